// The catalog against a real PostgreSQL started by this test binary (one
// server; a database per test).
#include "catalog/catalog.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "catalog/catalog_row.h"
#include "catalog/pg_connection.h"
#include "gtest/gtest.h"
#include "tests/testing/postgres_server.h"
#include "tests/testing/scoped_env.h"

namespace argsdump {
namespace {

PostgresServer* server = nullptr;

class PostgresEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<PostgresServer>> started = PostgresServer::Start();
    ASSERT_TRUE(started.ok()) << started.status();
    owned_ = *std::move(started);
    server = owned_.get();
  }
  void TearDown() override {
    server = nullptr;
    owned_.reset();
  }

 private:
  std::unique_ptr<PostgresServer> owned_;
};

const ::testing::Environment* const environment =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment());

// A fresh database named after the running test.
std::string FreshDatabase() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = absl::StrCat("t_", info->name());
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
  absl::StatusOr<std::string> uri = server->CreateDatabase(name);
  EXPECT_TRUE(uri.ok()) << uri.status();
  return uri.ok() ? *uri : "";
}

std::unique_ptr<Catalog> OpenCatalog(const std::string& uri) {
  Catalog::Options options;
  options.pg.uri = uri;
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(options);
  EXPECT_TRUE(catalog.ok()) << catalog.status();
  return catalog.ok() ? *std::move(catalog) : nullptr;
}

