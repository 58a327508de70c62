#include "viewer/index_lookup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "format/capture_index.h"
#include "format/names.h"
#include "format/record.h"

namespace argsdump {
namespace {

// What starts every entry line of a manifest the store wrote, and the
// line's task id after it ("0x" already in the pattern).
constexpr absl::string_view kEntryLine = "\n    {\"task_id\": \"0x";
constexpr size_t kTaskHexDigits = 16;
// The head ("...\"args\": [") is small: labels, a crash's tasks, counters.
constexpr absl::string_view kArgsOpen = "\n  \"args\": [";
constexpr size_t kMaxHeadBytes = 4 << 20;
constexpr size_t kChunk = 8 << 10;

// The manifest read with pread, a few pages at a time.
class ManifestBytes {
 public:
  ~ManifestBytes() {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Open(const std::string& path) {
    path_ = path;
    absl::StatusOr<int> fd = OpenRegularFile(path);  // a FIFO: refused, not waited on
    if (!fd.ok()) return fd.status();
    fd_ = *fd;
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    return absl::OkStatus();
  }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Bytes [at, at + n) clipped to the file.
  absl::Status Read(uint64_t at, size_t n, std::string* out) const {
    out->clear();
    if (at >= size_) return absl::OkStatus();
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - at));
    out->resize(n);
    size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, &(*out)[done], n - done, static_cast<off_t>(at + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return absl::DataLossError(absl::StrCat(path_, ": read failed at byte ", at));
      done += static_cast<size_t>(r);
    }
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// An entry line: where its '\n' is, and its task id.
struct EntryLine {
  uint64_t at = 0;
  uint64_t task_id = 0;
};

// The first entry line starting at or after `pos` (its '\n'), nullopt when
// there is none before the end.
// The task of an entry line (`line` starts where the line does), as the
// manifest reader parses it; nullopt for anything else.
std::optional<uint64_t> LineTask(absl::string_view line) {
  if (!absl::StartsWith(line, kEntryLine) || line.size() < kEntryLine.size() + kTaskHexDigits) {
    return std::nullopt;
  }
  return ParseTaskIdHex(line.substr(kEntryLine.size(), kTaskHexDigits));
}

absl::StatusOr<std::optional<EntryLine>> EntryLineFrom(const ManifestBytes& m, uint64_t pos) {
  std::string chunk;
  const size_t need = kEntryLine.size() + kTaskHexDigits;
  for (uint64_t at = pos; at < m.size(); at += kChunk) {
    if (absl::Status s = m.Read(at, kChunk + need, &chunk); !s.ok()) return s;
    const size_t found = chunk.find(kEntryLine.data(), 0, kEntryLine.size());
    if (found == std::string::npos || found >= kChunk) continue;
    if (found + need > chunk.size()) break;
    const std::optional<uint64_t> task = LineTask(absl::string_view(chunk).substr(found));
    if (!task) {
      return absl::DataLossError(
          absl::StrCat(m.path(), ": byte ", at + found, ": an entry line without a task id"));
    }
    return std::optional<EntryLine>(EntryLine{at + found, *task});
  }
  return std::optional<EntryLine>();
}

// The lines of `task_id`'s entries, each without its '\n' and its ',', from
// the first entry line in [begin, size) of a task at or above it.
absl::StatusOr<std::vector<std::string>> TaskLines(const ManifestBytes& m, uint64_t begin,
                                                   uint64_t task_id) {
  uint64_t lo = begin, hi = m.size();
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    absl::StatusOr<std::optional<EntryLine>> line = EntryLineFrom(m, mid);
    if (!line.ok()) return line.status();
    if (*line && (*line)->task_id < task_id) {
      lo = (*line)->at + 1;
    } else {
      hi = mid;
    }
  }
  absl::StatusOr<std::optional<EntryLine>> first = EntryLineFrom(m, lo);
  if (!first.ok()) return first.status();
  std::vector<std::string> lines;
  if (!*first || (*first)->task_id != task_id) return lines;
  // The task's lines, one after another (a line is at most a few KiB).
  std::string text;
  uint64_t at = (*first)->at;
  for (;;) {
    size_t nl = std::string::npos;
    for (size_t want = kChunk; nl == std::string::npos; want *= 2) {
      if (absl::Status s = m.Read(at, want, &text); !s.ok()) return s;
      nl = text.find('\n', 1);
      if (nl == std::string::npos && at + text.size() >= m.size()) nl = text.size();
      if (want > (64u << 20)) return absl::DataLossError(absl::StrCat(m.path(), ": byte ", at,
                                                                      ": an endless entry line"));
    }
    absl::string_view line = absl::string_view(text).substr(0, nl);
    if (LineTask(line) != task_id) break;
    line.remove_prefix(1);
    if (absl::EndsWith(line, ",")) line.remove_suffix(1);
    lines.emplace_back(line);
    at += nl;
  }
  return lines;
}

// Whether an entry read from the manifest says what its index row says.
// (A single-step manifest writes no "step": its entries read 0, as its rows
// hold.)
bool EntryAgrees(const ManifestEntry& e, const ManifestRow& r, const std::optional<StatsRow>& s) {
  const std::optional<DataType> dtype = FromProtoDType(r.dtype);
  if (e.task_id != r.task_id || e.role != r.role || e.stage != r.stage || e.kind != r.kind ||
      !dtype || e.dtype != *dtype || e.step != r.step) {
    return false;
  }
  if (r.func_count == 0 ? e.func_ids != std::vector<int64_t>{-1}
                        : e.func_ids.size() != r.func_count) {
    return false;
  }
  for (size_t i = 0; i < r.func_count; ++i) {
    if (e.func_ids[i] != r.func_ids[i]) return false;
  }
  if (e.shape.size() != r.ndims || e.strides.size() != r.ndims) return false;
  for (size_t i = 0; i < r.ndims; ++i) {
    if (e.shape[i] != r.shape[i] || e.strides[i] != r.strides[i]) return false;
  }
#define ARGSDUMP_SAME(id, style, member) \
  if (e.member != r.member) return false;
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_SAME)
#undef ARGSDUMP_SAME
  if (e.is_scalar() != e.has_value) return false;
  if (e.is_scalar() && !ScalarJsonMatches(r.dtype, r.scalar_bits, e.value)) return false;
  if (e.stats.has_value() != s.has_value()) return false;
  if (s) {
    const ManifestEntry::Stats& m = *e.stats;
#define ARGSDUMP_SAME_STATS(member, type) \
  if (m.member != s->member) return false;
    ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_SAME_STATS)
#undef ARGSDUMP_SAME_STATS
  }
  return true;
}

