#include "format/job.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

// An environment given as a table (what getenv would return).
GetEnv Env(std::map<std::string, std::string> vars) {
  auto table = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [table](const char* name) -> const char* {
    auto it = table->find(name);
    return it == table->end() ? nullptr : it->second.c_str();
  };
}

v1::JobMember Resolved(const JobRequest& given, const GetEnv& env) {
  absl::StatusOr<std::optional<v1::JobMember>> m = ResolveJob({given}, env);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok() || !m->has_value()) return {};
  return **m;
}

TEST(JobNameTest, TheCaptureNameRulesWithinSixtyFourBytes) {
  EXPECT_TRUE(ValidateJobName("nightly-2026.12.05_a").ok());
  EXPECT_FALSE(ValidateJobName("").ok());
  EXPECT_FALSE(ValidateJobName(".").ok());
  EXPECT_FALSE(ValidateJobName("..").ok());
  EXPECT_FALSE(ValidateJobName("a/b").ok());
  EXPECT_FALSE(ValidateJobName(std::string(65, 'j')).ok());
  EXPECT_TRUE(ValidateJobName(std::string(64, 'j')).ok());
  absl::Status s = ValidateJobName("bad job");
  EXPECT_NE(s.message().find("byte 3"), absl::string_view::npos) << s;
  EXPECT_EQ(JobCaptureName("j", 12), "j.rank12");
  EXPECT_EQ(JobRankFolder(0), "rank0");
}

TEST(JobNameTest, RankFolderParsesOnlyItsOwnSpelling) {
  EXPECT_EQ(RankFromFolder("rank0"), 0u);
  EXPECT_EQ(RankFromFolder("rank65535"), 65535u);
  EXPECT_EQ(RankFromFolder("rank65536"), std::nullopt);
  EXPECT_EQ(RankFromFolder("rank01"), std::nullopt);
  EXPECT_EQ(RankFromFolder("rank"), std::nullopt);
  EXPECT_EQ(RankFromFolder("rank-1"), std::nullopt);
  EXPECT_EQ(RankFromFolder("args_dump"), std::nullopt);
}

TEST(JobMemberTest, RankMustBeBelowTheWorldSize) {
  v1::JobMember m;
  m.set_job("j");
  m.set_rank(3);
  m.set_world_size(4);
  EXPECT_TRUE(CheckJobMember(m).ok());
  m.set_rank(4);
  EXPECT_FALSE(CheckJobMember(m).ok());
  m.set_world_size(0);
  EXPECT_TRUE(CheckJobMember(m).ok());
  m.set_world_size(kMaxWorldSize + 1);
  EXPECT_FALSE(CheckJobMember(m).ok());
  m.set_world_size(0);
  m.set_rank(kMaxWorldSize);
  EXPECT_FALSE(CheckJobMember(m).ok());
  m.set_rank(0);
  m.set_source("env\n");
  EXPECT_FALSE(CheckJobMember(m).ok());
}

TEST(ResolveJobTest, NothingNamedIsNoJob) {
  absl::StatusOr<std::optional<v1::JobMember>> m =
      ResolveJob({}, Env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"PMI_RANK", "1"}}));
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->has_value());
}

TEST(ResolveJobTest, GivenBeatsEnvironmentBeatsLaunchersFieldByField) {
  const GetEnv env = Env({{"ARGSDUMP_JOB", "envjob"},
                          {"ARGSDUMP_WORLD_SIZE", "16"},
                          {"RANK", "5"},
                          {"WORLD_SIZE", "8"},
                          {"TORCHELASTIC_RUN_ID", "rdzv1"}});
  v1::JobMember m = Resolved({}, env);
  EXPECT_EQ(m.job(), "envjob");
  EXPECT_EQ(m.rank(), 5u);         // only torchrun gives a rank
  EXPECT_EQ(m.world_size(), 16u);  // ARGSDUMP_WORLD_SIZE before WORLD_SIZE
  EXPECT_EQ(m.source(), "env,launcher:torchrun");

  JobRequest given;
  given.job = "flagjob";
  given.rank = 2;
  given.source = "flag";
  m = Resolved(given, env);
  EXPECT_EQ(m.job(), "flagjob");
  EXPECT_EQ(m.rank(), 2u);
  EXPECT_EQ(m.world_size(), 16u);
  EXPECT_EQ(m.source(), "flag,env");

  // Two entries of the caller's: the first that sets a field wins.
  JobRequest options;
  options.job = "optjob";
  options.rank = 7;
  options.world_size = 8;
  options.source = "options";
  absl::StatusOr<std::optional<v1::JobMember>> two = ResolveJob({given, options}, env);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ((*two)->job(), "flagjob");
  EXPECT_EQ((*two)->rank(), 2u);
  EXPECT_EQ((*two)->world_size(), 8u);
  EXPECT_EQ((*two)->source(), "flag,options");
}

