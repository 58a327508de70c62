// CaptureHub over an object store and a catalog: a real Ceph RGW and a real
// PostgreSQL, booted by the test. Appends are acknowledged once committed;
// a restart on an empty scratch disk resumes a live capture from the store;
// a sealed capture's files in the store are byte for byte those a local
// capture of the same appends has, and are served from there; failures of
// the store and the catalog fail appends without losing what was
// acknowledged; damaged objects are DataLoss naming the key; orphans are
// collected.
#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "catalog/catalog.h"
#include "gtest/gtest.h"
#include "s3/s3_client.h"
#include "server/capture_hub.h"
#include "server/capture_hub_testing.h"
#include "store/remote_captures.h"
#include "tests/testing/ceph_rgw.h"
#include "tests/testing/postgres_server.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

PostgresServer* SharedPostgres() {
  auto server = SharedPostgresServer();
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *server : nullptr;
}

// One bucket and one database per test.
class RemoteHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> serial{0};
    const int n = serial++;
    auto rgw = SharedCephRgw();
    ASSERT_TRUE(rgw.ok()) << rgw.status();
    rgw_ = *rgw;
    pg_ = SharedPostgres();
    ASSERT_NE(pg_, nullptr);
    bucket_ = absl::StrCat("hub-", ::getpid(), "-", n);
    auto db = pg_->CreateDatabase(absl::StrCat("hub_", n));
    ASSERT_TRUE(db.ok()) << db.status();
    catalog_uri_ = *db;
    auto client = Client(absl::Seconds(60));
    ASSERT_TRUE(client->CreateBucket(bucket_).ok());
    root_ = TempPath(absl::StrCat("remote_hub_", n));
  }

  std::unique_ptr<s3::S3Client> Client(absl::Duration deadline) {
    s3::S3ClientOptions o = rgw_->ClientOptions();
    o.retry.total_deadline = absl::ToChronoMilliseconds(deadline);
    o.retry.max_backoff = std::chrono::milliseconds(200);
    auto c = s3::S3Client::Create(std::move(o));
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(c).value();
  }

  // The store with a retry deadline of `deadline` (short for the tests
  // that take it away).
  std::unique_ptr<RemoteCaptures> Remote(const std::string& root,
                                         absl::Duration deadline = absl::Seconds(60),
                                         bool copy_parts = false) {
    Catalog::Options co;
    co.pg.uri = catalog_uri_;
    co.pg.connect_timeout = absl::Seconds(2);
    auto catalog = Catalog::Open(co);
    EXPECT_TRUE(catalog.ok()) << catalog.status();
    if (!catalog.ok()) return nullptr;
    RemoteCaptures::Options o;
    o.location.bucket = bucket_;
    o.location.prefix = "captures/";
    o.copy_parts = copy_parts;
    auto remote = RemoteCaptures::Open(Client(deadline), std::move(catalog).value(), o);
    EXPECT_TRUE(remote.ok()) << remote.status();
    return remote.ok() ? std::move(remote).value() : nullptr;
  }

  std::unique_ptr<CaptureHub> Hub(const std::string& root, RemoteCaptures* remote,
                                  absl::Duration group_delay = absl::ZeroDuration(),
                                  uint64_t group_bytes = 8 << 20) {
    CaptureHub::Options o;
    o.root = root;
    o.remote = remote;
    o.group_commit_delay = group_delay;
    o.group_commit_bytes = group_bytes;
    o.gc_every = absl::ZeroDuration();
    auto hub = CaptureHub::Open(o);
    EXPECT_TRUE(hub.ok()) << hub.status();
    return hub.ok() ? std::move(hub).value() : nullptr;
  }

  std::string Object(const std::string& key) {
    auto got = Client(absl::Seconds(60))->GetObjectToString(bucket_, key, {}, 1 << 30);
    EXPECT_TRUE(got.ok()) << key << ": " << got.status();
    return got.ok() ? *got : "";
  }

  // The key of a sealed capture's file (under the epoch that sealed it);
  // "" when there is none.
  std::string SealedKey(const std::string& name, const std::string& file) {
    for (const std::string& key : Keys("captures/" + name + "/")) {
      if (absl::EndsWith(key, "/args_dump/" + file)) return key;
    }
    return "";
  }

  std::vector<std::string> Keys(const std::string& prefix) {
    std::vector<std::string> keys;
    auto page = Client(absl::Seconds(60))->ListObjectsV2(bucket_, prefix);
    EXPECT_TRUE(page.ok()) << page.status();
    if (page.ok()) {
      for (const auto& o : page->objects) keys.push_back(o.key);
    }
    return keys;
  }

  // The same appends into a local hub, finished: what the store's copy
  // must equal byte for byte.
  std::string LocalTwin(const std::string& name, const std::vector<int>& job_sizes) {
    const std::string root = root_ + "-local";
    CaptureHub::Options o;
    o.root = root;
    auto hub = CaptureHub::Open(o);
    EXPECT_TRUE(hub.ok()) << hub.status();
    auto c = (*hub)->Open(OpenRequest(name));
    EXPECT_TRUE(c.ok()) << c.status();
    Waiter w;
    uint64_t records = 0, offset = 0, task = 0;
    for (int n : job_sizes) {
      (*c)->Append(Job(records, task, n, &offset), w.Callback());
      records += 2 * n;
      task += n;
    }
    (*c)->Finish({}, w.Callback());
    for (const Outcome& s : w.Wait()) EXPECT_TRUE(s.ok()) << s;
    return root + "/" + name + "/args_dump";
  }

  void ExpectSameAsLocal(const std::string& name, const std::vector<int>& job_sizes) {
    const std::string local = LocalTwin(name, job_sizes);
    for (const char* file : {kBinName, kIndexName, kManifestName}) {
      auto want = ReadFileToString(local + "/" + file, 1 << 30);
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_TRUE(Object(SealedKey(name, file)) == *want)
          << file << " differs from the local capture's";
    }
  }

  CephRgw* rgw_ = nullptr;
  PostgresServer* pg_ = nullptr;
  std::string bucket_;
  std::string catalog_uri_;
  std::string root_;
};

