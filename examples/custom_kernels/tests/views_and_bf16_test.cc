// (f) A BFLOAT16 kernel, its tensors written and read as floats with the
// SDK's 16-bit float helpers, and a kernel over a 3-D strided view with a
// start offset: what each received and produced, checked through the
// capture against values computed here from the buffers' own layout.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernels.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"

namespace custom_kernels {
namespace {

using argsdump::CoreTaskArgs;
using argsdump::DataType;
using argsdump::SimSession;
using argsdump::Tensor;
using argsdump::testing::ArgQuery;
using argsdump::testing::Capture;
using argsdump::testing::IsCloseTo;
using argsdump::testing::Kind;
using argsdump::testing::Role;
using argsdump::testing::Stage;
using ::testing::ElementsAre;

TEST(ViewsAndBf16Test, Bf16KernelInAndOut) {
  argsdump::KernelRegistry registry;
  auto ids = RegisterKernels(&registry);
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto session = SimSession::Open(registry);
  ASSERT_TRUE(session.ok()) << session.status();
  Tensor x = *(*session)->Alloc(DataType::kBfloat16, {4, 8});
  Tensor y = *(*session)->Alloc(DataType::kBfloat16, {4, 8});
  std::vector<float> values;
  for (int i = 0; i < 32; ++i) values.push_back(0.1f * static_cast<float>(i - 16));
  ASSERT_TRUE(argsdump::WriteFloats(x, values).ok());
  float s = 3.0f;
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(x).ok() && args.add_output(y).ok() && args.add_scalar(s).ok());
  auto task = (*session)->Submit(ids->bf16_scale, std::move(args));
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE((*session)->Synchronize().ok());
  // What the device holds: each input rounded to BF16, times 3, rounded.
  std::vector<double> in, out;
  for (float v : values) {
    const float x16 = argsdump::Bfloat16ToFloat(argsdump::FloatToBfloat16(v));
    in.push_back(x16);
    out.push_back(argsdump::Bfloat16ToFloat(argsdump::FloatToBfloat16(3.0f * x16)));
  }
  auto y_read = argsdump::ReadFloats(y);
  ASSERT_TRUE(y_read.ok()) << y_read.status();
  EXPECT_EQ(std::vector<double>(y_read->begin(), y_read->end()), out);

  auto result = (*session)->Finish();
  ASSERT_TRUE(result.ok() && result->run_status.ok());
  if (!result->wrote_capture) GTEST_SKIP() << "the dump is off";
  auto capture = Capture::Of(*result);
  ASSERT_TRUE(capture.ok()) << capture.status();
  auto x_in = capture->Get(ArgQuery().Task(*task).Kind(Kind::kTensor).Role(Role::kInput));
  ASSERT_TRUE(x_in.ok()) << x_in.status();
  EXPECT_EQ(x_in->dtype, DataType::kBfloat16);
  EXPECT_EQ(x_in->bin_size, 64u);  // 32 elements of 2 bytes
  EXPECT_THAT(*x_in, IsCloseTo(in, 0, 0));  // exactly
  auto y_out = capture->Get(ArgQuery().Task(*task).Stage(Stage::kAfterCompletion).Role(Role::kOutput));
  ASSERT_TRUE(y_out.ok()) << y_out.status();
  EXPECT_THAT(*y_out, IsCloseTo(out, 0, 0));
  // The scalar: an input too (role input), after the tensors.
  auto scalar = capture->Get(ArgQuery().Task(*task).Kind(Kind::kScalar));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->role, Role::kInput);
  EXPECT_EQ(scalar->arg_index, 2u);
  EXPECT_THAT(*scalar->Values(), ElementsAre(3.0));
}

TEST(ViewsAndBf16Test, ThreeDimensionalViewWithAStartOffset) {
  argsdump::KernelRegistry registry;
  auto ids = RegisterKernels(&registry);
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto session = SimSession::Open(registry);
  ASSERT_TRUE(session.ok()) << session.status();
  // A base of 4 x 6 x 8 floats, base[i] = i; the view, shape [2, 3, 4],
  // strides [96, 16, 2], from element 9, takes planes 0 and 2, rows 1, 3
  // and 5, columns 1, 3, 5 and 7.
  Tensor base = *(*session)->Alloc(DataType::kFloat32, {4, 6, 8});
  std::vector<float> iota(4 * 6 * 8);
  for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<float>(i);
  ASSERT_TRUE(base.Write(iota).ok());
  const std::vector<uint32_t> shape = {2, 3, 4}, strides = {96, 16, 2};
  const uint64_t start = 9;
  auto view = base.View(shape, strides, start);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_FALSE(view->is_contiguous());
  Tensor y = *(*session)->Alloc(DataType::kFloat32, {2, 3, 4});
  float a = 0.5f, b = -1.0f;
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(*view).ok() && args.add_output(y).ok() && args.add_scalar(a).ok() &&
              args.add_scalar(b).ok());
  auto task = (*session)->Submit(ids->strided_affine, std::move(args));
  ASSERT_TRUE(task.ok()) << task.status();
  // The view's elements, from the base's layout: start + i*96 + j*16 + k*2.
  std::vector<double> picked, expected;
  for (uint32_t i = 0; i < 2; ++i) {
    for (uint32_t j = 0; j < 3; ++j) {
      for (uint32_t k = 0; k < 4; ++k) {
        const double v = iota[start + i * 96 + j * 16 + k * 2];
        picked.push_back(v);
        expected.push_back(0.5 * v - 1.0);
      }
    }
  }
  auto result = (*session)->Finish();
  ASSERT_TRUE(result.ok() && result->run_status.ok());
  if (!result->wrote_capture) GTEST_SKIP() << "the dump is off";
  auto capture = Capture::Of(*result);
  ASSERT_TRUE(capture.ok()) << capture.status();
  auto x_in = capture->Get(ArgQuery().Task(*task).Kind(Kind::kTensor).Role(Role::kInput));
  ASSERT_TRUE(x_in.ok()) << x_in.status();
  EXPECT_THAT(x_in->shape, ElementsAre(2, 3, 4));
  EXPECT_THAT(x_in->strides, ElementsAre(96, 16, 2));
  EXPECT_EQ(x_in->start_offset, 9u);
  EXPECT_FALSE(x_in->is_contiguous);
  EXPECT_EQ(x_in->numel, 24u);
  EXPECT_THAT(*x_in, IsCloseTo(picked, 0, 0));  // the view's logical elements, gathered
  auto y_out = capture->Get(ArgQuery().Task(*task).Role(Role::kOutput));
  ASSERT_TRUE(y_out.ok()) << y_out.status();
  EXPECT_TRUE(y_out->is_contiguous);
  EXPECT_THAT(*y_out, IsCloseTo(expected, 0, 0));
}

}  // namespace
}  // namespace custom_kernels
