// The host's own bound on the device process: from samples of the device's
// progress, taken while it runs, it tells when the device is hung. Pure
// logic over the samples and the times they were taken (no clock, no
// process), so its rules are tested without waiting.
//
// Two ways to hang, each judged against the hang budget (the stream-sync
// budget, SIMPLER_STREAM_SYNC_TIMEOUT_MS: the device's own scheduler and
// op-execute bounds are shorter, so a device that can still act declares
// its own hang first):
//   stopped   the heartbeat (bumped by the device's watch thread every
//             50 ms) stood still for the budget (at least ten beats): the
//             process as a whole is not running (SIGSTOP, a debugger, a
//             frozen cgroup);
//   no progress  tasks are pending (submitted > completed) and no task
//             completed and no record was written or dropped for the budget,
//             while the host had taken everything the device published and
//             the device had an empty buffer to fill (a device waiting for a
//             slow host is the host's delay): a kernel that spins forever and
//             ignores cancellation (livelock).
#ifndef ARGSDUMP_SDK_DEVICE_WATCH_H_
#define ARGSDUMP_SDK_DEVICE_WATCH_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace argsdump {

// One sample of the device's counters (flight table and dump region).
struct DeviceProgress {
  uint64_t heartbeat = 0;
  uint64_t tasks_submitted = 0;
  uint64_t tasks_completed = 0;
  uint64_t records = 0;  // written + dropped, every recording thread
  // The device waits for the host: it published what the host has not
  // taken, or it has no empty buffer to fill.
  bool host_behind = false;
};

class DeviceWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // `start`: when the device process started (the first sample's baseline).
  DeviceWatch(std::chrono::microseconds budget, Clock::time_point start);

  // A sample taken at `now`; the reason (one line) once the device is hung.
  std::optional<std::string> Observe(const DeviceProgress& p, Clock::time_point now);

  std::chrono::microseconds budget() const { return budget_; }

 private:
  std::chrono::microseconds budget_;
  std::chrono::microseconds stopped_after_;  // the heartbeat rule's bound
  DeviceProgress last_;
  Clock::time_point beat_at_;      // the heartbeat last moved
  Clock::time_point progress_at_;  // the device last made progress (or had nothing to do)
};

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_DEVICE_WATCH_H_
