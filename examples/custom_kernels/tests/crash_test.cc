// (e) A kernel of ours with an out-of-bounds bug that crashes the process
// (here: a store through a null pointer). With SessionOptions::device_process
// the device runs in a process of its own, so the test survives it and reads
// back what the crashing kernel received, as captured before dispatch.
#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"

namespace custom_kernels {
namespace {

using argsdump::ArgDirection;
using argsdump::DataType;
using argsdump::SimSession;
using argsdump::testing::ArgQuery;
using argsdump::testing::Capture;
using argsdump::testing::Stage;

// out[i] = in[i] * 2, then a bug: the row pointer of row `rows` (one past
// the end) is read as null and written through.
__attribute__((no_sanitize("undefined"), noinline)) void WriteRowPastTheEnd() {
  static volatile uintptr_t row_pointer = 0;
  *reinterpret_cast<volatile float*>(row_pointer) = 1.0f;
}

absl::Status BuggyDouble(argsdump::KernelContext& ctx) {
  auto in = ctx.tensor(0), out = ctx.tensor(1);
  if (!in.ok() || !out.ok()) return absl::InvalidArgumentError("buggy_double: args");
  for (uint64_t i = 0; i < in->numel(); ++i) out->Set<float>(i, 2 * in->Get<float>(i));
  WriteRowPastTheEnd();
  return absl::OkStatus();
}

TEST(CrashTest, TheCrashingKernelsInputsAreKept) {
  argsdump::KernelRegistry kernels;
  const uint16_t buggy = *kernels.Register(
      "buggy_double", {ArgDirection::kIn, ArgDirection::kOut}, &BuggyDouble, "elementwise");
  argsdump::SessionOptions options;
  options.device_process = true;
  auto session = SimSession::Open(kernels, options);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::Status ran = (*session)->RunDevice([&](SimSession& device) -> absl::Status {
    auto in = device.Alloc(DataType::kFloat32, {4, 4});
    auto out = device.Alloc(DataType::kFloat32, {4, 4});
    if (!in.ok() || !out.ok()) return absl::InternalError("alloc");
    std::vector<float> values(16);
    for (int i = 0; i < 16; ++i) values[i] = 0.25f * i;
    if (absl::Status s = in->Write(values); !s.ok()) return s;
    argsdump::CoreTaskArgs args;
    args.add_input(*in).IgnoreError();
    args.add_output(*out).IgnoreError();
    args.dump(*in).IgnoreError();  // level 1 keeps it too
    if (auto id = device.Submit(buggy, std::move(args)); !id.ok()) return id.status();
    return device.Synchronize();
  });
  EXPECT_EQ(ran.code(), absl::StatusCode::kAborted) << ran;
  auto result = (*session)->Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->device_crashed);
  EXPECT_THAT(result->device_crash, ::testing::HasSubstr("kernel 'buggy_double'"));
  // Its exception dump holds what it received, whatever the level.
  ASSERT_EQ(result->exception_dumps.size(), 1u);
  if (!result->wrote_capture && result->capture.empty()) GTEST_SKIP() << "the dump is off";
  auto capture = Capture::Of(*result);
  ASSERT_TRUE(capture.ok()) << capture.status();
  auto in = capture->Get(ArgQuery().Func("buggy_double").Stage(Stage::kBeforeDispatch).Arg(0));
  ASSERT_TRUE(in.ok()) << in.status();
  auto values = in->Values();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)[15], 0.25 * 15);
}

}  // namespace
}  // namespace custom_kernels