std::unique_ptr<PgConnection> Raw(const std::string& uri) {
  PgOptions options;
  options.uri = uri;
  absl::StatusOr<std::unique_ptr<PgConnection>> c = PgConnection::Connect(options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

void Sql(PgConnection& c, const std::string& sql, const std::vector<PgParam>& params = {}) {
  absl::StatusOr<PgResult> r = c.Exec(sql, params);
  ASSERT_TRUE(r.ok()) << sql << ": " << r.status();
}

v1::CaptureInfo Info(const std::string& name, std::map<std::string, std::string> labels = {},
                     const std::string& job = "", uint32_t rank = 0) {
  v1::CaptureInfo info;
  info.set_name(name);
  info.set_level(v1::DumpLevel(2));
  info.set_platform("a2a3sim");
  for (const auto& [k, v] : labels) (*info.mutable_labels())[k] = v;
  if (!job.empty()) {
    info.mutable_job()->set_job(job);
    info.mutable_job()->set_rank(rank);
    info.mutable_job()->set_world_size(4);
  }
  return info;
}

std::vector<std::string> Names(const CapturePage& page) {
  std::vector<std::string> names;
  for (const CatalogCapture& c : page.captures) names.push_back(c.info.name());
  return names;
}

CatalogSegment Segment(uint64_t seq, uint64_t first, uint64_t count, const std::string& key) {
  CatalogSegment s;
  s.seq = seq;
  s.first_record = first;
  s.record_count = count;
  s.bytes = 1000 * count;
  s.object_key = key;
  return s;
}

TEST(CatalogTest, MigratesFromEmptyAndAgainIsNoChange) {
  const std::string uri = FreshDatabase();
  std::unique_ptr<PgConnection> raw = Raw(uri);
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(*CatalogSchemaVersion(*raw), 0);
  ASSERT_NE(OpenCatalog(uri), nullptr);
  EXPECT_EQ(*CatalogSchemaVersion(*raw), Catalog::kSchemaVersion);
  std::unique_ptr<Catalog> again = OpenCatalog(uri);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(*CatalogSchemaVersion(*raw), Catalog::kSchemaVersion);
  EXPECT_TRUE(again->CreateCapture(Info("a"), "p/a").ok());
}

TEST(CatalogTest, RefusesADatabaseNewerThanTheBinary) {
  const std::string uri = FreshDatabase();
  ASSERT_NE(OpenCatalog(uri), nullptr);
  std::unique_ptr<PgConnection> raw = Raw(uri);
  Sql(*raw, "UPDATE schema_version SET version = 99");
  Catalog::Options options;
  options.pg.uri = uri;
  absl::StatusOr<std::unique_ptr<Catalog>> refused = Catalog::Open(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "version 99")) << refused.status();
}

TEST(CatalogTest, CatalogsMigratingTogetherDoNotRace) {
  const std::string uri = FreshDatabase();
  constexpr int kCatalogs = 6;
  std::vector<absl::Status> results(kCatalogs);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCatalogs; ++i) {
    threads.emplace_back([&, i] {
      Catalog::Options options;
      options.pg.uri = uri;
      results[static_cast<size_t>(i)] = Catalog::Open(options).status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  std::unique_ptr<PgConnection> raw = Raw(uri);
  EXPECT_EQ(*CatalogSchemaVersion(*raw), Catalog::kSchemaVersion);
}

TEST(CatalogTest, CreatesListsFiltersPagesAndDeletes) {
  std::unique_ptr<Catalog> catalog = OpenCatalog(FreshDatabase());
  ASSERT_NE(catalog, nullptr);
  for (int i = 0; i < 20; ++i) {
    const std::string name = absl::StrCat(i % 2 == 0 ? "train-" : "eval-", 100 + i);
    absl::StatusOr<CatalogCapture> created = catalog->CreateCapture(
        Info(name, {{"team", i % 4 == 0 ? "a" : "b"}, {"run", "r1"}}), "captures/" + name);
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_EQ(created->state, v1::CAPTURE_STATE_LIVE);
    EXPECT_EQ(created->epoch, 1);
  }
  // A value that would break string-built SQL is only data here.
  ASSERT_TRUE(catalog->CreateCapture(Info("q", {{"team", "'\"; DROP TABLE captures; --"}}), "p/q").ok());

  absl::StatusOr<CatalogCapture> got = catalog->Get("train-104");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->info.labels().at("team"), "a");
  EXPECT_EQ(got->object_prefix, "captures/train-104");
  EXPECT_TRUE(absl::IsNotFound(catalog->Get("nope").status()));

  CaptureQuery by_label;
  by_label.labels = {{"team", "a"}};
  absl::StatusOr<CapturePage> page = catalog->List(by_label);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(Names(*page), (std::vector<std::string>{"train-100", "train-104", "train-108",
                                                    "train-112", "train-116"}));
  by_label.labels = {{"team", "'\"; DROP TABLE captures; --"}};
  EXPECT_EQ(Names(*catalog->List(by_label)), std::vector<std::string>{"q"});
  by_label.labels = {{"team", "b"}, {"run", "r1"}};
  EXPECT_EQ(catalog->List(by_label)->captures.size(), 15u);

  CaptureQuery by_prefix;
  by_prefix.name_prefix = "eval-";
  by_prefix.page_size = 4;
  std::vector<std::string> all;
  int pages = 0;
  do {
    page = catalog->List(by_prefix);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const std::string& n : Names(*page)) all.push_back(n);
    by_prefix.page_token = page->next_page_token;
    ++pages;
  } while (!by_prefix.page_token.empty());
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(all.size(), 10u);
  EXPECT_EQ(all.front(), "eval-101");
  EXPECT_EQ(all.back(), "eval-119");
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));

  ASSERT_TRUE(catalog->Finish("train-100", 1, {"m", "b", "i"}, {}, 10, 30).ok());
  CaptureQuery finished;
  finished.state = v1::CAPTURE_STATE_FINISHED;
  EXPECT_EQ(Names(*catalog->List(finished)), std::vector<std::string>{"train-100"});
  finished.state = v1::CAPTURE_STATE_LIVE;
  EXPECT_EQ(catalog->List(finished)->captures.size(), 20u);

  absl::StatusOr<DeletedCapture> deleted = catalog->Delete("train-100");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->object_prefix, "captures/train-100");
  EXPECT_EQ(deleted->object_keys, (std::vector<std::string>{"m", "b", "i"}));
  EXPECT_EQ(deleted->stored_bytes, 30u);
  EXPECT_TRUE(absl::IsNotFound(catalog->Get("train-100").status()));
  EXPECT_TRUE(absl::IsNotFound(catalog->Delete("train-100").status()));

  CaptureQuery too_big;
  too_big.page_size = 1001;
  EXPECT_TRUE(absl::IsInvalidArgument(catalog->List(too_big).status()));
}

