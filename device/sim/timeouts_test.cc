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

// On the sim the scheduler override applies on its own, without the onboard
// ordering limits; the others follow it (SIMPLER_SCHEDULER_TIMEOUT_MS=60000
// alone must not reset all three).
TEST(TimeoutsTest, TheSchedulerOverrideAppliesAlone) {
  struct Case {
    std::map<std::string, std::string> env;
    milliseconds scheduler, op, stream;
    size_t warnings;
  };
  const Case cases[] = {
      {{{"SIMPLER_SCHEDULER_TIMEOUT_MS", "60000"}}, milliseconds(60000), milliseconds(85000),
       milliseconds(90000), 0},
      {{{"SIMPLER_SCHEDULER_TIMEOUT_MS", "5000"}}, milliseconds(5000), milliseconds(45000),
       milliseconds(50000), 0},
      {{{"SIMPLER_SCHEDULER_TIMEOUT_MS", "100000"}, {"SIMPLER_STREAM_SYNC_TIMEOUT_MS", "200000"}},
       milliseconds(100000), milliseconds(125000), milliseconds(200000), 0},
      // Set ones that break the order are ignored; the scheduler still applies.
      {{{"SIMPLER_SCHEDULER_TIMEOUT_MS", "60000"}, {"SIMPLER_OP_EXECUTE_TIMEOUT_US", "45000000"}},
       milliseconds(60000), milliseconds(85000), milliseconds(90000), 1},
      {{{"SIMPLER_OP_EXECUTE_TIMEOUT_US", "9000000"}, {"SIMPLER_STREAM_SYNC_TIMEOUT_MS", "8000"}},
       milliseconds(20000), milliseconds(45000), milliseconds(50000), 1},
      {{{"SIMPLER_STREAM_SYNC_TIMEOUT_MS", "30000"}}, milliseconds(20000), milliseconds(45000),
       milliseconds(50000), 1},
  };
  for (const Case& c : cases) {
    std::vector<std::string> w;
    SimTimeouts t = Read(c.env, &w);
    std::string env;
    for (const auto& [k, v] : c.env) env += k + "=" + v + " ";
    EXPECT_EQ(t.scheduler, c.scheduler) << env;
    EXPECT_EQ(t.op_execute, c.op) << env;
    EXPECT_EQ(t.stream_sync, c.stream) << env;
    ASSERT_EQ(w.size(), c.warnings) << env;
    if (!w.empty()) {
      EXPECT_NE(w[0].find("does not hold"), std::string::npos) << w[0];
    }
  }
}

}  // namespace
}  // namespace argsdump
