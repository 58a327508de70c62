#include "sdk/session_place.h"

#include <sys/stat.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::MatchesRegex;
using ::testing::StartsWith;

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(FolderNameTest, KeepsSafeCharactersOnly) {
  EXPECT_EQ(FolderName("Suite.Case"), "Suite.Case");
  EXPECT_EQ(FolderName("../a b"), "_a_b");
  EXPECT_EQ(FolderName(".."), "session");
  EXPECT_EQ(FolderName(std::string(200, 'x')).size(), 96u);
}

TEST(RemoteCaptureNameTest, TargetSessionStampAndTag) {
  EXPECT_THAT(RemoteCaptureName("//pkg:t", "Suite.Case"),
              MatchesRegex("pkg\\.t\\.Suite\\.Case\\.[0-9]{8}-[0-9]{6}\\.[0-9a-f]{8}"));
  EXPECT_THAT(RemoteCaptureName("", "s"), StartsWith("s."));
  EXPECT_LE(RemoteCaptureName(std::string(300, 'a'), std::string(100, 'b')).size(), 128u);
}

TEST(SessionBaseNameTest, OptionThenTestCaseThenProgram) {
  EXPECT_EQ(SessionBaseName("mine", "Suite.Case"), "mine");
  EXPECT_EQ(SessionBaseName("", "Suite.Case"), "Suite.Case");
  EXPECT_FALSE(SessionBaseName("", "").empty());
}

TEST(PlaceSessionTest, TwoCapturingSessionsClaimTwoFolders) {
  const std::string root = FreshTempDir("place_claim");
  const SessionPlace a = PlaceSession("Suite.Case", true, root, SessionWiring());
  const SessionPlace b = PlaceSession("Suite.Case", true, root, SessionWiring());
  EXPECT_EQ(a.name, "Suite.Case");
  EXPECT_EQ(b.name, "Suite.Case_2");
  EXPECT_EQ(a.prefix, root + "/Suite.Case");
  EXPECT_EQ(a.dump_dir, root + "/Suite.Case/args_dump");
  EXPECT_TRUE(a.claimed);
  EXPECT_TRUE(IsDir(b.prefix));
  // One that does not capture creates nothing, and still takes a name of
  // its own.
  const SessionPlace c = PlaceSession("Suite.Case", false, root, SessionWiring());
  EXPECT_EQ(c.name, "Suite.Case_3");
  EXPECT_FALSE(c.claimed);
  EXPECT_FALSE(IsDir(c.prefix));
}

TEST(PlaceSessionTest, AnExactOutputPrefixIsTakenAsItIs) {
  SessionWiring wiring;
  wiring.output_prefix = "/no/such/place/run";
  const SessionPlace p = PlaceSession("w", true, "", wiring);
  EXPECT_EQ(p.name, "w");
  EXPECT_EQ(p.prefix, "/no/such/place/run");
  EXPECT_EQ(p.dump_dir, "/no/such/place/run/args_dump");
  EXPECT_FALSE(p.claimed);
}

TEST(PlaceSessionTest, ADefaultOutputPrefixTakesASiblingWhenHeld) {
  const std::string root = FreshTempDir("place_prefix");
  SessionWiring wiring;
  wiring.output_prefix = root + "/run";
  wiring.claim_output_prefix = true;
  const SessionPlace a = PlaceSession("w", true, "", wiring);
  const SessionPlace b = PlaceSession("w", true, "", wiring);
  EXPECT_EQ(a.prefix, root + "/run");
  EXPECT_EQ(b.prefix, root + "/run_2");
  EXPECT_TRUE(b.claimed);
}

TEST(PlaceSessionTest, UnderTestTheOutputsFolderIsTheRoot) {
  const std::string root = FreshTempDir("place_outputs");
  ScopedEnv outputs("TEST_UNDECLARED_OUTPUTS_DIR", root);
  const SessionPlace p = PlaceSession("Case", true, "", SessionWiring());
  EXPECT_EQ(p.prefix, root + "/Case");
  EXPECT_EQ(CapturePlace(p.dump_dir).find(root + "/Case"), std::string::npos)
      << "named inside the zip, not the folder bazel removes";
}

TEST(PlaceSessionTest, AJobsRankGoesToItsRankFolderAndARerunToJob2) {
  const std::string root = FreshTempDir("place_job");
  v1::JobMember job;
  job.set_job("nightly");
  job.set_rank(3);
  job.set_world_size(8);
  const SessionPlace a = PlaceSession("Case", true, root, SessionWiring(), &job);
  EXPECT_EQ(a.prefix, root + "/nightly/rank3");
  EXPECT_EQ(a.dump_dir, root + "/nightly/rank3/args_dump");
  EXPECT_TRUE(a.claimed);
  EXPECT_TRUE(IsDir(a.prefix));
  // Another rank of the same job meets it in the same folder.
  job.set_rank(4);
  EXPECT_EQ(PlaceSession("Case", true, root, SessionWiring(), &job).prefix,
            root + "/nightly/rank4");
  // Rank 3 again: its folder is taken; the rerun's ranks go to nightly_2.
  job.set_rank(3);
  EXPECT_EQ(PlaceSession("Case", true, root, SessionWiring(), &job).prefix,
            root + "/nightly_2/rank3");
  job.set_rank(4);
  EXPECT_EQ(PlaceSession("Case", true, root, SessionWiring(), &job).prefix,
            root + "/nightly_2/rank4");
  // A session that writes nothing claims nothing.
  job.set_rank(5);
  const SessionPlace off = PlaceSession("Case", false, root, SessionWiring(), &job);
  EXPECT_FALSE(off.claimed);
  EXPECT_FALSE(IsDir(off.prefix));
}

TEST(PlaceSessionTest, UnderTestAJobIsInTheOutputsFolder) {
  const std::string root = FreshTempDir("place_job_outputs");
  ScopedEnv outputs("TEST_UNDECLARED_OUTPUTS_DIR", root);
  v1::JobMember job;
  job.set_job("j");
  EXPECT_EQ(PlaceSession("Case", true, "", SessionWiring(), &job).prefix, root + "/j/rank0");
}

}  // namespace
}  // namespace argsdump
