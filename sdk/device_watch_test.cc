#include "sdk/device_watch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

constexpr milliseconds kBudget(1000);
const DeviceWatch::Clock::time_point t0;

TEST(DeviceWatchTest, AStoppedHeartbeatIsAHangAtTheBudget) {
  DeviceWatch w(kBudget, t0);
  DeviceProgress p;  // idle: nothing pending
  p.heartbeat = 1;
  EXPECT_FALSE(w.Observe(p, t0 + milliseconds(10)));
  EXPECT_FALSE(w.Observe(p, t0 + milliseconds(1009)));
  auto why = w.Observe(p, t0 + milliseconds(1010));
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("did not run for 1000 ms"));
}

TEST(DeviceWatchTest, ABudgetShorterThanTenBeatsWaitsTenBeatsForTheHeartbeat) {
  DeviceWatch w(milliseconds(20), t0);
  DeviceProgress p;
  p.heartbeat = 1;
  EXPECT_FALSE(w.Observe(p, t0));
  EXPECT_FALSE(w.Observe(p, t0 + milliseconds(499)));
  auto why = w.Observe(p, t0 + milliseconds(500));
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("did not run for 500 ms"));
}

// Progress stops before the heartbeat when the running kernel's process
// is stopped: the progress rule comes due first, and says the process did
// not run, since the heartbeat has stood still for more than ten beats.
TEST(DeviceWatchTest, AProcessStoppedAfterItsLastProgressIsStoppedNotLivelocked) {
  DeviceWatch w(milliseconds(2000), t0);
  DeviceProgress p;
  p.tasks_submitted = 3;
  p.records = 1;
  p.heartbeat = 1;
  EXPECT_FALSE(w.Observe(p, t0 + milliseconds(100)));  // the last progress
  for (int i = 2; i <= 6; ++i) {
    p.heartbeat = i;  // still beating, no progress
    EXPECT_FALSE(w.Observe(p, t0 + milliseconds(100 * i))) << i;
  }
  // Stopped at 600 ms: no beat from then on.
  auto why = w.Observe(p, t0 + milliseconds(2100));
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("did not run for the last 1500 ms (its heartbeat stood still"));
  EXPECT_THAT(*why, HasSubstr("3 task(s) pending and no progress for 2000 ms"));
}

// A livelocked kernel keeps the heartbeat going: the progress rule's verdict
// stays a livelock even just after a slow beat.
TEST(DeviceWatchTest, AFewMissedBeatsDoNotMakeALivelockAStop) {
  DeviceWatch w(kBudget, t0);
  DeviceProgress p;
  p.tasks_submitted = 1;
  p.heartbeat = 1;
  EXPECT_FALSE(w.Observe(p, t0));
  p.heartbeat = 2;
  EXPECT_FALSE(w.Observe(p, t0 + milliseconds(600)));
  auto why = w.Observe(p, t0 + milliseconds(1000));  // 400 ms since the beat: < 10 beats
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("no progress for 1000 ms with 1 task(s) pending"));
}

TEST(DeviceWatchTest, ABeatingIdleDeviceIsNeverHung) {
  DeviceWatch w(kBudget, t0);
  DeviceProgress p;
  for (int i = 1; i < 100; ++i) {
    p.heartbeat = i;
    EXPECT_FALSE(w.Observe(p, t0 + milliseconds(500 * i))) << i;
  }
}

TEST(DeviceWatchTest, PendingWorkWithoutProgressIsALivelock) {
  DeviceWatch w(kBudget, t0);
  DeviceProgress p;
  p.tasks_submitted = 3;
  p.tasks_completed = 1;
  p.records = 7;
  for (int i = 1; i <= 4; ++i) {
    p.heartbeat = i;
    EXPECT_FALSE(w.Observe(p, t0 + milliseconds(300 * i))) << i;  // the first sample moved
  }
  p.heartbeat = 5;
  auto why = w.Observe(p, t0 + milliseconds(300 + 1000));
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("no progress for 1000 ms with 2 task(s) pending"));
}

TEST(DeviceWatchTest, ARecordOrACompletionIsProgress) {
  DeviceWatch w(kBudget, t0);
  DeviceProgress p;
  p.tasks_submitted = 3;
  for (int i = 1; i < 40; ++i) {
    p.heartbeat = i;
    if (i % 2 == 0) ++p.records; else ++p.tasks_completed;
    if (p.tasks_completed >= p.tasks_submitted) p.tasks_submitted += 3;
    EXPECT_FALSE(w.Observe(p, t0 + milliseconds(900 * i))) << i;
  }
}

TEST(DeviceWatchTest, ADeviceWaitingForASlowHostIsNotHung) {
  DeviceWatch w(kBudget, t0);
  DeviceProgress p;
  p.tasks_submitted = 3;
  p.host_behind = true;
  for (int i = 1; i < 20; ++i) {
    p.heartbeat = i;
    EXPECT_FALSE(w.Observe(p, t0 + milliseconds(400 * i))) << i;
  }
  // The host caught up; the device still does nothing: hung a budget later.
  p.host_behind = false;
  p.heartbeat = 20;
  EXPECT_FALSE(w.Observe(p, t0 + milliseconds(8000)));
  p.heartbeat = 21;
  EXPECT_TRUE(w.Observe(p, t0 + milliseconds(8600)));
}

}  // namespace
}  // namespace argsdump
