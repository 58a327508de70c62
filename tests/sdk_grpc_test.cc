// SDK sessions streaming to a capture service, as CI runs them: the service
// set from the environment (ARGSDUMP_CAPTURE_SERVER, ARGSDUMP_AUTH_TOKEN_FILE,
// ARGSDUMP_LABELS), the capture named after the test and labelled by it,
// found with ListCaptures by target, read back through the test library;
// a service that refuses; and capture_server as a process the test starts.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"
#include "tests/testing/capture_service_fixture.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using testing::ArgQuery;
using testing::Capture;
using testing::Role;
using testing::Stage;

// out = x * s (float32).
absl::Status Scale(KernelContext& ctx) {
  auto x = ctx.tensor(0);
  auto out = ctx.tensor(1);
  auto s = ctx.scalar<float>(0);
  if (!x.ok() || !out.ok() || !s.ok()) return absl::InvalidArgumentError("scale: args");
  for (uint64_t i = 0; i < x->numel(); ++i) out->Set<float>(i, x->Get<float>(i) * *s);
  return absl::OkStatus();
}

class SdkGrpcTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& token = "") {
    TestCaptureServiceOptions o;
    o.root = FreshTempDir("root");
    o.auth_token = token;
    auto server = TestCaptureService::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    root_ = server_->root();
    target_ = server_->target();
  }

  // Two steps of out = x * (step + 1) over x = 0..7.
  absl::StatusOr<SessionResult> Run(SessionOptions o = SessionOptions()) {
    KernelRegistry kernels;
    const uint16_t scale =
        *kernels.Register("scale", {ArgDirection::kIn, ArgDirection::kOut, ArgDirection::kScalar},
                          &Scale, "elementwise");
    o.scheduler_threads = 1;
    o.worker_threads = 1;
    o.arena_bytes = 1 << 20;
    o.dump.level = 2;
    if (o.connect_timeout == SessionOptions().connect_timeout) {
      o.connect_timeout = std::chrono::milliseconds(2000);
    }
    auto s = SimSession::Open(kernels, o);
    if (!s.ok()) return s.status();
    auto x = (*s)->Alloc(DataType::kFloat32, {8});
    auto y = (*s)->Alloc(DataType::kFloat32, {8});
    if (!x.ok() || !y.ok()) return absl::InternalError("alloc");
    std::vector<float> v(8);
    for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(i);
    if (absl::Status st = x->Write(v); !st.ok()) return st;
    for (uint32_t step = 0; step < 2; ++step) {
      if (absl::Status st = (*s)->BeginStep(step); !st.ok()) return st;
      CoreTaskArgs args;
      float factor = static_cast<float>(step + 1);
      EXPECT_TRUE(args.add_input(*x).ok());
      EXPECT_TRUE(args.add_output(*y).ok());
      EXPECT_TRUE(args.add_scalar(factor).ok());
      if (auto id = (*s)->Submit(scale, std::move(args)); !id.ok()) return id.status();
    }
    return (*s)->Finish();
  }

  std::string root_, target_;
  std::unique_ptr<TestCaptureService> server_;
};

TEST_F(SdkGrpcTest, CiStreamsToTheServiceNamedAndLabelledByTheTest) {
  StartServer("s3cret");
  const std::string token_file = FreshTempDir("token") + "/token";
  std::ofstream(token_file) << "s3cret\n";
  ScopedEnv server("ARGSDUMP_CAPTURE_SERVER", target_);
  ScopedEnv token("ARGSDUMP_AUTH_TOKEN_FILE", token_file);
  ScopedEnv labels("ARGSDUMP_LABELS", "pipeline=nightly,commit=abc123");
  auto r = Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->run_status.ok());
  EXPECT_TRUE(r->dump_status.ok()) << r->dump_status;
  EXPECT_EQ(r->capture_server, target_);
  EXPECT_TRUE(r->capture_dir.empty());
  // <target>.<case>.<stamp>.<tag>: unique per run.
  const std::string test_case = "SdkGrpcTest.CiStreamsToTheServiceNamedAndLabelledByTheTest";
  // This binary's Bazel label (it runs as two targets: local and object store).
  const char* label_env = std::getenv("TEST_TARGET");
  const std::string label = label_env != nullptr ? label_env : "//tests:sdk_grpc_test";
  const std::string binary = label.substr(label.find(':') + 1);
  EXPECT_THAT(r->capture_name, ::testing::MatchesRegex("tests\\." + binary + "\\." + test_case +
                                                       "\\.[0-9]{8}-[0-9]{6}\\.[0-9a-f]{8}"));
  EXPECT_LE(r->capture_name.size(), 128u);
  auto again = Run();  // the same test case again: another name
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->capture_name, r->capture_name);

  // A dashboard finds it by target.
  auto stub = v1::CaptureService::NewStub(
      grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer s3cret");
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListCapturesRequest list;
  (*list.mutable_labels())["target"] = label;
  v1::ListCapturesResponse found;
  ASSERT_TRUE(stub->ListCaptures(&ctx, list, &found).ok());
  ASSERT_EQ(found.captures_size(), 2);
  const v1::CaptureSummary& c =
      found.captures(0).capture() == r->capture_name ? found.captures(0) : found.captures(1);
  EXPECT_EQ(c.capture(), r->capture_name);
  EXPECT_EQ(c.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(c.labels().at("test_case"), test_case);
  EXPECT_EQ(c.labels().at("steps"), "2");  // known at the end only
  EXPECT_EQ(c.labels().at("pipeline"), "nightly");
  EXPECT_EQ(c.labels().at("commit"), "abc123");

  // The test library reads it back from the service, and the server's
  // files say the same labels.
  auto capture = Capture::Of(*r);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(capture->args().size(), 6u);
  EXPECT_EQ(capture->labels().at("steps"), "2");
  auto out = capture->Get(ArgQuery().Func("scale").Step(1).Role(Role::kOutput));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, testing::IsCloseTo({0, 2, 4, 6, 8, 10, 12, 14}));
  auto local = Capture::Open(
      std::filesystem::path(server_->CaptureDir(r->capture_name)).parent_path().string());
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->labels(), capture->labels());
  EXPECT_THAT(*local, testing::MatchesCapture(*capture));
}

