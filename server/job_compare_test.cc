// JobQueries' comparisons over a CaptureHub without gRPC (so they run under
// ThreadSanitizer: ranks are compared on worker threads): finished ranks
// walked straight from their indexes, with deduplicated payloads (reads
// that jump back in args.bin); the first divergence over every rank; a
// missing record; rows out of pairing order and repeated keys, compared
// from sorted copies; a filter; args.bin cut short under the hub; a
// cancelled comparison and a client that goes away.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/capture_hub.h"
#include "server/job_queries.h"
#include "store/capture_store.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/record_batch.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

// One task of a rank: an input tensor, a scalar and an output tensor.
struct Task {
  uint64_t id = 0;
  uint32_t step = 0;
  std::vector<float> in, out;
  int32_t scalar = 0;
};

// `n` tasks whose ids grow with their steps (5 a step). Inputs repeat
// every 4 tasks and each output equals a later task's input, so the store
// keeps one copy and the comparison's reads jump back in args.bin.
std::vector<Task> Tasks(uint32_t n) {
  std::vector<Task> tasks;
  for (uint32_t t = 0; t < n; ++t) {
    Task k;
    k.id = 0x100000000ull + t;
    k.step = t / 5;
    k.in.assign(8, 1.0f * (t % 4));
    k.out.assign(8, 1.0f * ((t + 1) % 4));
    k.scalar = static_cast<int32_t>(t);
    tasks.push_back(k);
  }
  return tasks;
}

