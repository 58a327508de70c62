// sim_run's progress while a job runs: tasks done / submitted, records,
// payload bytes and rates, on stderr, at most a few times a second, never
// on stdout (the summary there stays what it was). Three small pieces: a
// line from counters, a rate limiter, and a meter thread drawing the line.
// A terminal gets one line redrawn in place; a file or pipe a line each.
#ifndef ARGSDUMP_COLLECTOR_SIM_PROGRESS_H_
#define ARGSDUMP_COLLECTOR_SIM_PROGRESS_H_

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "sdk/wiring.h"

namespace argsdump {

// "sim_run: 120/400 tasks done, 360 records, 1.5 MiB; 240 tasks/s,
// 3.0 MiB/s" (rates over `seconds` since the start; none before 1 ms).
std::string FormatSimProgress(const SessionProgress& progress, double seconds);

// Lets a line through at most once per interval: the first call, then the
// first call `interval` or more after the last line let through.
class ProgressRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ProgressRateLimiter(Clock::duration interval) : interval_(interval) {}
  bool Ready(Clock::time_point now);

 private:
  Clock::duration interval_;
  bool shown_ = false;
  Clock::time_point last_;
};

// Samples the counters every `interval` on its own thread and draws the
// line on `out`; Stop draws the last one. Start and Stop are for one
// thread (the job's); the sample function runs on the meter's thread.
class SimProgressMeter {
 public:
  using Clock = ProgressRateLimiter::Clock;
  // `terminal`: redraw one line in place ("\r", erase to the end of the
  // line); otherwise each line ends with a newline.
  SimProgressMeter(std::FILE* out, bool terminal, Clock::duration interval);
  ~SimProgressMeter();  // Stop()
  SimProgressMeter(const SimProgressMeter&) = delete;
  SimProgressMeter& operator=(const SimProgressMeter&) = delete;

  void Start(std::function<SessionProgress()> sample);
  // Draws the counters as they are now, ends the line and joins the
  // thread. Once; later calls (and a Stop without Start) do nothing.
  void Stop();

 private:
  void Loop();
  void Draw(bool last);

  std::FILE* const out_;
  const bool terminal_;
  const Clock::duration interval_;
  std::function<SessionProgress()> sample_;
  Clock::time_point start_;
  ProgressRateLimiter limiter_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  bool running_ = false;  // Start/Stop's thread only
  std::thread thread_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_SIM_PROGRESS_H_