TEST(CatalogTest, AJobsRankIsTakenOnce) {
  std::unique_ptr<Catalog> catalog = OpenCatalog(FreshDatabase());
  ASSERT_NE(catalog, nullptr);
  ASSERT_TRUE(catalog->CreateCapture(Info("j-0", {}, "job1", 0), "p/j-0").ok());
  ASSERT_TRUE(catalog->CreateCapture(Info("j-1", {}, "job1", 1), "p/j-1").ok());
  ASSERT_TRUE(catalog->CreateCapture(Info("k-0", {}, "job2", 0), "p/k-0").ok());
  absl::Status taken = catalog->CreateCapture(Info("other", {}, "job1", 1), "p/o").status();
  EXPECT_TRUE(absl::IsAlreadyExists(taken)) << taken;
  EXPECT_TRUE(absl::StrContains(taken.message(), "rank 1")) << taken;
  absl::Status name = catalog->CreateCapture(Info("j-0"), "p/x").status();
  EXPECT_TRUE(absl::IsAlreadyExists(name)) << name;
  EXPECT_TRUE(absl::StrContains(name.message(), "exists")) << name;

  CaptureQuery by_job;
  by_job.job = "job1";
  EXPECT_EQ(Names(*catalog->List(by_job)), (std::vector<std::string>{"j-0", "j-1"}));

  ASSERT_TRUE(catalog->Finish("j-0", 1, {"m", "b", "i"}, {}, 0, 0).ok());
  std::string next;
  absl::StatusOr<std::vector<CatalogJob>> jobs = catalog->ListJobs(1, "", &next);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job, "job1");
  EXPECT_EQ((*jobs)[0].world_size, 4u);
  EXPECT_EQ((*jobs)[0].ranks_present, 2u);
  EXPECT_EQ((*jobs)[0].ranks_live, 1u);
  EXPECT_EQ((*jobs)[0].ranks_finished, 1u);
  EXPECT_EQ(next, "job1");
  jobs = catalog->ListJobs(1, next, &next);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job, "job2");
  EXPECT_EQ(next, "");
}

