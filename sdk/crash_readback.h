// The exception dumps of a device process's crash: each task the crash
// names gets its folder (sdk/device_crash.h WriteCrashDump) holding its
// inputs as the run's capture recorded them before dispatch, read back
// from where that capture went - the local store or the capture service -
// then its tensors as the crash left them.
#ifndef ARGSDUMP_SDK_CRASH_READBACK_H_
#define ARGSDUMP_SDK_CRASH_READBACK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sdk/device_crash.h"

namespace argsdump {

// Where the run's capture can be read back from.
struct CaptureReadback {
  enum class Kind {
    kNone,    // no capture was written: no records to read
    kLocal,   // a finished local capture in dump_dir
    kRemote,  // capture `name` on the service at `server`
  };
  Kind kind = Kind::kNone;
  std::string dump_dir;
  std::string server, name, auth_token;

  // What an exception dump's context.json names as the run's capture
  // (empty: none).
  std::string Where() const;
};

// The records of `task_id` as captured before dispatch (none for kNone).
absl::StatusOr<std::vector<TaskRecord>> ReadBeforeDispatch(const CaptureReadback& capture,
                                                           uint64_t task_id);

struct CrashDumpRequest {
  std::string prefix;    // the session's folder: dumps go to <prefix>/exception_dump
  std::string workload;  // what the folders are named after
  bool snapshot_inputs = false;  // the device copied inputs before dispatch
  CaptureReadback capture;
};

// Writes an exception dump for each of crash.dumps; returns the folders
// written. A task whose records cannot be read back gets a dump without
// them; a dump that cannot be written is an ERROR line and no folder.
std::vector<std::string> WriteCrashExceptionDumps(const DeviceCrashAnalysis& crash,
                                                  const CrashDumpRequest& request);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_CRASH_READBACK_H_
