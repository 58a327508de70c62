// FloatToBfloat16 / FloatToFloat16 / Float16ToFloat: every one of the 65536
// bit patterns of each format through float and back, and the rounding at
// every boundary between two neighbouring values (the midpoint, and the
// floats on either side of it), which is all round-to-nearest-even decides.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/argsdump.h"

namespace argsdump {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct Format {
  const char* name;
  uint16_t (*to)(float);
  float (*from)(uint16_t);
  uint16_t max_finite;  // the largest finite positive pattern
};

const Format kFormats[] = {
    {"BFLOAT16", &FloatToBfloat16, &Bfloat16ToFloat, 0x7F7F},
    {"FLOAT16", &FloatToFloat16, &Float16ToFloat, 0x7BFF},
};

class Float16Test : public ::testing::TestWithParam<Format> {};

TEST_P(Float16Test, EveryBitPatternRoundTrips) {
  const Format& f = GetParam();
  int nans = 0;
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float wide = f.from(bits);
    ASSERT_EQ(f.to(wide), bits) << f.name << " 0x" << std::hex << b << " -> " << wide;
    const bool nan_pattern = (b & 0x7FFF) > (f.max_finite + 1u);
    ASSERT_EQ(std::isnan(wide), nan_pattern) << f.name << " 0x" << std::hex << b;
    nans += nan_pattern;
    if (!nan_pattern) {
      ASSERT_EQ(std::signbit(wide), (b & 0x8000) != 0) << f.name << " 0x" << std::hex << b;
    }
  }
  // Every exponent-all-ones pattern with a payload is a NaN: 2 x (2^m - 1).
  EXPECT_EQ(nans, f.max_finite == 0x7F7F ? 2 * 127 : 2 * 1023);
}

TEST_P(Float16Test, DecodesAsTheDtypeTableDoes) {
  // format/dtype.h's decoders (the viewer's, the test library's) agree on
  // every value but NaN payloads, which they do not keep.
  const Format& f = GetParam();
  const DataType dtype = f.max_finite == 0x7F7F ? DataType::kBfloat16 : DataType::kFloat16;
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    uint8_t payload[2];
    std::memcpy(payload, &bits, 2);
    const double table = ElementAsDouble(dtype, payload, 0);
    const float ours = f.from(bits);
    if (std::isnan(ours)) {
      ASSERT_TRUE(std::isnan(table)) << f.name << " 0x" << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(ours), table) << f.name << " 0x" << std::hex << b;
    }
  }
}

TEST_P(Float16Test, RoundsToNearestEvenAtEveryBoundary) {
  const Format& f = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  for (uint32_t lo = 0; lo <= f.max_finite; ++lo) {
    const uint16_t hi = static_cast<uint16_t>(lo + 1);  // max_finite + 1 is the infinity
    const float a = f.from(static_cast<uint16_t>(lo));
    // Half way to the next: for the largest finite value, half an ulp
    // past it (where rounding reaches the infinity).
    const float ulp = hi <= f.max_finite ? f.from(hi) - a : a - f.from(static_cast<uint16_t>(lo - 1));
    const float mid = a + ulp / 2;  // exact: one bit more than the format has
    ASSERT_GT(mid, a);
    ASSERT_LT(mid, hi <= f.max_finite ? f.from(hi) : inf);
    const uint16_t even = (lo & 1) == 0 ? static_cast<uint16_t>(lo) : hi;
    for (const float sign : {1.0f, -1.0f}) {
      const uint16_t s = sign < 0 ? 0x8000 : 0;
      ASSERT_EQ(f.to(sign * a), s | lo) << f.name << " " << a;
      ASSERT_EQ(f.to(sign * mid), s | even) << f.name << " tie " << mid;
      ASSERT_EQ(f.to(sign * std::nextafter(mid, 0.0f)), s | lo) << f.name << " below " << mid;
      ASSERT_EQ(f.to(sign * std::nextafter(mid, inf)), s | hi) << f.name << " above " << mid;
    }
  }
}

