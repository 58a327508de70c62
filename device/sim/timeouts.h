// The three hang budgets of a run and their environment overrides. They must
// keep the order scheduler < op-execute < stream-sync, so the scheduler
// declares the hang and dumps the in-flight tasks before an op is reaped and
// before the host gives up waiting:
//   SIMPLER_SCHEDULER_TIMEOUT_MS    default 20 s  no progress -> hang dump
//   SIMPLER_OP_EXECUTE_TIMEOUT_US   default 45 s  a running op is reaped
//   SIMPLER_STREAM_SYNC_TIMEOUT_MS  default 50 s  the host stops waiting
// A value that is not a positive integer is ignored with a warning (that one
// falls back to its default). On the sim the scheduler override applies on
// its own (parsed and applied independently, so slow CPU-sim kernels can
// raise the no-progress budget): op-execute and stream-sync,
// when not set, follow it with their default margins (25 s and 30 s above
// it, at least 45 s and 50 s); set ones that break the order are ignored
// with a warning and follow it the same way.
#ifndef ARGSDUMP_DEVICE_SIM_TIMEOUTS_H_
#define ARGSDUMP_DEVICE_SIM_TIMEOUTS_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace argsdump {

struct SimTimeouts {
  std::chrono::microseconds scheduler{std::chrono::seconds(20)};
  std::chrono::microseconds op_execute{std::chrono::seconds(45)};
  std::chrono::microseconds stream_sync{std::chrono::seconds(50)};
};

// Reads the overrides through `getenv` (std::getenv by default); every
// warning is appended to `warnings` (and printed to stderr by the runtime).
SimTimeouts TimeoutsFromEnvironment(
    std::vector<std::string>* warnings,
    const std::function<const char*(const char*)>& getenv = nullptr);

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_TIMEOUTS_H_
