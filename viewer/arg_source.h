// Where dump_viewer reads a capture from: a local directory (args_dump.json
// + args.bin) or a capture service (remote_source.h). Both hand out the
// selected entries in manifest order and read a selected entry's payload
// bytes, so every command (list, export, stats, compare) runs the same way
// on either.
#ifndef ARGSDUMP_VIEWER_ARG_SOURCE_H_
#define ARGSDUMP_VIEWER_ARG_SOURCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "viewer/manifest_reader.h"

namespace argsdump {

// The filters of the command line (manifest_reader.h).
using Selection = EntryFilter;

// A few values that exist in a capture, suggested when nothing matched.
// Stages, roles and kinds: every one seen (a hint offers none the capture
// lacks); steps: the first few.
struct SomeValues {
  std::set<uint64_t> tasks;
  std::set<uint32_t> args;
  std::set<int64_t> funcs;
  std::set<v1::Stage> stages;
  std::set<v1::Role> roles;
  std::set<v1::Kind> kinds;
  std::set<uint32_t> steps;
  void Add(const ManifestEntry& e);
};

class ArgSource {
 public:
  virtual ~ArgSource() = default;
  // How to name the capture in messages ("outputs/r/args_dump",
  // "capture 'run1' on 127.0.0.1:50051").
  virtual std::string name() const = 0;
  // The next entry that matches the selection, in manifest order; false
  // at the end. Errors name the file and byte (local) or the call (remote).
  virtual absl::StatusOr<bool> Next(ManifestEntry* e) = 0;
  // The entry's payload (bin_size bytes). DataLoss/Unavailable naming where.
  virtual absl::Status ReadPayload(const ManifestEntry& e, std::string* bytes) = 0;
  // Values that exist (after Next returned false with nothing selected).
  virtual absl::StatusOr<SomeValues> Suggestions() = 0;
  // The capture's labels (a local manifest's are complete once Next
  // returned false).
  virtual std::map<std::string, std::string> Labels() const = 0;
  // How the device process died, when it did: a local
  // manifest's "device_crash" (known after the first Next: the store
  // writes it before args[]; surely once Next returned false), a remote
  // capture's from GetCapture. None by default (sources of no capture).
  virtual std::optional<v1::DeviceCrash> DeviceCrashInfo() const { return std::nullopt; }
  // The capture's kernel table (what each func_id names): a local
  // manifest's "kernels" (known after the first Next), a remote capture's
  // from GetCapture. Empty for a capture without one.
  virtual KernelTable Kernels() const { return {}; }
  // What the entries' times (ManifestEntry::dispatch_ns, complete_ns) count
  // from: a local manifest's "clock" (known after the first Next), a remote
  // capture's from GetCapture. None for a capture without one.
  virtual std::optional<v1::CaptureClock> Clock() const { return std::nullopt; }
};

// DIR is a capture directory (holding args_dump.json) or a folder holding
// args_dump/. NotFound naming the manifest when there is none.
// A selection of a task or an index is answered from the capture's
// args.index when it has one that agrees with the manifest
// (index_lookup.h); otherwise, and for every other selection, the manifest
// is streamed. `index_note` (if not null) is set to why an args.index that
// is there was not used. A kernel name or type in the selection is
// resolved against the manifest's kernel table first (format/
// kernel_table.h: InvalidArgument, IsUnknownKernel, when it has none).
absl::StatusOr<std::unique_ptr<ArgSource>> OpenLocalCapture(const std::string& dir,
                                                            const Selection& selection,
                                                            std::string* index_note = nullptr);

// Whether `path` is a directory / a regular file (following links).
bool IsDir(const std::string& path);
bool IsFile(const std::string& path);

// The capture directory a DIR argument names (DIR or DIR/args_dump).
std::string CaptureDirOf(const std::string& dir);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_ARG_SOURCE_H_
