// The capture service's jobs over gRPC, with a real server on loopback and
// ranks written through the real ingest path (client/ IngestWriter): job
// identity checks, one capture per rank, GetJob's missing and crashed
// ranks, QueryJob's order and pages across live and finished ranks, the
// first non-finite record, comparisons of jobs and of ranks, a restart.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/capture_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "httplib.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/capture_service_fixture.h"
#include "tests/testing/record_batch.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

constexpr char kToken[] = "job-test-token";
constexpr uint32_t kSteps = 3;
constexpr uint32_t kTasksPerStep = 4;
constexpr uint32_t kRecordsPerTask = 3;

// Task ids fall as steps go on: an order by task id alone is not the job's
// order by (step, task).
uint64_t TaskId(uint32_t step, uint32_t task) { return 0x9000 - step * 0x100 + task; }

// What to plant in a rank's records.
struct Plant {
  std::optional<std::pair<uint32_t, uint32_t>> nan_at;      // (step, task): output NaN
  std::optional<std::pair<uint32_t, uint32_t>> scalar_at;   // (step, task): scalar + 1000
  std::optional<std::pair<uint32_t, uint32_t>> element_at;  // (step, task): output[2] + 1
};

std::string Floats(std::vector<float> v) { return BytesOf(v); }

// kSteps x kTasksPerStep tasks, each: an input tensor, a scalar, an output
// tensor (the kernel "add", func id 1).
RecordBatch RankRecords(const Plant& plant = {}) {
  RecordBatch batch;
  for (uint32_t s = 0; s < kSteps; ++s) {
    for (uint32_t t = 0; t < kTasksPerStep; ++t) {
      const uint64_t task = TaskId(s, t);
      const auto here = std::make_pair(s, t);
      batch.Add(TensorRecord(task).FuncIds({1}).Step(s).Shape({4}), Floats({1.0f * t, 2, 3, 4}));
      const int32_t value = static_cast<int32_t>(t) + (plant.scalar_at == here ? 1000 : 0);
      batch.Add(ScalarRecord(task).FuncIds({1}).Step(s).Arg(1).ScalarBits(BitsOf(value)));
      std::vector<float> out = {1.0f * t, 2, 3, 5};
      if (plant.element_at == here) out[2] += 1;
      if (plant.nan_at == here) out[1] = std::numeric_limits<float>::quiet_NaN();
      v1::ArgRecord& r = batch.Add(TensorRecord(task)
                                       .FuncIds({1})
                                       .Step(s)
                                       .Arg(2)
                                       .Role(v1::ROLE_OUTPUT)
                                       .Stage(v1::STAGE_AFTER_COMPLETION)
                                       .Shape({4}),
                                   Floats(out));
      if (plant.nan_at == here) r.set_nonfinite(true);
    }
  }
  return batch;
}

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = FreshTempDir(absl::StrCat(
        "job_service_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    StartServer();
  }

  void StartServer() {
    TestCaptureServiceOptions o;
    o.root = root_;
    o.auth_token = kToken;
    o.http = true;
    auto service = TestCaptureService::Start(o);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(service).value();
    CaptureClientOptions c;
    c.target = service_->target();
    c.auth_token = kToken;
    auto client = CaptureClient::Create(c);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
  }

  static IngestWriterOptions RankOpen(const std::string& job, uint32_t rank, uint32_t world_size,
                                      std::string capture = "") {
    IngestWriterOptions o;
    o.open.set_capture(capture.empty() ? absl::StrCat(job, ".rank", rank) : capture);
    o.open.set_level(v1::DUMP_LEVEL_FULL);
    v1::JobMember* m = o.open.mutable_job();
    m->set_job(job);
    m->set_rank(rank);
    m->set_world_size(world_size);
    m->set_source("flag");
    v1::Kernel* k = o.open.add_kernels();
    k->set_func_id(1);
    k->set_name("add");
    return o;
  }

  // Streams a rank's records; finishes it unless `live` (the writer is
  // kept in writers_ so the capture stays attached and live).
  void Rank(const std::string& job, uint32_t rank, uint32_t world_size, const Plant& plant = {},
            bool live = false, const v1::IngestFinish& finish = {}) {
    const RecordBatch batch = RankRecords(plant);
    auto writer = IngestWriter::Open(client_.get(), RankOpen(job, rank, world_size));
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Send(batch.RecordPtrs(), batch.PayloadViews(), 0, 0));
    ASSERT_TRUE((*writer)->WaitAcked(batch.size()));
    if (live) {
      writers_.push_back(std::move(writer).value());
      return;
    }
    v1::CaptureSummary summary;
    ASSERT_TRUE((*writer)->Finish(finish, &summary).ok());
    EXPECT_EQ(summary.job().rank(), rank);
  }

  // Every message of a comparison; the last is its answer.
  std::vector<v1::CompareProgress> CompareJobs(const v1::CompareJobsRequest& request) {
    std::vector<v1::CompareProgress> seen;
    auto last = client_->CompareJobs(request, [&](const v1::CompareProgress& p) {
      seen.push_back(p);
      return absl::OkStatus();
    });
    EXPECT_TRUE(last.ok()) << last.status();
    return seen;
  }

  std::string root_;
  std::unique_ptr<TestCaptureService> service_;
  std::unique_ptr<CaptureClient> client_;
  std::vector<std::unique_ptr<IngestWriter>> writers_;
};

