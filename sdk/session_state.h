// A SimSession's lifecycle as one state, and which public call each state
// takes. The session keeps the state under its one mutex; every public call
// asks CheckCall first, so a call in the wrong state is a FailedPrecondition
// that names the call and why, never a crash or a silent no-op.
//
//                         Open
//                          |
//                          v
//   +-------------------- kOpen ---------------------+
//   | RunDevice            |  RunDevice               | RunDevice, device_process:
//   | (in this process)    |  (device_process):       | the fork failed -> kOpen
//   v                      |  forked                  | (it may be tried again)
//   kRanInProcess          v                          |
//   | ^ RunDevice     kDeviceForked  - - - - - - - - -+- - -> kInDevice
//   | | (again)            |    (host side)               (the forked child's copy:
//   +-+                    |                               its device runs there; it
//   |                      |                               ends with the child, never
//   | Finish or the        | Finish or the                 finishes the session)
//   | destructor           | destructor
//   v                      v
//   +----------------> kFinished <---- kOpen: Finish or the destructor (with
//                                      device_process an empty device runs
//                                      first: kOpen -> kDeviceForked -> kFinished)
//
// Alloc, Submit, BeginStep and Synchronize need the runtime: in this process
// (kOpen, kRanInProcess) or, with device_process, only in kInDevice.
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