// The capture deleted while the service was down: the restarted service
// refuses the resume (NOT_FOUND). The session keeps what the service had
// not acknowledged (step 1's records) in a local capture and warns, naming
// the folder and the counts; the test does not fail on it.
TEST_F(SdkGrpcTest, ACaptureTheServiceLostKeepsWhatItHadNotAcknowledgedLocally) {
  StartServer();
  if (server_->object_store()) {
    GTEST_SKIP() << "a service over an object store keeps what it acknowledged on a lost disk "
                    "(the capture is rebuilt from the store: object_store_kill_test)";
  }
  KernelRegistry kernels;
  const uint16_t scale =
      *kernels.Register("scale", {ArgDirection::kIn, ArgDirection::kOut, ArgDirection::kScalar},
                        &Scale, "elementwise");
  SessionOptions o;
  o.scheduler_threads = 1;
  o.worker_threads = 1;
  o.arena_bytes = 1 << 20;
  o.records_per_buffer = 1;  // each record to the service as it is made
  o.dump.level = 2;
  o.dump.capture_server = target_;
  o.dump.path = FreshTempDir("lost_sdk");
  auto s = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string location = (*s)->capture_location();
  const std::string name = location.substr(location.find('/') + 1);
  auto x = (*s)->Alloc(DataType::kFloat32, {8});
  auto y = (*s)->Alloc(DataType::kFloat32, {8});
  ASSERT_TRUE(x.ok() && y.ok());
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(i);
  ASSERT_TRUE(x->Write(v).ok());
  auto step = [&](uint32_t n) {
    ASSERT_TRUE((*s)->BeginStep(n).ok());
    CoreTaskArgs args;
    float factor = static_cast<float>(n + 1);
    args.add_input(*x).IgnoreError();
    args.add_output(*y).IgnoreError();
    args.add_scalar(factor).IgnoreError();
    ASSERT_TRUE((*s)->Submit(scale, std::move(args)).ok());
    ASSERT_TRUE((*s)->Synchronize().ok());
  };
  step(0);
  {
    // Until the service made step 0's three records durable.
    auto stub = v1::CaptureService::NewStub(
        grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::WatchCaptureRequest watch;
    watch.set_capture(name);
    auto reader = stub->WatchCapture(&ctx, watch);
    v1::WatchCaptureResponse page;
    int durable = 0;
    while (durable < 3 && reader->Read(&page)) durable += page.args_size();
    ctx.TryCancel();
    reader->Finish().IgnoreError();
    ASSERT_EQ(durable, 3);
  }
  server_->Shutdown(std::chrono::milliseconds(100));
  server_.reset();
  std::filesystem::remove_all(root_ + "/" + name);
  TestCaptureServiceOptions again;
  again.listen = target_;
  again.root = root_;
  auto restarted = TestCaptureService::Start(again);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  server_ = std::move(restarted).value();
  step(1);
  ::testing::internal::CaptureStderr();
  auto r = (*s)->Finish();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->run_status.ok()) << r->run_status;
  EXPECT_THAT(log, HasSubstr(absl::StrCat("WARNING: capture service ", target_,
                                          " no longer has capture '", name, "'")));
  EXPECT_THAT(log, HasSubstr("3 records it had acknowledged went with it; the 3 records it had "
                             "not acknowledged are kept locally in " + r->capture_dir));
  EXPECT_TRUE(r->capture.empty());
  auto capture = Capture::Of(*r);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(capture->args().size(), 3u);
  for (const auto& a : capture->args()) EXPECT_EQ(a.step, 1u) << a;
  auto out = capture->Get(ArgQuery().Func("scale").Step(1).Role(Role::kOutput));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, testing::IsCloseTo({0, 2, 4, 6, 8, 10, 12, 14}));
}

