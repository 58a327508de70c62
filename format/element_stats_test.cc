#include "format/element_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// What the test works out itself, from the same values as doubles.
struct Want {
  double min, max, mean, l2;
  uint64_t nan, pos_inf, neg_inf, zeros;
};

void Check(const ElementStats& s, const Want& w, uint64_t count) {
  EXPECT_EQ(s.count, count);
  EXPECT_EQ(s.min, w.min);
  EXPECT_EQ(s.max, w.max);
  EXPECT_DOUBLE_EQ(s.mean(), w.mean);
  EXPECT_DOUBLE_EQ(s.l2(), w.l2);
  EXPECT_EQ(s.nan, w.nan);
  EXPECT_EQ(s.pos_inf, w.pos_inf);
  EXPECT_EQ(s.neg_inf, w.neg_inf);
  EXPECT_EQ(s.zeros, w.zeros);
}

TEST(TensorStatsTest, Float32WithNonFiniteValuesZerosAndDenormals) {
  const float denormal = std::numeric_limits<float>::denorm_min() * 3;  // ~4.2e-45
  const std::vector<float> v = {1.5f, -2.0f, 0.0f, -0.0f, denormal,
                                std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), 4.0f};
  const auto b = Bytes(v);
  const ElementStats s = ComputeElementStats(DataType::kFloat32, b.data(), v.size());
  const double finite[] = {1.5, -2.0, 0.0, -0.0, static_cast<double>(denormal), 4.0};
  double sum = 0, sq = 0;
  for (double x : finite) {
    sum += x;
    sq += x * x;
  }
  Check(s, {-2.0, 4.0, sum / 6, std::sqrt(sq), 1, 1, 1, 2}, v.size());
  EXPECT_EQ(s.finite, 6u);
  EXPECT_TRUE(s.has_nonfinite());
  EXPECT_EQ(s.abs_max, 4.0);
  // A denormal is the minimum of positives alone.
  const std::vector<float> tiny = {denormal, 1.0f};
  const auto tb = Bytes(tiny);
  EXPECT_EQ(ComputeElementStats(DataType::kFloat32, tb.data(), 2).min, static_cast<double>(denormal));
}

TEST(TensorStatsTest, EveryFloatFormat) {
  struct Case {
    DataType dtype;
    std::vector<uint8_t> bytes;
    Want want;
    uint64_t count;
  };
  const std::vector<Case> cases = {
      // FLOAT16: 1, -2, +0, NaN, +Inf, a denormal (0x0001 = 2^-24).
      {DataType::kFloat16, Bytes(std::vector<uint16_t>{0x3C00, 0xC000, 0x0000, 0x7E00, 0x7C00, 0x0001}),
       {-2, 1, (1 - 2 + 0 + std::ldexp(1.0, -24)) / 4,
        std::sqrt(1 + 4 + std::ldexp(1.0, -48)), 1, 1, 0, 1},
       6},
      // BFLOAT16: 3, -Inf, NaN, -0.5.
      {DataType::kBfloat16, Bytes(std::vector<uint16_t>{0x4040, 0xFF80, 0x7FC0, 0xBF00}),
       {-0.5, 3, 1.25, std::sqrt(9.25), 1, 0, 1, 0}, 4},
      // FLOAT64: -1e300, 1e-310 (denormal), +Inf.
      {DataType::kFloat64, Bytes(std::vector<double>{-1e300, 1e-310, INFINITY}),
       {-1e300, 1e-310, (-1e300 + 1e-310) / 2, 1e300, 0, 1, 0, 0}, 3},
      // FLOAT64 near the top: neither the mean nor the norm overflows.
      {DataType::kFloat64, Bytes(std::vector<double>{1e308, 1e308}),
       {1e308, 1e308, 1e308, std::sqrt(2.0) * 1e308, 0, 0, 0, 0}, 2},
      // FP8E4M3FN: 1 (0x38), -448 (0xFE), NaN (0x7F), 0.
      {DataType::kFp8E4M3Fn, std::vector<uint8_t>{0x38, 0xFE, 0x7F, 0x00},
       {-448, 1, -447.0 / 3, std::sqrt(1 + 448.0 * 448), 1, 0, 0, 1}, 4},
      // FP8E8M0: 2^0 (127), 2^1 (128), NaN (0xFF).
      {DataType::kFp8E8M0, std::vector<uint8_t>{127, 128, 0xFF},
       {1, 2, 1.5, std::sqrt(5.0), 1, 0, 0, 0}, 3},
      // FP4E2M1 (two per byte, low nibble first): 6, -0.5 | 0, 1.5.
      {DataType::kFp4E2M1, std::vector<uint8_t>{0x97, 0x30},
       {-0.5, 6, 7.0 / 4, std::sqrt(36 + 0.25 + 2.25), 0, 0, 0, 1}, 4},
      // Integers: no non-finite values.
      {DataType::kInt32, Bytes(std::vector<int32_t>{-5, 0, 7}), {-5, 7, 2.0 / 3, std::sqrt(74.0), 0, 0, 0, 1}, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.dtype));
    Check(ComputeElementStats(c.dtype, c.bytes.data(), c.count), c.want, c.count);
  }
}