TEST_F(JobServiceTest, BadJobIdentitiesAndASecondCaptureOfARankAreRefused) {
  auto bad_name = IngestWriter::Open(client_.get(), RankOpen("bad job", 0, 2, "c0"));
  EXPECT_EQ(bad_name.status().code(), absl::StatusCode::kInvalidArgument) << bad_name.status();
  auto past = IngestWriter::Open(client_.get(), RankOpen("j", 2, 2, "c1"));
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument) << past.status();
  EXPECT_TRUE(absl::StrContains(past.status().message(), "rank")) << past.status();
  Rank("j", 1, 2);
  auto twice = IngestWriter::Open(client_.get(), RankOpen("j", 1, 2, "another"));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kAlreadyExists) << twice.status();
  EXPECT_TRUE(absl::StrContains(twice.status().message(), "j.rank1")) << twice.status();
  // Without the token: refused like every other call.
  CaptureClientOptions o;
  o.target = service_->target();
  auto anonymous = std::move(CaptureClient::Create(o)).value();
  EXPECT_EQ(anonymous->GetJob("j").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(client_->GetJob("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->GetJob("bad job").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobServiceTest, GetJobReportsMissingLiveAndCrashedRanksAndTheRestWhole) {
  Rank("j", 0, 4);
  Rank("j", 1, 4, {}, /*live=*/true);
  v1::IngestFinish crashed;
  *crashed.mutable_device_crash() = SegvCrash(TaskId(1, 2), TaskId(1, 1));
  Rank("j", 3, 4, {}, false, crashed);
  auto job = client_->GetJob("j");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->world_size(), 4u);
  EXPECT_EQ(job->ranks_present(), 3u);
  EXPECT_EQ(std::vector<uint32_t>(job->missing_ranks().begin(), job->missing_ranks().end()),
            std::vector<uint32_t>{2});
  EXPECT_EQ(std::vector<uint32_t>(job->crashed_ranks().begin(), job->crashed_ranks().end()),
            std::vector<uint32_t>{3});
  EXPECT_EQ(job->ranks_live(), 1u);
  EXPECT_EQ(job->ranks_finished(), 2u);
  EXPECT_TRUE(job->problems().empty());
  ASSERT_EQ(job->ranks_size(), 3);
  const uint64_t per_rank = kSteps * kTasksPerStep * kRecordsPerTask;
  for (const v1::RankSummary& r : job->ranks()) EXPECT_EQ(r.capture().records(), per_rank);
  EXPECT_EQ(job->counters().total_args(), 3 * per_rank);  // the live rank: what is durable
  auto list = client_->ListJobs(v1::ListJobsRequest());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->jobs_size(), 1);
  EXPECT_EQ(list->jobs(0).ranks_size(), 0);
  EXPECT_EQ(list->jobs(0).ranks_present(), 3u);
  v1::ListCapturesRequest by_job;
  by_job.set_job("j");
  auto captures = client_->ListCaptures(by_job);
  ASSERT_TRUE(captures.ok()) << captures.status();
  EXPECT_EQ(captures->captures_size(), 3);
  by_job.set_job("k");
  EXPECT_EQ(client_->ListCaptures(by_job)->captures_size(), 0);
}