TEST_F(SdkGrpcTest, ARefusingServiceKeepsTheCaptureLocally) {
  StartServer("s3cret");  // and no token is sent
  ScopedEnv server("ARGSDUMP_CAPTURE_SERVER", target_);
  SessionOptions o;
  o.dump.path = FreshTempDir("refused");
  ::testing::internal::CaptureStderr();
  auto r = Run(o);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(log, HasSubstr("WARNING: capture service " + target_ + " refused the capture ("));
  EXPECT_THAT(log, HasSubstr("the capture is kept locally in " + o.dump.path.value()));
  EXPECT_TRUE(r->run_status.ok());
  EXPECT_TRUE(r->capture.empty());
  auto capture = Capture::Of(*r);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(capture->args().size(), 6u);
}

// A token file whose token could never pass as metadata (a CR, NUL or a
// byte >= 0x80 once aborted the session inside gRPC), or one that is no
// file (a FIFO once hung it, /dev/zero read until bad_alloc): a WARNING
// naming the byte or the file's type, and the capture is kept locally as
// for any service that refuses. The dump never fails the test.
TEST_F(SdkGrpcTest, ATokenFileThatIsNoTokenIsAWarningAndTheCaptureIsKeptLocally) {
  StartServer("s3cret");
  ScopedEnv server("ARGSDUMP_CAPTURE_SERVER", target_);
  const std::string dir = FreshTempDir("bad_tokens");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::pair<std::string, std::string> cases[] = {
      {"s3\rcret\n", "byte 2 is 0x0d (a carriage return)"},
      {std::string("s3cret\0\n", 8), "byte 6 is 0x00 (NUL)"},
      {"s3cr\xc3\xa9t\n", "byte 4 is 0xc3 (not ASCII)"},
      {"s3cret \n", "byte 6 is 0x20 (a space)"},
      {"", "is a FIFO, not a regular file"},
  };
  int n = 0;
  for (const auto& [bytes, why] : cases) {
    SCOPED_TRACE(why);
    std::string token_file = fifo;
    if (!bytes.empty()) {
      token_file = absl::StrCat(dir, "/token", n++);
      std::ofstream(token_file, std::ios::binary) << bytes;
    }
    ScopedEnv token("ARGSDUMP_AUTH_TOKEN_FILE", token_file);
    SessionOptions o;
    o.dump.path = FreshTempDir(absl::StrCat("bad_token_run", n));
    ::testing::internal::CaptureStderr();
    auto r = Run(o);
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(log, HasSubstr("WARNING: environment: ARGSDUMP_AUTH_TOKEN_FILE='" + token_file +
                               "' is not valid: cannot read a token from " + token_file + ": " +
                               why));
    EXPECT_THAT(log, HasSubstr("WARNING: capture service " + target_ + " refused the capture ("));
    EXPECT_THAT(log, HasSubstr("the capture is kept locally in " + o.dump.path.value()));
    EXPECT_TRUE(r->run_status.ok());
    EXPECT_TRUE(r->dump_status.ok()) << r->dump_status;
    auto capture = Capture::Of(*r);
    ASSERT_TRUE(capture.ok()) << capture.status();
    EXPECT_EQ(capture->args().size(), 6u);
  }
}

TEST_F(SdkGrpcTest, AnUnreachableServiceKeepsTheCaptureLocally) {
  // Port 1: nothing listens there.
  ScopedEnv server("ARGSDUMP_CAPTURE_SERVER", "127.0.0.1:1");
  SessionOptions o;
  o.dump.path = FreshTempDir("unreachable");
  o.connect_timeout = std::chrono::milliseconds(300);
  ::testing::internal::CaptureStderr();
  auto r = Run(o);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(log, HasSubstr("WARNING: capture service 127.0.0.1:1 cannot be reached"));
  EXPECT_THAT(log, HasSubstr("the capture is kept locally in " + o.dump.path.value()));
  EXPECT_TRUE(r->run_status.ok());
  EXPECT_TRUE(r->dump_status.ok());
  EXPECT_TRUE(r->capture.empty());
  EXPECT_EQ(r->records, 6u);
  EXPECT_THAT(r->warnings, ::testing::Contains(HasSubstr("cannot be reached")));
  auto capture = Capture::Of(*r);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(capture->args().size(), 6u);
}

TEST_F(SdkGrpcTest, CaptureServerAsAProcessTheTestStarts) {
  auto process = testing::CaptureServerProcess::Start(FreshTempDir("process_root"));
  ASSERT_TRUE(process.ok()) << process.status();
  EXPECT_THAT((*process)->address(), ::testing::StartsWith("127.0.0.1:"));
  SessionOptions o;
  o.dump.capture_server = (*process)->address();
  auto r = Run(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->capture_server, (*process)->address());
  auto capture = Capture::Of(*r);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_THAT(*capture, testing::HasNoNonFiniteOutputs());
  EXPECT_TRUE((*process)->Stop().ok());
  // The process is gone: the files stay, and read the same.
  auto files = Capture::Open((*process)->root() + "/" + r->capture_name);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->args().size(), 6u);
  EXPECT_EQ(testing::CaptureServerProcess::Start("/proc/forbidden", "/no/such/binary").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace argsdump
