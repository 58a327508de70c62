#include "sdk/session_setup.h"

#include "absl/strings/str_join.h"
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

// The job identity: the command line, then the options, then the
// environment, field by field; a value that cannot be used is a WARNING.
TEST(SessionSetupTest, JobIdentityFromTheCommandLineTheOptionsAndTheEnvironment) {
  ScopedEnv job_env("ARGSDUMP_JOB", "envjob");
  ScopedEnv rank_env("ARGSDUMP_RANK", "1");
  ScopedEnv world_env("ARGSDUMP_WORLD_SIZE", "16");
  SessionOptions options;
  options.rank = 2;
  {
    std::vector<std::string> args = {"t", "--job=flagjob", "--gtest_filter=x"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    ASSERT_TRUE(ConsumeDumpFlags(&argc, argv.data()).ok());
    EXPECT_EQ(argc, 2);  // --job is the SDK's; the gtest flag stays
  }
  SessionSetup setup = SessionSetup::Resolve(options, SessionWiring());
  ASSERT_TRUE(setup.job().has_value());
  EXPECT_EQ(setup.job()->job(), "flagjob");
  EXPECT_EQ(setup.job()->rank(), 2u);
  EXPECT_EQ(setup.job()->world_size(), 16u);
  EXPECT_EQ(setup.job()->source(), "flag,options,env");
  ResetCommandLineDumpForTest();
  {
    std::vector<std::string> args = {"t", "--rank=99"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    ASSERT_TRUE(ConsumeDumpFlags(&argc, argv.data()).ok());
  }
  // Rank 99 of 16: a WARNING, and the session is no job's.
  SessionSetup bad = SessionSetup::Resolve(options, SessionWiring());
  EXPECT_FALSE(bad.job().has_value());
  ASSERT_FALSE(bad.warnings().empty());
  EXPECT_THAT(bad.warnings().back(), HasSubstr("rank 99 is not below the world size 16"));
  ResetCommandLineDumpForTest();
  {
    std::vector<std::string> args = {"t", "--rank=x"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    ASSERT_TRUE(ConsumeDumpFlags(&argc, argv.data()).ok());
  }
  // A flag whose value cannot be read is a WARNING naming it; the options'
  // rank is used.
  SessionSetup flag = SessionSetup::Resolve(options, SessionWiring());
  ASSERT_TRUE(flag.job().has_value());
  EXPECT_EQ(flag.job()->rank(), 2u);
  EXPECT_THAT(absl::StrJoin(flag.warnings(), "\n"), HasSubstr("--rank: rank 'x' is not a decimal"));
  ResetCommandLineDumpForTest();
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