TEST(ResolveJobTest, EachLauncherAndTheirOrder) {
  EXPECT_EQ(Resolved({}, Env({{"SLURM_JOB_ID", "4242"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}}))
                .DebugString(),
            "job: \"4242\"\nrank: 7\nworld_size: 8\nsource: \"launcher:slurm\"\n");
  // mpirun under an allocation: Open MPI's rank, Slurm's job id.
  v1::JobMember m = Resolved({}, Env({{"SLURM_JOB_ID", "99"},
                                      {"SLURM_PROCID", "0"},
                                      {"SLURM_NTASKS", "1"},
                                      {"OMPI_COMM_WORLD_RANK", "3"},
                                      {"OMPI_COMM_WORLD_SIZE", "4"}}));
  EXPECT_EQ(m.job(), "99");
  EXPECT_EQ(m.rank(), 3u);
  EXPECT_EQ(m.world_size(), 4u);
  m = Resolved({}, Env({{"ARGSDUMP_JOB", "j"}, {"PMI_RANK", "2"}, {"PMI_SIZE", "3"}}));
  EXPECT_EQ(m.rank(), 2u);
  EXPECT_EQ(m.source(), "env,launcher:pmi");
  // torchrun without --rdzv-id names no job.
  absl::StatusOr<std::optional<v1::JobMember>> none =
      ResolveJob({}, Env({{"TORCHELASTIC_RUN_ID", "none"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // A launcher's rank without its size is not taken for one.
  m = Resolved({}, Env({{"ARGSDUMP_JOB", "j"}, {"RANK", "1"}}));
  EXPECT_EQ(m.rank(), 0u);
  EXPECT_EQ(m.source(), "env");
}

TEST(ResolveJobTest, BadValuesNameTheirVariable) {
  auto error = [](std::map<std::string, std::string> vars) {
    absl::StatusOr<std::optional<v1::JobMember>> m = ResolveJob({}, Env(std::move(vars)));
    EXPECT_FALSE(m.ok());
    return std::string(m.status().message());
  };
  EXPECT_NE(error({{"ARGSDUMP_JOB", "j"}, {"ARGSDUMP_RANK", "x1"}}).find("ARGSDUMP_RANK"),
            std::string::npos);
  EXPECT_NE(error({{"ARGSDUMP_JOB", "j"}, {"ARGSDUMP_RANK", "-1"}}).find("ARGSDUMP_RANK"),
            std::string::npos);
  EXPECT_NE(error({{"ARGSDUMP_JOB", "j"}, {"ARGSDUMP_WORLD_SIZE", "0"}}).find("ARGSDUMP_WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(error({{"ARGSDUMP_JOB", "j"}, {"ARGSDUMP_RANK", "99999999999"}}).find("ARGSDUMP_RANK"),
            std::string::npos);
  EXPECT_NE(error({{"ARGSDUMP_JOB", "j/k"}}).find("job name"), std::string::npos);
  EXPECT_NE(error({{"ARGSDUMP_JOB", "j"}, {"ARGSDUMP_RANK", "4"}, {"ARGSDUMP_WORLD_SIZE", "4"}})
                .find("not below the world size"),
            std::string::npos);
  EXPECT_NE(error({{"ARGSDUMP_JOB", "j"}, {"ARGSDUMP_WORLD_SIZE", "4"}}).find("no rank"),
            std::string::npos);
}

TEST(ResolveJobTest, ANamedJobWithoutRankIsRankZero) {
  JobRequest given;
  given.job = "solo";
  given.source = "options";
  v1::JobMember m = Resolved(given, Env({}));
  EXPECT_EQ(m.rank(), 0u);
  EXPECT_EQ(m.world_size(), 0u);
  EXPECT_EQ(m.source(), "options");
}

}  // namespace
}  // namespace argsdump
