// (c) The model streamed to a capture_server this test starts (127.0.0.1,
// port 0, its own root), read back from the service while the server runs
// and from its files after it stopped.
#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernels.h"
#include "kernels/model.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"

namespace custom_kernels {
namespace {

using argsdump::SimSession;
using argsdump::testing::ArgQuery;
using argsdump::testing::Capture;
using argsdump::testing::CaptureServerProcess;
using argsdump::testing::HasNoNonFiniteOutputs;
using argsdump::testing::MatchesCapture;
using argsdump::testing::Role;

TEST(StreamingTest, TheModelStreamsToAServiceTheTestStarts) {
  // The server's root among the test's outputs: its files land in
  // outputs.zip too.
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  auto server =
      CaptureServerProcess::Start(std::string(outputs ? outputs : "/tmp") + "/capture_server_root");
  ASSERT_TRUE(server.ok()) << server.status();

  argsdump::KernelRegistry registry;
  auto ids = RegisterKernels(&registry);
  ASSERT_TRUE(ids.ok());
  argsdump::SessionOptions options;
  options.dump.capture_server = (*server)->address();  // this code's wish (the API entry)
  options.labels["example"] = "custom_kernels";
  auto session = SimSession::Open(registry, options);
  ASSERT_TRUE(session.ok()) << session.status();
  auto run = RunModel(**session, *ids, ModelOptions());
  ASSERT_TRUE(run.ok()) << run.status();
  auto result = (*session)->Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->run_status.ok());
  if (result->dump.level == 0) GTEST_SKIP() << "the dump is off";
  EXPECT_EQ(result->capture_server, (*server)->address());
  EXPECT_TRUE(result->dump_status.ok()) << result->dump_status;

  auto remote = Capture::Of(*result);  // through QueryArgs / ReadPayload
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_THAT(*remote, HasNoNonFiniteOutputs());
  EXPECT_EQ(remote->labels().at("target"), "//tests:streaming_test");
  EXPECT_EQ(remote->labels().at("example"), "custom_kernels");
  auto y = remote->Get(ArgQuery().Func("axpb").Step(2).Role(Role::kOutput));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, argsdump::testing::IsCloseTo(std::vector<double>(run->y.begin(), run->y.end()),
                                               0, 0));

  // The server's files say the same as its answers; they stay when it stops.
  const std::string dir = (*server)->root() + "/" + result->capture_name + "/args_dump";
  EXPECT_TRUE(argsdump::testing::CheckCaptureFiles(dir).ok())
      << argsdump::testing::CheckCaptureFiles(dir);
  auto files = Capture::Open(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, MatchesCapture(*remote, 0, 0));
  // The files name the kernels themselves (the capture's kernel table): no
  // session result needed.
  auto y_in_files = files->Get(ArgQuery().Func("axpb").Step(2).Role(Role::kOutput));
  ASSERT_TRUE(y_in_files.ok()) << y_in_files.status();
  EXPECT_EQ(y_in_files->func, "axpb");
  ASSERT_TRUE((*server)->Stop().ok());
  auto after = Capture::Open(dir);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->args().size(), remote->args().size());
}

}  // namespace
}  // namespace custom_kernels
