// A session that streams to a capture service: its exception dumps reach
// the service as captures of their own, labelled with the test and the
// task, and stay in the session's folder too. The crash comes first: once
// a gRPC channel has started its threads this process can no longer fork
// a device process.
#include <csignal>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using testing::ArgQuery;
using testing::Capture;
using testing::CaptureServerProcess;
using testing::Stage;

absl::Status Half(KernelContext& ctx) {
  auto x = ctx.tensor(0), y = ctx.tensor(1);
  if (!x.ok() || !y.ok()) return absl::InvalidArgumentError("half");
  for (uint64_t i = 0; i < x->numel(); ++i) y->Set<float>(i, x->Get<float>(i) / 2);
  return absl::OkStatus();
}

absl::Status Fails(KernelContext& ctx) {
  auto y = ctx.tensor(1);
  if (y.ok()) y->Set<float>(0, 42.0f);  // what it left behind is in its dump
  return absl::InternalError("this kernel fails");
}

absl::Status Crashes(KernelContext& ctx) {
  auto y = ctx.tensor(1);
  if (y.ok()) y->Set<float>(0, 7.0f);
  std::raise(SIGSEGV);
  return absl::OkStatus();
}

std::string Root(const char* name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

KernelRegistry Kernels(uint16_t* half, uint16_t* bad, bool crash) {
  KernelRegistry kernels;
  *half = *kernels.Register("half", {ArgDirection::kIn, ArgDirection::kOut}, &Half, "elementwise");
  *bad = crash ? *kernels.Register("crashes", {ArgDirection::kIn, ArgDirection::kOut}, &Crashes,
                                   "test")
               : *kernels.Register("fails", {ArgDirection::kIn, ArgDirection::kOut}, &Fails,
                                   "test");
  return kernels;
}

// Two tasks: half, then the bad kernel on what half wrote.
absl::Status TwoTasks(SimSession& device, uint16_t half, uint16_t bad) {
  auto x = device.Alloc(DataType::kFloat32, {8});
  auto y = device.Alloc(DataType::kFloat32, {8});
  auto z = device.Alloc(DataType::kFloat32, {8});
  if (!x.ok() || !y.ok() || !z.ok()) return absl::InternalError("alloc");
  if (absl::Status s = x->Write(std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}); !s.ok()) return s;
  CoreTaskArgs first;
  if (!first.add_input(*x).ok() || !first.add_output(*y).ok()) return absl::InternalError("args");
  if (auto id = device.Submit(half, std::move(first)); !id.ok()) return id.status();
  CoreTaskArgs second;
  if (!second.add_input(*y).ok() || !second.add_output(*z).ok()) return absl::InternalError("args");
  if (auto id = device.Submit(bad, std::move(second)); !id.ok()) return id.status();
  return device.Synchronize();
}

