// An args.index written by WriteIndex, put in a real Ceph RGW
// (tests/testing/ceph_rgw) and opened ranged through an ObjectBlockCache:
// it answers as the local file does, a query by task GETs a few blocks
// and not the object, an object that is not what its reader was told is an
// error, and so is a gateway that went away; once it is back, the same
// IndexFile answers.
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "format/capture_index.h"
#include "format/record.h"
#include "gtest/gtest.h"
#include "s3/s3_client.h"
#include "store/object_block_cache.h"
#include "tests/testing/ceph_rgw.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

constexpr char kBucket[] = "ranged-index";
constexpr uint64_t kTasks = 20000;  // 60000 rows, about 11 MiB with stats

// kTasks tasks of 3 records each, arriving in a scattered order, with stats.
std::pair<RecordList, StatsTable> Capture() {
  RecordList rows;
  StatsTable stats;
  for (uint64_t n = 0; n < kTasks; ++n) {
    const uint64_t t = n * 7919 % kTasks;
    for (uint32_t a = 0; a < 3; ++a) {
      ManifestRow r;
      r.task_id = 1000 + t * 3;
      r.arg_index = a;
      r.stage = a < 2 ? v1::STAGE_BEFORE_DISPATCH : v1::STAGE_AFTER_COMPLETION;
      r.role = a < 2 ? v1::ROLE_INPUT : v1::ROLE_OUTPUT;
      r.kind = v1::KIND_TENSOR;
      r.dtype = v1::DTYPE_FLOAT32;
      r.func_count = 1;
      r.func_ids[0] = 0;
      r.ndims = 1;
      r.shape[0] = 8;
      r.strides[0] = 1;
      r.numel = 8;
      r.is_contiguous = true;
      r.bin_offset = rows.size() * 32;
      r.bin_size = 32;
      StatsRow s;
      s.present = true;
      s.count = 8;
      s.max = static_cast<double>(rows.size());
      stats.Add(rows.size(), s);
      rows.push_back(r);
    }
  }
  return {rows, stats};
}

uint64_t Task(uint64_t n) { return 1000 + n * 3; }

class RangedIndexRgwTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto [rows, stats] = Capture();
    v1::CaptureInfo info;
    info.set_name("ranged_index_rgw_test");
    v1::CaptureCounters counters;
    counters.set_total_args(rows.size());
    path_ = new std::string(TempPath("ranged_index_rgw_test.index"));
    ASSERT_TRUE(
        WriteIndex(*path_, info, counters, false, rows, ManifestOrder(rows), &stats).ok());
  }
  static void TearDownTestSuite() { delete path_; }

  void SetUp() override {
    auto rgw = SharedCephRgw();
    ASSERT_TRUE(rgw.ok()) << rgw.status();
    rgw_ = *rgw;
    s3::S3ClientOptions o;
    o.endpoint = rgw_->endpoint();
    o.region = rgw_->region();
    o.credentials = s3::Credentials{rgw_->access_key(), rgw_->secret_key(), ""};
    // A gateway that is gone is an answer soon, not after a minute of
    // retries.
    o.retry.max_attempts = 2;
    o.retry.initial_backoff = std::chrono::milliseconds(10);
    auto client = s3::S3Client::Create(o);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
    ASSERT_TRUE(client_->CreateBucket(kBucket).ok());
    bytes_ = ReadFileOrEmpty(*path_);
    ASSERT_GT(bytes_.size(), 10u << 20);
    auto local = IndexFile::Open(*path_);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = std::move(local).value();
  }

  StoredObject Put(const std::string& key, const std::string& bytes) {
    auto etag = client_->PutObject(kBucket, key, bytes);
    EXPECT_TRUE(etag.ok()) << etag.status();
    return StoredObject{key, etag.ok() ? *etag : "", bytes.size()};
  }

  std::unique_ptr<ObjectBlockCache> Cache() {
    ObjectBlockCache::Options o;
    o.block_bytes = IndexFile::kRangedBlockBytes;
    o.capacity_bytes = 64 << 20;
    return std::make_unique<ObjectBlockCache>(client_.get(), kBucket, o);
  }

  // The index `object` names, read through `cache`.
  absl::StatusOr<std::unique_ptr<IndexFile>> OpenRanged(ObjectBlockCache* cache,
                                                        const StoredObject& object) {
    return IndexFile::OpenRanged(
        object.key, object.size, [cache, object](uint64_t offset, uint64_t size, char* out) {
          return cache->Read(object, offset, size, out);
        });
  }

  static std::string* path_;
  CephRgw* rgw_ = nullptr;
  std::unique_ptr<s3::S3Client> client_;
  std::string bytes_;
  std::unique_ptr<IndexFile> local_;
};

std::string* RangedIndexRgwTest::path_ = nullptr;

