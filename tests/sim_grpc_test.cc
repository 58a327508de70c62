// sim runs streamed to a capture service (the gRPC sink) against the same
// runs written locally, and a live query while a run is still streaming.
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "apps/sim_run/sim_job.h"
#include "tests/capture_reader.h"
#include "device/sim/kernels.h"
#include "device/workload.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/capture_service_fixture.h"
#include "tests/testing/sim_jobs.h"
#include "tests/testing/temp_dir.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "httplib.h"
#include "server/http/proto_json.h"

namespace argsdump {
namespace {

class SimGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestCaptureServiceOptions o;
    o.http = true;  // the same captures over HTTP/JSON
    o.root = TempPath(absl::StrCat(
        "root_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    auto server = TestCaptureService::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    root_ = server_->root();
    target_ = server_->target();
    stub_ = server_->NewStub();
  }

  // One scheduler and one worker: the same records in the same order on
  // every run, so two runs can be compared byte for byte.
  SimJobOptions Options(int level, const std::string& prefix) {
    return SmallSimJob(level, TempPath(prefix), /*threads=*/1);
  }

  std::string root_, target_;
  std::unique_ptr<TestCaptureService> server_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
};

// A streamed run's capture keeps the session's clock (its host and bases),
// with the server's offset measured at open.
TEST_F(SimGrpcTest, AStreamedCaptureKeepsTheClockWithTheServersOffset) {
  const auto w = BuiltinWorkload("vector_example");
  ASSERT_TRUE(w.ok());
  SimJobOptions remote = Options(2, "remote_clock");
  remote.capture_server = target_;
  remote.capture_name = "clocked";
  auto r = RunSimJob(*w, BuiltinKernels(), remote);
  ASSERT_TRUE(r.ok()) << r.status();
  auto capture = server_->hub().Find("clocked");
  ASSERT_TRUE(capture.ok()) << capture.status();
  const v1::CaptureClock clock = (*capture)->Clock();
  EXPECT_GT(clock.base_monotonic_ns(), 0);
  EXPECT_GT(clock.base_unix_ns(), 0);
  EXPECT_FALSE(clock.host().empty());
  EXPECT_TRUE(clock.has_server_offset());
}

TEST_F(SimGrpcTest, BothSinksWriteTheSameCapture) {
  int compared = 0;
  for (const char* workload : {"vector_example", "mixed_example"}) {
    for (int level : {1, 2, 3}) {
      SCOPED_TRACE(absl::StrCat(workload, " level ", level));
      const auto w = BuiltinWorkload(workload);
      ASSERT_TRUE(w.ok());
      const std::string name = absl::StrCat(workload, "_l", level);
      SimJobOptions local = Options(level, "local_" + name);
      local.labels["case"] = "sim_grpc";  // labels are written into the manifest
      auto l = RunSimJob(*w, BuiltinKernels(), local);
      ASSERT_TRUE(l.ok()) << l.status();
      SimJobOptions remote = Options(level, "remote_" + name);
      remote.capture_server = target_;
      remote.capture_name = name;
      remote.labels["case"] = "sim_grpc";
      auto r = RunSimJob(*w, BuiltinKernels(), remote);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->collected.records, l->collected.records);
      EXPECT_EQ(r->capture, absl::StrCat(target_, "/", name));
      const std::string ldir = local.output_prefix + "/args_dump";
      const std::string rdir = server_->CaptureDir(name);
      if (!l->wrote_capture) {  // level 1 of a workload with no dump(...) marks
        EXPECT_FALSE(r->wrote_capture);
        continue;
      }
      // Two runs of a workload with parallel branches may append payloads
      // in another order (scheduler vs. worker timing), so compare what each
      // entry says and the bytes it points at; the files themselves are
      // compared byte for byte when the pairs are the same
      // (capture_service_test).
      const CaptureFiles lc = ReadCapture(ldir);
      const CaptureFiles rc = ReadCapture(rdir);
      ASSERT_EQ(rc.entries.size(), lc.entries.size());
      for (size_t i = 0; i < lc.entries.size(); ++i) {
        const Entry& a = lc.entries[i];
        const Entry& b = rc.entries[i];
        EXPECT_EQ(a.Key(), b.Key());
        EXPECT_EQ(a.shape, b.shape);
        EXPECT_EQ(a.strides, b.strides);
        EXPECT_EQ(a.func_id, b.func_id);
        EXPECT_EQ(a.dtype, b.dtype);
        EXPECT_EQ(a.bin_size, b.bin_size);
        EXPECT_TRUE(a.payload == b.payload) << i;
      }
      if (std::string(workload) == "vector_example") {  // a chain: one order
        EXPECT_TRUE(ReadFileOrEmpty(rdir + "/args.bin") == ReadFileOrEmpty(ldir + "/args.bin"));
        EXPECT_EQ(ManifestWithoutTimes(ReadFileOrEmpty(rdir + "/args_dump.json")),
                  ManifestWithoutTimes(ReadFileOrEmpty(ldir + "/args_dump.json")));
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 4);
}

// Sharing equal payloads, on and off, to either sink: every
// entry reads the same bytes as it does with sharing off, the local and the
// remote capture of a run are the same files, and sharing saves exactly
// the bytes of the entries it shares.
TEST_F(SimGrpcTest, SharedPayloadsReadTheSameInBothSinks) {
  for (const char* workload : {"vector_example", "mixed_example"}) {
    SCOPED_TRACE(workload);
    const auto w = BuiltinWorkload(workload);
    ASSERT_TRUE(w.ok());
    std::map<std::string, CaptureFiles> runs;
    for (bool dedup : {true, false}) {
      for (bool remote : {false, true}) {
        const std::string name =
            absl::StrCat(workload, dedup ? "_shared" : "_plain", remote ? "_remote" : "_local");
        SimJobOptions o = Options(2, name);
        o.dump.dedup = dedup;
        if (remote) {
          o.capture_server = target_;
          o.capture_name = name;
        }
        auto r = RunSimJob(*w, BuiltinKernels(), o);
        ASSERT_TRUE(r.ok()) << r.status();
        runs[name] = ReadCapture(remote ? server_->CaptureDir(name)
                                        : o.output_prefix + "/args_dump");
      }
    }
    const CaptureFiles& plain = runs[absl::StrCat(workload, "_plain_local")];
    for (const auto& [name, c] : runs) {
      SCOPED_TRACE(name);
      ASSERT_EQ(c.entries.size(), plain.entries.size());
      for (size_t i = 0; i < c.entries.size(); ++i) {
        EXPECT_EQ(c.entries[i].Key(), plain.entries[i].Key());
        EXPECT_TRUE(c.entries[i].payload == plain.entries[i].payload) << i;
      }
      EXPECT_EQ(c.manifest.payload_bytes(), plain.manifest.payload_bytes());
      EXPECT_EQ(c.manifest.payload_bytes_stored(), c.bin.size());
      // What sharing saved is the shared entries' bytes.
      std::map<uint64_t, uint64_t> stored;  // bin_offset -> bin_size, written once each
      for (const v1::ManifestEntry& e : c.manifest.args()) {
        if (e.bin_size() > 0) stored.emplace(e.bin_offset(), e.bin_size());
      }
      uint64_t unique = 0;
      for (const auto& [offset, size] : stored) unique += size;
      EXPECT_EQ(unique, c.bin.size());
    }
    EXPECT_EQ(plain.manifest.deduplicated_args(), 0u);
    EXPECT_EQ(plain.bin.size(), plain.manifest.payload_bytes());
    const CaptureFiles& shared = runs[absl::StrCat(workload, "_shared_local")];
    EXPECT_GT(shared.manifest.deduplicated_args(), 0u);
    EXPECT_LT(shared.bin.size(), plain.bin.size());
    std::printf("%s level 2: args.bin %zu bytes shared, %zu plain (%.1f%% saved, %lu entries "
                "shared)\n",
                workload, shared.bin.size(), plain.bin.size(),
                100.0 * (1.0 - double(shared.bin.size()) / double(plain.bin.size())),
                static_cast<unsigned long>(shared.manifest.deduplicated_args()));
    if (std::string(workload) == "vector_example") {  // a chain: one order
      for (const char* mode : {"_shared", "_plain"}) {
        const CaptureFiles& l = runs[absl::StrCat(workload, mode, "_local")];
        const CaptureFiles& r = runs[absl::StrCat(workload, mode, "_remote")];
        EXPECT_TRUE(l.bin == r.bin) << mode;
        EXPECT_EQ(ManifestWithoutTimes(l.manifest_text), ManifestWithoutTimes(r.manifest_text)) << mode;
      }
    }
  }
}

// A kernel that blocks until the test opens the gate: the run is provably
// still streaming while the test queries it.
std::mutex gate_mu;
std::condition_variable gate_cv;
bool gate_open = false;

absl::Status Gate(KernelContext& ctx) {
  std::unique_lock<std::mutex> lock(gate_mu);
  gate_cv.wait(lock, [] { return gate_open; });
  return absl::OkStatus();
}

TEST_F(SimGrpcTest, QueriesALiveCaptureWhileTheRunStreams) {
  KernelRegistry kernels;
  ASSERT_TRUE(RegisterBuiltinKernels(&kernels).ok());
  ASSERT_TRUE(kernels.Register("gate", {ArgDirection::kIn, ArgDirection::kOut}, Gate).ok());
  v1::WorkloadSpec w;
  w.set_name("gated");
  for (const char* b : {"a", "b", "c", "d"}) {
    auto* buf = w.add_buffers();
    buf->set_name(b);
    buf->set_dtype("FLOAT32");
    buf->add_shape(64);
    buf->mutable_init()->set_fill(2);
  }
  auto task = [&](const char* func, const char* in, const char* out) {
    auto* t = w.add_tasks();
    t->set_func(func);
    auto* a = t->add_args();
    a->set_tensor(in);
    a->set_role("input");
    a = t->add_args();
    a->set_tensor(out);
    a->set_role("output");
  };
  task("relu", "a", "b");
  task("relu", "b", "c");
  task("gate", "c", "d");
  SimJobOptions o = Options(2, "gated");
  o.capture_server = target_;
  o.capture_name = "gated";
  o.region.records_per_buffer = 1;  // every record is published at once
  absl::StatusOr<SimJobResult> result;
  std::thread run([&] { result = RunSimJob(w, kernels, o); });

  // Wait (on the watch stream, no sleeps) for the gate task's input record.
  {
    grpc::ClientContext ctx;
    v1::WatchCaptureRequest req;
    req.set_capture("gated");
    req.mutable_filter()->set_func_id(*kernels.IdOf("gate"));
    grpc::Status open_status;
    std::unique_ptr<grpc::ClientReader<v1::WatchCaptureResponse>> reader;
    v1::WatchCaptureResponse resp;
    bool seen = false;
    // The capture exists once the run opened it; until then NOT_FOUND.
    while (!seen) {
      grpc::ClientContext c;
      auto r = stub_->WatchCapture(&c, req);
      while (!seen && r->Read(&resp)) seen = resp.args_size() > 0;
      if (seen) {
        c.TryCancel();
      }
      r->Finish().IgnoreError();
    }
    const v1::ArgRecord gate_input = resp.args(0).record();
    EXPECT_EQ(gate_input.role(), v1::ROLE_INPUT);
    EXPECT_EQ(gate_input.stage(), v1::STAGE_BEFORE_DISPATCH);
    // Live: query the second relu's records by task_id and stage.
    grpc::ClientContext gctx;
    v1::GetCaptureRequest get;
    get.set_capture("gated");
    v1::CaptureSummary summary;
    ASSERT_TRUE(stub_->GetCapture(&gctx, get, &summary).ok());
    EXPECT_EQ(summary.state(), v1::CAPTURE_STATE_LIVE);
    EXPECT_TRUE(summary.attached());
    grpc::ClientContext qctx;
    v1::QueryArgsRequest q;
    q.set_capture("gated");
    q.set_task_id(gate_input.task_id() - 1);
    q.set_stage(v1::STAGE_AFTER_COMPLETION);
    v1::QueryArgsResponse qr;
    ASSERT_TRUE(stub_->QueryArgs(&qctx, q, &qr).ok());
    ASSERT_EQ(qr.args_size(), 1);
    EXPECT_EQ(qr.args(0).record().role(), v1::ROLE_OUTPUT);
    EXPECT_EQ(qr.args(0).record().bin_size(), 256u);
    // The same live capture over HTTP, while the run is held mid-stream:
    // the same answer, byte for byte, and the payload's bytes.
    httplib::Client http("127.0.0.1", server_->http_port());
    auto live = http.Get("/v1/captures/gated");
    ASSERT_TRUE(live);
    EXPECT_EQ(live->status, 200);
    EXPECT_NE(live->body.find("\"state\":\"CAPTURE_STATE_LIVE\""), std::string::npos)
        << live->body;
    auto args = http.Get(absl::StrCat("/v1/captures/gated/args?task_id=0x",
                                      absl::Hex(gate_input.task_id() - 1),
                                      "&stage=after_completion")
                             .c_str());
    ASSERT_TRUE(args);
    EXPECT_EQ(args->status, 200) << args->body;
    EXPECT_EQ(args->body, ProtoToJson(qr) + "\n");
    auto payload = http.Get(
        absl::StrCat("/v1/captures/gated/args/", qr.args(0).record_id(), "/payload").c_str());
    ASSERT_TRUE(payload);
    EXPECT_EQ(payload->status, 200);
    EXPECT_EQ(payload->body.size(), 256u);
  }
  {
    std::lock_guard<std::mutex> lock(gate_mu);
    gate_open = true;
  }
  gate_cv.notify_all();
  run.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->run_status.ok()) << result->run_status;
  grpc::ClientContext gctx;
  v1::GetCaptureRequest get;
  get.set_capture("gated");
  v1::CaptureSummary summary;
  ASSERT_TRUE(stub_->GetCapture(&gctx, get, &summary).ok());
  EXPECT_EQ(summary.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(summary.records(), 6u);
}

}  // namespace
}  // namespace argsdump
