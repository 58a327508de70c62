// A task's entries (--task, or the task of --index N) from a capture's
// args.index instead of a scan of args_dump.json: the index's task_id column
// is binary searched, and so are the manifest's entry lines (the store
// writes one entry per line, in manifest order); only those lines are read
// and parsed. O(log n) pages of either file, whatever the capture's size.
//
// The index is believed only where the manifest agrees with it: the
// manifest's head (counters, level, labels, device_crash) matches the
// index's counters and info, its first entry matches row 0, and every entry
// handed out matches its row field for field (and the task has as many
// entries in the manifest as rows in the index). A damaged, truncated,
// stale or foreign index is reported as an error, for the caller to fall
// back to streaming the manifest; it never changes an answer.
#ifndef ARGSDUMP_VIEWER_INDEX_LOOKUP_H_
#define ARGSDUMP_VIEWER_INDEX_LOOKUP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "viewer/manifest_reader.h"

namespace argsdump {

// The answer: the selected entries in manifest order (index = position in
// args[], as streaming gives them) and the manifest's top-level fields.
struct IndexedSelection {
  std::vector<ManifestEntry> entries;
  ManifestSummary summary;
};

// Whether the index can answer `selection` (it names a task or an index).
bool IndexCanAnswer(const EntryFilter& selection);

// NotFound when `capture_dir` has no args.index (stream without a word);
// any other error says why the index was not used (DataLoss naming the
// file and what disagrees).
absl::StatusOr<IndexedSelection> SelectFromIndex(const std::string& capture_dir,
                                                 const EntryFilter& selection);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_INDEX_LOOKUP_H_
