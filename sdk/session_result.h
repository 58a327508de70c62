// A session's result put together at Finish from what each part knows:
// the steps begun, what the device reported (or, when it died or hung,
// what the flight table says), what the collector counted, the dump flush
// lines, the names an exception dump's capture takes on the service, and
// the one-line summary. Pure functions over the parts' outputs.
#ifndef ARGSDUMP_SDK_SESSION_RESULT_H_
#define ARGSDUMP_SDK_SESSION_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device/region.h"
#include "device/sim/kernel.h"
#include "device/sim/sim_runtime.h"
#include "proto/argsdump/v1/device_report.pb.h"
#include "sdk/argsdump.h"
#include "sdk/device_crash.h"
#include "sdk/wiring.h"

namespace argsdump {

// The steps of a session: the last one begun, and how many were.
struct StepCount {
  std::optional<uint32_t> step;  // the last step begun (nullopt: none yet)
  uint32_t begun = 0;
};

// What the device process reported, into the result, the report and the
// session's warnings (a warning already there is not repeated).
void ApplyDeviceReport(const v1::DeviceReport& device, SessionResult* result,
                       SessionReport* report, std::vector<std::string>* warnings,
                       StepCount* steps);

// What the in-process runtime did (its run status aside), into the
// result, the report and the session's warnings; step 0 counts once it has
// a task.
void ApplyRuntime(const SimRuntime& runtime, SessionResult* result, SessionReport* report,
                  std::vector<std::string>* warnings, StepCount* steps);

// The dump as it started (a device that died reported no steps): the
// level of `region` (null: the dump was off), or 0 when only the overflow
// check was on.
StepLevel StartLevel(const DumpConfig& config, const DumpRegion* region, bool dynamic_switch);

// A device process that died (`hang`: the host's watch killed it, why) from
// its flight table, into the result and the report; the dump ran at
// `start_level` (a dead device reported no levels).
void ApplyDeviceLoss(const DeviceCrashAnalysis& crash, const std::optional<std::string>& hang,
                     const StepLevel& start_level, SessionResult* result,
                     SessionReport* report, StepCount* steps);

// What the collector counted (report.collected, report.losses).
void CopyCounts(const SessionReport& report, SessionResult* result);

// func_id -> name of every kernel registered.
std::map<uint16_t, std::string> KernelNames(const KernelRegistry& kernels);

// The dump_args_flush lines, once the device flushed: per recording thread
// what it wrote and lost (an ERROR for drops, a WARNING for cuts, each
// printed and kept in `warnings`), then the INFO total (printed and kept in
// report.dump_log).
void LogFlush(const DumpRegion& region, SessionReport* report,
              std::vector<std::string>* warnings);

// An exception dump's capture on the service:
// <the run's capture>.<scenario>.<task>, where the folder is
// <scenario>_..._<task id>; at most 128 characters, the run's name cut and
// a hash of it put in when it is too long. `scenario` and `task` are the
// folder's.
std::string ExceptionCaptureName(const std::string& run_capture, const std::string& folder,
                                 std::string* scenario, std::string* task);

// "session <name>: <records> records of <tasks> tasks in <steps> step(s); capture: ..."
std::string SessionSummary(const std::string& name, const SessionResult& result);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_SESSION_RESULT_H_
