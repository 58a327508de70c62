#include "apps/sim_run/sim_progress.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/progress_testing.h"

namespace argsdump {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

// sim_run's options for a mode and a stream, on the test's clock.
ProgressOptions OptionsFor(ProgressMode mode, bool terminal, FakeProgressClock* clock) {
  ProgressOptions o = *ProgressOptionsFor(mode, terminal);
  o.label = "sim_run";
  o.clock = clock->Fn();
  return o;
}

SessionProgress Counters(uint64_t submitted, uint64_t completed, uint64_t records,
                         uint64_t bytes) {
  SessionProgress p;
  p.tasks_submitted = submitted;
  p.tasks_completed = completed;
  p.records = records;
  p.payload_bytes = bytes;
  return p;
}

TEST(SimProgressTest, TheLineSaysTasksRecordsBytesAndRates) {
  FakeProgressClock clock;
  std::ostringstream err;
  // A period the test never reaches: the only sample is Stop's.
  SimProgressSampler sampler(&err, OptionsFor(ProgressMode::kAlways, false, &clock), hours(1));
  sampler.Start([] { return Counters(400, 120, 360, 3 * 1024 * 1024); });
  clock.Advance(500);
  sampler.Stop();
  EXPECT_EQ(err.str(),
            "sim_run: 120/400 tasks done (240/s), 360 records (720/s), 3.0 MiB (6.0 MiB/s), "
            "0.5 s\n");
}

TEST(SimProgressTest, StopDrawsTheLastLineOnceAndEndsIt) {
  for (const bool terminal : {false, true}) {
    FakeProgressClock clock;
    std::ostringstream err;
    {
      SimProgressSampler sampler(&err, OptionsFor(ProgressMode::kAlways, terminal, &clock),
                                 hours(1));
      sampler.Start([] { return Counters(6, 6, 6, 192); });
      clock.Advance(2000);
      sampler.Stop();
      sampler.Stop();  // once
      clock.Advance(2000);
    }  // nor again from the destructor
    const std::string line =
        "sim_run: 6/6 tasks done (3.0/s), 6 records (3.0/s), 192 B (96 B/s), 2.0 s";
    EXPECT_EQ(err.str(), terminal ? "\r" + line + "\x1b[K\n" : line + "\n");
  }
}

// A job the sampler watches on its own thread (a period of 1 ms): each
// sample is taken a quarter second later on the meter's clock than the one
// before, with one more task done. Returns what was drawn once at least
// `samples` were taken and the sampler stopped; `*taken` is how many.
std::string DrawnOverSamples(ProgressMode mode, bool terminal, uint64_t samples,
                             uint64_t* taken) {
  FakeProgressClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::ostringstream err;
  SimProgressSampler sampler(&err, OptionsFor(mode, terminal, &clock), milliseconds(1));
  sampler.Start([&] {
    std::lock_guard<std::mutex> lock(mu);
    clock.Advance(250);
    ++*taken;
    cv.notify_all();
    return Counters(100, *taken, 0, 0);
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return *taken >= samples; });
  }
  sampler.Stop();
  return err.str();
}

TEST(SimProgressTest, TheSamplerDrawsWhileTheJobRuns) {
  uint64_t taken = 0;
  const std::string text = DrawnOverSamples(ProgressMode::kAlways, false, 3, &taken);
  // A line per sample (each is an interval after the last), the last Stop's.
  EXPECT_TRUE(absl::StartsWith(
      text, "sim_run: 1/100 tasks done (4.0/s), 0 records (0.0/s), 0 B (0 B/s), 0.2 s\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "\nsim_run: 2/100 tasks done (4.0/s), 0 records (0.0/s), 0 B (0 B/s), 0.5 s\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "\nsim_run: 3/100 tasks done (4.0/s)")) << text;
  const std::string last = text.substr(text.rfind('\n', text.size() - 2) + 1);
  EXPECT_TRUE(absl::StartsWith(last, absl::StrCat("sim_run: ", taken, "/100 tasks done"))) << text;
}

TEST(SimProgressTest, OnATerminalByDefaultTheLineComesAfterTheDelayInPlace) {
  uint64_t taken = 0;
  // 1.0 s on the meter's clock: past the delay.
  const std::string text = DrawnOverSamples(ProgressMode::kAuto, true, 4, &taken);
  // Nothing in the first half second: the first line is the second sample's.
  EXPECT_TRUE(absl::StartsWith(
      text, "\rsim_run: 2/100 tasks done (4.0/s), 0 records (0.0/s), 0 B (0 B/s), 0.5 s\x1b[K"))
      << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1) << text;  // one line, redrawn, ended by Stop
  EXPECT_EQ(text.substr(text.size() - 4), "\x1b[K\n") << text;
}

TEST(SimProgressTest, AQuickRunOnATerminalPrintsNothing) {
  FakeProgressClock clock;
  std::ostringstream err;
  SimProgressSampler sampler(&err, OptionsFor(ProgressMode::kAuto, true, &clock), hours(1));
  sampler.Start([] { return Counters(2, 2, 6, 192); });
  clock.Advance(499);
  sampler.Stop();
  EXPECT_EQ(err.str(), "");
}

TEST(SimProgressTest, ASamplerNeverStartedWritesNothing) {
  FakeProgressClock clock;
  std::ostringstream err;
  {
    SimProgressSampler sampler(&err, OptionsFor(ProgressMode::kAlways, true, &clock),
                               milliseconds(1));
    sampler.Stop();
  }
  EXPECT_EQ(err.str(), "");
}

}  // namespace
}  // namespace argsdump
