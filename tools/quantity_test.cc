#include "tools/quantity.h"

#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

constexpr int64_t kCentury = 36500 * kMillisecondsPerDay;

// The error text, or "" with *out set.
std::string Parse(const std::string& text, const Quantity& q, int64_t* out = nullptr) {
  absl::StatusOr<int64_t> v = ParseQuantity(text, q);
  if (!v.ok()) {
    EXPECT_TRUE(absl::IsInvalidArgument(v.status()));
    return std::string(v.status().message());
  }
  if (out != nullptr) *out = *v;
  return "";
}

TEST(QuantityTest, DurationsInUnitsOrPlainMilliseconds) {
  const Quantity ms = Quantity::Milliseconds(0, kCentury, "never");
  int64_t v = -1;
  for (const auto& [text, want] : std::vector<std::pair<std::string, int64_t>>{
           {"0", 0}, {"250", 250}, {"30s", 30000}, {"2m", 120000}, {"168h", 168 * 3600000LL},
           {"1h30m", 5400000}, {"1d", kMillisecondsPerDay}, {"1d2h3m4s5ms", 93784005},
           {"36500d", kCentury},
           {"3153600000000", kCentury}}) {
    ASSERT_EQ(Parse(text, ms, &v), "") << text;
    EXPECT_EQ(v, want) << text;
  }
  // A unit required: a bare number other than 0 is refused.
  const Quantity unit = Quantity::Duration(0, kCentury, "keep them");
  ASSERT_EQ(Parse("0", unit, &v), "");
  EXPECT_EQ(v, 0);
  EXPECT_NE(Parse("30", unit).find("'30' is not a duration (a whole number with a unit"),
            std::string::npos)
      << Parse("30", unit);
}

TEST(QuantityTest, OverTheMaximumInfNegativeAndGarbageAreRefusedWithTheRange) {
  const Quantity q = Quantity::Duration(0, kCentury, "keep them");
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"36501d", "'36501d' is over the maximum of 36500d"},
           {"3153600000001ms", "is over the maximum of 36500d"},
           // Past every integer: saturated, not wrapped.
           {"9223372036854775807s", "is over the maximum"},
           {"99999999999999999999999999h", "is over the maximum"},
           {"106751991167300d", "is over the maximum"},
           {"inf", "'inf' is not a number: give the maximum, 36500d"},
           {"INF", "is not a number"},
           {"-1h", "'-1h' is negative"},
           {"-0", "is negative"},
           {"", "is empty"},
           {"a week", "'a week' is not a duration"},
           {"1.5h", "is not a duration"},
           {"1 h", "is not a duration"},
           {"1h30", "is not a duration"},
           {"1d1d", "is not a duration"},
           {"30m1h", "is not a duration"},
           {"h", "is not a duration"},
           {"1y", "is not a duration"},
           {"+1h", "is not a duration"},
       }) {
    const std::string error = Parse(text, q);
    EXPECT_NE(error.find(why), std::string::npos) << text << ": " << error;
    EXPECT_NE(error.find("it takes 0..36500d (3153600000000ms); 0: keep them"), std::string::npos)
        << text << ": " << error;
  }
}

TEST(QuantityTest, ByteSizesAndCounts) {
  const Quantity bytes = Quantity::Bytes(64, int64_t{1} << 40);
  int64_t v = 0;
  ASSERT_EQ(Parse("4GiB", bytes, &v), "");
  EXPECT_EQ(v, int64_t{4} << 30);
  ASSERT_EQ(Parse("1TiB", bytes, &v), "");
  EXPECT_EQ(v, int64_t{1} << 40);
  ASSERT_EQ(Parse("64", bytes, &v), "");
  EXPECT_EQ(v, 64);
  EXPECT_NE(Parse("63", bytes).find("under the minimum of 64"), std::string::npos);
  EXPECT_NE(Parse("1099511627777", bytes).find("over the maximum of 1TiB"), std::string::npos);
  EXPECT_NE(Parse("4GB", bytes).find("is not a byte size"), std::string::npos);
  EXPECT_NE(Parse("1KiB1KiB", bytes).find("is not a byte size"), std::string::npos);
  const Quantity count = Quantity::Count(1, 64);
  ASSERT_EQ(Parse("64", count, &v), "");
  EXPECT_EQ(v, 64);
  EXPECT_NE(Parse("0", count).find("'0' is under the minimum of 1; it takes 1..64"),
            std::string::npos);
  EXPECT_NE(Parse("4k", count).find("is not a whole number (digits only)"), std::string::npos);
  EXPECT_NE(Parse("18446744073709551616", count).find("over the maximum of 64"),
            std::string::npos);
}

TEST(QuantityTest, FormatsInTheLargestExactUnit) {
  EXPECT_EQ(FormatQuantity(0, Quantity::kDuration), "0");
  EXPECT_EQ(FormatQuantity(90000, Quantity::kDuration), "90s");
  EXPECT_EQ(FormatQuantity(1500, Quantity::kDuration), "1500ms");
  EXPECT_EQ(FormatQuantity(int64_t{3} << 30, Quantity::kBytes), "3GiB");
  EXPECT_EQ(FormatQuantity(100, Quantity::kBytes), "100B");
  EXPECT_EQ(FormatQuantity(65536, Quantity::kCount), "65536");
}

}  // namespace
}  // namespace argsdump
