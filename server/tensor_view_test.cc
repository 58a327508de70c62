#include "server/tensor_view.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

v1::ArgRecord Tensor(std::vector<uint32_t> shape, v1::DType dtype = v1::DTYPE_FLOAT32,
                     uint64_t element_bytes = 4) {
  v1::ArgRecord r;
  r.set_kind(v1::KIND_TENSOR);
  r.set_dtype(dtype);
  uint64_t n = 1;
  for (uint32_t d : shape) {
    r.add_shape(d);
    n *= d;
  }
  r.set_numel(n);
  r.set_bin_size(n * element_bytes);
  return r;
}

std::string Floats(const std::vector<float>& v) {
  std::string b(v.size() * 4, '\0');
  std::memcpy(&b[0], v.data(), b.size());
  return b;
}

TEST(TensorViewTest, ASmallTensorComesWholeWithItsStatsAndHistogram) {
  const v1::ArgRecord r = Tensor({2, 3});
  auto plan = PlanTensorSlice(r, {}, 0, TensorViewLimits());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->grid_rows, 2u);
  EXPECT_EQ(plan->grid_cols, 3u);
  EXPECT_EQ(plan->read_length, 24u);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::string json = TensorSliceJson(3, r, *plan, Floats({1, 2, nan, 0, -1.5f, 4}));
  EXPECT_NE(json.find("\"values\": [1,2,\"NaN\",0,-1.5,4]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"count\":\"6\",\"min\":-1.5,\"max\":4"), std::string::npos) << json;
  EXPECT_NE(json.find("\"nan\":\"1\""), std::string::npos);
  EXPECT_NE(json.find("\"zeros\":\"1\""), std::string::npos);
  EXPECT_NE(json.find("\"counts\": [1,"), std::string::npos) << json;
}

TEST(TensorViewTest, AGridKeepsEveryNonFiniteValue) {
  const v1::ArgRecord r = Tensor({4, 4});
  auto plan = PlanTensorSlice(r, {}, 4, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->block_rows, 2u);
  EXPECT_EQ(plan->block_cols, 2u);
  std::vector<float> v(16, 1.0f);
  v[0] = std::numeric_limits<float>::infinity();              // block (0,0)
  v[1] = std::numeric_limits<float>::quiet_NaN();             // block (0,0): NaN wins
  v[6] = -std::numeric_limits<float>::infinity();             // block (0,1)
  v[10] = 3.0f;                                              // block (1,1): mean 1.5
  const std::string json = TensorSliceJson(0, r, *plan, Floats(v));
  EXPECT_NE(json.find("\"values\": [\"NaN\",\"-Infinity\",1,1.5]"), std::string::npos) << json;
}

TEST(TensorViewTest, HigherRanksAreSlicedAndTruncatedPayloadsAreNull) {
  v1::ArgRecord r = Tensor({3, 2, 2});
  auto plan = PlanTensorSlice(r, {2}, 0, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->read_offset, 32u);
  EXPECT_EQ(plan->read_length, 16u);
  r.set_bin_size(40);  // 10 of 12 elements: the slice at 2 has 2 of 4
  r.set_truncated(true);
  plan = PlanTensorSlice(r, {2}, 0, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->captured, 2u);
  EXPECT_EQ(plan->read_length, 8u);
  const std::string json = TensorSliceJson(0, r, *plan, Floats({5, 6}));
  EXPECT_NE(json.find("\"values\": [5,6,null,null]"), std::string::npos) << json;
  EXPECT_FALSE(PlanTensorSlice(r, {3}, 0, TensorViewLimits()).ok());
  EXPECT_FALSE(PlanTensorSlice(r, {0, 0}, 0, TensorViewLimits()).ok());
}