// The manifest's head against the index's info and counters.
absl::Status HeadAgrees(const ManifestSummary& head, const IndexFile& index,
                        const std::string& name) {
  const v1::CaptureCounters& c = index.counters();
  const std::pair<const char*, uint64_t> numbers[] = {
      {"total_args", index.size()},
      {"before_dispatch", c.before_dispatch()},
      {"after_completion", c.after_completion()},
      {"input_args", c.input_args()},
      {"output_args", c.output_args()},
      {"inout_args", c.inout_args()},
      {"truncated_args", c.truncated_args()},
      {"dropped_records", c.dropped_records()},
      {"dropped_overwrite", c.dropped_overwrite()},
      {"in_flight_snapshots", c.in_flight_snapshots()},
      {"payload_bytes", c.payload_bytes()},
      {"dump_args_level", static_cast<uint64_t>(ReportedLevel(index.info()))},
  };
  for (const auto& [key, want] : numbers) {
    auto it = head.counters.find(key);
    if (it == head.counters.end() || it->second < 0 || static_cast<uint64_t>(it->second) != want) {
      return absl::DataLossError(absl::StrCat(name, ": its ", key, " is not the manifest's"));
    }
  }
  if (c.total_args() != index.size()) {
    return absl::DataLossError(absl::StrCat(name, ": counts ", c.total_args(), " args in ",
                                            index.size(), " rows"));
  }
  const std::map<std::string, std::string> labels(index.info().labels().begin(),
                                                  index.info().labels().end());
  if (labels != head.labels) {
    return absl::DataLossError(absl::StrCat(name, ": its labels are not the manifest's"));
  }
  const KernelTable& kernels = index.info().kernels();
  bool same_kernels = kernels.size() == head.kernels.size();
  for (int i = 0; same_kernels && i < kernels.size(); ++i) {
    same_kernels = kernels.Get(i).SerializeAsString() == head.kernels.Get(i).SerializeAsString();
  }
  if (!same_kernels) {
    return absl::DataLossError(absl::StrCat(name, ": its kernel table is not the manifest's"));
  }
  if (index.info().has_device_crash() != head.device_crash.has_value()) {
    return absl::DataLossError(absl::StrCat(name, ": its device_crash is not the manifest's"));
  }
  return absl::OkStatus();
}

