#include "sdk/session_setup.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/scoped_env.h"

namespace argsdump {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(CheckSessionOptionsTest, NamesTheFieldOutOfRange) {
  EXPECT_TRUE(CheckSessionOptions(SessionOptions()).ok());
  SessionOptions o;
  o.worker_threads = 0;
  EXPECT_EQ(CheckSessionOptions(o).message(),
            "SessionOptions.worker_threads: 0 is outside 1..256");
  o = SessionOptions();
  o.arena_bytes = 63;
  EXPECT_THAT(CheckSessionOptions(o).message(), HasSubstr("SessionOptions.arena_bytes: 63"));
  o = SessionOptions();
  o.connect_timeout = std::chrono::milliseconds(-1);
  EXPECT_EQ(CheckSessionOptions(o).message(), "SessionOptions.connect_timeout: negative");
}

TEST(SessionSetupTest, TakesTheCallersResolutionAsItIs) {
  SessionWiring wiring;
  DumpConfig resolved;
  resolved.level = 3;
  resolved.path = "/somewhere";
  wiring.resolved = resolved;
  SessionSetup setup = SessionSetup::Resolve(SessionOptions(), wiring);
  EXPECT_EQ(setup.config().level, 3);
  EXPECT_EQ(setup.config().path, "/somewhere");
  EXPECT_FALSE(setup.watching());
  EXPECT_TRUE(setup.WantsCapture(SessionOptions()));

  DumpConfigEntry api;
  api.level = 0;
  setup.SetApi(api, /*resolved_by_caller=*/true);
  EXPECT_EQ(setup.config().level, 0);
  EXPECT_FALSE(setup.WantsCapture(SessionOptions()));
  SessionOptions dynamic;
  dynamic.dynamic_switch = true;
  EXPECT_TRUE(setup.WantsCapture(dynamic));
  EXPECT_FALSE(setup.PollFile());  // no file is watched
}

TEST(SessionSetupTest, TheApiEntryIsResolvedUnderTheEnvironment) {
  ScopedEnv level("ARGSDUMP_LEVEL", nullptr);
  SessionOptions options;
  options.dump.level = 2;
  SessionSetup setup = SessionSetup::Resolve(options, SessionWiring());
  EXPECT_EQ(setup.config().level, 2);
  DumpConfigEntry api;
  api.level = 1;
  setup.SetApi(api, /*resolved_by_caller=*/false);
  EXPECT_EQ(setup.config().level, 1);
}

TEST(SessionSetupTest, TheRuntimeRunsWithTheOptionsAndTheConfiguration) {
  SessionWiring wiring;
  DumpConfig resolved;
  resolved.level = 2;
  wiring.resolved = resolved;
  SessionOptions options;
  options.worker_threads = 3;
  SessionSetup setup = SessionSetup::Resolve(options, wiring);
  SimConfig sim = setup.RuntimeConfig(options, wiring);
  EXPECT_EQ(sim.worker_threads, 3u);
  ASSERT_TRUE(sim.dump.has_value());
  EXPECT_EQ(sim.dump->level, 2);
  SimConfig mine;
  mine.worker_threads = 5;
  wiring.sim = mine;
  EXPECT_EQ(setup.RuntimeConfig(options, wiring).worker_threads, 5u);
}

TEST(SessionLabelsTest, TestIdentityThenConfigurationThenCode) {
  ScopedEnv target("TEST_TARGET", "//pkg:t");
  ScopedEnv shard("TEST_SHARD_INDEX", "3");
  SessionOptions options;
  options.labels = {{"team", "code"}, {"extra", "x"}};
  DumpConfig config;
  config.labels = {{"team", "config"}, {"target", "overridden"}};
  EXPECT_THAT(SessionLabels(options, SessionWiring(), config, "Suite.Case"),
              ElementsAre(Pair("target", "overridden"), Pair("test_case", "Suite.Case"),
                          Pair("shard", "3"), Pair("team", "code"), Pair("extra", "x")));
  SessionWiring no_test;
  no_test.test_labels = false;
  EXPECT_THAT(SessionLabels(SessionOptions(), no_test, DumpConfig(), "Suite.Case"),
              ElementsAre());
}

}  // namespace
}  // namespace argsdump