TEST(CatalogTest, CommitSegmentIsFencedByEpochAndWatermark) {
  std::unique_ptr<Catalog> catalog = OpenCatalog(FreshDatabase());
  ASSERT_NE(catalog, nullptr);
  ASSERT_TRUE(catalog->CreateCapture(Info("c"), "p/c").ok());
  v1::CaptureCounters counters;
  counters.set_total_args(10);
  ASSERT_TRUE(catalog->CommitSegment("c", 1, Segment(0, 0, 10, "p/c/seg0"), 10, 500, counters).ok());

  absl::StatusOr<int64_t> epoch = catalog->AdvanceEpoch("c");
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, 2);
  // The old writer is fenced off.
  absl::Status stale = catalog->CommitSegment("c", 1, Segment(1, 10, 5, "p/c/seg1"), 15, 700, counters);
  EXPECT_TRUE(absl::IsFailedPrecondition(stale)) << stale;
  EXPECT_TRUE(absl::StrContains(stale.message(), "epoch 2")) << stale;
  // The watermark never goes back.
  absl::Status back = catalog->CommitSegment("c", 2, Segment(1, 0, 5, "p/c/seg1"), 5, 300, counters);
  EXPECT_TRUE(absl::IsFailedPrecondition(back)) << back;
  EXPECT_TRUE(absl::StrContains(back.message(), "go back")) << back;
  // A segment that does not end at the watermark is refused before SQL.
  EXPECT_TRUE(absl::IsInvalidArgument(
      catalog->CommitSegment("c", 2, Segment(1, 10, 5, "k"), 16, 700, counters)));
  counters.set_total_args(15);
  ASSERT_TRUE(catalog->CommitSegment("c", 2, Segment(1, 10, 5, "p/c/seg1"), 15, 700, counters).ok());
  absl::Status twice = catalog->CommitSegment("c", 2, Segment(1, 15, 0, "p/c/seg1b"), 15, 700, counters);
  EXPECT_TRUE(absl::IsAlreadyExists(twice)) << twice;

  absl::StatusOr<CatalogCapture> got = catalog->Get("c");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->committed_records, 15u);
  EXPECT_EQ(got->committed_bytes, 700u);
  EXPECT_EQ(got->counters.total_args(), 15u);
  EXPECT_EQ(got->stored_bytes, 15000u);
  absl::StatusOr<std::vector<CatalogSegment>> segments = catalog->Segments("c");
  ASSERT_TRUE(segments.ok()) << segments.status();
  ASSERT_EQ(segments->size(), 2u);
  EXPECT_EQ((*segments)[1].object_key, "p/c/seg1");
  EXPECT_EQ((*segments)[1].first_record, 10u);

  // Orphans: keys no row refers to.
  absl::StatusOr<std::vector<std::string>> orphans =
      catalog->ListOrphanCandidates({"p/c/seg0", "p/c/lost", "p/c/seg1", "x\"y\\z"});
  ASSERT_TRUE(orphans.ok()) << orphans.status();
  EXPECT_EQ(*orphans, (std::vector<std::string>{"p/c/lost", "x\"y\\z"}));

  // Finish is fenced too, and hands back the segments to delete.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      catalog->Finish("c", 1, {"p/c/m", "p/c/b", "p/c/i"}, counters, 9, 99).status()));
  absl::StatusOr<std::vector<std::string>> leftover =
      catalog->Finish("c", 2, {"p/c/m", "p/c/b", "p/c/i"}, counters, 9, 99);
  ASSERT_TRUE(leftover.ok()) << leftover.status();
  EXPECT_EQ(*leftover, (std::vector<std::string>{"p/c/seg0", "p/c/seg1"}));
  got = catalog->Get("c");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state, v1::CAPTURE_STATE_FINISHED);
  EXPECT_TRUE(got->finished.has_value());
  EXPECT_EQ(got->objects.index_key, "p/c/i");
  EXPECT_EQ(got->stored_bytes, 99u);
  absl::Status after = catalog->CommitSegment("c", 2, Segment(2, 15, 1, "p/c/seg2"), 16, 800, counters);
  EXPECT_TRUE(absl::IsFailedPrecondition(after)) << after;
  EXPECT_TRUE(absl::IsFailedPrecondition(catalog->AdvanceEpoch("c").status()));
  EXPECT_TRUE(absl::IsNotFound(catalog->AdvanceEpoch("none").status()));
  EXPECT_EQ(*catalog->ListOrphanCandidates({"p/c/m", "p/c/seg0"}),
            std::vector<std::string>{"p/c/seg0"});
}

TEST(CatalogTest, TotalsAndOldestFinishedForRetention) {
  std::unique_ptr<Catalog> catalog = OpenCatalog(FreshDatabase());
  ASSERT_NE(catalog, nullptr);
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(catalog->CreateCapture(Info(name), std::string("p/") + name).ok());
  }
  ASSERT_TRUE(catalog->Finish("b", 1, {"bm", "bb", "bi"}, {}, 0, 200).ok());
  ASSERT_TRUE(catalog->Finish("a", 1, {"am", "ab", "ai"}, {}, 0, 100).ok());
  absl::StatusOr<CatalogTotals> totals = catalog->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->captures, 3u);
  EXPECT_EQ(totals->stored_bytes, 300u);
  absl::StatusOr<std::vector<RetentionCandidate>> oldest = catalog->OldestFinished(10);
  ASSERT_TRUE(oldest.ok()) << oldest.status();
  ASSERT_EQ(oldest->size(), 2u);  // the live one is not a candidate
  EXPECT_EQ((*oldest)[0].name, "a");  // created first
  EXPECT_EQ((*oldest)[1].stored_bytes, 200u);
}

