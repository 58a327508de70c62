// The object store's addressing and segment objects, without a store:
// s3:// locations, and segments encoded, parsed back, and refused when
// damaged (DataLoss naming the key and byte).
#include "store/remote_captures.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

TEST(ObjectStoreUriTest, BucketAndPrefix) {
  auto u = ParseObjectStoreUri("s3://my-bucket/team/captures/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->bucket, "my-bucket");
  EXPECT_EQ(u->prefix, "team/captures/");
  u = ParseObjectStoreUri("s3://b.example");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->prefix, "");
  for (const char* bad : {"my-bucket/x", "s3://", "s3://AB", "s3://-bucket", "s3://bucket-",
                          "s3://ab", "s3://bucket/a//b", "s3://bucket/../x", "s3://bucket/a\nb",
                          "s3://bu_cket"}) {
    auto refused = ParseObjectStoreUri(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(refused.status().message(), "--object_store")) << bad;
  }
}

std::string Segment(const SegmentHeader& h, const std::string& journal, const std::string& bin) {
  return EncodeSegmentHeader(h, journal, bin) + journal + bin;
}

TEST(SegmentTest, RoundTrip) {
  SegmentHeader h;
  h.first_record = 10;
  h.records = 3;
  h.journal_offset = 4096;
  h.bin_offset = 192;
  const std::string object = Segment(h, "journal-bytes", "payload");
  absl::string_view journal, bin;
  auto parsed = ParseSegment(object, "k", &journal, &bin);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->first_record, 10u);
  EXPECT_EQ(parsed->records, 3u);
  EXPECT_EQ(parsed->journal_offset, 4096u);
  EXPECT_EQ(parsed->bin_offset, 192u);
  EXPECT_EQ(journal, "journal-bytes");
  EXPECT_EQ(bin, "payload");
}

TEST(SegmentTest, EveryDamageIsDataLossNamingTheKeyAndByte) {
  SegmentHeader h;
  h.records = 1;
  const std::string good = Segment(h, "journal", "bin");
  absl::string_view journal, bin;
  // Every single flipped byte and every cut is found.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    auto parsed = ParseSegment(bad, "p/c/segments/7.e1", &journal, &bin);
    ASSERT_FALSE(parsed.ok()) << "byte " << i;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), "p/c/segments/7.e1"));
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), "at byte "));
  }
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ParseSegment(good.substr(0, n), "k", &journal, &bin).ok()) << n;
  }
  EXPECT_FALSE(ParseSegment(good + "x", "k", &journal, &bin).ok());
}

}  // namespace
}  // namespace argsdump
