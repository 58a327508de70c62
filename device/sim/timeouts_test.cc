#include "device/sim/timeouts.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

SimTimeouts Read(std::map<std::string, std::string> env, std::vector<std::string>* w) {
  return TimeoutsFromEnvironment(w, [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(TimeoutsTest, DefaultsKeepTheOrder) {
  std::vector<std::string> w;
  SimTimeouts t = Read({}, &w);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(t.scheduler, milliseconds(20000));
  EXPECT_EQ(t.op_execute, microseconds(45000000));
  EXPECT_EQ(t.stream_sync, milliseconds(50000));
}

TEST(TimeoutsTest, ValidOverridesApply) {
  std::vector<std::string> w;
  SimTimeouts t = Read({{"SIMPLER_SCHEDULER_TIMEOUT_MS", "5000"},
                        {"SIMPLER_OP_EXECUTE_TIMEOUT_US", "6000000"},
                        {"SIMPLER_STREAM_SYNC_TIMEOUT_MS", "7000"}}, &w);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(t.scheduler, milliseconds(5000));
  EXPECT_EQ(t.op_execute, milliseconds(6000));
  EXPECT_EQ(t.stream_sync, milliseconds(7000));
}

TEST(TimeoutsTest, InvalidValuesAreIgnoredWithAWarning) {
  for (const char* bad : {"abc", "-5", "0", "12ms", "", "99999999999999999999"}) {
    std::vector<std::string> w;
    SimTimeouts t = Read({{"SIMPLER_SCHEDULER_TIMEOUT_MS", bad},
                          {"SIMPLER_STREAM_SYNC_TIMEOUT_MS", "60000"}}, &w);
    EXPECT_EQ(t.scheduler, milliseconds(20000)) << bad;
    EXPECT_EQ(t.stream_sync, milliseconds(60000)) << bad;
    ASSERT_EQ(w.size(), 1u) << bad;
    EXPECT_NE(w[0].find("SIMPLER_SCHEDULER_TIMEOUT_MS"), std::string::npos);
  }
}

TEST(TimeoutsTest, BrokenOrderFallsBackToDefaults) {
  std::vector<std::string> w;
  SimTimeouts t = Read({{"SIMPLER_SCHEDULER_TIMEOUT_MS", "60000"}}, &w);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("does not hold"), std::string::npos);
  EXPECT_EQ(t.scheduler, milliseconds(20000));
  EXPECT_EQ(t.stream_sync, milliseconds(50000));
}

}  // namespace
}  // namespace argsdump
