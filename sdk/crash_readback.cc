#include "sdk/crash_readback.h"

#include "absl/strings/str_cat.h"
#include "format/names.h"
#include "sdk/session_log.h"
#include "sdk/wiring.h"

namespace argsdump {

std::string CaptureReadback::Where() const {
  switch (kind) {
    case Kind::kNone: return "";
    case Kind::kLocal: return dump_dir;
    case Kind::kRemote: return absl::StrCat(server, "/", name);
  }
  return "";
}

absl::StatusOr<std::vector<TaskRecord>> ReadBeforeDispatch(const CaptureReadback& capture,
                                                           uint64_t task_id) {
  switch (capture.kind) {
    case CaptureReadback::Kind::kNone:
      return std::vector<TaskRecord>();
    case CaptureReadback::Kind::kLocal:
      return ReadLocalTaskRecords(capture.dump_dir, task_id, v1::STAGE_BEFORE_DISPATCH);
    case CaptureReadback::Kind::kRemote:
      return ReadRemoteTaskRecords(capture.server, capture.name, capture.auth_token, task_id,
                                   v1::STAGE_BEFORE_DISPATCH);
  }
  return std::vector<TaskRecord>();
}

std::vector<std::string> WriteCrashExceptionDumps(const DeviceCrashAnalysis& crash,
                                                  const CrashDumpRequest& request) {
  std::vector<std::string> written;
  const std::string where = request.capture.Where();
  for (int i : crash.dumps) {
    const v1::CrashedTask& e = crash.crash.executing(i);
    absl::StatusOr<std::vector<TaskRecord>> before = ReadBeforeDispatch(request.capture,
                                                                         e.task_id());
    if (!before.ok()) {
      PrintDumpLog(DumpLog::kError,
                   absl::StrCat("the exception dump of task ", TaskIdHex(e.task_id()),
                                " has no before-dispatch records: ", before.status().message()));
      before = std::vector<TaskRecord>();
    }
    auto dir = WriteCrashDump(request.prefix, request.workload, crash, e, *before, where);
    if (!dir.ok()) {
      PrintDumpLog(DumpLog::kError, absl::StrCat("the exception dump of task ",
                                                 TaskIdHex(e.task_id()),
                                                 " failed: ", dir.status().message()));
      continue;
    }
    written.push_back(*dir);
    PrintDumpLog(DumpLog::kError,
                 absl::StrCat("exception dump of the crash: ", CapturePlace(*dir), " (task ",
                              TaskIdHex(e.task_id()), ": ", before->size(),
                              " record(s) as captured before dispatch",
                              request.snapshot_inputs ? " and its inputs as the device copied "
                                                        "them before dispatch"
                                                      : "",
                              ", its tensors as the crash left them, context.json)"));
  }
  return written;
}

}  // namespace argsdump