// A finished rank capture of `job` in `root` holding `tasks`;
// `repeat_output_of` (a task id) records that task's output twice.
void WriteRank(const std::string& root, const std::string& job, uint32_t rank, uint32_t ranks,
               const std::vector<Task>& tasks, std::optional<uint64_t> repeat_output_of = {},
               std::vector<float> repeated = {}) {
  v1::CaptureInfo info;
  info.set_name(absl::StrCat(job, ".rank", rank));
  info.set_level(v1::DUMP_LEVEL_FULL);
  v1::JobMember* m = info.mutable_job();
  m->set_job(job);
  m->set_rank(rank);
  m->set_world_size(ranks);
  auto store = CaptureStore::Create(root + "/" + info.name() + "/args_dump", info);
  ASSERT_TRUE(store.ok()) << store.status();
  RecordBatch batch;
  auto output = [&](const Task& k, const std::vector<float>& values) {
    batch.Add(TensorRecord(k.id)
                  .Step(k.step)
                  .Arg(2)
                  .Role(v1::ROLE_OUTPUT)
                  .Stage(v1::STAGE_AFTER_COMPLETION)
                  .Shape({8}),
              BytesOf(values));
  };
  for (const Task& k : tasks) {
    batch.Add(TensorRecord(k.id).Step(k.step).Shape({8}), BytesOf(k.in));
    batch.Add(ScalarRecord(k.id).Step(k.step).Arg(1).ScalarBits(BitsOf(k.scalar)));
    output(k, k.out);
    if (repeat_output_of == k.id) output(k, repeated);
  }
  ASSERT_TRUE((*store)->AppendBatch(batch.RecordPtrs(), batch.PayloadViews()).ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
}

class JobCompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = FreshTempDir(absl::StrCat(
        "job_compare_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }

  // Opens the hub over what the test wrote.
  void Load() {
    CaptureHub::Options o;
    o.root = root_;
    auto hub = CaptureHub::Open(o);
    ASSERT_TRUE(hub.ok()) << hub.status();
    hub_ = std::move(hub).value();
    queries_ = std::make_unique<JobQueries>(hub_.get());
  }

  // Every message of CompareJobs(tonight, lastnight); the status in `*status`.
  std::vector<v1::CompareProgress> Compare(absl::Status* status,
                                           const v1::ArgFilter& filter = {}) {
    v1::CompareJobsRequest request;
    request.set_job("tonight");
    request.set_reference("lastnight");
    *request.mutable_filter() = filter;
    std::vector<v1::CompareProgress> seen;
    *status = queries_->CompareJobs(request, [&](const v1::CompareProgress& p) {
      seen.push_back(p);
      return true;
    });
    return seen;
  }

  // The answer of a comparison that must succeed.
  v1::CompareProgress Answer(const v1::ArgFilter& filter = {}) {
    absl::Status status;
    std::vector<v1::CompareProgress> seen = Compare(&status, filter);
    EXPECT_TRUE(status.ok()) << status;
    if (seen.empty()) return {};
    EXPECT_TRUE(seen.back().done());
    return seen.back();
  }

  std::string root_;
  std::unique_ptr<CaptureHub> hub_;
  std::unique_ptr<JobQueries> queries_;
};

TEST_F(JobCompareTest, AgreeingJobsAreComparedRecordByRecordWithProgressPerRank) {
  constexpr uint32_t kRanks = 6, kTasks = 40;
  for (uint32_t r = 0; r < kRanks; ++r) {
    WriteRank(root_, "tonight", r, kRanks, Tasks(kTasks));
    WriteRank(root_, "lastnight", r, kRanks, Tasks(kTasks));
  }
  Load();
  absl::Status status;
  const std::vector<v1::CompareProgress> seen = Compare(&status);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(seen.size(), kRanks + 1);
  for (uint32_t i = 0; i < kRanks; ++i) {
    EXPECT_EQ(seen[i].ranks_done(), i + 1);
    EXPECT_EQ(seen[i].ranks_total(), kRanks);
    EXPECT_FALSE(seen[i].done());
  }
  const v1::CompareProgress& last = seen.back();
  EXPECT_TRUE(last.done());
  EXPECT_FALSE(last.has_first()) << last.first().DebugString();
  EXPECT_EQ(last.records_compared(), kRanks * kTasks * 3);
  EXPECT_EQ(last.bytes_compared(), kRanks * kTasks * 2 * 2 * 32);
  EXPECT_EQ(last.progress_size(), 2 * static_cast<int>(kRanks));
}

TEST_F(JobCompareTest, TheFirstDivergenceIsTheEarliestStepOverEveryRank) {
  constexpr uint32_t kRanks = 5, kTasks = 40;
  for (uint32_t r = 0; r < kRanks; ++r) {
    std::vector<Task> tonight = Tasks(kTasks);
    if (r == 1) tonight[31].out[6] += 0.5f;  // step 6
    if (r == 3) tonight[12].out[5] = 7.25f;  // step 2: the first
    if (r == 4) tonight[13].scalar = 99;     // step 2, a later task
    WriteRank(root_, "tonight", r, kRanks, tonight);
    WriteRank(root_, "lastnight", r, kRanks, Tasks(kTasks));
  }
  Load();
  const v1::CompareProgress answer = Answer();
  ASSERT_TRUE(answer.has_first());
  const v1::Divergence& d = answer.first();
  EXPECT_EQ(d.actual().rank(), 3u);
  EXPECT_EQ(d.actual().capture(), "tonight.rank3");
  EXPECT_EQ(d.reference().capture(), "lastnight.rank3");
  EXPECT_EQ(d.actual().arg().record().task_id(), 0x100000000ull + 12);
  EXPECT_EQ(d.actual().arg().record().step(), 2u);
  EXPECT_EQ(d.actual().arg().record().role(), v1::ROLE_OUTPUT);
  EXPECT_EQ(d.element(), 5u);
  EXPECT_EQ(d.actual_value(), 7.25);
  EXPECT_EQ(d.reference_value(), 1.0);  // (12 + 1) % 4
  EXPECT_EQ(d.mismatches(), 1u);
  EXPECT_TRUE(absl::StrContains(d.reason(), "1 of 8 elements differ")) << d.reason();
}

TEST_F(JobCompareTest, ARecordOnlyOneSideHasIsADivergence) {
  std::vector<Task> fewer = Tasks(20);
  fewer.erase(fewer.begin() + 7);
  WriteRank(root_, "tonight", 0, 1, fewer);
  WriteRank(root_, "lastnight", 0, 1, Tasks(20));
  Load();
  const v1::CompareProgress answer = Answer();
  ASSERT_TRUE(answer.has_first());
  EXPECT_TRUE(absl::StrContains(answer.first().reason(), "tonight.rank0 has no such record"))
      << answer.first().reason();
  EXPECT_FALSE(answer.first().actual().has_arg());
  EXPECT_EQ(answer.first().reference().arg().record().task_id(), 0x100000000ull + 7);
  EXPECT_EQ(answer.first().reference().arg().record().arg_index(), 0u);
}

// Task ids in manifest order are not the job's (step, task) order when a
// later id has an earlier step: the divergence met first in the index (step
// 1) is not the first one (step 0, the last task id).
TEST_F(JobCompareTest, RowsOutOfPairingOrderAreComparedInTheJobsOrder) {
  std::vector<Task> lastnight = Tasks(12);
  for (Task& k : lastnight) k.step = k.id == 0x100000000ull + 11 ? 0 : 1 + k.step;
  std::vector<Task> tonight = lastnight;
  tonight[3].out[0] = 100;   // step 1
  tonight[11].out[1] = 200;  // step 0
  WriteRank(root_, "tonight", 0, 1, tonight);
  WriteRank(root_, "lastnight", 0, 1, lastnight);
  Load();
  const v1::CompareProgress answer = Answer();
  ASSERT_TRUE(answer.has_first());
  EXPECT_EQ(answer.first().actual().arg().record().task_id(), 0x100000000ull + 11);
  EXPECT_EQ(answer.first().actual().arg().record().step(), 0u);
  EXPECT_EQ(answer.first().element(), 1u);
  EXPECT_EQ(answer.first().actual_value(), 200);
}

// A record key twice (an output recorded again): the two are paired in
// arrival order, and the second one differs.
TEST_F(JobCompareTest, ARepeatedRecordIsPairedInArrivalOrder) {
  const uint64_t task = 0x100000000ull + 9;
  WriteRank(root_, "tonight", 0, 1, Tasks(16), task, std::vector<float>(8, 5.0f));
  WriteRank(root_, "lastnight", 0, 1, Tasks(16), task, std::vector<float>(8, 4.0f));
  Load();
  const v1::CompareProgress answer = Answer();
  ASSERT_TRUE(answer.has_first());
  EXPECT_EQ(answer.first().actual().arg().record().task_id(), task);
  EXPECT_EQ(answer.first().actual_value(), 5);
  EXPECT_EQ(answer.first().reference_value(), 4);
  EXPECT_EQ(answer.first().mismatches(), 8u);
  // Every record before it agreed (the first output of the task too), and
  // the pair that differs counts as compared.
  EXPECT_EQ(answer.records_compared(), 9 * 3 + 4);
}

TEST_F(JobCompareTest, AFilterLimitsTheComparedRecords) {
  std::vector<Task> tonight = Tasks(30);
  tonight[17].out[2] = -1;  // step 3
  WriteRank(root_, "tonight", 0, 1, tonight);
  WriteRank(root_, "lastnight", 0, 1, Tasks(30));
  Load();
  v1::ArgFilter step2;
  step2.set_step(2);
  const v1::CompareProgress agree = Answer(step2);
  EXPECT_FALSE(agree.has_first());
  EXPECT_EQ(agree.records_compared(), 5 * 3);
  v1::ArgFilter step3;
  step3.set_step(3);
  const v1::CompareProgress differ = Answer(step3);
  ASSERT_TRUE(differ.has_first());
  EXPECT_EQ(differ.first().actual().arg().record().task_id(), 0x100000000ull + 17);
  v1::ArgFilter one_task;
  one_task.set_task_id(0x100000000ull + 17);
  one_task.set_role(v1::ROLE_OUTPUT);
  const v1::CompareProgress task = Answer(one_task);
  ASSERT_TRUE(task.has_first());
  EXPECT_EQ(task.records_compared(), 1u);
}

TEST_F(JobCompareTest, ArgsBinCutShortUnderTheHubIsDataLossNamingIt) {
  for (uint32_t r = 0; r < 3; ++r) {
    WriteRank(root_, "tonight", r, 3, Tasks(20));
    WriteRank(root_, "lastnight", r, 3, Tasks(20));
  }
  Load();
  const std::string bin = root_ + "/tonight.rank1/args_dump/args.bin";
  ASSERT_EQ(::truncate(bin.c_str(), 40), 0);
  absl::Status status;
  Compare(&status);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), bin)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "ends before byte")) << status;
}

