#include "store/payload_dedup.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

std::string Bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

std::vector<absl::string_view> Cut(absl::string_view s, std::vector<size_t> at) {
  std::vector<absl::string_view> out;
  size_t from = 0;
  for (size_t a : at) {
    out.push_back(s.substr(from, a - from));
    from = a;
  }
  out.push_back(s.substr(from));
  return out;
}

TEST(SamePayloadTest, ComparesBytesWhereverThePiecesAreCut) {
  const std::string a = Bytes(1000, 1);
  std::string b = a;
  const std::vector<absl::string_view> whole = {a};
  EXPECT_TRUE(SamePayload(whole, Cut(b, {1, 2, 500, 999})));
  EXPECT_TRUE(SamePayload(Cut(a, {0, 0, 700}), Cut(b, {300})));
  b[777] ^= 1;
  EXPECT_FALSE(SamePayload(whole, Cut(b, {500})));
  const std::vector<absl::string_view> shorter = {absl::string_view(a).substr(0, 999)};
  EXPECT_FALSE(SamePayload(whole, shorter));
  EXPECT_FALSE(SamePayload(shorter, whole));
}

TEST(PayloadIndexTest, KeyIsTheSameForTheSameBytesHoweverCut) {
  for (size_t n : {64, 100, 512, 513, 4096, 65536 + 7}) {
    const std::string a = Bytes(n, 7);
    const std::vector<absl::string_view> whole = {a};
    const PayloadIndex::Key k = PayloadIndex::KeyOf(whole, n);
    EXPECT_EQ(k, PayloadIndex::KeyOf(Cut(a, {1, n / 3, n / 2, n - 1}), n)) << n;
    // A change in a sampled place (the first and last bytes always are)
    // changes the key; the size is part of it.
    std::string b = a;
    b[0] ^= 1;
    EXPECT_FALSE(k == PayloadIndex::KeyOf(std::vector<absl::string_view>{b}, n)) << n;
    b = a;
    b[n - 1] ^= 1;
    EXPECT_FALSE(k == PayloadIndex::KeyOf(std::vector<absl::string_view>{b}, n)) << n;
  }
}

TEST(PayloadIndexTest, RemembersTheLastOffsetPerKey) {
  PayloadIndex index;
  const PayloadIndex::Key k{100, 5};
  EXPECT_FALSE(index.Find(k).has_value());
  index.Remember(k, 10);
  index.Remember(k, 20);
  EXPECT_EQ(index.Find(k), 20u);
  EXPECT_FALSE(index.Find(PayloadIndex::Key{101, 5}).has_value());
}

PayloadMap Map(uint64_t stream_begin, uint64_t stream_end, uint64_t stored_begin,
               std::vector<PayloadMap::Shared> shared) {
  PayloadMap m;
  m.stream_begin = stream_begin;
  m.stream_end = stream_end;
  m.stored_begin = stored_begin;
  m.shared = std::move(shared);
  return m;
}

TEST(PayloadMapTest, PlacesWrittenAndSharedPayloads) {
  // Stream [1000, 1400): 100 bytes written, 100 shared (stored at 50),
  // 100 written, 100 shared (stored at 700: written by this batch).
  const PayloadMap m = Map(1000, 1400, 600, {{1100, 100, 50}, {1300, 100, 700}});
  auto parsed = PayloadMap::Parse(m.Encode());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  bool shared = true;
  EXPECT_EQ(parsed->Place(1000, 100, &shared), 600u);
  EXPECT_FALSE(shared);
  EXPECT_EQ(parsed->Place(1100, 100, &shared), 50u);
  EXPECT_TRUE(shared);
  EXPECT_EQ(parsed->Place(1200, 100, &shared), 700u);
  EXPECT_FALSE(shared);
  EXPECT_EQ(parsed->Place(1300, 100, &shared), 700u);
  EXPECT_TRUE(shared);
  EXPECT_EQ(parsed->stored_end(), 800u);
  // Not placed: outside, inside a shared one, running into one, a size
  // that is not the shared one's.
  EXPECT_FALSE(parsed->Place(999, 1, &shared).has_value());
  EXPECT_FALSE(parsed->Place(1400, 1, &shared).has_value());
  EXPECT_FALSE(parsed->Place(1150, 10, &shared).has_value());
  EXPECT_FALSE(parsed->Place(1050, 100, &shared).has_value());
  EXPECT_FALSE(parsed->Place(1100, 99, &shared).has_value());
}

TEST(PayloadMapTest, ParseRefusesWhatCannotBeRight) {
  const std::string good = Map(0, 300, 0, {{100, 100, 0}}).Encode();
  ASSERT_TRUE(PayloadMap::Parse(good).ok());
  ASSERT_TRUE(PayloadMap::Parse(PayloadMap().Encode()).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(PayloadMap::Parse(good.substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(PayloadMap::Parse(good + "x").ok());
  EXPECT_FALSE(PayloadMap::Parse(Map(10, 5, 0, {}).Encode()).ok());
  // Pointing at bytes not stored before it (forward, or past what was).
  EXPECT_FALSE(PayloadMap::Parse(Map(0, 300, 0, {{100, 100, 50}}).Encode()).ok());
  EXPECT_FALSE(PayloadMap::Parse(Map(0, 300, 0, {{0, 100, 0}}).Encode()).ok());
  // Out of order, overlapping, outside the batch, empty.
  EXPECT_FALSE(
      PayloadMap::Parse(Map(0, 500, 1000, {{300, 100, 0}, {200, 100, 0}}).Encode()).ok());
  EXPECT_FALSE(
      PayloadMap::Parse(Map(0, 500, 1000, {{200, 100, 0}, {250, 100, 0}}).Encode()).ok());
  EXPECT_FALSE(PayloadMap::Parse(Map(0, 500, 1000, {{450, 100, 0}}).Encode()).ok());
  EXPECT_FALSE(PayloadMap::Parse(Map(0, 500, 1000, {{100, 0, 0}}).Encode()).ok());
  // A varint past 64 bits; an overflowing stored range.
  EXPECT_FALSE(PayloadMap::Parse(std::string(10, '\xff') + std::string(1, '\x01')).ok());
  EXPECT_FALSE(PayloadMap::Parse(Map(0, 10, ~uint64_t{0} - 5, {}).Encode()).ok());
}

}  // namespace
}  // namespace argsdump
