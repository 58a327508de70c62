#include "tools/progress.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tools/progress_testing.h"

namespace argsdump {
namespace {

using std::chrono::milliseconds;

ProgressOptions Options(FakeProgressClock* clock, bool in_place) {
  ProgressOptions o;
  o.label = "export";
  o.in_place = in_place;
  o.delay = milliseconds(500);
  o.interval = milliseconds(250);
  o.clock = clock->Fn();
  return o;
}

std::vector<ProgressCounter> ArgsAndBytes() {
  return {{"args", ProgressUnit::kCount, 40}, {"", ProgressUnit::kBytes, 40 * 1024 * 1024}};
}

TEST(ProgressTest, NothingBeforeTheDelayThenAtMostOneLinePerInterval) {
  FakeProgressClock clock;
  std::ostringstream err;
  {
    ProgressMeter meter(&err, Options(&clock, /*in_place=*/false), ArgsAndBytes());
    clock.Set(1000 + 499);
    meter.Add({10, 10 * 1024 * 1024});  // one call for both counters
    EXPECT_EQ(err.str(), "");  // a quick command prints nothing
    clock.Set(1000 + 500);
    meter.Add(0, 0);
    EXPECT_EQ(err.str(), "export: 10/40 args (20/s), 10.0 MiB/40.0 MiB (20.0 MiB/s), 0.5 s\n");
    err.str("");
    for (int64_t t = 501; t < 750; t += 10) {
      clock.Set(1000 + t);
      meter.Add(0, 1);
    }
    EXPECT_EQ(err.str(), "");  // within the interval: counted, not drawn
    clock.Set(1000 + 750);
    meter.Update();
    EXPECT_EQ(err.str(), "export: 35/40 args (47/s), 10.0 MiB/40.0 MiB (13.3 MiB/s), 0.8 s\n");
    err.str("");
    clock.Set(1000 + 1000);
    meter.Add(0, 5);
    meter.Add(1, 30 * 1024 * 1024);  // same tick: already drawn
    EXPECT_EQ(err.str(), "export: 40/40 args (40/s), 10.0 MiB/40.0 MiB (10.0 MiB/s), 1.0 s\n");
    err.str("");
    meter.Finish();  // the final state, not rate-limited
    EXPECT_EQ(err.str(), "export: 40/40 args (40/s), 40.0 MiB/40.0 MiB (40.0 MiB/s), 1.0 s\n");
    err.str("");
    clock.Set(1000 + 5000);
    meter.Add(0, 1);
    meter.Finish();
  }
  EXPECT_EQ(err.str(), "");  // nothing after Finish, nor from the destructor
}

TEST(ProgressTest, QuickWorkFinishesSilently) {
  FakeProgressClock clock;
  std::ostringstream err;
  {
    ProgressMeter meter(&err, Options(&clock, /*in_place=*/true), ArgsAndBytes());
    clock.Set(1000 + 100);
    meter.Add(0, 40);
  }  // the destructor finishes
  EXPECT_EQ(err.str(), "");
}

TEST(ProgressTest, InPlaceRedrawsOneLineAndEndsIt) {
  FakeProgressClock clock;
  std::ostringstream err;
  ProgressMeter meter(&err, Options(&clock, /*in_place=*/true),
                      {{"args", ProgressUnit::kCount, std::nullopt}});
  clock.Set(1000 + 500);
  meter.Add(0, 3);
  clock.Set(1000 + 1000);
  meter.Add(0, 2);
  EXPECT_EQ(err.str(),
            "\rexport: 3 args (6.0/s), 0.5 s\x1b[K"
            "\rexport: 5 args (5.0/s), 1.0 s\x1b[K");
  err.str("");
  meter.Clear();  // the caller writes to the same terminal next
  meter.Clear();  // nothing left to erase
  EXPECT_EQ(err.str(), "\r\x1b[K");
  err.str("");
  meter.SetTotal(0, 9);
  meter.Finish();
  EXPECT_EQ(err.str(), "\rexport: 5/9 args (5.0/s), 1.0 s\x1b[K\n");
}

TEST(ProgressTest, SetStoresASampledValueAndUpdateDrawsIt) {
  FakeProgressClock clock;
  std::ostringstream err;
  ProgressMeter meter(
      &err, Options(&clock, /*in_place=*/false),
      {{"tasks", ProgressUnit::kCount, std::nullopt}, {"", ProgressUnit::kBytes, std::nullopt}});
  clock.Set(1000 + 500);
  meter.SetTotal(0, 10);  // a total that grows as work is submitted
  meter.Set(0, 4);
  meter.Set(1, 2048);
  EXPECT_EQ(err.str(), "");  // setting draws nothing, even when due
  meter.Update();
  EXPECT_EQ(err.str(), "export: 4/10 tasks (8.0/s), 2.0 KiB (4.0 KiB/s), 0.5 s\n");
  err.str("");
  clock.Set(1000 + 1000);
  meter.SetTotal(0, 20);
  meter.Set(0, 3);  // a value, not a delta: it may even go down
  meter.Set(1, 0);
  meter.Finish();
  EXPECT_EQ(err.str(), "export: 3/20 tasks (3.0/s), 0 B (0 B/s), 1.0 s\n");
}

TEST(ProgressTest, TheFlagGivesTheMode) {
  EXPECT_EQ(ProgressModeFromFlag(/*given=*/false, false), ProgressMode::kAuto);
  EXPECT_EQ(ProgressModeFromFlag(/*given=*/false, true), ProgressMode::kAuto);
  EXPECT_EQ(ProgressModeFromFlag(/*given=*/true, true), ProgressMode::kAlways);
  EXPECT_EQ(ProgressModeFromFlag(/*given=*/true, false), ProgressMode::kNever);
}

TEST(ProgressTest, BytesAndRatesReadable) {
  FakeProgressClock clock;
  std::ostringstream err;
  ProgressMeter meter(&err, Options(&clock, false),
                      {{"", ProgressUnit::kBytes, std::nullopt}, {"files", ProgressUnit::kCount, 2}});
  EXPECT_EQ(meter.Line(), "export: 0 B, 0/2 files, 0.0 s");  // no time yet: no rates
  clock.Set(1000 + 2000);
  meter.Add(1, 1);
  meter.Add(0, 1023);
  EXPECT_EQ(meter.Line(), "export: 1023 B (512 B/s), 1/2 files (0.5/s), 2.0 s");
  meter.Add(0, 1);
  EXPECT_EQ(meter.Line(), "export: 1.0 KiB (512 B/s), 1/2 files (0.5/s), 2.0 s");
  meter.Add(0, (uint64_t{3} << 40) - 1024);
  EXPECT_EQ(meter.Line(), "export: 3.0 TiB (1.5 TiB/s), 1/2 files (0.5/s), 2.0 s");
}

TEST(ProgressTest, OffDrawsNothing) {
  ProgressMeter off;
  EXPECT_FALSE(off.enabled());
  off.Add(0, 5);  // no counters, no stream: still a no-op
  off.Set(0, 5);
  off.SetTotal(0, 5);
  off.Update();
  off.Clear();
  off.Finish();
  EXPECT_EQ(off.Line(), "");
}

TEST(ProgressTest, ModesFromTheCommandLine) {
  EXPECT_FALSE(ProgressOptionsFor(ProgressMode::kNever, true).has_value());
  EXPECT_FALSE(ProgressOptionsFor(ProgressMode::kAuto, false).has_value());
  const auto terminal = ProgressOptionsFor(ProgressMode::kAuto, true);
  ASSERT_TRUE(terminal.has_value());
  EXPECT_TRUE(terminal->in_place);
  EXPECT_EQ(terminal->delay, milliseconds(500));
  EXPECT_EQ(terminal->interval, milliseconds(250));
  const auto forced = ProgressOptionsFor(ProgressMode::kAlways, false);
  ASSERT_TRUE(forced.has_value());
  EXPECT_FALSE(forced->in_place);  // a log gets a line per update
  EXPECT_EQ(forced->delay, milliseconds(0));
  EXPECT_TRUE(ProgressOptionsFor(ProgressMode::kAlways, true)->in_place);
}

TEST(ProgressTest, CountsFromManyThreads) {
  FakeProgressClock clock;
  std::ostringstream err;
  ProgressMeter meter(&err, Options(&clock, false), {{"records", ProgressUnit::kCount, std::nullopt}});
  clock.Set(1000 + 1000);  // every Add is due: the threads race to draw
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&meter] {
      for (int i = 0; i < 1000; ++i) meter.Add(0, 1);
    });
  }
  for (std::thread& t : threads) t.join();
  meter.Finish();
  const std::string text = err.str();
  // One tick of the fake clock: one line drawn while counting, one at the end.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
  EXPECT_NE(text.find("export: 4000 records (4000/s), 1.0 s\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace argsdump
