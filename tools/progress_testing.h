// A clock for ProgressMeter tests (ProgressOptions::clock): it stands
// still until the test moves it, so what a meter draws does not depend on
// how fast the test runs. Atomic: a meter may read it from other threads.
#ifndef ARGSDUMP_TOOLS_PROGRESS_TESTING_H_
#define ARGSDUMP_TOOLS_PROGRESS_TESTING_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "tools/progress.h"

namespace argsdump {

class FakeProgressClock {
 public:
  ProgressClock::time_point Now() const {
    return ProgressClock::time_point(std::chrono::milliseconds(ms_.load()));
  }
  // "Now" in milliseconds since the clock's epoch (it starts at 1000).
  void Set(int64_t ms) { ms_.store(ms); }
  void Advance(int64_t ms) { ms_.fetch_add(ms); }
  // For ProgressOptions::clock; the clock must outlive the meter.
  std::function<ProgressClock::time_point()> Fn() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<int64_t> ms_{1000};
};

}  // namespace argsdump

#endif  // ARGSDUMP_TOOLS_PROGRESS_TESTING_H_