// Large float32 tensors go through the block path: blocks with and without
// NaN, Inf and zeros give what a plain loop over doubles gives.
TEST(TensorStatsTest, Float32BlocksMatchAPlainLoop) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (int special : {-1, 3, 300, 700, 1000}) {
    SCOPED_TRACE(special);
    std::vector<float> v(1000 + 37);
    for (float& x : v) x = dist(rng);
    if (special == 300) v[300] = 0.0f;
    if (special == 700) v[700] = NAN;
    if (special == 1000) v[1000] = -INFINITY;
    if (special == 3) v[3] = std::numeric_limits<float>::denorm_min();
    double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
    uint64_t finite = 0, nan = 0, ninf = 0, zeros = 0;
    for (float x : v) {
      if (std::isnan(x)) { ++nan; continue; }
      if (std::isinf(x)) { ++ninf; continue; }
      lo = std::min<double>(lo, x);
      hi = std::max<double>(hi, x);
      sum += x;
      sq += static_cast<double>(x) * x;
      zeros += x == 0;
      ++finite;
    }
    const auto b = Bytes(v);
    const ElementStats s = ComputeElementStats(DataType::kFloat32, b.data(), v.size());
    EXPECT_EQ(s.count, v.size());
    EXPECT_EQ(s.finite, finite);
    EXPECT_EQ(s.nan, nan);
    EXPECT_EQ(s.neg_inf, ninf);
    EXPECT_EQ(s.zeros, zeros);
    EXPECT_EQ(s.min, lo);
    EXPECT_EQ(s.max, hi);
    EXPECT_EQ(s.abs_max, std::max(std::fabs(lo), std::fabs(hi)));
    EXPECT_NEAR(s.mean(), sum / finite, 1e-9 * std::fabs(sum));
    EXPECT_NEAR(s.l2(), std::sqrt(sq), 1e-12 * std::sqrt(sq));
  }
}

TEST(TensorStatsTest, NothingFinite) {
  const std::vector<float> v = {NAN, NAN};
  const auto b = Bytes(v);
  const ElementStats s = ComputeElementStats(DataType::kFloat32, b.data(), 2);
  EXPECT_EQ(s.finite, 0u);
  EXPECT_EQ(s.nan, 2u);
  EXPECT_EQ(s.mean(), 0.0);
  EXPECT_EQ(s.min, 0.0);
  EXPECT_EQ(ComputeElementStats(DataType::kFloat32, b.data(), 0).count, 0u);
}

// HasNonFinite says what the full statistics say, for every dtype: each bit
// pattern of the narrow ones, and for float32/float64 a NaN or an infinity
// at each place around the 64-element blocks (first, last, alone in the
// tail), on a payload that is otherwise finite.
TEST(HasNonFiniteTest, AgreesWithTheStatsForEveryDtype) {
  for (int d = 0; d < kDataTypeCount; ++d) {
    const auto dtype = static_cast<DataType>(d);
    const uint32_t bytes = std::max<uint32_t>(1, ElementBits(dtype) / 8);
    if (bytes > 2) continue;
    // Every pattern of the element, alone and after 100 zero elements.
    const uint32_t patterns = bytes == 1 ? 256 : 65536;
    std::vector<uint8_t> one(bytes), padded(101 * bytes, 0);
    for (uint32_t p = 0; p < patterns; ++p) {
      std::memcpy(one.data(), &p, bytes);
      std::memcpy(padded.data() + 100 * bytes, &p, bytes);
      const uint64_t n = ElementBits(dtype) == 4 ? 2 : 1;  // FP4: both nibbles
      ASSERT_EQ(HasNonFinite(dtype, one.data(), n),
                ComputeElementStats(dtype, one.data(), n).has_nonfinite())
          << DataTypeName(dtype) << " pattern " << p;
      ASSERT_EQ(HasNonFinite(dtype, padded.data(), 100 + n),
                ComputeElementStats(dtype, padded.data(), 100 + n).has_nonfinite())
          << DataTypeName(dtype) << " pattern " << p << " after 100 zeros";
    }
  }
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::quiet_NaN()};
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0, 1e3);
  for (uint64_t n : {1u, 63u, 64u, 65u, 200u, 1000u}) {
    std::vector<float> f(n);
    std::vector<double> g(n);
    for (uint64_t i = 0; i < n; ++i) g[i] = f[i] = static_cast<float>(normal(rng));
    EXPECT_FALSE(HasNonFinite(DataType::kFloat32, Bytes(f).data(), n)) << n;
    EXPECT_FALSE(HasNonFinite(DataType::kFloat64, Bytes(g).data(), n)) << n;
    for (uint64_t at : {uint64_t{0}, n / 2, n - 1}) {
      for (double special : specials) {
        std::vector<float> f2 = f;
        std::vector<double> g2 = g;
        f2[at] = static_cast<float>(special);
        g2[at] = special;
        EXPECT_TRUE(HasNonFinite(DataType::kFloat32, Bytes(f2).data(), n)) << n << " at " << at;
        EXPECT_TRUE(HasNonFinite(DataType::kFloat64, Bytes(g2).data(), n)) << n << " at " << at;
        // Only the first `at` elements looked at: the special is not among them.
        EXPECT_FALSE(HasNonFinite(DataType::kFloat32, Bytes(f2).data(), at));
      }
    }
    // The largest finite values and denormals are finite.
    std::vector<float> edge(n, std::numeric_limits<float>::max());
    edge[0] = -std::numeric_limits<float>::max();
    edge[n - 1] = std::numeric_limits<float>::denorm_min();
    EXPECT_FALSE(HasNonFinite(DataType::kFloat32, Bytes(edge).data(), n));
  }
  // Integers never hold one, whatever their bits.
  const std::vector<uint32_t> ones(300, 0xFFFFFFFFu);
  EXPECT_FALSE(HasNonFinite(DataType::kInt32, Bytes(ones).data(), 300));
  EXPECT_FALSE(HasNonFinite(DataType::kUint64, Bytes(ones).data(), 150));
}

}  // namespace
}  // namespace argsdump