TEST(TensorViewTest, FitGridsHaveEvenBlocks) {
  // 8 rows in 2 blocks are 4 and 4 (they were 7 and 1).
  auto plan = PlanTensorSlice(Tensor({8, 16}), {}, 3, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->grid_rows * plan->grid_cols, 2u);
  EXPECT_EQ(plan->block_rows, 4u);
  EXPECT_EQ(plan->block_cols, 16u);
  plan = PlanTensorSlice(Tensor({8, 8}), {}, 2, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->block_rows, 4u);
  EXPECT_EQ(plan->grid_rows, 2u);
  // Every shape and fit: at most fit cells, each element in one, no empty
  // row or column of cells.
  for (uint32_t rows = 1; rows <= 24; ++rows) {
    for (uint32_t cols = 1; cols <= 24; ++cols) {
      for (uint64_t fit = 1; fit <= 40; ++fit) {
        plan = PlanTensorSlice(Tensor({rows, cols}), {}, fit, TensorViewLimits());
        ASSERT_TRUE(plan.ok());
        const std::string at = absl::StrCat(rows, "x", cols, " fit ", fit);
        EXPECT_LE(plan->grid_rows * plan->grid_cols, std::max<uint64_t>(fit, 1)) << at;
        EXPECT_EQ(plan->grid_rows, (rows + plan->block_rows - 1) / plan->block_rows) << at;
        EXPECT_EQ(plan->grid_cols, (cols + plan->block_cols - 1) / plan->block_cols) << at;
        if (static_cast<uint64_t>(rows) * cols <= fit) {
          EXPECT_EQ(plan->grid_rows * plan->grid_cols, static_cast<uint64_t>(rows) * cols) << at;
        }
      }
    }
  }
}

TEST(TensorViewTest, ASliceWhollyPastTheCapturedBytesReadsNothing) {
  v1::ArgRecord r = Tensor({3, 2, 2});
  r.set_bin_size(8);  // 2 of 12 elements: slices 1 and 2 were not captured
  r.set_truncated(true);
  for (uint64_t slice : {1, 2}) {
    auto plan = PlanTensorSlice(r, {slice}, 0, TensorViewLimits());
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->captured, 0u);
    EXPECT_EQ(plan->read_length, 0u);
    EXPECT_LE(plan->read_offset, r.bin_size());  // nothing past the end is named
    const std::string json = TensorSliceJson(0, r, *plan, "");
    EXPECT_NE(json.find("\"values\": [null,null,null,null]"), std::string::npos) << json;
  }
}

TEST(TensorViewTest, Fp4SlicesStartMidByte) {
  const v1::ArgRecord r = Tensor({3, 1}, v1::DTYPE_FP4E2M1, 0);
  v1::ArgRecord packed = r;
  packed.set_bin_size(2);  // 3 nibbles in 2 bytes
  auto plan = PlanTensorSlice(packed, {}, 0, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  // 0x21: element 0 = 0.5 (nibble 1), element 1 = 1 (nibble 2); 0x03: 1.5.
  const std::string json = TensorSliceJson(0, packed, *plan, std::string("\x21\x03", 2));
  EXPECT_NE(json.find("\"values\": [0.5,1,1.5]"), std::string::npos) << json;
}

TEST(TensorViewTest, RefusalsSayWhy) {
  v1::ArgRecord scalar;
  scalar.set_kind(v1::KIND_SCALAR);
  EXPECT_TRUE(absl::IsInvalidArgument(PlanTensorSlice(scalar, {}, 0, {}).status()));
  v1::ArgRecord lying = Tensor({4, 4});
  lying.set_numel(17);
  EXPECT_TRUE(absl::IsInvalidArgument(PlanTensorSlice(lying, {}, 0, {}).status()));
  TensorViewLimits small;
  small.max_elements = 8;
  const v1::ArgRecord big = Tensor({4, 4});
  auto refused = PlanTensorSlice(big, {}, 0, small);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status()));
  EXPECT_NE(refused.status().message().find("fit=N"), std::string::npos);
  EXPECT_TRUE(PlanTensorSlice(big, {}, 8, small).ok());
  small.max_read_bytes = 32;
  EXPECT_TRUE(absl::IsResourceExhausted(PlanTensorSlice(big, {}, 8, small).status()));
  v1::ArgRecord overflow = Tensor({65536, 65536});
  overflow.add_shape(65536);
  overflow.add_shape(65536);
  EXPECT_TRUE(absl::IsInvalidArgument(PlanTensorSlice(overflow, {}, 8, {}).status()));
}

}  // namespace
}  // namespace argsdump