TEST(CatalogTest, ARestartedServerFailsTheCallInFlightThenRecovers) {
  const std::string catalog_uri = FreshDatabase();
  std::unique_ptr<Catalog> catalog = OpenCatalog(catalog_uri);
  ASSERT_NE(catalog, nullptr);
  ASSERT_TRUE(catalog->CreateCapture(Info("r"), "p/r").ok());
  ASSERT_TRUE(catalog->Get("r").ok());
  ASSERT_TRUE(server->Restart().ok()) << server->LogTail();
  // The pooled connection died with the old server: the next call fails
  // Unavailable, the one after reconnects (same Catalog object).
  absl::Status lost = catalog->Get("r").status();
  EXPECT_TRUE(absl::IsUnavailable(lost)) << lost;
  absl::StatusOr<CatalogCapture> again = catalog->Get("r");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->info.name(), "r");

  // While the server is down every call is Unavailable, and none crashes.
  ASSERT_TRUE(server->Stop().ok());
  EXPECT_TRUE(absl::IsUnavailable(catalog->Get("r").status()));
  EXPECT_TRUE(absl::IsUnavailable(catalog->Get("r").status()));
  ASSERT_TRUE(server->Restart().ok()) << server->LogTail();
  EXPECT_TRUE(catalog->Get("r").ok());

  // A transaction (Delete) lost to a restart: the next single statement on
  // the same pooled connection reconnects.
  Catalog::Options one;
  one.pg.uri = catalog_uri;
  one.max_connections = 1;
  absl::StatusOr<std::unique_ptr<Catalog>> single = Catalog::Open(one);
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_TRUE(server->Restart().ok()) << server->LogTail();
  EXPECT_TRUE(absl::IsUnavailable((*single)->Delete("r").status()));
  EXPECT_TRUE((*single)->Get("r").ok());
}

// A call blocked in the server when it restarts fails Unavailable; the next
// call on the same Catalog reconnects and succeeds. The call waits on a row
// lock of a prepared transaction: unlike a session's, it outlives the
// restart, so the call cannot slip through while the server shuts down.
TEST(CatalogTest, ACallInFlightDuringARestartFailsUnavailable) {
  const std::string uri = FreshDatabase();
  std::unique_ptr<Catalog> catalog = OpenCatalog(uri);
  ASSERT_NE(catalog, nullptr);
  ASSERT_TRUE(catalog->CreateCapture(Info("busy"), "p/busy").ok());
  std::unique_ptr<PgConnection> holder = Raw(uri);
  ASSERT_NE(holder, nullptr);
  Sql(*holder, "BEGIN");
  Sql(*holder, "SELECT 1 FROM captures WHERE name = 'busy' FOR UPDATE");
  Sql(*holder, "PREPARE TRANSACTION 'hold_busy'");
  absl::Status in_flight;
  std::thread call([&] { in_flight = catalog->AdvanceEpoch("busy").status(); });
  // Wait (bounded) until the call is waiting on the lock in the server.
  std::unique_ptr<PgConnection> watcher = Raw(uri);
  ASSERT_NE(watcher, nullptr);
  bool waiting = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!waiting && std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<PgResult> r = watcher->Exec(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE 'UPDATE captures SET epoch%'");
    ASSERT_TRUE(r.ok()) << r.status();
    waiting = *DecodeInt8(r->cell(0, 0), {"pg_stat_activity", "count", "0"}) == 1;
  }
  ASSERT_TRUE(waiting) << "the call never waited on the lock";
  ASSERT_TRUE(server->Restart().ok()) << server->LogTail();
  call.join();
  EXPECT_TRUE(absl::IsUnavailable(in_flight)) << in_flight;
  std::unique_ptr<PgConnection> releaser = Raw(uri);
  ASSERT_NE(releaser, nullptr);
  Sql(*releaser, "ROLLBACK PREPARED 'hold_busy'");
  absl::StatusOr<int64_t> epoch = catalog->AdvanceEpoch("busy");
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, 2);  // the call that failed did not apply
}

