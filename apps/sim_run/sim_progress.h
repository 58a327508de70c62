// sim_run's progress: a thread that samples a session's counters (tasks
// done / submitted, records, payload bytes) onto the tools' ProgressMeter
// (tools/progress.h), which formats, rate-limits and draws the line:
//   sim_run: 120/400 tasks done (240/s), 360 records (720/s), 1.5 MiB (3.0 MiB/s), 0.5 s
// Invariant: nothing is drawn before Start nor after Stop; Stop ends the
// line (sim_run calls it when the device finished, before the flush lines).
#ifndef ARGSDUMP_APPS_SIM_RUN_SIM_PROGRESS_H_
#define ARGSDUMP_APPS_SIM_RUN_SIM_PROGRESS_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>

#include "sdk/wiring.h"
#include "tools/progress.h"

namespace argsdump {

// Start and Stop are for one thread (the job's); the sample function runs
// on the sampler's thread, and once more in Stop.
class SimProgressSampler {
 public:
  // The meter draws on `*out` (which must outlive the sampler) with
  // `options` (ProgressOptionsFor, with the label); the thread samples
  // every `period` (options.interval: each sample is then due to be drawn).
  SimProgressSampler(std::ostream* out, ProgressOptions options, std::chrono::nanoseconds period);
  ~SimProgressSampler();  // Stop()
  SimProgressSampler(const SimProgressSampler&) = delete;
  SimProgressSampler& operator=(const SimProgressSampler&) = delete;

  // The meter starts counting time now. Once; later calls do nothing.
  void Start(std::function<SessionProgress()> sample);
  // Joins the thread, samples the counters as they are now and finishes
  // the meter (the final line, ended). Once; later calls (and a Stop
  // without Start) do nothing.
  void Stop();

 private:
  void Loop();
  void Sample();  // the counters onto the meter

  std::ostream* const out_;
  const ProgressOptions options_;
  const std::chrono::nanoseconds period_;
  std::function<SessionProgress()> sample_;
  std::unique_ptr<ProgressMeter> meter_;  // from Start on
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;     // guarded by mu_
  bool running_ = false;  // Start/Stop's thread only
  std::thread thread_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_APPS_SIM_RUN_SIM_PROGRESS_H_