TEST_P(Float16Test, InfinitiesZerosAndNaNs) {
  const Format& f = GetParam();
  const uint16_t inf = static_cast<uint16_t>(f.max_finite + 1);
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(f.to(std::numeric_limits<float>::infinity()), inf);
  EXPECT_EQ(f.to(-std::numeric_limits<float>::infinity()), 0x8000 | inf);
  EXPECT_EQ(f.to(big), inf);  // beyond either range
  EXPECT_EQ(f.to(-big), 0x8000 | inf);
  EXPECT_EQ(f.to(0.0f), 0x0000);
  EXPECT_EQ(f.to(-0.0f), 0x8000);
  EXPECT_EQ(f.to(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f.to(-std::numeric_limits<float>::denorm_min()), 0x8000);
  // A NaN whose payload is only in the low bits stays a NaN, sign kept.
  uint32_t low_payload = 0xFF800001u;
  float nan;
  std::memcpy(&nan, &low_payload, 4);
  const uint16_t narrowed = f.to(nan);
  EXPECT_TRUE(std::isnan(f.from(narrowed))) << std::hex << narrowed;
  EXPECT_TRUE(std::signbit(f.from(narrowed)));
  EXPECT_TRUE(std::isnan(f.from(f.to(std::numeric_limits<float>::quiet_NaN()))));
}

INSTANTIATE_TEST_SUITE_P(Formats, Float16Test, ::testing::ValuesIn(kFormats),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(info.param.name);
                         });

// An independent rounding: the compiler's _Float16 conversion, on floats
// drawn from every exponent.
TEST(Float16, AgreesWithTheCompilersFloat16) {
  std::mt19937 random(25);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = random();
    float v;
    std::memcpy(&v, &u, 4);
    if (std::isnan(v)) continue;
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    ASSERT_EQ(FloatToFloat16(v), expected) << std::hexfloat << v;
  }
  // Around the half range, where most of the work is.
  std::uniform_real_distribution<float> around(-70000.0f, 70000.0f);
  for (int i = 0; i < 2000000; ++i) {
    const float v = around(random) * (i % 2 == 0 ? 1.0f : 1e-6f);
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    ASSERT_EQ(FloatToFloat16(v), expected) << std::hexfloat << v;
  }
}

TEST(Float16, TensorsOfSixteenBitFloats) {
  KernelRegistry kernels;
  SessionOptions options;
  options.dump.level = 0;
  auto session = SimSession::Open(kernels, options);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<float> values = {1.0f, -2.5f, 1.0f / 3, 1e30f, -0.0f, 65519.0f, 3e-8f};
  for (const DataType dtype : {DataType::kBfloat16, DataType::kFloat16, DataType::kFloat32}) {
    auto t = (*session)->Alloc(dtype, {7});
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(WriteFloats(*t, values).ok());
    auto back = ReadFloats(*t);
    ASSERT_TRUE(back.ok()) << back.status();
    for (size_t i = 0; i < values.size(); ++i) {
      const float expected = dtype == DataType::kBfloat16 ? Bfloat16ToFloat(FloatToBfloat16(values[i]))
                             : dtype == DataType::kFloat16 ? Float16ToFloat(FloatToFloat16(values[i]))
                                                           : values[i];
      EXPECT_EQ(Bits((*back)[i]), Bits(expected)) << DataTypeName(dtype) << " [" << i << "]";
    }
    if (dtype != DataType::kFloat32) {
      // The bits are what Write<uint16_t> would have put there.
      auto bits = t->Read<uint16_t>();
      ASSERT_TRUE(bits.ok());
      EXPECT_EQ((*bits)[0], dtype == DataType::kBfloat16 ? 0x3F80 : 0x3C00);
    }
  }
  // A strided view: logical order.
  auto base = (*session)->Alloc(DataType::kBfloat16, {2, 3});
  ASSERT_TRUE(base.ok());
  auto transposed = base->View({3, 2}, {1, 3}, 0);
  ASSERT_TRUE(transposed.ok());
  ASSERT_TRUE(WriteFloats(*transposed, {0, 1, 2, 3, 4, 5}).ok());
  auto rows = ReadFloats(*base);
  ASSERT_TRUE(rows.ok());
  EXPECT_THAT(*rows, ::testing::ElementsAre(0, 2, 4, 1, 3, 5));
  // Errors name the dtype and the count.
  auto ints = (*session)->Alloc(DataType::kInt32, {2});
  ASSERT_TRUE(ints.ok());
  EXPECT_THAT(std::string(WriteFloats(*ints, {1, 2}).message()), ::testing::HasSubstr("INT32"));
  EXPECT_THAT(std::string(ReadFloats(*ints).status().message()), ::testing::HasSubstr("INT32"));
  EXPECT_THAT(std::string(WriteFloats(*transposed, {1}).message()),
              ::testing::HasSubstr("1 values for a view of 6"));
  ASSERT_TRUE((*session)->Finish().ok());
}

}  // namespace
}  // namespace argsdump
