#include "collector/sim_progress.h"

#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <mutex>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

using Clock = ProgressRateLimiter::Clock;
using std::chrono::milliseconds;

TEST(SimProgressTest, TheLineSaysTasksRecordsBytesAndRates) {
  SessionProgress p;
  p.tasks_submitted = 400;
  p.tasks_completed = 120;
  p.records = 360;
  p.payload_bytes = 3 * 1024 * 1024;
  EXPECT_EQ(FormatSimProgress(p, 0.5),
            "sim_run: 120/400 tasks done, 360 records, 3.0 MiB; 240 tasks/s, 6.0 MiB/s");
  p.payload_bytes = 1536;
  EXPECT_EQ(FormatSimProgress(p, 2), "sim_run: 120/400 tasks done, 360 records, 1.5 KiB; 60 tasks/s, 768 B/s");
  // No rate before there is time to measure it.
  EXPECT_EQ(FormatSimProgress(SessionProgress(), 0), "sim_run: 0/0 tasks done, 0 records, 0 B");
}

TEST(SimProgressTest, TheLimiterLetsOneLineThroughPerInterval) {
  ProgressRateLimiter limiter(milliseconds(250));
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(limiter.Ready(t0));
  EXPECT_FALSE(limiter.Ready(t0));
  EXPECT_FALSE(limiter.Ready(t0 + milliseconds(249)));
  EXPECT_TRUE(limiter.Ready(t0 + milliseconds(250)));
  EXPECT_FALSE(limiter.Ready(t0 + milliseconds(499)));  // counted from the last line shown
  EXPECT_TRUE(limiter.Ready(t0 + milliseconds(600)));
  EXPECT_TRUE(limiter.Ready(t0 + milliseconds(5000)));
}

// What the meter wrote to a memory stream.
struct Captured {
  char* data = nullptr;
  size_t size = 0;
  std::FILE* file = open_memstream(&data, &size);
  ~Captured() { std::free(data); }
  std::string Text() {
    std::fflush(file);
    return std::string(data, size);
  }
};

TEST(SimProgressTest, StopDrawsTheLastLineOnce) {
  for (const bool terminal : {false, true}) {
    Captured out;
    {
      SimProgressMeter meter(out.file, terminal, std::chrono::hours(1));
      SessionProgress now;
      now.tasks_submitted = now.tasks_completed = 6;
      now.records = 6;
      now.payload_bytes = 192;
      meter.Start([&] { return now; });
      meter.Stop();
      meter.Stop();  // once
    }
    const std::string text = out.Text();
    std::fclose(out.file);
    const std::string start = terminal ? "\rsim_run: 6/6 tasks done, 6 records, 192 B"
                                       : "sim_run: 6/6 tasks done, 6 records, 192 B";
    EXPECT_EQ(text.rfind(start, 0), 0u) << text;
    EXPECT_EQ(text.back(), '\n');
    EXPECT_EQ(text.find('\n'), text.size() - 1) << text;  // one line
    EXPECT_EQ(text.find("\033[K") != std::string::npos, terminal) << text;
  }
}

TEST(SimProgressTest, TheMeterDrawsWhileItRuns) {
  Captured out;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t samples = 0;
  SimProgressMeter meter(out.file, /*terminal=*/false, milliseconds(1));
  meter.Start([&] {
    std::lock_guard<std::mutex> lock(mu);
    SessionProgress p;
    p.tasks_submitted = 100;
    p.tasks_completed = ++samples;
    cv.notify_all();
    return p;
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return samples >= 3; });
  }
  meter.Stop();
  const std::string text = out.Text();
  std::fclose(out.file);
  EXPECT_EQ(text.rfind("sim_run: 1/100 tasks done", 0), 0u) << text;
  EXPECT_NE(text.find("\nsim_run: 2/100 tasks done"), std::string::npos) << text;
  EXPECT_NE(text.find("\nsim_run: 3/100 tasks done"), std::string::npos) << text;
}

TEST(SimProgressTest, AMeterNeverStartedWritesNothing) {
  Captured out;
  { SimProgressMeter meter(out.file, true, milliseconds(1)); }
  EXPECT_EQ(out.Text(), "");
  std::fclose(out.file);
}

}  // namespace
}  // namespace argsdump
