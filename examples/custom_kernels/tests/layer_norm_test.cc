// (a) The model at level 2 (argsdump_sim_test's dump_args): every input the
// kernels received and every output they produced, checked through the
// capture. Run it with the dump off (--test_env=ARGSDUMP_LEVEL=0) and the
// kernels are still checked; only the capture checks are skipped.
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernels.h"
#include "kernels/model.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"

namespace custom_kernels {
namespace {

using argsdump::SessionResult;
using argsdump::SimSession;
using argsdump::testing::ArgQuery;
using argsdump::testing::Capture;
using argsdump::testing::CapturedArg;
using argsdump::testing::HasNoNonFiniteOutputs;
using argsdump::testing::IsCloseTo;
using argsdump::testing::IsFinite;
using argsdump::testing::Role;
using argsdump::testing::Stage;
using ::testing::ElementsAre;

// y = layer_norm(x) row by row, on the host (the reference).
std::vector<double> Normalize(const std::vector<double>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, uint32_t rows, uint32_t cols,
                              double eps) {
  std::vector<double> y(x.size());
  for (uint32_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (uint32_t c = 0; c < cols; ++c) mean += x[r * cols + c];
    mean /= cols;
    for (uint32_t c = 0; c < cols; ++c) var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    var /= cols;
    for (uint32_t c = 0; c < cols; ++c) {
      y[r * cols + c] = (x[r * cols + c] - mean) / std::sqrt(var + eps) * gamma[c] + beta[c];
    }
  }
  return y;
}

TEST(LayerNormTest, WhatTheKernelsReceivedAndProduced) {
  argsdump::KernelRegistry registry;
  auto ids = RegisterKernels(&registry);
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto session = SimSession::Open(registry);
  ASSERT_TRUE(session.ok()) << session.status();
  ModelOptions o;
  auto run = RunModel(**session, *ids, o);
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<SessionResult> result = (*session)->Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->run_status.ok()) << result->run_status;
  EXPECT_EQ(result->tasks_completed, 2u * o.steps);
  EXPECT_FALSE(run->y.empty());
  if (!result->wrote_capture) GTEST_SKIP() << "the dump is off (level " << result->dump.level << ")";

  if (!result->capture_dir.empty()) {  // local (not streamed): the files hold to the schema
    EXPECT_TRUE(argsdump::testing::CheckCaptureFiles(result->capture_dir).ok())
        << argsdump::testing::CheckCaptureFiles(result->capture_dir);
  }
  auto capture = Capture::Of(*result);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_THAT(*capture, HasNoNonFiniteOutputs());
  EXPECT_EQ(capture->labels().at("target"), "//tests:layer_norm_test");
  EXPECT_EQ(capture->labels().at("steps"), std::to_string(o.steps));
  if (result->dump.level != 2) GTEST_SKIP() << "the value checks below are for level 2";

  for (uint32_t step = 0; step < o.steps; ++step) {
    SCOPED_TRACE(step);
    // layer_norm: its input is what the orchestration handed it (step 0:
    // x as written; later: the previous axpb output, seen transposed).
    auto x = capture->Get(ArgQuery().Func("layer_norm").Step(step).Stage(Stage::kBeforeDispatch)
                              .Arg(0));
    ASSERT_TRUE(x.ok()) << x.status();
    EXPECT_THAT(x->shape, ElementsAre(o.rows, o.cols));
    auto xv = x->Values();
    ASSERT_TRUE(xv.ok());
    if (step == 0) {
      EXPECT_THAT(*x, IsCloseTo(std::vector<double>(run->x0.begin(), run->x0.end())));
      EXPECT_TRUE(x->is_contiguous);
    } else {
      EXPECT_FALSE(x->is_contiguous);  // y^T
      EXPECT_THAT(x->strides, ElementsAre(1u, o.rows));
    }
    auto eps = capture->Get(ArgQuery().Func("layer_norm").Step(step).Arg(4));
    ASSERT_TRUE(eps.ok());
    EXPECT_THAT(*eps->Values(), ElementsAre(::testing::DoubleEq(static_cast<double>(o.eps))));
    // Its output is layer_norm of that input, within float rounding.
    auto h = capture->Get(ArgQuery().Func("layer_norm").Step(step).Role(Role::kOutput));
    ASSERT_TRUE(h.ok());
    EXPECT_THAT(*h, IsFinite());
    const std::vector<double> want = Normalize(*xv, run->gamma, run->beta, o.rows, o.cols, o.eps);
    EXPECT_THAT(*h, IsCloseTo(want, 1e-5, 1e-5));
    // axpb read h through a transposed view: not contiguous, the elements
    // in the view's logical order, i.e. h^T.
    auto hin = capture->Get(ArgQuery().Func("axpb").Step(step).Stage(Stage::kBeforeDispatch)
                                .Arg(0));
    ASSERT_TRUE(hin.ok());
    EXPECT_FALSE(hin->is_contiguous);
    EXPECT_THAT(hin->shape, ElementsAre(o.cols, o.rows));
    EXPECT_THAT(hin->strides, ElementsAre(1u, o.cols));
    std::vector<double> h_t(want.size());
    const std::vector<double> hv = *h->Values();
    for (uint32_t r = 0; r < o.rows; ++r) {
      for (uint32_t c = 0; c < o.cols; ++c) h_t[c * o.rows + r] = hv[r * o.cols + c];
    }
    EXPECT_THAT(*hin, IsCloseTo(h_t, 0, 0));  // bit for bit the same floats
    // Its scalars as the orchestration chose them (a halves when y grows).
    auto a = capture->Get(ArgQuery().Func("axpb").Step(step).Arg(2));
    ASSERT_TRUE(a.ok());
    EXPECT_THAT(*a->Values(), ElementsAre(run->a_per_step[step]));
    auto y = capture->Get(ArgQuery().Func("axpb").Step(step).Stage(Stage::kAfterCompletion));
    ASSERT_TRUE(y.ok());
    std::vector<double> ay(h_t.size());
    for (size_t i = 0; i < h_t.size(); ++i) ay[i] = run->a_per_step[step] * h_t[i] + o.b;
    EXPECT_THAT(*y, IsCloseTo(ay, 1e-6, 1e-6));
  }
  // The dynamic part of the orchestration did happen in this run.
  EXPECT_LT(run->a_per_step.back(), run->a_per_step.front());
}

}  // namespace
}  // namespace custom_kernels
