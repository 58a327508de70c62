#include "apps/sim_run/sim_progress.h"

#include <utility>
#include <vector>

#include "base/thread.h"

namespace argsdump {
namespace {

// The meter's counters, in the line's order.
enum SimCounter : size_t { kTasks, kRecords, kPayloadBytes };

std::vector<ProgressCounter> SimCounters() {
  return {{"tasks done", ProgressUnit::kCount, std::nullopt},
          {"records", ProgressUnit::kCount, std::nullopt},
          {"", ProgressUnit::kBytes, std::nullopt}};
}

}  // namespace

SimProgressSampler::SimProgressSampler(std::ostream* out, ProgressOptions options,
                                       std::chrono::nanoseconds period)
    : out_(out), options_(std::move(options)), period_(period) {}

SimProgressSampler::~SimProgressSampler() { Stop(); }

void SimProgressSampler::Start(std::function<SessionProgress()> sample) {
  if (running_ || meter_ != nullptr) return;
  sample_ = std::move(sample);
  meter_ = std::make_unique<ProgressMeter>(out_, options_, SimCounters());
  // A progress line is not worth failing a run for: without its thread
  // (the system refused one) there is none.
  running_ = StartThread("the progress line's thread", &thread_, [this] { Loop(); }).ok();
}

void SimProgressSampler::Stop() {
  if (!running_) return;
  running_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  Sample();
  meter_->Finish();
}

void SimProgressSampler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  // A timed wait on the stop flag: Stop never waits out a period.
  while (!cv_.wait_for(lock, period_, [this] { return stop_; })) {
    lock.unlock();
    Sample();
    meter_->Update();
    lock.lock();
  }
}

void SimProgressSampler::Sample() {
  const SessionProgress p = sample_();
  meter_->SetTotal(kTasks, p.tasks_submitted);
  meter_->Set(kTasks, p.tasks_completed);
  meter_->Set(kRecords, p.records);
  meter_->Set(kPayloadBytes, p.payload_bytes);
}

}  // namespace argsdump