// A capture's index and its manifest, read together; what they disagree on
// is DataLoss naming both.
struct IndexAndManifest {
  const IndexFile& index;
  const std::string& index_path;
  const std::string& manifest_path;

  absl::Status Disagree(const std::string& what) const {
    return absl::DataLossError(
        absl::StrCat(index_path, ": does not match ", manifest_path, ": ", what));
  }
};

// The head, and the first entry, as the streaming reader reads them, checked
// against the index; false when the manifest has no entries (nor the index
// rows).
absl::StatusOr<bool> CheckHeadAndFirstEntry(const IndexAndManifest& c,
                                            IndexedSelection* answer) {
  absl::StatusOr<std::unique_ptr<ManifestReader>> reader = ManifestReader::Open(c.manifest_path);
  if (!reader.ok()) return reader.status();
  ManifestEntry first;
  absl::StatusOr<bool> got = (*reader)->Next(&first);
  if (!got.ok()) return got.status();
  answer->summary = (*reader)->summary();
  if (absl::Status s = HeadAgrees(answer->summary, c.index, c.index_path); !s.ok()) return s;
  if (!*got) {
    if (c.index.size() != 0) return c.Disagree("the manifest has no entries");
    return false;
  }
  if (c.index.size() == 0) return c.Disagree("the index has no rows");
  absl::StatusOr<ManifestRow> row0 = c.index.CheckedRow(0);
  if (!row0.ok()) return row0.status();
  if (!EntryAgrees(first, *row0, c.index.StatsOf(0))) return c.Disagree("entry 0");
  return true;
}

// The task the selection names (by its id, or by the index of one of its
// entries); nullopt when no entry can match.
absl::StatusOr<std::optional<uint64_t>> SelectedTask(const IndexFile& index,
                                                     const EntryFilter& selection) {
  if (!selection.index) return *selection.args.task_id;
  if (*selection.index >= index.size()) return std::optional<uint64_t>();
  absl::StatusOr<ManifestRow> row = index.CheckedRow(*selection.index);
  if (!row.ok()) return row.status();
  const uint64_t task_id = row->task_id;
  if (selection.args.task_id && *selection.args.task_id != task_id) {
    return std::optional<uint64_t>();
  }
  return task_id;
}

// The manifest's lines of the task, found without the index.
absl::StatusOr<std::vector<std::string>> ManifestLinesOfTask(const IndexAndManifest& c,
                                                             uint64_t task_id) {
  ManifestBytes m;
  if (absl::Status s = m.Open(c.manifest_path); !s.ok()) return s;
  std::string head;
  size_t args_open = std::string::npos;
  for (size_t want = 64 << 10; args_open == std::string::npos && want <= kMaxHeadBytes;
       want *= 4) {
    if (absl::Status s = m.Read(0, want, &head); !s.ok()) return s;
    args_open = head.find(kArgsOpen.data(), 0, kArgsOpen.size());
    if (head.size() < want) break;  // the whole file
  }
  if (args_open == std::string::npos) {
    return c.Disagree(
        "no \"args\": [ line in the manifest's first 4 MiB (not the store's layout)");
  }
  return TaskLines(m, args_open + kArgsOpen.size(), task_id);
}