TEST_F(JobServiceTest, QueryJobMergesRanksInTheJobsOrderPageByPage) {
  Rank("j", 0, 3);
  Rank("j", 1, 3, {}, /*live=*/true);
  Rank("j", 2, 3);
  v1::QueryJobRequest request;
  request.set_job("j");
  request.set_page_size(7);
  QueryJobPager pager(client_.get(), request);
  std::vector<v1::JobArg> all, page;
  int pages = 0;
  for (;;) {
    auto more = pager.Next(&page);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    ++pages;
    EXPECT_LE(page.size(), 7u);
    all.insert(all.end(), page.begin(), page.end());
  }
  const size_t total = 3 * kSteps * kTasksPerStep * kRecordsPerTask;
  ASSERT_EQ(all.size(), total);
  EXPECT_EQ(pages, static_cast<int>((total + 6) / 7));
  ASSERT_EQ(pager.progress().size(), 3u);
  EXPECT_EQ(pager.progress()[1].state(), v1::CAPTURE_STATE_LIVE);
  EXPECT_EQ(pager.progress()[0].durable_records(), total / 3);
  auto key = [](const v1::JobArg& a) {
    const v1::ArgRecord& r = a.arg().record();
    return std::make_tuple(r.step(), r.task_id(), a.rank(), static_cast<int>(r.stage()),
                           r.arg_index(), static_cast<int>(r.role()));
  };
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_LT(key(all[i - 1]), key(all[i])) << "at " << i;
  }
  EXPECT_EQ(all.front().arg().record().task_id(), TaskId(0, 0));
  EXPECT_EQ(all.back().rank(), 2u);
  // A filter and a subset of ranks.
  request.set_page_size(1000);
  request.mutable_filter()->set_role(v1::ROLE_OUTPUT);
  request.add_ranks(1);
  auto outputs = client_->QueryJob(request);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(outputs->args_size(), static_cast<int>(kSteps * kTasksPerStep));
  for (const v1::JobArg& a : outputs->args()) EXPECT_EQ(a.rank(), 1u);
  request.add_ranks(9);
  EXPECT_EQ(client_->QueryJob(request).status().code(), absl::StatusCode::kNotFound);
  request.clear_ranks();
  request.set_page_token("q1.2.3");
  EXPECT_EQ(client_->QueryJob(request).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobServiceTest, FirstNonfiniteIsTheEarliestStepThenTaskOverTheRanks) {
  Rank("j", 0, 3);
  // Rank 1: a NaN at step 1, whose task id is lower than step 0's.
  Rank("j", 1, 3, Plant{std::make_pair(1u, 0u), {}, {}});
  // Rank 2, live: a NaN at step 0, a later task.
  Rank("j", 2, 3, Plant{std::make_pair(0u, 3u), {}, {}}, /*live=*/true);
  auto first = client_->FirstNonfinite([] {
    v1::FirstNonfiniteRequest r;
    r.set_job("j");
    return r;
  }());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_first());
  EXPECT_EQ(first->first().rank(), 2u);
  EXPECT_EQ(first->first().capture(), "j.rank2");
  EXPECT_EQ(first->first().arg().record().task_id(), TaskId(0, 3));
  EXPECT_EQ(first->first().arg().record().arg_index(), 2u);
  ASSERT_EQ(first->funcs_size(), 1);
  EXPECT_EQ(first->funcs(0), "add");
  ASSERT_EQ(first->task_args_size(), static_cast<int>(kRecordsPerTask));
  for (const v1::CapturedArg& a : first->task_args()) EXPECT_EQ(a.record().task_id(), TaskId(0, 3));
  EXPECT_EQ(first->progress_size(), 3);
  // Rank 2 left out by the filter's step: rank 1's.
  v1::FirstNonfiniteRequest later;
  later.set_job("j");
  later.mutable_filter()->set_step(1);
  auto at_step1 = client_->FirstNonfinite(later);
  ASSERT_TRUE(at_step1.ok()) << at_step1.status();
  EXPECT_EQ(at_step1->first().rank(), 1u);
  EXPECT_EQ(at_step1->first().arg().record().task_id(), TaskId(1, 0));
}

