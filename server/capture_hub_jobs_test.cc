// CaptureHub's jobs without gRPC: a capture's job identity checked at open,
// one capture per rank, the job map kept across deletes and restarts, and
// the manifest's "job" key.
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "format/job.h"
#include "gtest/gtest.h"
#include "server/capture_hub.h"
#include "store/capture_store.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

v1::IngestOpen RankOpen(const std::string& capture, const std::string& job, uint32_t rank,
                        uint32_t world_size, bool resume = false) {
  v1::IngestOpen o;
  o.set_capture(capture);
  o.set_level(v1::DUMP_LEVEL_FULL);
  o.set_resume(resume);
  v1::JobMember* m = o.mutable_job();
  m->set_job(job);
  m->set_rank(rank);
  m->set_world_size(world_size);
  m->set_source("options");
  return o;
}

// Runs a capture's writer jobs and waits for each callback.
absl::Status AppendOneTask(HubCapture& c, uint64_t first_record, uint64_t task) {
  AppendJob job;
  job.first_record = first_record;
  if (absl::Status s = job.records.Add(ScalarRecord(task)); !s.ok()) return s;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status out;
  c.Append(std::move(job), [&](absl::Status s, Watermark) {
    std::lock_guard<std::mutex> lock(mu);
    out = s;
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return out;
}

absl::Status FinishAndWait(HubCapture& c) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status out;
  c.Finish(v1::CaptureCounters(), [&](absl::Status s, Watermark) {
    std::lock_guard<std::mutex> lock(mu);
    out = s;
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return out;
}

TEST(CaptureHubJobsTest, ABadJobIdentityIsInvalidArgumentWithTheRule) {
  CaptureHub::Options o;
  o.root = TempPath("hub_jobs_bad");
  auto hub = std::move(CaptureHub::Open(o)).value();
  auto bad_name = hub->Open(RankOpen("c0", "no/slash", 0, 2));
  EXPECT_EQ(bad_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad_name.status().message(), "c0")) << bad_name.status();
  auto past = hub->Open(RankOpen("c1", "j", 2, 2));
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(past.status().message(), "rank")) << past.status();
  auto huge = hub->Open(RankOpen("c2", "j", 0, kMaxWorldSize + 1));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing was made of them.
  bool more = false;
  EXPECT_TRUE(hub->List({}, v1::CAPTURE_STATE_UNSPECIFIED, "", 10, &more).empty());
  EXPECT_TRUE(hub->JobNames("", 10, &more).empty());
}

TEST(CaptureHubJobsTest, OneCapturePerRankUntilItIsDeleted) {
  CaptureHub::Options o;
  o.root = TempPath("hub_jobs_rank");
  auto hub = std::move(CaptureHub::Open(o)).value();
  auto first = hub->Open(RankOpen("j.rank1", "j", 1, 4));
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = hub->Open(RankOpen("other", "j", 1, 4));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "j.rank1")) << second.status();
  // The first one resumed: fine.
  (*first)->Detach();
  auto resumed = hub->Open(RankOpen("j.rank1", "j", 1, 4, /*resume=*/true));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(AppendOneTask(**resumed, 0, 7).ok());
  EXPECT_EQ((*resumed)->Summary().job().rank(), 1u);
  EXPECT_EQ((*resumed)->Summary().job().world_size(), 4u);
  ASSERT_TRUE(FinishAndWait(**resumed).ok());
  // Deleted: the rank is free again.
  ASSERT_TRUE(hub->Delete("j.rank1", "deleted (test)").ok());
  bool more = false;
  EXPECT_TRUE(hub->JobNames("", 10, &more).empty());
  EXPECT_EQ(hub->JobRanks("j").status().code(), absl::StatusCode::kNotFound);
  auto again = hub->Open(RankOpen("other", "j", 1, 4));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(CaptureHubJobsTest, JobsSurviveARestartLiveAndFinished) {
  CaptureHub::Options o;
  o.root = TempPath("hub_jobs_restart");
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    auto r0 = std::move(hub->Open(RankOpen("j.rank0", "j", 0, 3)).value());
    auto r2 = std::move(hub->Open(RankOpen("j.rank2", "j", 2, 3)).value());
    auto lone = std::move(hub->Open(RankOpen("k.rank0", "k", 0, 1)).value());
    ASSERT_TRUE(AppendOneTask(*r0, 0, 1).ok());
    ASSERT_TRUE(AppendOneTask(*r2, 0, 1).ok());
    ASSERT_TRUE(AppendOneTask(*lone, 0, 1).ok());
    ASSERT_TRUE(FinishAndWait(*r0).ok());  // r2 and lone stay live
  }
  const std::string manifest = ReadFileOrEmpty(o.root + "/j.rank0/args_dump/" + kManifestName);
  EXPECT_TRUE(absl::StrContains(
      manifest,
      "\"job\": {\"job\": \"j\", \"rank\": 0, \"world_size\": 3, \"source\": \"options\"}"))
      << manifest.substr(0, 600);
  auto hub = std::move(CaptureHub::Open(o)).value();
  bool more = false;
  EXPECT_EQ(hub->JobNames("", 10, &more), (std::vector<std::string>{"j", "k"}));
  EXPECT_EQ(hub->JobNames("j", 10, &more), (std::vector<std::string>{"k"}));
  auto ranks = hub->JobRanks("j");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->size(), 2u);
  EXPECT_TRUE(ranks->at(0)->finished());
  EXPECT_FALSE(ranks->at(2)->finished());
  EXPECT_EQ(ranks->at(0)->Summary().job().world_size(), 3u);
  EXPECT_EQ(ranks->at(2)->Summary().job().rank(), 2u);
  // The rank is still held, and the job filter of the list still works.
  EXPECT_EQ(hub->Open(RankOpen("x", "j", 2, 3)).status().code(), absl::StatusCode::kAlreadyExists);
  const auto listed = hub->List({}, v1::CAPTURE_STATE_UNSPECIFIED, "", 10, &more, "j");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0]->name(), "j.rank0");
  EXPECT_EQ(listed[1]->name(), "j.rank2");
}

}  // namespace
}  // namespace argsdump