// The task's entry lines parsed, each checked against its index row; the
// ones the selection matches go into `answer`.
absl::Status ReadTaskEntries(const IndexAndManifest& c, const std::vector<std::string>& lines,
                             uint64_t task_id, const IndexRange& range,
                             const EntryFilter& selection, IndexedSelection* answer) {
  std::string text = "{\"args\": [";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) text.push_back(',');
    text.append(lines[i]);
  }
  text.append("]}");
  std::unique_ptr<ManifestReader> reader = ManifestReader::FromBytes(
      std::move(text), absl::StrCat(c.manifest_path, " (task ", TaskIdHex(task_id), ")"));
  ManifestEntry e;
  for (uint64_t i = range.begin;; ++i) {
    absl::StatusOr<bool> got = reader->Next(&e);
    if (!got.ok()) return got.status();
    if (!*got) {
      if (i != range.end) return c.Disagree("the task's entries do not parse as its lines");
      break;
    }
    if (i >= range.end) return c.Disagree("the task's entries do not parse as its lines");
    absl::StatusOr<ManifestRow> row = c.index.CheckedRow(i);
    if (!row.ok()) return row.status();
    if (!EntryAgrees(e, *row, c.index.StatsOf(i))) {
      return c.Disagree(absl::StrCat("entry ", i));
    }
    e.index = i;
    if (selection.Matches(e)) answer->entries.push_back(e);
  }
  return absl::OkStatus();
}

}  // namespace

bool IndexCanAnswer(const EntryFilter& selection) {
  return selection.args.task_id.has_value() || selection.index.has_value();
}

absl::StatusOr<IndexedSelection> SelectFromIndex(const std::string& capture_dir,
                                                 const EntryFilter& selection) {
  const std::string index_path = capture_dir + "/args.index";
  const std::string manifest_path = capture_dir + "/args_dump.json";
  if (!IndexCanAnswer(selection)) {
    return absl::InvalidArgumentError("the index answers a task or an index only");
  }
  absl::StatusOr<std::unique_ptr<IndexFile>> opened =
      IndexFile::Open(index_path, IndexChecks::kRowsRead);
  if (!opened.ok()) return opened.status();
  const IndexFile& index = **opened;
  const IndexAndManifest c{index, index_path, manifest_path};

  IndexedSelection answer;
  absl::StatusOr<bool> has_entries = CheckHeadAndFirstEntry(c, &answer);
  if (!has_entries.ok()) return has_entries.status();
  if (!*has_entries) return answer;

  absl::StatusOr<std::optional<uint64_t>> selected = SelectedTask(index, selection);
  if (!selected.ok()) return selected.status();
  if (!selected->has_value()) return answer;
  const uint64_t task_id = **selected;
  absl::StatusOr<IndexRange> range = index.TaskRows(task_id);
  if (!range.ok()) return range.status();

  absl::StatusOr<std::vector<std::string>> lines = ManifestLinesOfTask(c, task_id);
  if (!lines.ok()) return lines.status();
  const uint64_t rows = range->end - range->begin;
  if (lines->size() != rows) {
    return c.Disagree(absl::StrCat("task ", TaskIdHex(task_id), " has ", lines->size(),
                                   " entry lines in the manifest and ", rows,
                                   " rows in the index"));
  }
  if (rows == 0) return answer;
  if (absl::Status s = ReadTaskEntries(c, *lines, task_id, *range, selection, &answer);
      !s.ok()) {
    return s;
  }
  return answer;
}

}  // namespace argsdump