// Manifest order (by task id) meets task A (step 1), whose payload is past
// the end of a cut args.bin, before task B (step 0), where the ranks
// differ: the job's order reaches B first, so B's divergence is the answer
// and A's payload is never read.
TEST_F(JobCompareTest, AnUnreadablePayloadLaterInTheJobsOrderDoesNotHideTheFirstDivergence) {
  Task b;
  b.id = 0x100000000ull + 5;
  b.step = 0;
  b.in.assign(8, 10.0f);
  b.out.assign(8, 11.0f);
  Task a;
  a.id = 0x100000000ull + 1;
  a.step = 1;
  a.in.assign(8, 20.0f);
  a.out.assign(8, 21.0f);
  Task b_tonight = b;
  b_tonight.out[4] = 12.0f;
  // B arrives first: its payloads are args.bin's first 64 bytes.
  WriteRank(root_, "tonight", 0, 1, {b_tonight, a});
  WriteRank(root_, "lastnight", 0, 1, {b, a});
  Load();
  ASSERT_EQ(::truncate((root_ + "/tonight.rank0/args_dump/args.bin").c_str(), 64), 0);
  const v1::CompareProgress answer = Answer();
  ASSERT_TRUE(answer.has_first());
  EXPECT_EQ(answer.first().actual().arg().record().task_id(), b.id);
  EXPECT_EQ(answer.first().element(), 4u);
  EXPECT_EQ(answer.first().actual_value(), 12);
}

TEST_F(JobCompareTest, ACancelledComparisonAndAClientThatGoesAwayStopIt) {
  for (uint32_t r = 0; r < 8; ++r) {
    WriteRank(root_, "tonight", r, 8, Tasks(200));
    WriteRank(root_, "lastnight", r, 8, Tasks(200));
  }
  Load();
  v1::CompareJobsRequest request;
  request.set_job("tonight");
  request.set_reference("lastnight");
  std::atomic<bool> cancelled{true};
  int emitted = 0;
  absl::Status s = queries_->CompareJobs(
      request,
      [&](const v1::CompareProgress&) {
        ++emitted;
        return true;
      },
      &cancelled);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(emitted, 0);
  emitted = 0;
  s = queries_->CompareJobs(request, [&](const v1::CompareProgress&) {
    ++emitted;
    return false;
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "went away")) << s;
  EXPECT_EQ(emitted, 1);
  // And the next comparison runs whole.
  EXPECT_EQ(Answer().records_compared(), 8u * 200 * 3);
}

}  // namespace
}  // namespace argsdump