void ExpectSameHits(const std::vector<QueryHit>& a, const std::vector<QueryHit>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].record_id, b[i].record_id);
    EXPECT_EQ(std::memcmp(&a[i].row, &b[i].row, sizeof(ManifestRow)), 0);
    EXPECT_EQ(a[i].manifest_index, b[i].manifest_index);
    ASSERT_EQ(a[i].stats.has_value(), b[i].stats.has_value());
    if (a[i].stats) {
      EXPECT_EQ(a[i].stats->max, b[i].stats->max);
    }
  }
}

TEST_F(RangedIndexRgwTest, QueriesByTaskGetAFewBlocksAndAnswerAsTheFile) {
  const StoredObject object = Put("a/args.index", bytes_);
  auto cache = Cache();
  auto f = OpenRanged(cache.get(), object);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(cache->counters().misses, 1u);
  EXPECT_EQ((*f)->size(), kTasks * 3);
  const uint64_t blocks = bytes_.size() / IndexFile::kRangedBlockBytes + 1;
  for (uint64_t n : {uint64_t{0}, uint64_t{9999}, kTasks - 1}) {
    ArgFilter q;
    q.task_id = Task(n);
    const uint64_t before = cache->counters().misses;
    const QueryPage page = (*f)->Query(q, 0, 100, 1000);
    ASSERT_TRUE(page.error.ok()) << page.error;
    ExpectSameHits(page.hits, local_->Query(q, 0, 100, 1000).hits);
    EXPECT_EQ(page.hits.size(), 3u);
    // Two searches over ~8 doublings of blocks per region, and the range.
    EXPECT_LE(cache->counters().misses - before, 30u) << "of " << blocks << " blocks";
  }
  EXPECT_LT((*f)->fetched_bytes(), bytes_.size() / 4);
  for (uint64_t id : {uint64_t{0}, uint64_t{31337}, kTasks * 3 - 1}) {
    auto hit = (*f)->HitById(id);
    ASSERT_TRUE(hit.ok()) << hit.status();
    ExpectSameHits({*hit}, {*local_->HitById(id)});
  }
  absl::Status error;
  ArgFilter outputs;
  outputs.role = v1::ROLE_OUTPUT;
  ExpectSameHits((*f)->ByArrival(outputs, 5000, 5300, &error),
                 local_->ByArrival(outputs, 5000, 5300));
  EXPECT_TRUE(error.ok()) << error;
}

TEST_F(RangedIndexRgwTest, AnObjectThatIsNotTheOneNamedIsAnError) {
  // Stored short: the reader was told the whole index's size.
  const StoredObject whole = Put("short/args.index", bytes_);
  const StoredObject cut = Put("short/args.index", bytes_.substr(0, bytes_.size() - 4096));
  auto cache = Cache();
  auto f = OpenRanged(cache.get(), StoredObject{cut.key, cut.etag, whole.size});
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(f.status())) << f.status();
  // Opened, then replaced under its reader: what was fetched still
  // answers, what was not is an error.
  const StoredObject first = Put("replaced/args.index", bytes_);
  auto g = OpenRanged(cache.get(), first);
  ASSERT_TRUE(g.ok()) << g.status();
  std::string other = bytes_;
  other[bytes_.size() / 2] ^= 1;
  Put("replaced/args.index", other);
  ArgFilter q;
  q.task_id = Task(123);
  const QueryPage page = (*g)->Query(q, 0, 100, 1000);
  EXPECT_TRUE(absl::IsFailedPrecondition(page.error)) << page.error;
  EXPECT_TRUE(page.hits.empty());
}

// Last (gtest runs them in order): the gateway goes away and comes back.
TEST_F(RangedIndexRgwTest, ZzGatewayGoneIsAnErrorUntilItIsBack) {
  const StoredObject object = Put("gone/args.index", bytes_);
  auto cache = Cache();
  auto f = OpenRanged(cache.get(), object);
  ASSERT_TRUE(f.ok()) << f.status();
  ArgFilter cached, other;
  cached.task_id = Task(17);
  other.task_id = Task(18000);
  const QueryPage before = (*f)->Query(cached, 0, 100, 1000);
  ASSERT_TRUE(before.error.ok()) << before.error;
  ASSERT_TRUE(rgw_->StopGateway().ok());
  // What was fetched still answers; what was not is the client's error.
  ExpectSameHits((*f)->Query(cached, 0, 100, 1000).hits, before.hits);
  QueryPage page = (*f)->Query(other, 0, 100, 1000);
  EXPECT_TRUE(absl::IsUnavailable(page.error)) << page.error;
  EXPECT_TRUE(page.hits.empty());
  auto hit = (*f)->HitById(40000);
  EXPECT_TRUE(absl::IsUnavailable(hit.status())) << hit.status();
  ASSERT_TRUE(rgw_->StartGateway().ok());
  page = (*f)->Query(other, 0, 100, 1000);
  ASSERT_TRUE(page.error.ok()) << page.error;
  ExpectSameHits(page.hits, local_->Query(other, 0, 100, 1000).hits);
}

}  // namespace
}  // namespace argsdump
