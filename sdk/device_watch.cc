#include "sdk/device_watch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "device/sim/flight.h"

namespace argsdump {

DeviceWatch::DeviceWatch(std::chrono::microseconds budget, Clock::time_point start)
    : budget_(budget),
      // Ten heartbeats at least: a budget shorter than that would call a
      // running process stopped between two beats.
      stopped_after_(std::max<std::chrono::microseconds>(
          budget, std::chrono::milliseconds(10 * abi::kFlightHeartbeatMs))),
      beat_at_(start),
      progress_at_(start) {}

std::optional<std::string> DeviceWatch::Observe(const DeviceProgress& p, Clock::time_point now) {
  if (p.heartbeat != last_.heartbeat) beat_at_ = now;
  const bool pending = p.tasks_submitted > p.tasks_completed;
  const bool moved = p.tasks_completed != last_.tasks_completed ||
                     p.tasks_submitted != last_.tasks_submitted || p.records != last_.records;
  if (moved || !pending || p.host_behind) progress_at_ = now;
  last_ = p;
  const auto ms = [](std::chrono::microseconds d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  if (now - beat_at_ >= stopped_after_) {
    return absl::StrCat("the device process did not run for ", ms(stopped_after_),
                        " ms (its heartbeat stood still: stopped, e.g. by SIGSTOP)");
  }
  if (now - progress_at_ >= budget_) {
    // Progress stopped a little before the heartbeat did (the running
    // kernel's inputs were recorded, then its process was stopped): when
    // the heartbeat has missed ten beats by now, the process is not
    // running, and that is the verdict, whichever rule came due first.
    const auto still = std::chrono::duration_cast<std::chrono::microseconds>(now - beat_at_);
    if (still >= std::chrono::milliseconds(10 * abi::kFlightHeartbeatMs)) {
      return absl::StrCat("the device process did not run for the last ", ms(still),
                          " ms (its heartbeat stood still: stopped, e.g. by SIGSTOP), with ",
                          p.tasks_submitted - p.tasks_completed, " task(s) pending and no "
                          "progress for ", ms(budget_), " ms");
    }
    return absl::StrCat("the device made no progress for ", ms(budget_), " ms with ",
                        p.tasks_submitted - p.tasks_completed,
                        " task(s) pending (no task completed, nothing recorded: a kernel that "
                        "never returns)");
  }
  return std::nullopt;
}

}  // namespace argsdump
