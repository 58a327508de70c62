// A SimSession's lifecycle as one state, and which public call each state
// takes. The session keeps the state under its one mutex; every public call
// asks CheckCall first, so a call in the wrong state is a FailedPrecondition
// that names the call and why, never a crash or a silent no-op.
//
//   Open ---------------------------------------------> kOpen
//
//   kOpen -- RunDevice, in this process -------------> kRanInProcess
//   kRanInProcess -- RunDevice (any number of times) -> kRanInProcess
//   kOpen -- RunDevice, device_process: forked ------> kDeviceForked  (the host)
//                                              \-----> kInDevice      (the child's copy)
//   kOpen -- RunDevice, device_process: fork failed -> kOpen          (may be tried again)
//   kOpen, kRanInProcess, kDeviceForked
//         -- Finish, or the destructor --------------> kFinished
//      (with device_process, Finish in kOpen first runs an empty device:
//       kOpen -> kDeviceForked -> kFinished)
//   kInDevice: ends with the device process; it never finishes the session.
//
// What each state refuses (FailedPrecondition, naming the call):
//   kOpen, kRanInProcess  in this process: nothing. With device_process the
//                         host has no runtime: Alloc, Submit, BeginStep,
//                         Synchronize, SetDumpConfig (a WARNING).
//   kDeviceForked         RunDevice (one device process per session), and
//                         the runtime's calls as in kOpen.
//   kInDevice             RunDevice and Finish (the host finishes).
//   kFinished             every call but SetDumpConfig.
#ifndef ARGSDUMP_SDK_SESSION_STATE_H_
#define ARGSDUMP_SDK_SESSION_STATE_H_

#include "absl/status/status.h"

namespace argsdump {

enum class SessionState {
  kOpen,           // opened; the device has not run (or its fork failed)
  kRanInProcess,   // RunDevice ran in this process at least once
  kDeviceForked,   // device_process: the device process was forked (one per session)
  kInDevice,       // this is the forked device process's copy of the session
  kFinished,       // Finish ran (or the destructor did it)
};
const char* SessionStateName(SessionState state);

// The public calls whose state is checked.
enum class SessionCall {
  kRunDevice,
  kFinish,
  kAlloc,
  kSubmit,
  kBeginStep,
  kSynchronize,
  kSetDumpConfig,  // never refused for a finished session (as ever)
};
const char* SessionCallName(SessionCall call);

// OK when `call` may be made in `state` (`isolated`: the session has
// device_process), else FailedPrecondition saying why.
absl::Status CheckCall(SessionState state, bool isolated, SessionCall call);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_SESSION_STATE_H_