// Waits (bounded) until a statement starting with `query_prefix` waits on a
// lock in the server.
bool WaitsOnALock(PgConnection& watcher, const std::string& query_prefix) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<PgResult> r = watcher.Exec(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND starts_with(query, $1)",
        {PgParam::Text(query_prefix)});
    if (!r.ok()) return false;
    if (*DecodeInt8(r->cell(0, 0), {"pg_stat_activity", "count", "0"}) > 0) return true;
  }
  return false;
}

// A transaction the server aborts as a deadlock's victim is run again, in
// Catalog's one place for it, and succeeds.
TEST(CatalogTest, ADeadlockedTransactionIsRetried) {
  const std::string uri = FreshDatabase();
  std::unique_ptr<Catalog> catalog = OpenCatalog(uri);
  ASSERT_NE(catalog, nullptr);
  ASSERT_TRUE(catalog->CreateCapture(Info("d"), "p/d").ok());
  ASSERT_TRUE(catalog->CommitSegment("d", 1, Segment(0, 0, 1, "p/d/0"), 1, 1, {}).ok());
  // Another session holds the segment rows Finish deletes after updating
  // the capture's row, then asks for that row: a cycle.
  std::unique_ptr<PgConnection> other = Raw(uri);
  ASSERT_NE(other, nullptr);
  // Only Finish's session looks for deadlocks (after its 1 s default):
  // it is the victim.
  Sql(*other, "SET deadlock_timeout = '10min'");
  Sql(*other, "BEGIN");
  Sql(*other, "SELECT 1 FROM segments WHERE capture = 'd' FOR UPDATE");
  absl::StatusOr<std::vector<std::string>> finished;
  std::thread finish([&] { finished = catalog->Finish("d", 1, {"m", "b", "i"}, {}, 1, 1); });
  std::unique_ptr<PgConnection> watcher = Raw(uri);
  ASSERT_NE(watcher, nullptr);
  ASSERT_TRUE(WaitsOnALock(*watcher, "DELETE FROM segments"));
  // This session's update goes through once Finish is aborted.
  Sql(*other, "UPDATE captures SET level = level WHERE name = 'd'");
  Sql(*other, "COMMIT");
  finish.join();
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(*finished, std::vector<std::string>{"p/d/0"});
  absl::StatusOr<PgResult> deadlocks = watcher->Exec(
      "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()");
  ASSERT_TRUE(deadlocks.ok()) << deadlocks.status();
  EXPECT_GE(*DecodeInt8(deadlocks->cell(0, 0), {"pg_stat_database", "deadlocks", "0"}), 1);
}

// More callers than pooled connections: they queue for one, none fails.
TEST(CatalogTest, ThreadsShareTheBoundedPool) {
  Catalog::Options options;
  options.pg.uri = FreshDatabase();
  options.max_connections = 2;
  absl::StatusOr<std::unique_ptr<Catalog>> opened = Catalog::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Catalog& catalog = **opened;
  constexpr int kThreads = 6;
  constexpr int kSegments = 20;
  std::vector<absl::Status> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string name = absl::StrCat("w", t);
      absl::Status s = catalog.CreateCapture(Info(name), "p/" + name).status();
      for (int i = 0; s.ok() && i < kSegments; ++i) {
        s = catalog.CommitSegment(name, 1, Segment(i, i, 1, absl::StrCat("p/", name, "/", i)),
                                  i + 1, i + 1, {});
      }
      failures[static_cast<size_t>(t)] = s;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : failures) EXPECT_TRUE(s.ok()) << s;
  for (int t = 0; t < kThreads; ++t) {
    absl::StatusOr<CatalogCapture> c = catalog.Get(absl::StrCat("w", t));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->committed_records, static_cast<uint64_t>(kSegments));
  }
}

