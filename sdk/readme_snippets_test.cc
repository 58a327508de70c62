// The docs' C++ snippets as written (sdk/BUILD.bazel extracts them, in the
// order of docs/sdk.md then docs/dump-control.md, into readme_snippet_N.inc),
// each given what it leaves to its surroundings, compiled with -Wall -Wextra
// -Werror and run.
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"

// 1. docs/sdk.md, step 2: a kernel and a test of it, whole.
namespace snippet_1 {
#include "sdk/readme_snippet_1.inc"
}  // namespace snippet_1

namespace {

using argsdump::CoreTaskArgs;  // docs/dump-control.md writes it as code in namespace argsdump
using argsdump::DataType;
using argsdump::Tensor;

absl::Status Add(argsdump::KernelContext& ctx) {
  auto x = ctx.tensor(0), y = ctx.tensor(1), z = ctx.tensor(2);
  auto s = ctx.scalar<float>(0);
  if (!x.ok() || !y.ok() || !z.ok() || !s.ok()) return absl::InvalidArgumentError("add");
  for (uint64_t i = 0; i < x->numel(); ++i) {
    z->Set<float>(i, (x->Get<float>(i) + y->Get<float>(i)) * *s);
  }
  return absl::OkStatus();
}

// 2. docs/sdk.md, "Kernels that crash": the device in its own process (this one does
// not crash).
TEST(ReadmeSnippet2, KernelsThatCrash) {
  argsdump::KernelRegistry kernels;
#include "sdk/readme_snippet_2.inc"
  EXPECT_TRUE(ran.ok()) << ran;
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->device_crashed);
}

// 4. docs/dump-control.md, "Dump levels": a task's args, marked for level 1.
absl::Status DumpLevelsSnippet(argsdump::SimSession& session, uint16_t add, const Tensor& x,
                               const Tensor& y, const Tensor& z, uint64_t* task_id) {
#include "sdk/readme_snippet_4.inc"
  if (!task.ok()) return task.status();
  *task_id = *task;
  return absl::OkStatus();
}

TEST(ReadmeSnippet4, DumpLevels) {
  argsdump::KernelRegistry kernels;
  const uint16_t add = *kernels.Register(
      "add", {argsdump::ArgDirection::kIn, argsdump::ArgDirection::kIn,
              argsdump::ArgDirection::kOut, argsdump::ArgDirection::kScalar},
      &Add, "elementwise");
  argsdump::SessionOptions options;
  options.dump.level = 1;
  auto session = argsdump::SimSession::Open(kernels, options);
  ASSERT_TRUE(session.ok()) << session.status();
  Tensor x = *(*session)->Alloc(DataType::kFloat32, {4});
  Tensor y = *(*session)->Alloc(DataType::kFloat32, {4});
  Tensor z = *(*session)->Alloc(DataType::kFloat32, {4});
  ASSERT_TRUE(x.Write(std::vector<float>{1, 2, 3, 4}).ok());
  ASSERT_TRUE(y.Write(std::vector<float>{10, 20, 30, 40}).ok());
  uint64_t task = 0;
  ASSERT_TRUE(DumpLevelsSnippet(**session, add, x, y, z, &task).ok());
  EXPECT_EQ(task, 0x100000000u);
  auto result = (*session)->Finish();
  ASSERT_TRUE(result.ok() && result->run_status.ok());
  auto capture = argsdump::testing::Capture::Of(*result);
  ASSERT_TRUE(capture.ok()) << capture.status();
  // Level 1: the marked args only (x before dispatch, z after, the scale).
  std::vector<std::string> got;
  for (const auto& a : capture->args()) got.push_back(a.Describe());
  EXPECT_EQ(capture->args().size(), 3u) << ::testing::PrintToString(got);
  auto z_out = capture->Get(argsdump::testing::ArgQuery().Arg(2));
  ASSERT_TRUE(z_out.ok()) << z_out.status();
  EXPECT_THAT(*z_out, argsdump::testing::IsCloseTo({11, 22, 33, 44}));
}

// 3. docs/sdk.md, "16-bit floats": a BF16 tensor from floats and back.
TEST(ReadmeSnippet3, SixteenBitFloats) {
  argsdump::KernelRegistry kernels;
  auto session = argsdump::SimSession::Open(kernels);
  ASSERT_TRUE(session.ok()) << session.status();
#include "sdk/readme_snippet_3.inc"
  EXPECT_EQ(back[0], 0.10009765625f);
  EXPECT_EQ(back[1], 1.0f);
  EXPECT_EQ(back[3], 65536.0f);  // 65504 is between two BF16 values: 65280 and 65536
  EXPECT_EQ(back.size(), 6u);
}

}  // namespace