// The exception dump's capture on the service: the bad task's input as
// captured (before dispatch) and its labels.
void CheckDumpCapture(const SessionResult& r, const std::string& address, const char* scenario) {
  ASSERT_EQ(r.exception_dumps.size(), 1u);
  ASSERT_EQ(r.exception_dump_captures.size(), 1u);
  const std::string& where = r.exception_dump_captures[0];
  // <the run's capture>.<scenario>.<task>, the run's name cut (and a hash
  // of it put in) when that would pass the service's 128 characters.
  ASSERT_THAT(where, ::testing::StartsWith(address + "/"));
  const std::string name = where.substr(address.size() + 1);
  const std::string suffix = absl::StrCat(".", scenario, ".0000000100000001");
  EXPECT_THAT(name, ::testing::EndsWith(suffix));
  EXPECT_LE(name.size(), 128u);
  if (r.capture_name.size() + suffix.size() <= 128) {
    EXPECT_EQ(name, r.capture_name + suffix);
  }
  EXPECT_EQ(name.substr(0, 60), r.capture_name.substr(0, 60));
  auto dump = Capture::OpenRemote(address, where.substr(address.size() + 1));
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->labels().at("scenario"), scenario);
  EXPECT_EQ(dump->labels().at("task_id"), "0x0000000100000001");
  EXPECT_EQ(dump->labels().at("run_capture"), r.capture_name);
  EXPECT_EQ(dump->labels().at("target"), std::getenv("TEST_TARGET"));
  EXPECT_EQ(dump->labels().at("test_case"), r.name);
  const std::string folder = r.exception_dumps[0].substr(r.exception_dumps[0].find_last_of('/') + 1);
  EXPECT_EQ(dump->labels().at("exception_dump"), folder);
  // Every record is the bad task's; its input is what half wrote.
  ASSERT_FALSE(dump->args().empty());
  for (const auto& a : dump->args()) EXPECT_EQ(a.task_id, 0x100000001u) << a;
  auto in = dump->Find(ArgQuery().Arg(0).Role(testing::Role::kInput));
  ASSERT_FALSE(in.empty());
  EXPECT_THAT(*in.front().Values(), ::testing::ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  // And it is the same capture as the local folder's.
  auto local = Capture::Open(r.exception_dumps[0]);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(*dump, testing::MatchesCapture(*local, 0, 0));
}

TEST(ExceptionStreamTest, ACrashDumpReachesTheService) {
  auto server = CaptureServerProcess::Start(Root("crash_root"));
  ASSERT_TRUE(server.ok()) << server.status();
  uint16_t half, bad;
  KernelRegistry kernels = Kernels(&half, &bad, /*crash=*/true);
  SessionOptions options;
  options.device_process = true;
  options.dump.capture_server = (*server)->address();
  auto session = SimSession::Open(kernels, options);
  ASSERT_TRUE(session.ok()) << session.status();
  const absl::Status ran = (*session)->RunDevice(
      [&](SimSession& device) { return TwoTasks(device, half, bad); });
  EXPECT_EQ(ran.code(), absl::StatusCode::kAborted) << ran;
  auto result = (*session)->Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->device_crashed);
  ASSERT_FALSE(result->capture_name.empty()) << "streamed";
  CheckDumpCapture(*result, (*server)->address(), "crash");
  auto dump = Capture::OpenRemote((*server)->address(),
                                  result->exception_dump_captures[0].substr(
                                      (*server)->address().size() + 1));
  ASSERT_TRUE(dump.ok());
  // What the crash left in the output (in-flight, after completion).
  auto out = dump->Find(ArgQuery().Stage(Stage::kAfterCompletion).Arg(1));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ((*out.front().Values())[0], 7.0);
}

TEST(ExceptionStreamTest, AKernelFailuresDumpReachesTheService) {
  auto server = CaptureServerProcess::Start(Root("fail_root"));
  ASSERT_TRUE(server.ok()) << server.status();
  uint16_t half, bad;
  KernelRegistry kernels = Kernels(&half, &bad, /*crash=*/false);
  SessionOptions options;
  options.dump.capture_server = (*server)->address();
  auto session = SimSession::Open(kernels, options);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_THAT(std::string(TwoTasks(**session, half, bad).message()),
              HasSubstr("this kernel fails"));
  auto result = (*session)->Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->capture_name.empty()) << "streamed";
  CheckDumpCapture(*result, (*server)->address(), "exception");
  // The run's capture is on the service as before, without the dump's.
  auto run = Capture::Of(*result);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->Find(ArgQuery().Task(0x100000000)).empty());
}

TEST(ExceptionStreamTest, LocalSessionsUploadNothing) {
  uint16_t half, bad;
  KernelRegistry kernels = Kernels(&half, &bad, /*crash=*/false);
  auto session = SimSession::Open(kernels);
  ASSERT_TRUE(session.ok()) << session.status();
  TwoTasks(**session, half, bad).IgnoreError();
  auto result = (*session)->Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exception_dumps.size(), 1u);
  EXPECT_TRUE(result->exception_dump_captures.empty());
}

}  // namespace
}  // namespace argsdump
