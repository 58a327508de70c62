#include "sdk/session_state.h"

#include "absl/strings/str_cat.h"

namespace argsdump {

const char* SessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kOpen: return "open";
    case SessionState::kRanInProcess: return "ran in process";
    case SessionState::kDeviceForked: return "device forked";
    case SessionState::kInDevice: return "in device";
    case SessionState::kFinished: return "finished";
  }
  return "?";
}

const char* SessionCallName(SessionCall call) {
  switch (call) {
    case SessionCall::kRunDevice: return "RunDevice";
    case SessionCall::kFinish: return "Finish";
    case SessionCall::kAlloc: return "Alloc";
    case SessionCall::kSubmit: return "Submit";
    case SessionCall::kBeginStep: return "BeginStep";
    case SessionCall::kSynchronize: return "Synchronize";
    case SessionCall::kSetDumpConfig: return "SetDumpConfig";
  }
  return "?";
}

absl::Status CheckCall(SessionState state, bool isolated, SessionCall call) {
  const char* name = SessionCallName(call);
  if (state == SessionState::kFinished && call != SessionCall::kSetDumpConfig) {
    return absl::FailedPreconditionError(absl::StrCat(name, ": the session is finished"));
  }
  switch (call) {
    case SessionCall::kRunDevice:
      if (state == SessionState::kInDevice) {
        return absl::FailedPreconditionError(
            "RunDevice: called on the device (inside RunDevice)");
      }
      if (isolated && state == SessionState::kDeviceForked) {
        return absl::FailedPreconditionError(
            "RunDevice: the device process of this session ran already (one per session)");
      }
      return absl::OkStatus();
    case SessionCall::kFinish:
      if (state == SessionState::kInDevice) {
        return absl::FailedPreconditionError(
            "Finish: called on the device (inside RunDevice); the host finishes the session");
      }
      return absl::OkStatus();
    case SessionCall::kAlloc:
    case SessionCall::kSubmit:
    case SessionCall::kBeginStep:
    case SessionCall::kSynchronize:
    case SessionCall::kSetDumpConfig:
      // With device_process the runtime exists only on the device.
      if (isolated && state != SessionState::kInDevice) {
        return absl::FailedPreconditionError(absl::StrCat(
            name, ": the device runs in its own process (SessionOptions::device_process): "
                  "call it inside RunDevice's function"));
      }
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace argsdump