TEST(CatalogTest, HostileRowsAreDataLossNamingTheColumn) {
  const std::string uri = FreshDatabase();
  std::unique_ptr<Catalog> catalog = OpenCatalog(uri);
  ASSERT_NE(catalog, nullptr);
  std::unique_ptr<PgConnection> raw = Raw(uri);
  ASSERT_NE(raw, nullptr);
  // The database's own checks go first: a hostile database has none.
  for (const char* constraint : {"captures_state_check", "captures_committed_records_check",
                                 "captures_epoch_check", "captures_finished",
                                 "captures_job_has_rank", "captures_rank_check"}) {
    Sql(*raw, absl::StrCat("ALTER TABLE captures DROP CONSTRAINT ", constraint));
  }
  struct Case {
    const char* name;
    const char* set;  // an UPDATE's SET clause
    const char* column;
  };
  const Case cases[] = {
      {"counters", "counters = '\\xdeadbeefff'::bytea", "counters"},
      {"info", "info = '\\x0a05'::bytea", "info"},
      {"info_other", "info = (SELECT info FROM captures WHERE name = 'fine')", "info"},
      {"state", "state = 7", "state"},
      {"records", "committed_records = -5", "committed_records"},
      {"epoch", "epoch = 0", "epoch"},
      {"finished", "finished_at = now()", "finished_at"},
      {"infinity", "created_at = 'infinity'", "created_at"},
      {"rank", "rank = 3, job = 'j'", "job"},
  };
  ASSERT_TRUE(catalog->CreateCapture(Info("fine"), "p/fine").ok());
  for (const Case& c : cases) {
    ASSERT_TRUE(catalog->CreateCapture(Info(c.name), std::string("p/") + c.name).ok());
    Sql(*raw, absl::StrCat("UPDATE captures SET ", c.set, " WHERE name = $1"),
        {PgParam::Text(c.name)});
    absl::Status got = catalog->Get(c.name).status();
    EXPECT_TRUE(absl::IsDataLoss(got)) << c.name << ": " << got;
    EXPECT_TRUE(absl::StrContains(got.message(), absl::StrCat("column ", c.column)))
        << c.name << ": " << got;
    EXPECT_TRUE(absl::StrContains(got.message(), c.name)) << c.name << ": " << got;
    CaptureQuery all;
    all.page_size = 1000;
    EXPECT_TRUE(absl::IsDataLoss(catalog->List(all).status())) << c.name;
    Sql(*raw, "DELETE FROM captures WHERE name = $1", {PgParam::Text(c.name)});
  }
  ASSERT_TRUE(catalog->Get("fine").ok());
  // A column of another type than the binary expects.
  Sql(*raw, "ALTER TABLE captures ALTER COLUMN epoch TYPE text");
  absl::Status typed = catalog->Get("fine").status();
  EXPECT_TRUE(absl::IsDataLoss(typed)) << typed;
  EXPECT_TRUE(absl::StrContains(typed.message(), "column epoch row 'fine': has type oid 25 (text)")) << typed;
}

TEST(PgConnectionTest, ErrorsNeverShowThePassword) {
  PgOptions options;
  options.uri = absl::StrCat("postgresql://postgres:sup3rsecret@127.0.0.1:", server->port() + 0,
                             "/no_such_database");
  absl::Status missing_db = PgConnection::Connect(options).status();
  EXPECT_TRUE(absl::IsNotFound(missing_db)) << missing_db;
  EXPECT_FALSE(absl::StrContains(missing_db.message(), "sup3rsecret")) << missing_db;
  options.uri = absl::StrCat("postgresql://no_such_role:sup3rsecret@127.0.0.1:", server->port(),
                             "/postgres");
  absl::Status no_role = PgConnection::Connect(options).status();
  EXPECT_TRUE(absl::IsPermissionDenied(no_role)) << no_role;
  EXPECT_FALSE(absl::StrContains(no_role.message(), "sup3rsecret")) << no_role;
  options.uri = "postgresql://postgres:sup3rsecret@127.0.0.1:1/x";
  absl::Status refused = PgConnection::Connect(options).status();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_FALSE(absl::StrContains(refused.message(), "sup3rsecret")) << refused;
  options.uri = "host=127.0.0.1 password=sup3rsecret port";
  absl::Status malformed = PgConnection::Connect(options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(malformed)) << malformed;
  EXPECT_FALSE(absl::StrContains(malformed.message(), "sup3rsecret")) << malformed;
}

