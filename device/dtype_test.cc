#include "device/dtype.h"

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