TEST_F(JobServiceTest, TheGridCountsEachRankByStepWithMissingAndCrashedRanks) {
  Rank("j", 0, 4);
  Rank("j", 1, 4, Plant{std::make_pair(1u, 2u), {}, {}}, /*live=*/true);
  v1::IngestFinish crashed;
  *crashed.mutable_device_crash() = SegvCrash(TaskId(1, 2), TaskId(1, 1));
  Rank("j", 3, 4, {}, false, crashed);
  auto stub = v1::CaptureService::NewStub(
      grpc::CreateChannel(service_->target(), grpc::InsecureChannelCredentials()));
  auto grid = [&](uint32_t max_steps) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    v1::GetJobGridRequest request;
    request.set_job("j");
    request.set_max_steps(max_steps);
    v1::JobGrid out;
    const grpc::Status s = stub->GetJobGrid(&context, request, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  };
  const v1::JobGrid all = grid(0);
  EXPECT_EQ(all.world_size(), 4u);
  EXPECT_EQ(std::vector<uint32_t>(all.steps().begin(), all.steps().end()),
            (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_FALSE(all.steps_capped());
  ASSERT_EQ(all.ranks_size(), 4);
  EXPECT_TRUE(all.ranks(2).missing());
  EXPECT_EQ(all.ranks(2).cells_size(), 0);
  EXPECT_TRUE(all.ranks(3).crashed());
  EXPECT_FALSE(all.ranks(0).crashed());
  EXPECT_EQ(all.ranks(1).state(), v1::CAPTURE_STATE_LIVE);
  EXPECT_EQ(all.ranks(0).state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(std::vector<uint32_t>(all.missing_ranks().begin(), all.missing_ranks().end()),
            std::vector<uint32_t>{2});
  for (int r : {0, 1, 3}) {
    const v1::JobGridRank& rank = all.ranks(r);
    EXPECT_EQ(rank.capture(), absl::StrCat("j.rank", r));
    EXPECT_EQ(rank.last_step(), kSteps - 1);
    ASSERT_EQ(rank.cells_size(), static_cast<int>(kSteps));
    for (uint32_t s = 0; s < kSteps; ++s) {
      EXPECT_EQ(rank.cells(s).records(), kTasksPerStep * kRecordsPerTask);
      EXPECT_EQ(rank.cells(s).nonfinite(), r == 1 && s == 1 ? 1u : 0u) << r << " " << s;
    }
  }
  // Capped: the lowest steps, and the answer says so.
  const v1::JobGrid two = grid(2);
  EXPECT_EQ(std::vector<uint32_t>(two.steps().begin(), two.steps().end()),
            (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(two.steps_capped());
  EXPECT_EQ(two.max_steps(), 2u);
  EXPECT_EQ(two.ranks(0).cells_size(), 2);
  EXPECT_EQ(two.ranks(0).last_step(), kSteps - 1);
  // Over HTTP, with the token.
  httplib::Client http("127.0.0.1", service_->http_port());
  const httplib::Headers auth = {{"Authorization", absl::StrCat("Bearer ", kToken)}};
  auto ok = http.Get("/v1/jobs/j/grid?max_steps=1", auth);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_TRUE(absl::StrContains(ok->body, "j.rank3")) << ok->body;
  auto bad = http.Get("/v1/jobs/j/grid?max_steps=x", auth);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  auto anonymous = http.Get("/v1/jobs/j/grid");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  auto rpc = http.Post("/v1/rpc/GetJobGrid", auth, R"({"job": "j", "max_steps": 2})",
                       "application/json");
  ASSERT_TRUE(rpc);
  EXPECT_EQ(rpc->status, 200) << rpc->body;
  EXPECT_TRUE(absl::StrContains(rpc->body, "\"steps_capped\": true") ||
              absl::StrContains(rpc->body, "\"steps_capped\":true"))
      << rpc->body;
  auto none = http.Get("/v1/jobs/nope/grid", auth);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404) << none->body;
}

TEST_F(JobServiceTest, CompareJobsNamesTheOneDifferingScalar) {
  for (uint32_t r = 0; r < 3; ++r)
    Rank("tonight", r, 3, r == 1 ? Plant{{}, std::make_pair(2u, 1u), {}} : Plant{});
  for (uint32_t r = 0; r < 3; ++r) Rank("lastnight", r, 3);
  v1::CompareJobsRequest request;
  request.set_job("tonight");
  request.set_reference("lastnight");
  const std::vector<v1::CompareProgress> seen = CompareJobs(request);
  ASSERT_EQ(seen.size(), 4u);  // a message per rank, then the answer
  EXPECT_EQ(seen[0].ranks_done(), 1u);
  EXPECT_EQ(seen[0].ranks_total(), 3u);
  const v1::CompareProgress& done = seen.back();
  EXPECT_TRUE(done.done());
  ASSERT_TRUE(done.has_first());
  const v1::Divergence& d = done.first();
  EXPECT_EQ(d.actual().rank(), 1u);
  EXPECT_EQ(d.actual().capture(), "tonight.rank1");
  EXPECT_EQ(d.reference().capture(), "lastnight.rank1");
  EXPECT_EQ(d.actual().arg().record().task_id(), TaskId(2, 1));
  EXPECT_EQ(d.actual().arg().record().kind(), v1::KIND_SCALAR);
  EXPECT_EQ(d.actual_value(), 1001);
  EXPECT_EQ(d.reference_value(), 1);
  EXPECT_EQ(done.progress_size(), 6);
  // A job against itself: nothing differs.
  request.set_reference("tonight");
  const std::vector<v1::CompareProgress> same = CompareJobs(request);
  ASSERT_FALSE(same.empty());
  EXPECT_FALSE(same.back().has_first());
  EXPECT_EQ(same.back().records_compared(), 3 * kSteps * kTasksPerStep * kRecordsPerTask);
  request.set_reference("nope");
  auto missing =
      client_->CompareJobs(request, [](const v1::CompareProgress&) { return absl::OkStatus(); });
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobServiceTest, CompareRanksFindsTheReplicaThatDiffers) {
  Rank("dp", 0, 3);
  Rank("dp", 1, 3, {}, /*live=*/true);
  Rank("dp", 2, 3, Plant{{}, {}, std::make_pair(1u, 2u)});
  v1::CompareRanksRequest request;
  request.set_job("dp");
  request.set_reference_rank(0);
  std::vector<v1::CompareProgress> seen;
  auto done = client_->CompareRanks(request, [&](const v1::CompareProgress& p) {
    seen.push_back(p);
    return absl::OkStatus();
  });
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(seen.size(), 3u);
  ASSERT_TRUE(done->has_first());
  const v1::Divergence& d = done->first();
  EXPECT_EQ(d.actual().rank(), 2u);
  EXPECT_EQ(d.reference().rank(), 0u);
  EXPECT_EQ(d.actual().arg().record().task_id(), TaskId(1, 2));
  EXPECT_EQ(d.element(), 2u);
  EXPECT_EQ(d.actual_value(), 4);
  EXPECT_EQ(d.reference_value(), 3);
  EXPECT_EQ(d.mismatches(), 1u);
  // A tolerance that takes the difference in: nothing differs.
  request.mutable_tolerance()->set_atol(1.5);
  auto tolerant =
      client_->CompareRanks(request, [](const v1::CompareProgress&) { return absl::OkStatus(); });
  ASSERT_TRUE(tolerant.ok()) << tolerant.status();
  EXPECT_FALSE(tolerant->has_first());
  // A kernel no rank has: the request's mistake, not agreement.
  request.mutable_filter()->set_func_name("matmul");
  auto unknown =
      client_->CompareRanks(request, [](const v1::CompareProgress&) { return absl::OkStatus(); });
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << unknown.status();
  request.mutable_filter()->set_func_name("add");
  auto by_kernel =
      client_->CompareRanks(request, [](const v1::CompareProgress&) { return absl::OkStatus(); });
  ASSERT_TRUE(by_kernel.ok()) << by_kernel.status();
  EXPECT_EQ(by_kernel->records_compared(), 2 * kSteps * kTasksPerStep * kRecordsPerTask);
}

TEST_F(JobServiceTest, ARestartKeepsTheJobs) {
  Rank("j", 0, 2);
  Rank("j", 1, 2, {}, /*live=*/true);
  writers_.clear();
  service_->Shutdown(std::chrono::milliseconds(1000));
  service_.reset();
  StartServer();
  auto job = client_->GetJob("j");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->ranks_present(), 2u);
  EXPECT_EQ(job->world_size(), 2u);
  EXPECT_EQ(job->ranks_finished(), 1u);
  EXPECT_EQ(job->ranks_live(), 1u);
  EXPECT_TRUE(job->missing_ranks().empty());
  auto twice = IngestWriter::Open(client_.get(), RankOpen("j", 1, 2, "j.again"));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kAlreadyExists) << twice.status();
}

// The HTTP face: the same answers as JSON, behind the same token.
TEST_F(JobServiceTest, TheHttpFaceAnswersTheJobQuestions) {
  Rank("j", 0, 2);
  Rank("j", 1, 2, Plant{std::make_pair(1u, 0u), std::make_pair(2u, 3u), {}});
  Rank("k", 0, 2);
  Rank("k", 1, 2);
  httplib::Client http("127.0.0.1", service_->http_port());
  const httplib::Headers auth = {{"Authorization", absl::StrCat("Bearer ", kToken)}};
  auto get = [&](const std::string& path) {
    auto r = http.Get(path, auth);
    EXPECT_TRUE(r) << path;
    return r ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string());
  };
  auto unauthorized = http.Get("/v1/jobs");
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
  auto [status, body] = get("/v1/jobs");
  EXPECT_EQ(status, 200) << body;
  EXPECT_TRUE(absl::StrContains(body, "\"job\": \"j\"") || absl::StrContains(body, "\"job\":\"j\""))
      << body;
  std::tie(status, body) = get("/v1/jobs/j");
  EXPECT_EQ(status, 200) << body;
  EXPECT_TRUE(absl::StrContains(body, "j.rank1")) << body;
  std::tie(status, body) = get("/v1/jobs/j/args?role=output&ranks=1&page_size=2");
  EXPECT_EQ(status, 200) << body;
  EXPECT_TRUE(absl::StrContains(body, "nextPageToken") ||
              absl::StrContains(body, "next_page_token"))
      << body;
  std::tie(status, body) = get("/v1/jobs/j/args?ranks=x");
  EXPECT_EQ(status, 400) << body;
  std::tie(status, body) = get("/v1/jobs/j/first_nonfinite");
  EXPECT_EQ(status, 200) << body;
  EXPECT_TRUE(absl::StrContains(body, "\"add\"")) << body;
  std::tie(status, body) = get("/v1/jobs/j/compare?reference=k");
  EXPECT_EQ(status, 200) << body;
  EXPECT_TRUE(absl::StrContains(body, "value")) << body;
  EXPECT_TRUE(absl::StrContains(body, "j.rank1")) << body;
  std::tie(status, body) = get("/v1/jobs/j/compare");
  EXPECT_EQ(status, 400) << body;
  std::tie(status, body) = get("/v1/jobs/k/compare_ranks?reference_rank=0&ranks=1");
  EXPECT_EQ(status, 200) << body;
  EXPECT_FALSE(absl::StrContains(body, "\"first\"")) << body;
  std::tie(status, body) = get("/v1/captures?job=k");
  EXPECT_EQ(status, 200) << body;
  EXPECT_TRUE(absl::StrContains(body, "k.rank1")) << body;
  EXPECT_FALSE(absl::StrContains(body, "j.rank1")) << body;
  std::tie(status, body) = get("/v1/jobs/nope");
  EXPECT_EQ(status, 404) << body;
}

// The traces over HTTP: a capture's and a job's (a process per rank, a
// slice per task), with the bearer token like every other endpoint; a
// filter picks tasks; an unknown capture or job is 404.
TEST_F(JobServiceTest, TheHttpFaceAnswersTraces) {
  for (uint32_t rank : {0u, 1u}) {
    RecordBatch batch = RankRecords();
    for (v1::ArgRecord& r : batch.records()) {
      // Each task 1 us after the last on its rank, 0.5 us long.
      const uint64_t n = uint64_t{r.step()} * kTasksPerStep + (r.task_id() & 0xff);
      r.set_dispatch_ns(1000 * (n + 1));
      if (r.stage() == v1::STAGE_AFTER_COMPLETION) r.set_complete_ns(1000 * (n + 1) + 500);
    }
    IngestWriterOptions o = RankOpen("t", rank, 2);
    o.open.mutable_clock()->set_base_unix_ns(1795953930000000000 + rank * 100);
    o.open.mutable_clock()->set_host(absl::StrCat("node", rank));
    auto writer = IngestWriter::Open(client_.get(), o);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Send(batch.RecordPtrs(), batch.PayloadViews(), 0, 0));
    ASSERT_TRUE((*writer)->WaitAcked(batch.size()));
    v1::CaptureSummary summary;
    ASSERT_TRUE((*writer)->Finish({}, &summary).ok());
    EXPECT_EQ(summary.clock().host(), absl::StrCat("node", rank));
  }
  httplib::Client http("127.0.0.1", service_->http_port());
  const httplib::Headers auth = {{"Authorization", absl::StrCat("Bearer ", kToken)}};
  auto count = [](const std::string& body, const std::string& what) {
    size_t n = 0;
    for (size_t at = body.find(what); at != std::string::npos; at = body.find(what, at + 1)) ++n;
    return n;
  };
  auto job = http.Get("/v1/jobs/t/trace", auth);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->status, 200) << job->body;
  EXPECT_TRUE(absl::StartsWith(job->get_header_value("Content-Type"), "application/json"));
  EXPECT_EQ(count(job->body, "\"ph\": \"X\""), 2 * kSteps * kTasksPerStep) << job->body;
  EXPECT_EQ(count(job->body, "\"process_name\""), 2u);
  EXPECT_TRUE(absl::StrContains(job->body, "rank 1 (t.rank1)")) << job->body;
  EXPECT_TRUE(absl::StrContains(job->body, "\"name\": \"add\"")) << job->body;
  auto one = http.Get("/v1/captures/t.rank0/trace?step=1", auth);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200) << one->body;
  EXPECT_EQ(count(one->body, "\"ph\": \"X\""), kTasksPerStep) << one->body;
  auto ranks = http.Get("/v1/jobs/t/trace?ranks=1", auth);
  ASSERT_TRUE(ranks);
  EXPECT_EQ(count(ranks->body, "\"process_name\""), 1u) << ranks->body;
  auto unauthorized = http.Get("/v1/captures/t.rank0/trace");
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
  auto none = http.Get("/v1/captures/nope/trace", auth);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404) << none->body;
  auto no_job = http.Get("/v1/jobs/nope/trace", auth);
  ASSERT_TRUE(no_job);
  EXPECT_EQ(no_job->status, 404) << no_job->body;
  auto bad = http.Get("/v1/jobs/t/trace?ranks=x", auth);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
}

