#include "device/tensor_view.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "device/testing/views.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {


TEST(TensorViewTest, ContiguityAndExtent) {
  std::vector<float> buf(64);
  EXPECT_TRUE(MakeView(DataType::kFloat32, {4, 8}, {8, 1}, 0, buf.data()).is_contiguous());
  EXPECT_FALSE(MakeView(DataType::kFloat32, {4, 4}, {8, 1}, 0, buf.data()).is_contiguous());
  EXPECT_TRUE(MakeView(DataType::kFloat32, {1, 8}, {99, 1}, 3, buf.data()).is_contiguous());
  EXPECT_EQ(MakeView(DataType::kFloat32, {4, 4}, {8, 1}, 2, buf.data()).extent_elements(), 2u + 3 * 8 + 3 + 1);
  EXPECT_TRUE(ValidateView(MakeView(DataType::kFloat32, {4, 8}, {8, 1}, 0, buf.data()), 32).ok());
  EXPECT_EQ(ValidateView(MakeView(DataType::kFloat32, {4, 8}, {8, 1}, 1, buf.data()), 32).code(),
            absl::StatusCode::kOutOfRange);
}

TEST(TensorViewTest, HugeGeometryIsRejectedNotWrapped) {
  std::vector<float> buf(16);
  TensorView v = MakeView(DataType::kFloat32, {0xFFFFFFFF, 0xFFFFFFFF, 2},
                      {0xFFFFFFFF, 0xFFFFFFFF, 1}, ~uint64_t{0} - 4, buf.data());
  EXPECT_FALSE(ValidateView(v, 16).ok());
  TensorView far = MakeView(DataType::kFloat32, {2}, {0xFFFFFFFF}, ~uint64_t{0} - 1, buf.data());
  EXPECT_EQ(far.extent_elements(), ~uint64_t{0});
  EXPECT_FALSE(ValidateView(far, 16).ok());
}

TEST(TensorViewTest, Gather2DWithStartOffset) {
  std::vector<int32_t> buf(48);
  std::iota(buf.begin(), buf.end(), 0);
  // 3 x 4 window of a 6 x 8 matrix, starting at row 1, column 2.
  TensorView v = MakeView(DataType::kInt32, {3, 4}, {8, 1}, 10, buf.data());
  std::vector<int32_t> out(12);
  EXPECT_EQ(GatherLogical(v, reinterpret_cast<uint8_t*>(out.data()), 1 << 20), 48u);
  EXPECT_EQ(out, (std::vector<int32_t>{10, 11, 12, 13, 18, 19, 20, 21, 26, 27, 28, 29}));
}

TEST(TensorViewTest, Gather3DTransposedInnerStride) {
  std::vector<uint16_t> buf(2 * 3 * 4);
  std::iota(buf.begin(), buf.end(), 0);
  // Logical [2][4][3] view of a [2][3][4] buffer with the last two dims swapped.
  TensorView v = MakeView(DataType::kUint16, {2, 4, 3}, {12, 1, 4}, 0, buf.data());
  std::vector<uint16_t> out(24);
  GatherLogical(v, reinterpret_cast<uint8_t*>(out.data()), 1 << 20);
  for (uint32_t i = 0; i < 2; ++i)
    for (uint32_t j = 0; j < 4; ++j)
      for (uint32_t k = 0; k < 3; ++k)
        EXPECT_EQ(out[i * 12 + j * 3 + k], buf[i * 12 + k * 4 + j]);
}

TEST(TensorViewTest, TruncatedGatherStopsMidRowAndMidElement) {
  std::vector<double> buf(20);
  std::iota(buf.begin(), buf.end(), 0.0);
  TensorView v = MakeView(DataType::kFloat64, {4, 3}, {5, 1}, 0, buf.data());
  std::vector<uint8_t> out(100, 0xEE);
  EXPECT_EQ(GatherLogical(v, out.data(), 4 * 8 + 3), 35u);
  double got[4];
  std::memcpy(got, out.data(), 32);
  EXPECT_EQ(got[0], 0.0);
  EXPECT_EQ(got[2], 2.0);
  EXPECT_EQ(got[3], 5.0);
  EXPECT_EQ(std::memcmp(out.data() + 32, &buf[6], 3), 0);
  EXPECT_EQ(out[35], 0xEE);
}

TEST(TensorViewTest, Fp4PacksTwoPerByte) {
  // Buffer of 8 nibbles 0..7; take elements 1, 3, 5 (stride 2, start 1).
  const uint8_t buf[4] = {0x10, 0x32, 0x54, 0x76};
  TensorView v = MakeView(DataType::kFp4E2M1, {3}, {2}, 1, buf);
  uint8_t out[2] = {0, 0};
  EXPECT_EQ(GatherLogical(v, out, 100), 2u);
  EXPECT_EQ(out[0], 0x31);
  EXPECT_EQ(out[1], 0x05);
  TensorView c = MakeView(DataType::kFp4E2M1, {4}, {1}, 2, buf);
  EXPECT_EQ(GatherLogical(c, out, 100), 2u);
  EXPECT_EQ(out[0], 0x32);
  EXPECT_EQ(out[1], 0x54);
}

}  // namespace
}  // namespace argsdump
