// (b) Level 1 (argsdump_sim_test's dump_args): only what the orchestration
// marked with CoreTaskArgs::dump(...) -- the normalised h and axpb's scalar
// a. The same test at another level checks what that level keeps:
//   --test_arg=--dump-args=2  everything, with payload
//   --test_arg=--dump-args=3  everything as metadata, payload for h only
//   --test_env=ARGSDUMP_LEVEL=0  nothing
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
using argsdump::testing::Kind;
using argsdump::testing::Role;
using argsdump::testing::Stage;

class MarkersTest : public ::testing::Test {
 protected:
  absl::StatusOr<argsdump::SessionResult> Run(bool mark) {
    auto ids = RegisterKernels(&registry_);
    if (!ids.ok()) return ids.status();
    auto session = SimSession::Open(registry_);
    if (!session.ok()) return session.status();
    ModelOptions o;
    o.mark = mark;
    auto run = RunModel(**session, *ids, o);
    if (!run.ok()) return run.status();
    return (*session)->Finish();
  }
  argsdump::KernelRegistry registry_;
};

TEST_F(MarkersTest, WhatEachLevelKeepsOfTheMarkedArgs) {
  auto result = Run(/*mark=*/true);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->run_status.ok());
  const int level = result->dump.level;
  if (level == 0) {
    EXPECT_FALSE(result->wrote_capture);
    GTEST_SKIP() << "the dump is off";
  }
  // Local (files to check against the schema) or on a capture service.
  ASSERT_TRUE(!result->capture_dir.empty() || !result->capture.empty());
  if (!result->capture_dir.empty()) {
    EXPECT_TRUE(argsdump::testing::CheckCaptureFiles(result->capture_dir).ok());
  }
  auto capture = Capture::Of(*result);
  ASSERT_TRUE(capture.ok()) << capture.status();
  const size_t per_step = level == 1 ? 2 : 9;  // marked: h and a; else every arg
  EXPECT_EQ(capture->args().size(), 3 * per_step);
  for (uint32_t step = 0; step < 3; ++step) {
    auto h = capture->Get(ArgQuery().Func("layer_norm").Step(step).Role(Role::kOutput));
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_GT(h->bin_size, 0u);  // marked: payload at levels 1, 2 and 3
    auto a = capture->Get(ArgQuery().Func("axpb").Step(step).Kind(Kind::kScalar).Arg(2));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->Values()->size(), 1u);
    if (level == 1) {
      EXPECT_TRUE(capture->Find(ArgQuery().Func("axpb").Step(step).Kind(Kind::kTensor)).empty());
    } else {
      auto x = capture->Get(ArgQuery().Func("layer_norm").Step(step).Arg(0));
      ASSERT_TRUE(x.ok());
      // Level 3: metadata for every arg, payload only for marked tensors.
      EXPECT_EQ(x->bin_size > 0, level == 2);
      EXPECT_EQ(x->numel, 32u);
    }
  }
}

TEST_F(MarkersTest, NothingMarkedNothingCapturedAtLevelOne) {
  auto result = Run(/*mark=*/false);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->run_status.ok());
  if (result->dump.level != 1) GTEST_SKIP() << "this is about level 1";
  EXPECT_FALSE(result->wrote_capture);
  EXPECT_EQ(result->records, 0u);
  EXPECT_EQ(Capture::Of(*result).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace custom_kernels
