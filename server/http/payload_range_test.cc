// Which bytes of a payload are sent for each way of asking.
#include "server/http/payload_range.h"

#include "gtest/gtest.h"

namespace argsdump {
namespace {

constexpr uint64_t kSize = 100;

TEST(PayloadRangeTest, NothingAskedIsTheWholePayload) {
  const PayloadRange r = ResolvePayloadRange(kSize, std::nullopt, std::nullopt, {});
  EXPECT_EQ(r.error_status, 0);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.length, kSize);
  EXPECT_EQ(r.provided, kSize);
  EXPECT_FALSE(r.serves_range);
}

TEST(PayloadRangeTest, OffsetAndLengthAreCutToThePayload) {
  PayloadRange r = ResolvePayloadRange(kSize, 10, 20, {});
  EXPECT_EQ(r.error_status, 0);
  EXPECT_EQ(r.begin, 10u);
  EXPECT_EQ(r.length, 20u);
  EXPECT_EQ(r.provided, 20u);
  EXPECT_FALSE(r.serves_range);
  r = ResolvePayloadRange(kSize, 90, 0, {});  // length 0: to the end
  EXPECT_EQ(r.length, 10u);
  r = ResolvePayloadRange(kSize, std::nullopt, 500, {});
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.length, kSize);
  r = ResolvePayloadRange(kSize, kSize, std::nullopt, {});  // at the end: nothing
  EXPECT_EQ(r.error_status, 0);
  EXPECT_EQ(r.length, 0u);
}

TEST(PayloadRangeTest, AnOffsetPastTheEndIs400) {
  const PayloadRange r = ResolvePayloadRange(kSize, kSize + 1, std::nullopt, {});
  EXPECT_EQ(r.error_status, 400);
  EXPECT_EQ(r.error, "offset=101 is past the payload's 100 bytes");
}

TEST(PayloadRangeTest, ARangeAndOffsetsTogetherAre400) {
  const PayloadRange r = ResolvePayloadRange(kSize, 1, std::nullopt, {{0, 5}});
  EXPECT_EQ(r.error_status, 400);
  EXPECT_EQ(r.error, "give a Range header or offset=/length=, not both");
}

TEST(PayloadRangeTest, OneRangeIsServedOverTheWholePayload) {
  PayloadRange r = ResolvePayloadRange(kSize, std::nullopt, std::nullopt, {{10, 19}});
  EXPECT_EQ(r.error_status, 0);
  EXPECT_TRUE(r.serves_range);
  EXPECT_EQ(r.begin, 10u);
  EXPECT_EQ(r.length, 10u);
  EXPECT_EQ(r.provided, kSize);
  r = ResolvePayloadRange(kSize, std::nullopt, std::nullopt, {{90, 500}});  // cut at the end
  EXPECT_EQ(r.begin, 90u);
  EXPECT_EQ(r.length, 10u);
  r = ResolvePayloadRange(kSize, std::nullopt, std::nullopt, {{95, -1}});  // bytes=95-
  EXPECT_EQ(r.begin, 95u);
  EXPECT_EQ(r.length, 5u);
  r = ResolvePayloadRange(kSize, std::nullopt, std::nullopt, {{-1, 30}});  // bytes=-30
  EXPECT_EQ(r.begin, 70u);
  EXPECT_EQ(r.length, 30u);
  r = ResolvePayloadRange(kSize, std::nullopt, std::nullopt, {{-1, 500}});  // longer suffix
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.length, kSize);
}

TEST(PayloadRangeTest, UnsatisfiableRangesAre416) {
  const struct {
    ByteRanges ranges;
    const char* why;
  } cases[] = {
      {{{0, 1}, {5, 6}}, "one byte range per request"},
      {{{100, 200}}, "the range starts past the payload's 100 bytes"},
      {{{20, 10}}, "the range starts past the payload's 100 bytes"},
      {{{-1, 0}}, "the range is empty"},
  };
  for (const auto& c : cases) {
    const PayloadRange r = ResolvePayloadRange(kSize, std::nullopt, std::nullopt, c.ranges);
    EXPECT_EQ(r.error_status, 416) << c.why;
    EXPECT_EQ(r.error, c.why);
    EXPECT_FALSE(r.serves_range);
  }
  // An empty payload has no byte a range can start at.
  EXPECT_EQ(ResolvePayloadRange(0, std::nullopt, std::nullopt, {{0, -1}}).error_status, 416);
}

}  // namespace
}  // namespace argsdump
