#include "collector/sim_progress.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace argsdump {
namespace {

// 512 B, 1.5 KiB, 3.0 MiB, 2.2 GiB.
std::string Bytes(double bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrFormat("%.0f B", bytes);
  int unit = -1;
  while (bytes >= 1024 && unit < 3) {
    bytes /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", bytes, kUnits[unit]);
}

}  // namespace

std::string FormatSimProgress(const SessionProgress& p, double seconds) {
  std::string line = absl::StrCat("sim_run: ", p.tasks_completed, "/", p.tasks_submitted,
                                  " tasks done, ", p.records, " records, ",
                                  Bytes(static_cast<double>(p.payload_bytes)));
  if (seconds >= 0.001) {
    absl::StrAppend(&line, absl::StrFormat("; %.0f tasks/s, %s/s",
                                           static_cast<double>(p.tasks_completed) / seconds,
                                           Bytes(static_cast<double>(p.payload_bytes) / seconds)));
  }
  return line;
}

bool ProgressRateLimiter::Ready(Clock::time_point now) {
  if (shown_ && now - last_ < interval_) return false;
  shown_ = true;
  last_ = now;
  return true;
}

SimProgressMeter::SimProgressMeter(std::FILE* out, bool terminal, Clock::duration interval)
    : out_(out), terminal_(terminal), interval_(interval), limiter_(interval) {}

SimProgressMeter::~SimProgressMeter() { Stop(); }

void SimProgressMeter::Start(std::function<SessionProgress()> sample) {
  if (running_) return;
  sample_ = std::move(sample);
  start_ = Clock::now();
  limiter_.Ready(start_);  // the first line comes one interval in
  running_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void SimProgressMeter::Stop() {
  if (!running_) return;
  running_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  Draw(/*last=*/true);
}

void SimProgressMeter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // A timed wait on the stop flag: Stop never waits out an interval.
    if (cv_.wait_for(lock, interval_, [this] { return stop_; })) return;
    if (!limiter_.Ready(Clock::now())) continue;
    lock.unlock();
    Draw(/*last=*/false);
    lock.lock();
  }
}

void SimProgressMeter::Draw(bool last) {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  const std::string line = FormatSimProgress(sample_(), seconds);
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K%s", line.c_str(), last ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace argsdump