// Appends the jobs of `sizes` (tasks of one tensor and one scalar each)
// from record `*records` on; every callback's outcome.
std::vector<Outcome> AppendAll(HubCapture& c, const std::vector<int>& sizes, uint64_t* records,
                               uint64_t* offset, uint64_t* task) {
  Waiter w;
  for (int n : sizes) {
    c.Append(Job(*records, *task, n, offset), w.Callback());
    *records += 2 * n;
    *task += n;
  }
  return w.Wait();
}

// Opens `name` on `hub`, appends the jobs of `sizes` (every one
// acknowledged) and finishes it.
void Seal(CaptureHub& hub, const std::string& name, const std::vector<int>& sizes) {
  auto c = hub.Open(OpenRequest(name));
  ASSERT_TRUE(c.ok()) << c.status();
  uint64_t records = 0, offset = 0, task = 0;
  for (const Outcome& s : AppendAll(**c, sizes, &records, &offset, &task)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
}

TEST_F(RemoteHubTest, AcknowledgedOnceCommittedSealedByteForByteAndServedFromTheStore) {
  auto remote = Remote(root_);
  ASSERT_NE(remote, nullptr);
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  auto c = hub->Open(OpenRequest("run"));
  ASSERT_TRUE(c.ok()) << c.status();
  uint64_t records = 0, offset = 0, task = 0;
  for (const Outcome& s : AppendAll(**c, {3, 1, 5}, &records, &offset, &task)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  // Acknowledged means committed: the catalog's watermark is the hub's.
  auto row = remote->catalog().Get("run");
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->state, v1::CAPTURE_STATE_LIVE);
  EXPECT_EQ(row->committed_records, records);
  EXPECT_EQ((*c)->durable().records, records);
  EXPECT_FALSE(Keys("captures/run/segments/").empty());

  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  // Sealed: finished in the catalog, the segments gone, the scratch copy gone.
  row = remote->catalog().Get("run");
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->state, v1::CAPTURE_STATE_FINISHED);
  EXPECT_TRUE(Keys("captures/run/segments/").empty());
  struct stat st;
  EXPECT_NE(::stat((root_ + "/run").c_str(), &st), 0);
  ExpectSameAsLocal("run", {3, 1, 5});

  // Served from the store: a query by task, a record, its payload.
  auto found = hub->Find("run");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE((*found)->bin_path().empty());
  ArgFilter by_task;
  by_task.task_id = 4;
  QueryPage page = (*found)->Query(by_task, 0, 10, 1000);
  ASSERT_EQ(page.hits.size(), 2u);
  auto hit = (*found)->HitById(page.hits[0].record_id);
  ASSERT_TRUE(hit.ok()) << hit.status();
  std::string payload;
  const ManifestRow& r = hit->row.bin_size > 0 ? hit->row : page.hits[1].row;
  ASSERT_TRUE((*found)
                  ->ReadBin(r.bin_offset, r.bin_size,
                            [&](std::string_view piece) {
                              payload.append(piece.data(), piece.size());
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(payload, std::string(64, static_cast<char>(4)));
  EXPECT_EQ((*found)->Summary().records(), records);
}

// Appends go on while a segment uploads: what was appended meanwhile is
// the next segment, so forty queued appends take far fewer commits, and
// every one is acknowledged with the catalog's watermark at or past it.
TEST_F(RemoteHubTest, AppendsMadeDuringACommitShareTheNextSegment) {
  auto remote = Remote(root_);
  ASSERT_NE(remote, nullptr);
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  auto c = hub->Open(OpenRequest("grouped"));
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<int> sizes(40, 3);
  uint64_t records = 0, offset = 0, task = 0;
  for (const Outcome& s : AppendAll(**c, sizes, &records, &offset, &task)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  auto segments = remote->catalog().Segments("grouped");
  ASSERT_TRUE(segments.ok()) << segments.status();
  EXPECT_LT(segments->size(), sizes.size() / 2);
  uint64_t next = 0;
  for (const CatalogSegment& g : *segments) {
    EXPECT_EQ(g.first_record, next);  // in order, none twice
    next += g.record_count;
  }
  EXPECT_EQ(next, records);
  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  ExpectSameAsLocal("grouped", sizes);
}

// --group_commit_bytes bounds a segment (at append boundaries; one append
// larger than it goes alone), and the least time between two commits
// (--group_commit_ms) never holds up a finish.
TEST_F(RemoteHubTest, GroupBytesBoundASegmentAndTheDelayNeverHoldsUpAFinish) {
  auto remote = Remote(root_);
  ASSERT_NE(remote, nullptr);
  // A job of 3 tasks is 3 x 64 payload bytes and 6 records: three such
  // jobs fill the bound.
  const uint64_t bound = 3 * (3 * 64 + 6 * PreparedRecords::kRecordEntryGuess);
  auto hub = Hub(root_, remote.get(), absl::Hours(1), bound);
  ASSERT_NE(hub, nullptr);
  auto c = hub->Open(OpenRequest("bounded"));
  ASSERT_TRUE(c.ok()) << c.status();
  uint64_t records = 0, offset = 0, task = 0;
  // The first commit goes at once; the hour's delay then holds the next
  // until the group is full: the appends after the first go in segments of
  // three.
  for (const Outcome& s : AppendAll(**c, {3}, &records, &offset, &task)) EXPECT_TRUE(s.ok()) << s;
  const std::vector<int> sizes(9, 3);
  for (const Outcome& s : AppendAll(**c, sizes, &records, &offset, &task)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  auto segments = remote->catalog().Segments("bounded");
  ASSERT_TRUE(segments.ok()) << segments.status();
  ASSERT_EQ(segments->size(), 4u);
  EXPECT_EQ((*segments)[0].record_count, 6u);
  for (size_t i = 1; i < segments->size(); ++i) EXPECT_EQ((*segments)[i].record_count, 18u) << i;
  // One more append, held by the delay (the group is not full): the finish
  // commits it at once.
  Waiter held;
  (*c)->Append(Job(records, task, 1, &offset), held.Callback());
  records += 2;
  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : held.Wait()) EXPECT_TRUE(s.ok()) << s;
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  auto row = remote->catalog().Get("bounded");
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->state, v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(row->committed_records, records);
}

TEST_F(RemoteHubTest, ARestartOnAnEmptyDiskResumesTheLiveCaptureFromTheStore) {
  uint64_t records = 0, offset = 0, task = 0;
  {
    auto remote = Remote(root_);
    auto hub = Hub(root_, remote.get());
    ASSERT_NE(hub, nullptr);
    auto c = hub->Open(OpenRequest("resumed"));
    ASSERT_TRUE(c.ok()) << c.status();
    for (const Outcome& s : AppendAll(**c, {2, 4}, &records, &offset, &task)) {
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  // The server's disk is gone: a new one, empty.
  const std::string fresh = root_ + "-fresh";
  auto remote = Remote(fresh);
  auto hub = Hub(fresh, remote.get());
  ASSERT_NE(hub, nullptr);
  auto c = hub->Open(OpenRequest("resumed", /*resume=*/true));
  ASSERT_TRUE(c.ok()) << c.status();
  Waiter opened;
  (*c)->Barrier(opened.Callback());
  for (const Outcome& s : opened.Wait()) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(opened.last().records, records);
  EXPECT_EQ(opened.last().bin_bytes, offset);
  for (const Outcome& s : AppendAll(**c, {3}, &records, &offset, &task)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  ExpectSameAsLocal("resumed", {2, 4, 3});
  // And once more on another empty disk: listed from the catalog, served.
  const std::string third = root_ + "-third";
  auto remote3 = Remote(third);
  auto hub3 = Hub(third, remote3.get());
  ASSERT_NE(hub3, nullptr);
  auto found = hub3->Find("resumed");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE((*found)->finished());
  EXPECT_EQ((*found)->Summary().records(), records);
  ArgFilter all;
  EXPECT_EQ((*found)->Query(all, 0, 100, 1000).hits.size(), records);
}

// A server whose capture another took over (a restart elsewhere while it
// still ran) is fenced out of sealing it: the finished capture's objects
// stay the ones the new owner sealed, and the old server, told the capture
// finished, serves it from the store and keeps no scratch copy of it.
TEST_F(RemoteHubTest, AFencedOutServerNeitherSealsNorOverwritesTheFinishedCapture) {
  auto remote_a = Remote(root_);
  auto hub_a = Hub(root_, remote_a.get());
  ASSERT_NE(hub_a, nullptr);
  auto a = hub_a->Open(OpenRequest("taken"));
  ASSERT_TRUE(a.ok()) << a.status();
  uint64_t records = 0, offset = 0, task = 0;
  for (const Outcome& s : AppendAll(**a, {2}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
  // Another server takes it over from the store and finishes it.
  const std::string other = root_ + "-other";
  auto remote_b = Remote(other);
  auto hub_b = Hub(other, remote_b.get());
  ASSERT_NE(hub_b, nullptr);
  auto b = hub_b->Open(OpenRequest("taken", /*resume=*/true));
  ASSERT_TRUE(b.ok()) << b.status();
  Waiter sealed;
  (*b)->Finish({}, sealed.Callback());
  for (const Outcome& s : sealed.Wait()) ASSERT_TRUE(s.ok()) << s;
  const std::string manifest_key = SealedKey("taken", "args_dump.json");
  const std::string manifest = Object(manifest_key);
  ASSERT_FALSE(manifest.empty());
  // The first server's client finishes it too, with other counters.
  v1::CaptureCounters device;
  device.set_dropped_records(7);
  Waiter fenced;
  (*a)->Finish(device, fenced.Callback());
  fenced.Wait();
  EXPECT_EQ(Object(manifest_key), manifest);
  Waiter again;
  (*a)->Finish(device, again.Callback());
  for (const Outcome& s : again.Wait()) EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE((*a)->finished());
  EXPECT_EQ(Object(manifest_key), manifest);
  struct stat st;
  EXPECT_NE(::stat((root_ + "/taken").c_str(), &st), 0);
  auto found = hub_a->Find("taken");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)->Summary().records(), records);
}

TEST_F(RemoteHubTest, AStoreThatGoesAwayFailsAppendsAndLosesNothingAcknowledged) {
  auto remote = Remote(root_, absl::Seconds(2));
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  auto c = hub->Open(OpenRequest("outage"));
  ASSERT_TRUE(c.ok()) << c.status();
  uint64_t records = 0, offset = 0, task = 0;
  for (const Outcome& s : AppendAll(**c, {2}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
  const uint64_t acked = records, acked_bytes = offset;
  ASSERT_TRUE(rgw_->StopGateway().ok());
  uint64_t lost_records = records, lost_offset = offset, lost_task = task;
  std::vector<Outcome> failed = AppendAll(**c, {3}, &lost_records, &lost_offset, &lost_task);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].code, absl::StatusCode::kUnavailable) << failed[0];
  ASSERT_TRUE(rgw_->StartGateway().ok());
  // The resume's barrier rebuilds the scratch files from what was committed.
  Waiter opened;
  (*c)->Barrier(opened.Callback());
  for (const Outcome& s : opened.Wait()) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(opened.last().records, acked);
  EXPECT_EQ(opened.last().bin_bytes, acked_bytes);
  for (const Outcome& s : AppendAll(**c, {3, 1}, &records, &offset, &task)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  ExpectSameAsLocal("outage", {2, 3, 1});
}

// A rebuild after a failed commit that finds a committed segment damaged
// says DataLoss naming the segment (retrying cannot help), not Unavailable.
TEST_F(RemoteHubTest, ARebuildThatFindsADamagedSegmentIsDataLoss) {
  auto remote = Remote(root_, absl::Seconds(2));
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  auto c = hub->Open(OpenRequest("rotten"));
  ASSERT_TRUE(c.ok()) << c.status();
  uint64_t records = 0, offset = 0, task = 0;
  for (const Outcome& s : AppendAll(**c, {2}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
  std::vector<std::string> segments = Keys("captures/rotten/segments/");
  ASSERT_EQ(segments.size(), 1u);
  std::string seg = Object(segments[0]);
  seg[seg.size() - 1] ^= 1;
  ASSERT_TRUE(Client(absl::Seconds(60))->PutObject(bucket_, segments[0], seg).ok());
  ASSERT_TRUE(rgw_->StopGateway().ok());
  std::vector<Outcome> failed = AppendAll(**c, {1}, &records, &offset, &task);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].code, absl::StatusCode::kUnavailable) << failed[0];
  ASSERT_TRUE(rgw_->StartGateway().ok());
  Waiter rebuilt;
  (*c)->Barrier(rebuilt.Callback());
  std::vector<Outcome> outcome = rebuilt.Wait();
  ASSERT_EQ(outcome.size(), 1u);
  EXPECT_EQ(outcome[0].code, absl::StatusCode::kDataLoss) << outcome[0];
  EXPECT_TRUE(absl::StrContains(outcome[0].message, segments[0])) << outcome[0];
}

TEST_F(RemoteHubTest, ACatalogRestartFailsAppendsUntilItIsBack) {
  auto remote = Remote(root_, absl::Seconds(2));
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  auto c = hub->Open(OpenRequest("pg"));
  ASSERT_TRUE(c.ok()) << c.status();
  uint64_t records = 0, offset = 0, task = 0;
  for (const Outcome& s : AppendAll(**c, {2}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(pg_->Stop().ok());
  uint64_t r2 = records, o2 = offset, t2 = task;
  std::vector<Outcome> failed = AppendAll(**c, {1}, &r2, &o2, &t2);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].code, absl::StatusCode::kUnavailable) << failed[0];
  ASSERT_TRUE(pg_->Restart().ok()) << pg_->LogTail();
  Waiter opened;
  (*c)->Barrier(opened.Callback());
  for (const Outcome& s : opened.Wait()) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(opened.last().records, records);
  for (const Outcome& s : AppendAll(**c, {4}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  ExpectSameAsLocal("pg", {2, 4});
}

// A deletion the catalog could not take leaves the capture as it was:
// listed and served once the catalog is back, and deleted when asked again.
TEST_F(RemoteHubTest, ADeletionTheCatalogRefusedLeavesTheCaptureServed) {
  auto remote = Remote(root_, absl::Seconds(2));
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  ASSERT_NO_FATAL_FAILURE(Seal(*hub, "kept", {2}));
  ASSERT_TRUE(pg_->Stop().ok());
  auto refused = hub->Delete("kept", "deleted by the test");
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  ASSERT_TRUE(pg_->Restart().ok()) << pg_->LogTail();
  auto found = hub->Find("kept");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)->Summary().records(), 4u);  // two tasks of two records
  bool more = false;
  EXPECT_EQ(hub->List({}, v1::CAPTURE_STATE_UNSPECIFIED, "", 10, &more).size(), 1u);
  auto freed = hub->Delete("kept", "deleted by the test");
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_TRUE(Keys("captures/kept/").empty());
}

// Sealed captures whose objects were damaged afterwards: each read says
// DataLoss naming the key, and nothing crashes.
TEST_F(RemoteHubTest, DamagedObjectsAreDataLossNamingTheKey) {
  {
    auto remote = Remote(root_);
    auto hub = Hub(root_, remote.get());
    ASSERT_NE(hub, nullptr);
    for (const char* name : {"garbled", "short"}) {
      ASSERT_NO_FATAL_FAILURE(Seal(*hub, name, {4}));
    }
  }
  auto client = Client(absl::Seconds(60));
  const std::string index_key = SealedKey("garbled", "args.index");
  std::string index = Object(index_key);
  index[index.size() / 2] ^= 0x5a;
  index.resize(index.size() - 3);
  ASSERT_TRUE(client->PutObject(bucket_, index_key, index).ok());
  const std::string bin_key = SealedKey("short", "args.bin");
  ASSERT_TRUE(client->PutObject(bucket_, bin_key, Object(bin_key).substr(0, 100)).ok());

  const std::string fresh = root_ + "-fresh";
  auto remote = Remote(fresh);
  auto hub = Hub(fresh, remote.get());
  ASSERT_NE(hub, nullptr);
  auto garbled = hub->Find("garbled");
  ASSERT_FALSE(garbled.ok());
  EXPECT_EQ(garbled.status().code(), absl::StatusCode::kDataLoss) << garbled.status();
  EXPECT_TRUE(absl::StrContains(garbled.status().message(), index_key)) << garbled.status();

  auto shortened = hub->Find("short");
  ASSERT_TRUE(shortened.ok()) << shortened.status();
  auto last = (*shortened)->HitById(6);
  ASSERT_TRUE(last.ok()) << last.status();
  absl::Status read = (*shortened)->ReadBin(last->row.bin_offset, last->row.bin_size,
                                            [](std::string_view) { return absl::OkStatus(); });
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss) << read;
  EXPECT_TRUE(absl::StrContains(read.message(), bin_key)) << read;
}

// A finished capture's index is read from the store block by block as
// queries need it: damage inside it is DataLoss when a query reaches it
// (never a wrong answer), and a store that is away is UNAVAILABLE until it
// is back, for the same capture.
TEST_F(RemoteHubTest, TheIndexIsReadByRangesAndItsFailuresAreTheQuerysAnswer) {
  for (const char* name : {"scarred", "faraway"}) {
    auto remote = Remote(root_);
    auto hub = Hub(root_, remote.get());
    ASSERT_NE(hub, nullptr);
    ASSERT_NO_FATAL_FAILURE(Seal(*hub, name, {200, 200}));
  }
  const std::string key = SealedKey("scarred", "args.index");
  std::string index = Object(key);
  for (size_t i = index.size() / 2; i < index.size() / 2 + 256; ++i) index[i] = '\xff';
  ASSERT_TRUE(Client(absl::Seconds(60))->PutObject(bucket_, key, index).ok());

  const std::string fresh = root_ + "-fresh";
  auto remote = Remote(fresh, absl::Seconds(2));
  auto hub = Hub(fresh, remote.get());
  ASSERT_NE(hub, nullptr);
  auto scarred = hub->Find("scarred");
  ASSERT_TRUE(scarred.ok()) << scarred.status();  // its header is whole
  ArgFilter all;
  QueryPage page = (*scarred)->Query(all, 0, 1000, 1000000);
  EXPECT_EQ(page.error.code(), absl::StatusCode::kDataLoss) << page.error;
  EXPECT_TRUE(page.hits.empty());
  EXPECT_TRUE(absl::StrContains(page.error.message(), key)) << page.error;

  auto faraway = hub->Find("faraway");  // opened: its header read
  ASSERT_TRUE(faraway.ok()) << faraway.status();
  ASSERT_TRUE(rgw_->StopGateway().ok());
  page = (*faraway)->Query(all, 0, 1000, 1000000);
  EXPECT_EQ(page.error.code(), absl::StatusCode::kUnavailable) << page.error;
  absl::Status unread;
  EXPECT_FALSE((*faraway)->RecordById(399, &unread).has_value());
  EXPECT_EQ(unread.code(), absl::StatusCode::kUnavailable) << unread;
  ASSERT_TRUE(rgw_->StartGateway().ok());
  page = (*faraway)->Query(all, 0, 1000, 1000000);
  EXPECT_TRUE(page.error.ok()) << page.error;
  EXPECT_EQ(page.hits.size(), 800u);
  ArgFilter by_task;
  by_task.task_id = 250;
  page = (*faraway)->Query(by_task, 0, 10, 1000);
  ASSERT_EQ(page.hits.size(), 2u);
  EXPECT_EQ(page.hits[0].row.task_id, 250u);
}

TEST_F(RemoteHubTest, ADamagedSegmentLeavesTheCaptureDamagedNotLost) {
  {
    auto remote = Remote(root_);
    auto hub = Hub(root_, remote.get());
    ASSERT_NE(hub, nullptr);
    auto c = hub->Open(OpenRequest("torn"));
    ASSERT_TRUE(c.ok()) << c.status();
    uint64_t records = 0, offset = 0, task = 0;
    for (const Outcome& s : AppendAll(**c, {2}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
  }
  std::vector<std::string> segments = Keys("captures/torn/segments/");
  ASSERT_FALSE(segments.empty());
  std::string seg = Object(segments[0]);
  seg[seg.size() - 1] ^= 1;
  ASSERT_TRUE(Client(absl::Seconds(60))->PutObject(bucket_, segments[0], seg).ok());
  const std::string fresh = root_ + "-fresh";
  auto remote = Remote(fresh);
  auto hub = Hub(fresh, remote.get());
  ASSERT_NE(hub, nullptr);
  auto torn = hub->Find("torn");
  ASSERT_FALSE(torn.ok());
  EXPECT_EQ(torn.status().code(), absl::StatusCode::kDataLoss) << torn.status();
  EXPECT_TRUE(absl::StrContains(torn.status().message(), segments[0])) << torn.status();
  // The segment is kept: nothing deletes what the catalog still names.
  EXPECT_EQ(Keys("captures/torn/segments/").size(), segments.size());
}

// A capture that cannot be rebuilt from the store is deleted there as a
// local damaged one is from the disk: its row and its segments go, it does
// not come back after a restart, and its name can be taken again.
// A segment whose checksum holds but whose journal bytes are not a journal
// (the store's bytes are not trusted) leaves that capture damaged; the
// server starts and serves the others.
TEST_F(RemoteHubTest, ASegmentWithAGarbageJournalLeavesOnlyThatCaptureDamaged) {
  {
    auto remote = Remote(root_);
    auto hub = Hub(root_, remote.get());
    ASSERT_NE(hub, nullptr);
    for (const char* name : {"garbage", "sound"}) {
      auto c = hub->Open(OpenRequest(name));
      ASSERT_TRUE(c.ok()) << c.status();
      uint64_t records = 0, offset = 0, task = 0;
      for (const Outcome& s : AppendAll(**c, {2}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
    }
  }
  std::vector<std::string> segments = Keys("captures/garbage/segments/");
  ASSERT_EQ(segments.size(), 1u);
  const std::string object = Object(segments[0]);
  absl::string_view journal, bin;
  auto h = ParseSegment(object, segments[0], &journal, &bin);
  ASSERT_TRUE(h.ok()) << h.status();
  const std::string garbage(journal.size(), 'g');
  const std::string forged = EncodeSegmentHeader(*h, garbage, bin) + garbage + std::string(bin);
  ASSERT_EQ(forged.size(), object.size());
  ASSERT_TRUE(Client(absl::Seconds(60))->PutObject(bucket_, segments[0], forged).ok());
  const std::string fresh = root_ + "-fresh";
  auto remote = Remote(fresh);
  auto hub = Hub(fresh, remote.get());
  ASSERT_NE(hub, nullptr);
  auto damaged = hub->Find("garbage");
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss) << damaged.status();
  EXPECT_TRUE(absl::StrContains(damaged.status().message(), "garbage")) << damaged.status();
  auto sound = hub->Find("sound");
  ASSERT_TRUE(sound.ok()) << sound.status();
  EXPECT_EQ((*sound)->durable().records, 4u);
  // Deleted, its name is free again.
  ASSERT_TRUE(hub->Delete("garbage", "deleted by the test").ok());
  auto again = hub->Open(OpenRequest("garbage"));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(RemoteHubTest, DeletingADamagedCaptureRemovesItFromTheStore) {
  {
    auto remote = Remote(root_);
    auto hub = Hub(root_, remote.get());
    ASSERT_NE(hub, nullptr);
    auto c = hub->Open(OpenRequest("torn"));
    ASSERT_TRUE(c.ok()) << c.status();
    uint64_t records = 0, offset = 0, task = 0;
    for (const Outcome& s : AppendAll(**c, {2}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
  }
  std::vector<std::string> segments = Keys("captures/torn/segments/");
  ASSERT_FALSE(segments.empty());
  std::string seg = Object(segments[0]);
  seg[seg.size() - 1] ^= 1;
  ASSERT_TRUE(Client(absl::Seconds(60))->PutObject(bucket_, segments[0], seg).ok());
  {
    const std::string fresh = root_ + "-fresh";
    auto remote = Remote(fresh);
    auto hub = Hub(fresh, remote.get());
    ASSERT_NE(hub, nullptr);
    ASSERT_TRUE(absl::IsDataLoss(hub->Find("torn").status())) << hub->Find("torn").status();
    auto freed = hub->Delete("torn", "deleted by the test");
    ASSERT_TRUE(freed.ok()) << freed.status();
    EXPECT_TRUE(absl::IsNotFound(remote->catalog().Get("torn").status()));
    EXPECT_TRUE(Keys("captures/torn/").empty());
    // The name is free: a new capture of it commits and finishes.
    ASSERT_NO_FATAL_FAILURE(Seal(*hub, "torn", {1}));
  }
  const std::string third = root_ + "-third";
  auto remote = Remote(third);
  auto hub = Hub(third, remote.get());
  ASSERT_NE(hub, nullptr);
  auto found = hub->Find("torn");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)->Summary().records(), 2u);
}

TEST_F(RemoteHubTest, DeleteRemovesTheRowAndTheObjectsAndGarbageCollectionTheOrphans) {
  auto remote = Remote(root_);
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  ASSERT_NO_FATAL_FAILURE(Seal(*hub, "gone", {2}));
  auto freed = hub->Delete("gone", "deleted by the test");
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_GT(*freed, 0u);
  EXPECT_TRUE(absl::IsNotFound(remote->catalog().Get("gone").status()));
  EXPECT_TRUE(Keys("captures/gone/").empty());

  // What a crash between an upload and its commit leaves, and what is not ours.
  auto client = Client(absl::Seconds(60));
  for (const char* key : {"captures/crashed/segments/00000000000000000000.e1",
                          "captures/crashed/3/args_dump/args.bin", "captures/notes.txt",
                          "captures/crashed/other/file"}) {
    ASSERT_TRUE(client->PutObject(bucket_, key, "bytes").ok());
  }
  auto young = remote->CollectGarbage(absl::Hours(1));
  ASSERT_TRUE(young.ok()) << young.status();
  EXPECT_EQ(young->deleted, 0u);
  EXPECT_EQ(young->young, 2u);
  auto old = remote->CollectGarbage(absl::ZeroDuration());
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->deleted, 2u);
  std::vector<std::string> left = Keys("captures/");
  EXPECT_EQ(left, (std::vector<std::string>{"captures/crashed/other/file", "captures/notes.txt"}));
}

// Keys the catalog names are not trusted: sealing and deleting a capture
// delete only objects below its own prefix, whatever its rows say.
TEST_F(RemoteHubTest, OnlyTheCapturesOwnObjectsAreDeleted) {
  auto remote = Remote(root_);
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  auto client = Client(absl::Seconds(60));
  const std::vector<std::string> others = {"elsewhere/precious", "captures/other/args_dump/args.bin",
                                           "captures/x-other/args_dump/args.index"};
  for (const std::string& key : others) ASSERT_TRUE(client->PutObject(bucket_, key, "kept").ok());
  auto c = hub->Open(OpenRequest("x"));
  ASSERT_TRUE(c.ok()) << c.status();
  uint64_t records = 0, offset = 0, task = 0;
  for (const Outcome& s : AppendAll(**c, {2}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
  PgOptions po;
  po.uri = catalog_uri_;
  auto raw = PgConnection::Connect(po);
  ASSERT_TRUE(raw.ok()) << raw.status();
  // A segment row naming another's object: sealing forgets it.
  ASSERT_TRUE((*raw)->Exec("INSERT INTO segments (capture, seq, object_key, first_record,"
                           " record_count, bytes) VALUES ('x', 99, $1, 4, 0, 4)",
                           {PgParam::Text(others[0])})
                  .ok());
  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  // Final keys naming others' objects: deleting the capture forgets them.
  ASSERT_TRUE((*raw)->Exec("UPDATE captures SET bin_key = $1, index_key = $2 WHERE name = 'x'",
                           {PgParam::Text(others[1]), PgParam::Text(others[2])})
                  .ok());
  ASSERT_TRUE(hub->Delete("x", "deleted by the test").ok());
  for (const std::string& key : others) EXPECT_EQ(Object(key), "kept") << key;
}

// Listing over the catalog: its page by labels and state, with the live
// captures nothing was committed of yet (not in the catalog) merged in by
// name; pages continue after the last name.
TEST_F(RemoteHubTest, ListingMergesTheCatalogsPageWithUncommittedLiveCaptures) {
  auto remote = Remote(root_);
  auto hub = Hub(root_, remote.get());
  ASSERT_NE(hub, nullptr);
  std::vector<std::shared_ptr<HubCapture>> live;
  for (const char* name : {"a-done", "b-live", "c-done", "d-empty", "e-done"}) {
    v1::IngestOpen open = OpenRequest(name);
    (*open.mutable_labels())["team"] = name[0] == 'c' ? "other" : "kernels";
    auto c = hub->Open(open);
    ASSERT_TRUE(c.ok()) << c.status();
    if (name[2] == 'e') {  // d-empty: opened, nothing appended
      live.push_back(*c);
      continue;
    }
    uint64_t records = 0, offset = 0, task = 0;
    for (const Outcome& s : AppendAll(**c, {1}, &records, &offset, &task)) ASSERT_TRUE(s.ok()) << s;
    if (name[2] == 'l') {
      live.push_back(*c);
      continue;
    }
    Waiter done;
    (*c)->Finish({}, done.Callback());
    for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  }
  auto names = [](const std::vector<std::shared_ptr<HubCapture>>& cs) {
    std::vector<std::string> out;
    for (const auto& c : cs) out.push_back(c->name());
    return out;
  };
  bool more = false;
  EXPECT_EQ(names(hub->List({{"team", "kernels"}}, v1::CAPTURE_STATE_UNSPECIFIED, "", 10, &more)),
            (std::vector<std::string>{"a-done", "b-live", "d-empty", "e-done"}));
  EXPECT_FALSE(more);
  EXPECT_EQ(names(hub->List({}, v1::CAPTURE_STATE_LIVE, "", 10, &more)),
            (std::vector<std::string>{"b-live", "d-empty"}));
  EXPECT_EQ(names(hub->List({}, v1::CAPTURE_STATE_FINISHED, "", 10, &more)),
            (std::vector<std::string>{"a-done", "c-done", "e-done"}));
  std::vector<std::string> paged;
  std::string after;
  do {
    std::vector<std::string> page =
        names(hub->List({}, v1::CAPTURE_STATE_UNSPECIFIED, after, 2, &more));
    ASSERT_LE(page.size(), 2u);
    ASSERT_FALSE(page.empty());
    paged.insert(paged.end(), page.begin(), page.end());
    after = page.back();
  } while (more);
  EXPECT_EQ(paged, (std::vector<std::string>{"a-done", "b-live", "c-done", "d-empty", "e-done"}));
}

// Retention over the store: --max_total_bytes counts the bytes the
// captures take there, and evicts the oldest finished first (its row and
// objects); --retain_for evicts by the catalog's finish time.
TEST_F(RemoteHubTest, RetentionEvictsFromTheCatalogAndTheStore) {
  {
    auto remote = Remote(root_);
    auto hub = Hub(root_, remote.get());
    ASSERT_NE(hub, nullptr);
    for (const char* name : {"old", "middle", "new"}) {
      ASSERT_NO_FATAL_FAILURE(Seal(*hub, name, {3}));
    }
  }
  auto remote = Remote(root_);
  auto bytes_of = [&](const char* name) {
    auto row = remote->catalog().Get(name);
    EXPECT_TRUE(row.ok()) << row.status();
    return row.ok() ? row->stored_bytes : 0;
  };
  const uint64_t old_bytes = bytes_of("old");
  const uint64_t total = old_bytes + bytes_of("middle") + bytes_of("new");
  ASSERT_GT(old_bytes, 0u);
  {
    CaptureHub::Options o;
    o.root = root_;
    o.remote = remote.get();
    o.gc_every = absl::ZeroDuration();
    o.max_total_bytes = total - old_bytes + 1;  // room once "old" goes
    auto hub = CaptureHub::Open(o);
    ASSERT_TRUE(hub.ok()) << hub.status();
    EXPECT_TRUE(absl::IsNotFound(remote->catalog().Get("old").status()));
    EXPECT_TRUE(Keys("captures/old/").empty());
    EXPECT_TRUE((*hub)->Find("middle").ok());
    EXPECT_EQ((*hub)->RootDiskBytes(), total - old_bytes);
  }
  CaptureHub::Options o;
  o.root = root_;
  o.remote = remote.get();
  o.gc_every = absl::ZeroDuration();
  o.retain_for = absl::Nanoseconds(1);
  auto hub = CaptureHub::Open(o);
  ASSERT_TRUE(hub.ok()) << hub.status();
  EXPECT_TRUE(Keys("captures/").empty());
  EXPECT_TRUE(absl::IsNotFound(remote->catalog().Get("new").status()));
}

// Sealing builds args.bin inside the store where segments hold whole
// parts (5 MiB and more), uploading only what lies between them; the
// result is the bytes sent, in order, also after a restart (the pieces
// are found again from the segments).
TEST_F(RemoteHubTest, SealingCopiesLargeSegmentsInsideTheStore) {
  const std::vector<uint64_t> sizes = {6 << 20, 100 << 10, 7 << 20, 1 << 10, (5 << 20) + 4};
  std::string expected;
  uint64_t records = 0, offset = 0;
  auto job = [&](size_t i) {
    AppendJob j;
    j.first_record = records;
    EXPECT_TRUE(j.records.Add(TensorRecord(100 + i).Shape({static_cast<int64_t>(sizes[i] / 4)})
                                  .BinOffset(offset)).ok());
    std::string bytes(sizes[i] / 4 * 4, '\0');
    for (size_t b = 0; b < bytes.size(); b += 4096) bytes[b] = static_cast<char>(i * 31 + b / 4096);
    expected += bytes;
    offset += bytes.size();
    records += 1;
    j.chunks.push_back(std::move(bytes));
    return j;
  };
  {
    auto remote = Remote(root_);
    auto hub = Hub(root_, remote.get());
    ASSERT_NE(hub, nullptr);
    auto c = hub->Open(OpenRequest("big"));
    ASSERT_TRUE(c.ok()) << c.status();
    for (size_t i = 0; i < 3; ++i) {
      Waiter w;
      (*c)->Append(job(i), w.Callback());  // one at a time: a segment each
      for (const Outcome& s : w.Wait()) ASSERT_TRUE(s.ok()) << s;
    }
  }
  const std::string fresh = root_ + "-fresh";
  auto remote = Remote(fresh, absl::Seconds(60), /*copy_parts=*/true);
  auto hub = Hub(fresh, remote.get());
  ASSERT_NE(hub, nullptr);
  auto c = hub->Open(OpenRequest("big", /*resume=*/true));
  ASSERT_TRUE(c.ok()) << c.status();
  for (size_t i = 3; i < sizes.size(); ++i) {
    Waiter w;
    (*c)->Append(job(i), w.Callback());
    for (const Outcome& s : w.Wait()) ASSERT_TRUE(s.ok()) << s;
  }
  Waiter done;
  (*c)->Finish({}, done.Callback());
  for (const Outcome& s : done.Wait()) ASSERT_TRUE(s.ok()) << s;
  const RemoteCaptures::SealCounters sealed = remote->seal_counters();
  // Copied: 6 MiB (the first part) and the last 5 MiB (behind a 1 KiB
  // upload that alone is short, but it follows the 7 MiB upload); the 7 MiB
  // piece came after a 100 KiB one that a part cannot be cut from alone, so
  // both were uploaded together.
  EXPECT_EQ(sealed.copied_bytes, sizes[0] + sizes[4]);
  EXPECT_EQ(sealed.uploaded_bytes, sizes[1] + sizes[2] + sizes[3]);
  EXPECT_TRUE(Object(SealedKey("big", "args.bin")) == expected);
}

TEST(RemoteCapturesOpenTest, WrongCredentialsAreAClearStartupError) {
  auto rgw = SharedCephRgw();
  ASSERT_TRUE(rgw.ok()) << rgw.status();
  PostgresServer* pg = SharedPostgres();
  ASSERT_NE(pg, nullptr);
  auto db = pg->CreateDatabase("wrong_keys");
  ASSERT_TRUE(db.ok()) << db.status();
  s3::S3ClientOptions o = (*rgw)->ClientOptions();
  o.credentials.secret_access_key = "not-the-secret";
  auto client = s3::S3Client::Create(o);
  ASSERT_TRUE(client.ok());
  Catalog::Options co;
  co.pg.uri = *db;
  auto catalog = Catalog::Open(co);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  RemoteCaptures::Options ro;
  ro.location.bucket = "any-bucket";
  auto remote = RemoteCaptures::Open(std::move(client).value(), std::move(catalog).value(), ro);
  ASSERT_FALSE(remote.ok());
  EXPECT_TRUE(absl::StrContains(remote.status().message(), "s3://any-bucket/")) << remote.status();
  EXPECT_FALSE(absl::StrContains(remote.status().message(), "not-the-secret")) << remote.status();
}

}  // namespace
}  // namespace argsdump