// A trace holds at most 200,000 records over all its ranks: two ranks of
// 100,001 each are one too many for the job's trace (413 naming the bound
// and the way out), while each rank alone, or the job with a filter, fits.
TEST_F(JobServiceTest, AJobsTraceIsBoundedOverItsRanks) {
  constexpr uint32_t kRecords = 100001;
  for (uint32_t rank : {0u, 1u}) {
    RecordBatch batch;
    for (uint32_t i = 0; i < kRecords; ++i) {
      batch.Add(ScalarRecord(0x100000000ull + i).FuncIds({1}).Step(i < 10 ? 0 : 1));
    }
    auto writer = IngestWriter::Open(client_.get(), RankOpen("big", rank, 2));
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Send(batch.RecordPtrs(), batch.PayloadViews(), 0, 0));
    ASSERT_TRUE((*writer)->WaitAcked(batch.size()));
    v1::CaptureSummary summary;
    ASSERT_TRUE((*writer)->Finish({}, &summary).ok());
  }
  httplib::Client http("127.0.0.1", service_->http_port());
  http.set_read_timeout(120, 0);
  const httplib::Headers auth = {{"Authorization", absl::StrCat("Bearer ", kToken)}};
  auto job = http.Get("/v1/jobs/big/trace", auth);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->status, 413) << job->body.substr(0, 500);
  EXPECT_TRUE(absl::StrContains(job->body, "at most 200000 records")) << job->body;
  EXPECT_TRUE(absl::StrContains(job->body, "pick fewer with filters")) << job->body;
  auto rank = http.Get("/v1/captures/big.rank1/trace", auth);
  ASSERT_TRUE(rank);
  EXPECT_EQ(rank->status, 200) << rank->body.substr(0, 500);
  auto step0 = http.Get("/v1/jobs/big/trace?step=0", auth);
  ASSERT_TRUE(step0);
  EXPECT_EQ(step0->status, 200) << step0->body.substr(0, 500);
  EXPECT_TRUE(absl::StrContains(step0->body, "rank 1 (big.rank1)")) << step0->body.substr(0, 500);
}

}  // namespace
}  // namespace argsdump