// A transaction's statements never run on a new connection outside of it.
TEST(PgConnectionTest, AConnectionLostInATransactionDoesNotReconnectMidway) {
  std::unique_ptr<PgConnection> c = Raw(FreshDatabase());
  ASSERT_NE(c, nullptr);
  Sql(*c, "BEGIN");
  Sql(*c, "SELECT 1");
  ASSERT_TRUE(server->Restart().ok()) << server->LogTail();
  EXPECT_TRUE(absl::IsUnavailable(c->Exec("SELECT 1").status()));
  absl::Status midway = c->Exec("SELECT 1").status();
  EXPECT_TRUE(absl::IsUnavailable(midway)) << midway;
  EXPECT_TRUE(absl::StrContains(midway.message(), "inside a transaction")) << midway;
  Sql(*c, "ROLLBACK");  // ends it: reconnects
  Sql(*c, "SELECT 1");
}

TEST(PgConnectionTest, ConnectsFromTheStandardEnvironmentVariables) {
  const std::string uri = FreshDatabase();
  const std::string port = absl::StrCat(server->port());
  ScopedEnv host("PGHOST", "127.0.0.1");
  ScopedEnv pgport("PGPORT", port);
  ScopedEnv user("PGUSER", "postgres");
  ScopedEnv database("PGDATABASE", "t_connectsfromthestandardenvironmentvariables");
  Catalog::Options options;  // no URI: the PG* variables alone
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(options);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  ASSERT_TRUE((*catalog)->CreateCapture(Info("env"), "p/env").ok());
  // The same database through the URI sees it.
  std::unique_ptr<Catalog> by_uri = OpenCatalog(uri);
  ASSERT_NE(by_uri, nullptr);
  EXPECT_TRUE(by_uri->Get("env").ok());
}

TEST(PgConnectionTest, ParametersAndErrorsMapToStatuses) {
  const std::string uri = FreshDatabase();
  std::unique_ptr<PgConnection> c = Raw(uri);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(
      c->Exec("SELECT $1::text", {PgParam::Text(std::string("a\0b", 3))}).status()));
  absl::StatusOr<PgResult> r = c->Exec("SELECT $1::int8, $2::bytea, $3::text",
                                       {PgParam::Int(-7), PgParam::Bytes(std::string("\0\1", 2)),
                                        PgParam::Null()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*DecodeInt8(r->cell(0, 0), {"t", "a", "0"}), -7);
  EXPECT_EQ(*DecodeBytea(r->cell(0, 1), {"t", "b", "0"}, 10), std::string("\0\1", 2));
  EXPECT_TRUE(r->cell(0, 2).is_null);
  EXPECT_TRUE(absl::IsInvalidArgument(c->Exec("SELECT 'x'::int8").status()));
  EXPECT_TRUE(absl::IsInternal(c->Exec("SELEC 1").status()));
  Sql(*c, "CREATE TABLE u (k int PRIMARY KEY)");
  Sql(*c, "INSERT INTO u VALUES (1)");
  EXPECT_TRUE(absl::IsAlreadyExists(c->Exec("INSERT INTO u VALUES (1)").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(c->Exec("INSERT INTO u VALUES (NULL)").status()));
  EXPECT_TRUE(absl::IsUnavailable(StatusFromSqlState("57P01", "terminating")));
  EXPECT_TRUE(absl::IsUnavailable(StatusFromSqlState("08006", "lost")));
  EXPECT_TRUE(absl::IsAborted(StatusFromSqlState("40001", "serialize")));
  EXPECT_TRUE(absl::IsAborted(StatusFromSqlState("40P01", "deadlock")));
  EXPECT_TRUE(absl::IsDeadlineExceeded(StatusFromSqlState("57014", "timeout")));
  PgOptions quick;
  quick.uri = uri;
  quick.statement_timeout = absl::Milliseconds(50);
  absl::StatusOr<std::unique_ptr<PgConnection>> q = PgConnection::Connect(quick);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(absl::IsDeadlineExceeded((*q)->Exec("SELECT pg_sleep(5)").status()));
}

}  // namespace
}  // namespace argsdump
