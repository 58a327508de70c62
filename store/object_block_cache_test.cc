// ObjectBlockCache against a real Ceph RGW (tests/testing/ceph_rgw): ranges
// across blocks, hits, LRU eviction within the capacity, an object changed
// under its readers, a short or missing object, and concurrent misses of
// one block fetched once.
#include "store/object_block_cache.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "s3/s3_client.h"
#include "tests/testing/ceph_rgw.h"

namespace argsdump {
namespace {

constexpr char kBucket[] = "block-cache";
constexpr uint64_t kBlock = 64 << 10;  // 1000-byte objects are one block

std::string Bytes(size_t size, uint32_t seed) {
  std::string out(size, '\0');
  uint32_t x = seed;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    out[i] = static_cast<char>(x >> 24);
  }
  return out;
}

class ObjectBlockCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rgw = SharedCephRgw();
    ASSERT_TRUE(rgw.ok()) << rgw.status();
    auto client = s3::S3Client::Create((*rgw)->ClientOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
    ASSERT_TRUE(client_->CreateBucket(kBucket).ok());
  }

  // Puts `bytes` under `key`; the object as a reader names it.
  StoredObject Put(const std::string& key, const std::string& bytes) {
    auto etag = client_->PutObject(kBucket, key, bytes);
    EXPECT_TRUE(etag.ok()) << etag.status();
    return StoredObject{key, etag.ok() ? *etag : "", bytes.size()};
  }

  std::unique_ptr<ObjectBlockCache> Cache(uint64_t capacity_blocks) {
    ObjectBlockCache::Options o;
    o.block_bytes = kBlock;
    o.capacity_bytes = capacity_blocks * kBlock;
    return std::make_unique<ObjectBlockCache>(client_.get(), kBucket, o);
  }

  std::unique_ptr<s3::S3Client> client_;
};

TEST_F(ObjectBlockCacheTest, RangesAcrossBlocksAreReadOnceThenFromTheCache) {
  const std::string bytes = Bytes(kBlock * 5 / 2, 1);  // 2.5 blocks
  const StoredObject object = Put("ranges/index", bytes);
  auto cache = Cache(8);
  struct Range {
    uint64_t offset, size;
  };
  for (const Range r : {Range{0, 10}, Range{kBlock - 3, 7}, Range{kBlock / 2, kBlock * 2},
                        Range{bytes.size() - 5, 5}, Range{0, bytes.size()}, Range{17, 0}}) {
    std::string out(r.size, '\0');
    ASSERT_TRUE(cache->Read(object, r.offset, r.size, out.data()).ok()) << r.offset;
    EXPECT_EQ(out, bytes.substr(r.offset, r.size)) << r.offset << "+" << r.size;
  }
  const ObjectBlockCache::Counters c = cache->counters();
  EXPECT_EQ(c.misses, 3u);
  EXPECT_GT(c.hits, 3u);
  EXPECT_EQ(c.bytes, bytes.size());
  EXPECT_EQ(c.evictions, 0u);
}

TEST_F(ObjectBlockCacheTest, TheLeastRecentlyUsedBlockGoesFirstWithinTheCapacity) {
  const std::string bytes = Bytes(kBlock * 4, 2);
  const StoredObject object = Put("lru/index", bytes);
  auto cache = Cache(2);
  char byte = 0;
  auto read_block = [&](uint64_t b) {
    ASSERT_TRUE(cache->Read(object, b * kBlock + 1, 1, &byte).ok());
    EXPECT_EQ(byte, bytes[b * kBlock + 1]);
  };
  read_block(0);
  read_block(1);
  read_block(0);  // 0 is now the most recent
  read_block(2);  // evicts 1
  EXPECT_EQ(cache->counters().evictions, 1u);
  EXPECT_LE(cache->counters().bytes, 2 * kBlock);
  const uint64_t misses = cache->counters().misses;
  read_block(0);
  EXPECT_EQ(cache->counters().misses, misses);  // kept
  read_block(1);
  EXPECT_EQ(cache->counters().misses, misses + 1);  // fetched again
}

TEST_F(ObjectBlockCacheTest, AnObjectChangedUnderItsReadersIsFailedPreconditionNamingTheKey) {
  const StoredObject before = Put("changed/index", Bytes(kBlock * 2, 3));
  auto cache = Cache(8);
  char byte = 0;
  ASSERT_TRUE(cache->Read(before, 0, 1, &byte).ok());
  const std::string now = Bytes(kBlock * 2, 4);
  const StoredObject after = Put("changed/index", now);
  ASSERT_NE(after.etag, before.etag);
  absl::Status s = cache->Read(before, kBlock, 1, &byte);  // a block not yet held
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "changed/index changed")) << s;
  // Under its new ETag the object reads as it is now; the old block stays
  // keyed by the old ETag and is never served for the new one.
  ASSERT_TRUE(cache->Read(after, 0, 1, &byte).ok());
  EXPECT_EQ(byte, now[0]);
}

TEST_F(ObjectBlockCacheTest, AShortMissingOrOverreadObjectIsAnError) {
  const std::string bytes = Bytes(1000, 5);
  StoredObject object = Put("short/index", bytes);
  auto cache = Cache(8);
  std::string out(2000, '\0');
  absl::Status past = cache->Read(object, 900, 200, out.data());
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_TRUE(absl::StrContains(past.message(), "short/index")) << past;
  // Named longer than it is (a damaged catalog row): refused, never read
  // past, also once the right name has its block in the cache.
  ASSERT_TRUE(cache->Read(object, 0, 10, out.data()).ok());
  StoredObject longer = object;
  longer.size = 2000;
  absl::Status s = cache->Read(longer, 1010, 20, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "short/index changed")) << s;
  s = cache->Read(longer, 0, 2000, out.data());
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "short/index")) << s;
  StoredObject missing{"short/none", "\"x\"", 10};
  EXPECT_EQ(cache->Read(missing, 0, 1, out.data()).code(), absl::StatusCode::kNotFound);
  // A failed fetch keeps nothing: the right name still reads.
  ASSERT_TRUE(cache->Read(object, 0, 1000, out.data()).ok());
  EXPECT_EQ(out.substr(0, 1000), bytes);
}

TEST_F(ObjectBlockCacheTest, ConcurrentMissesOfOneBlockFetchItOnce) {
  const std::string bytes = Bytes(kBlock, 6);
  const StoredObject object = Put("shared/index", bytes);
  auto cache = Cache(8);
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      std::string out(100, '\0');
      const uint64_t at = static_cast<uint64_t>(t) * 1000;
      if (!cache->Read(object, at, 100, out.data()).ok() || out != bytes.substr(at, 100)) {
        ++wrong;
      }
    });
  }
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(cache->counters().misses, 1u);
  EXPECT_EQ(cache->counters().hits, 7u);
}

}  // namespace
}  // namespace argsdump
