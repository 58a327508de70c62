#include "format/dtype.h"

#include <cmath>
#include <cstring>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

TEST(DataTypeTest, ElementWidthsOfEveryType) {
  struct Case { DataType dtype; uint32_t bits; const char* name; };
  const Case cases[] = {
      {DataType::kFloat32, 32, "FLOAT32"},  {DataType::kFloat16, 16, "FLOAT16"},
      {DataType::kInt32, 32, "INT32"},      {DataType::kInt16, 16, "INT16"},
      {DataType::kInt8, 8, "INT8"},         {DataType::kUint8, 8, "UINT8"},
      {DataType::kBfloat16, 16, "BFLOAT16"}, {DataType::kInt64, 64, "INT64"},
      {DataType::kUint64, 64, "UINT64"},    {DataType::kUint16, 16, "UINT16"},
      {DataType::kUint32, 32, "UINT32"},    {DataType::kBool, 8, "BOOL"},
      {DataType::kFp8E4M3Fn, 8, "FP8E4M3FN"}, {DataType::kFp8E8M0, 8, "FP8E8M0"},
      {DataType::kFp4E2M1, 4, "FP4E2M1"},   {DataType::kFloat64, 64, "FLOAT64"},
  };
  ASSERT_EQ(std::size(cases), static_cast<size_t>(kDataTypeCount));
  for (const Case& c : cases) {
    EXPECT_EQ(ElementBits(c.dtype), c.bits) << c.name;
    EXPECT_EQ(DataTypeName(c.dtype), c.name);
    EXPECT_EQ(DataTypeFromName(c.name), c.dtype);
    EXPECT_EQ(PayloadBytes(c.dtype, 10), 10 * c.bits / 8) << c.name;
  }
}

TEST(DataTypeTest, SubByteTypeRoundsUp) {
  EXPECT_EQ(PayloadBytes(DataType::kFp4E2M1, 3), 2u);
  EXPECT_EQ(PayloadBytes(DataType::kFp4E2M1, 0), 0u);
}

TEST(DataTypeTest, NamesAreCaseInsensitiveAndUnknownsRejected) {
  EXPECT_EQ(DataTypeFromName("bfloat16"), DataType::kBfloat16);
  EXPECT_EQ(DataTypeFromName("Float64"), DataType::kFloat64);
  EXPECT_FALSE(DataTypeFromName("FLOAT128").has_value());
  EXPECT_FALSE(DataTypeFromName("").has_value());
  EXPECT_FALSE(IsValidDataType(kDataTypeCount));
}

TEST(DataTypeTest, ScalarTypesMapToTheirOwnDtype) {
  EXPECT_EQ(ScalarDataType<double>::value, DataType::kFloat64);
  EXPECT_EQ(ScalarDataType<float>::value, DataType::kFloat32);
  EXPECT_EQ(ScalarDataType<bool>::value, DataType::kBool);
  EXPECT_EQ(ScalarDataType<uint16_t>::value, DataType::kUint16);
}

}  // namespace
}  // namespace argsdump

namespace argsdump {
namespace {

TEST(DtypeDecodeTest, NarrowFloatsWidenExactly) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7C00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_EQ(Bfloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bfloat16ToFloat(0xC0A0), -5.0f);
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(0x7FC0)));
  // E4M3FN: 1.0 = 0 0111 000; 448 = 0 1111 110; NaN = x 1111 111; 2^-9 the
  // smallest subnormal; -0.
  EXPECT_EQ(Fp8E4M3FnToFloat(0x38), 1.0f);
  EXPECT_EQ(Fp8E4M3FnToFloat(0x7E), 448.0f);
  EXPECT_EQ(Fp8E4M3FnToFloat(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(Fp8E4M3FnToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(Fp8E4M3FnToFloat(0xFF)));
  EXPECT_EQ(Fp8E4M3FnToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(Fp8E4M3FnToFloat(0x78), 256.0f);  // not an infinity in FN
  EXPECT_TRUE(std::signbit(Fp8E4M3FnToFloat(0x80)));
  EXPECT_EQ(Fp8E8M0ToFloat(127), 1.0f);
  EXPECT_EQ(Fp8E8M0ToFloat(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(Fp8E8M0ToFloat(130), 8.0f);
  EXPECT_TRUE(std::isnan(Fp8E8M0ToFloat(0xFF)));
  const float fp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (uint8_t n = 0; n < 16; ++n) EXPECT_EQ(Fp4E2M1ToFloat(n), fp4[n]) << int(n);
}

TEST(DtypeDecodeTest, ElementsOfEveryTypeByIndex) {
  const int32_t i32[3] = {-7, 0, 2147483647};
  EXPECT_EQ(ElementAsDouble(DataType::kInt32, reinterpret_cast<const uint8_t*>(i32), 2),
            2147483647.0);
  EXPECT_EQ(ElementAsDouble(DataType::kInt32, reinterpret_cast<const uint8_t*>(i32), 0), -7.0);
  const uint16_t half[2] = {0x3C00, 0xC000};
  EXPECT_EQ(ElementAsDouble(DataType::kFloat16, reinterpret_cast<const uint8_t*>(half), 1), -2.0);
  const uint8_t packed[2] = {0x2F, 0x90};  // nibbles, low first: 0xF (-6), 0x2 (1), 0x0, 0x9 (-0.5)
  EXPECT_EQ(ElementAsDouble(DataType::kFp4E2M1, packed, 0), -6.0);
  EXPECT_EQ(ElementAsDouble(DataType::kFp4E2M1, packed, 1), 1.0);
  EXPECT_EQ(ElementAsDouble(DataType::kFp4E2M1, packed, 2), 0.0);
  EXPECT_EQ(ElementAsDouble(DataType::kFp4E2M1, packed, 3), -0.5);
  const uint8_t flags[2] = {0, 3};
  EXPECT_EQ(ElementAsDouble(DataType::kBool, flags, 1), 1.0);
  const int8_t small[1] = {-128};
  EXPECT_EQ(ElementAsDouble(DataType::kInt8, reinterpret_cast<const uint8_t*>(small), 0), -128.0);
  const uint64_t big[1] = {1ull << 40};
  EXPECT_EQ(ElementAsDouble(DataType::kUint64, reinterpret_cast<const uint8_t*>(big), 0),
            1099511627776.0);
  const double f64[1] = {0.1};
  EXPECT_EQ(ElementAsDouble(DataType::kFloat64, reinterpret_cast<const uint8_t*>(f64), 0), 0.1);
  // Unaligned loads are fine (payloads are byte arrays).
  uint8_t bytes[9] = {0};
  const float one = 1.0f;
  std::memcpy(bytes + 1, &one, 4);
  EXPECT_EQ(ElementAsDouble(DataType::kFloat32, bytes + 1, 0), 1.0);
}

}  // namespace
}  // namespace argsdump
