// Where messages say a capture is: under `bazel test` the zip Bazel makes
// of the undeclared outputs and the folder in it (CapturePlace), in the
// session's own lines and in the test library's messages.
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"
#include "sdk/wiring.h"
#include "tests/testing/scoped_env.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CapturePlaceTest, UndeclaredOutputsAreTheZipAndTheFolderInIt) {
  const std::string dir =
      "/home/u/.cache/bazel/_bazel_u/abc/sandbox/linux-sandbox/12/execroot/ws/bazel-out/"
      "k8-fastbuild/testlogs/pkg/t/test.outputs";
  ScopedEnv outputs("TEST_UNDECLARED_OUTPUTS_DIR", dir);
  ScopedEnv zip("TEST_UNDECLARED_OUTPUTS_ZIP", nullptr);
  EXPECT_EQ(CapturePlace(dir + "/Suite.Case/args_dump"),
            "bazel-testlogs/pkg/t/test.outputs/outputs.zip/Suite.Case/args_dump (the zip: "
            "/home/u/.cache/bazel/_bazel_u/abc/execroot/ws/bazel-out/k8-fastbuild/testlogs/pkg/t/"
            "test.outputs/outputs.zip)");
  EXPECT_EQ(CapturePlace(dir + "/Suite.Case/exception_dump/crash_w_f_t_0_1_0x0000000100000000/"),
            "bazel-testlogs/pkg/t/test.outputs/outputs.zip/Suite.Case/exception_dump/"
            "crash_w_f_t_0_1_0x0000000100000000 (the zip: /home/u/.cache/bazel/_bazel_u/abc/"
            "execroot/ws/bazel-out/k8-fastbuild/testlogs/pkg/t/test.outputs/outputs.zip)");
  // Not below it, or only its prefix as a name: the path as it is.
  EXPECT_EQ(CapturePlace("/tmp/x/args_dump"), "/tmp/x/args_dump");
  EXPECT_EQ(CapturePlace(dir + "x/args_dump"), dir + "x/args_dump");
  EXPECT_EQ(CapturePlace(dir), dir);
  // Sharded, unsandboxed, and a runner that exports the zip's path.
  {
    const std::string plain = "/o/execroot/ws/bazel-out/k8-opt/testlogs/p/t/shard_2_of_3/test.outputs";
    ScopedEnv sharded("TEST_UNDECLARED_OUTPUTS_DIR", plain + "/");
    EXPECT_EQ(CapturePlace(plain + "/A.B/args_dump"),
              "bazel-testlogs/p/t/shard_2_of_3/test.outputs/outputs.zip/A.B/args_dump (the zip: " +
                  plain + "/outputs.zip)");
  }
  {
    ScopedEnv exported("TEST_UNDECLARED_OUTPUTS_ZIP", "/elsewhere/outputs.zip");
    EXPECT_EQ(CapturePlace(dir + "/A.B/args_dump"), "/elsewhere/outputs.zip/A.B/args_dump");
  }
  // Outside bazel test: the plain path.
  ScopedEnv none("TEST_UNDECLARED_OUTPUTS_DIR", nullptr);
  EXPECT_EQ(CapturePlace(dir + "/A.B/args_dump"), dir + "/A.B/args_dump");
}

absl::Status Twice(KernelContext& ctx) {
  auto x = ctx.tensor(0), y = ctx.tensor(1);
  if (!x.ok() || !y.ok()) return absl::InvalidArgumentError("twice");
  for (uint64_t i = 0; i < x->numel(); ++i) y->Set<float>(i, 2 * x->Get<float>(i));
  return absl::OkStatus();
}

absl::Status Fails(KernelContext&) { return absl::InternalError("this kernel fails"); }

// What this test prints, run by bazel test: no path inside the sandbox's
// test.outputs, the zip and the folder instead.
TEST(CapturePlaceTest, MessagesOfASessionUnderBazelTest) {
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (outputs == nullptr) GTEST_SKIP() << "not under bazel test";
  KernelRegistry kernels;
  const uint16_t twice = *kernels.Register(
      "twice", {ArgDirection::kIn, ArgDirection::kOut}, &Twice, "elementwise");
  const uint16_t fails = *kernels.Register(
      "fails", {ArgDirection::kIn, ArgDirection::kOut}, &Fails, "test");
  SessionOptions options;
  options.dump.level = 2;
  ::testing::internal::CaptureStderr();
  auto session = SimSession::Open(kernels, options);
  ASSERT_TRUE(session.ok()) << session.status();
  Tensor x = *(*session)->Alloc(DataType::kFloat32, {4});
  Tensor y = *(*session)->Alloc(DataType::kFloat32, {4});
  for (uint16_t f : {twice, fails}) {
    CoreTaskArgs args;
    ASSERT_TRUE(args.add_input(x).ok() && args.add_output(y).ok());
    ASSERT_TRUE((*session)->Submit(f, std::move(args)).ok());
  }
  auto result = (*session)->Finish();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->exception_dumps.size(), 1u);
  const std::string zip = "/test.outputs/outputs.zip/CapturePlaceTest.MessagesOfASessionUnderBazelTest";
  EXPECT_THAT(printed, HasSubstr(zip + "/args_dump (the zip: /"));
  EXPECT_THAT(printed, HasSubstr(zip + "/exception_dump/exception_"));
  EXPECT_THAT(printed, Not(HasSubstr(std::string(outputs) + "/"))) << printed;
  // The test library's messages too.
  auto capture = testing::Capture::Of(*result);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_THAT(capture->name(), HasSubstr(zip + "/args_dump (the zip: /"));
  auto none = capture->Get(testing::ArgQuery().Step(7));
  EXPECT_THAT(std::string(none.status().message()), HasSubstr(zip));
  EXPECT_THAT(::testing::PrintToString(*capture), HasSubstr(zip));
}

}  // namespace
}  // namespace argsdump
