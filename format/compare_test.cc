#include "format/compare.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

std::string F32(const std::vector<float>& v) {
  std::string b(v.size() * 4, '\0');
  std::memcpy(&b[0], v.data(), b.size());
  return b;
}

TEST(CompareTest, KnownDifferencesGiveExactMetrics) {
  const std::string golden = F32({1, 2, 4, -8});
  const std::string actual = F32({1, 2.5f, 4, -6});
  const ElementDiff d = CompareElements(DataType::kFloat32, actual, DataType::kFloat32, golden, 4, Tolerance());
  EXPECT_EQ(d.compared, 4u);
  EXPECT_EQ(d.mismatches, 2u);
  EXPECT_EQ(d.nonfinite, 0u);
  EXPECT_DOUBLE_EQ(d.max_abs, 2.0);   // |-6 - -8|
  EXPECT_DOUBLE_EQ(d.max_rel, 0.25);  // 0.5 / 2 and 2 / 8
  const double dot = 1 + 5 + 16 + 48, aa = 1 + 6.25 + 16 + 36, gg = 1 + 4 + 16 + 64;
  EXPECT_DOUBLE_EQ(d.cosine, dot / (std::sqrt(aa) * std::sqrt(gg)));
  EXPECT_EQ(d.first_mismatch, 1u);
  EXPECT_EQ(d.first_actual, 2.5);
  EXPECT_EQ(d.first_golden, 2.0);
}

TEST(CompareTest, ToleranceIsNumpysIsclose) {
  const std::string golden = F32({100, 0});
  const std::string actual = F32({100.5f, 1e-4f});
  Tolerance t{1e-3, 1e-2};  // 100.5: 0.5 <= 1e-3 + 1 ; 1e-4 <= 1e-3
  ElementDiff d = CompareElements(DataType::kFloat32, actual, DataType::kFloat32, golden, 2, t);
  EXPECT_EQ(d.mismatches, 0u);
  EXPECT_TRUE(std::isinf(d.max_rel));  // golden 0, actual not
  t = Tolerance{1e-5, 1e-3};           // 0.5 > 1e-5 + 0.1; 1e-4 > 1e-5
  d = CompareElements(DataType::kFloat32, actual, DataType::kFloat32, golden, 2, t);
  EXPECT_EQ(d.mismatches, 2u);
  EXPECT_EQ(d.first_mismatch, 0u);
}

TEST(CompareTest, NonFiniteValuesMatchOnlyThemselves) {
  const std::string golden = F32({NAN, INFINITY, 1, -INFINITY, NAN});
  const std::string actual = F32({NAN, INFINITY, NAN, INFINITY, 0});
  const ElementDiff d = CompareElements(DataType::kFloat32, actual, DataType::kFloat32, golden, 5, Tolerance());
  EXPECT_EQ(d.mismatches, 3u);
  EXPECT_EQ(d.nonfinite, 3u);
  EXPECT_EQ(d.first_mismatch, 2u);
  EXPECT_EQ(d.max_abs, 0.0);  // finite pairs only: none left
  EXPECT_EQ(d.cosine, 1.0);
}

TEST(CompareTest, DifferentDtypesCompareValues) {
  // FLOAT16 1.0, 0.5, -2 (0x3C00, 0x3800, 0xC000) against float32.
  const uint16_t half[] = {0x3C00, 0x3800, 0xC000};
  const std::string actual(reinterpret_cast<const char*>(half), sizeof(half));
  const ElementDiff d =
      CompareElements(DataType::kFloat16, actual, DataType::kFloat32, F32({1, 0.5f, -2}), 3, Tolerance());
  EXPECT_EQ(d.mismatches, 0u);
  EXPECT_DOUBLE_EQ(d.cosine, 1.0);
  // All zeros on one side.
  const ElementDiff z =
      CompareElements(DataType::kFloat32, F32({0, 0}), DataType::kFloat32, F32({1, 0}), 2, Tolerance());
  EXPECT_EQ(z.cosine, 0.0);
}

TEST(CompareTest, ScalarTokens) {
  double v;
  ASSERT_TRUE(ScalarAsDouble("\"NaN\"", &v));
  EXPECT_TRUE(std::isnan(v));
  ASSERT_TRUE(ScalarAsDouble("\"-Infinity\"", &v));
  EXPECT_EQ(v, -INFINITY);
  ASSERT_TRUE(ScalarAsDouble("true", &v));
  EXPECT_EQ(v, 1.0);
  ASSERT_TRUE(ScalarAsDouble("0.25", &v));
  EXPECT_EQ(v, 0.25);
  EXPECT_FALSE(ScalarAsDouble("\"x\"", &v));
  EXPECT_EQ(CompareValues(1.0, 1.5, Tolerance()).mismatches, 1u);
}

}  // namespace
}  // namespace argsdump
