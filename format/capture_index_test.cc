// IndexFile opened ranged (OpenRanged) over an in-memory reader: it answers
// every question as the same index opened locally, opening reads only the
// first block, a query by task O(log n) blocks, each block once however
// many threads ask, and a read that fails or returns damaged bytes is an
// error (the reader's, or DataLoss naming the byte), never a wrong answer.
#include "format/capture_index.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "format/capture_index_layout_testing.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

constexpr uint64_t kBlock = IndexFile::kRangedBlockBytes;

// `tasks` tasks of 3 records each, arriving in a scattered order, every
// other record with stats.
struct Capture {
  RecordList rows;
  StatsTable stats;
};

uint64_t EvenTask(uint64_t n) { return 0x100000000ull + n * 5; }

Capture MakeCapture(uint64_t tasks, uint64_t (*task_id)(uint64_t) = EvenTask) {
  Capture c;
  for (uint64_t n = 0; n < tasks; ++n) {
    const uint64_t t = n * 7919 % tasks;  // 7919 is prime: a permutation
    for (uint32_t a = 0; a < 3; ++a) {
      ManifestRow r;
      r.task_id = task_id(t);
      r.arg_index = a;
      r.stage = a < 2 ? v1::STAGE_BEFORE_DISPATCH : v1::STAGE_AFTER_COMPLETION;
      r.role = a < 2 ? v1::ROLE_INPUT : v1::ROLE_OUTPUT;
      r.kind = v1::KIND_TENSOR;
      r.dtype = a == 1 ? v1::DTYPE_INT32 : v1::DTYPE_FLOAT32;
      r.func_count = 1;
      r.func_ids[0] = 0;
      r.device_thread = t % 2;
      r.ndims = 1;
      r.shape[0] = 4;
      r.strides[0] = 1;
      r.numel = 4;
      r.is_contiguous = true;
      r.bin_offset = c.rows.size() * 16;
      r.bin_size = 16;
      const uint64_t id = c.rows.size();
      c.rows.push_back(r);
      if (id % 2 == 0) {
        StatsRow s;
        s.present = true;
        s.count = 4;
        s.max = static_cast<double>(id);
        c.stats.Add(id, s);
      } else {
        c.stats.Add(id, StatsRow{});
      }
    }
  }
  return c;
}

// args.index of `c`: its path and bytes.
std::pair<std::string, std::string> Write(const std::string& name, const Capture& c) {
  v1::CaptureInfo info;
  info.set_name(name);
  v1::CaptureCounters counters;
  counters.set_total_args(c.rows.size());
  const std::string path = TempPath(name);
  const absl::Status s =
      WriteIndex(path, info, counters, false, c.rows, ManifestOrder(c.rows), &c.stats);
  EXPECT_TRUE(s.ok()) << s;
  return {path, ReadFileOrEmpty(path)};
}

// An object store in memory: serves `bytes`, counts the reads of each
// offset, fails reads that touch [fail_begin, fail_end) with Unavailable and
// xors `damage` into the byte at `damage_at` of what it returns.
struct MemoryStore {
  std::string bytes;
  std::atomic<uint64_t> fail_begin{0}, fail_end{0};
  uint64_t damage_at = ~uint64_t{0};
  char damage = 0;
  std::mutex mu;
  std::map<uint64_t, int> reads;  // by offset; guarded by mu

  IndexReader Reader() {
    return [this](uint64_t offset, uint64_t size, char* out) -> absl::Status {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++reads[offset];
      }
      if (offset > bytes.size() || size > bytes.size() - offset) {
        return absl::OutOfRangeError(absl::StrCat(size, " bytes at ", offset, " are past the end"));
      }
      if (offset < fail_end && fail_begin < offset + size) {
        return absl::UnavailableError("the store is down");
      }
      std::memcpy(out, bytes.data() + offset, size);
      if (damage_at >= offset && damage_at < offset + size) out[damage_at - offset] ^= damage;
      return absl::OkStatus();
    };
  }
  int total_reads() {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (const auto& [offset, count] : reads) n += count;
    return n;
  }
};

std::unique_ptr<IndexFile> OpenRanged(MemoryStore* store,
                                      IndexChecks checks = IndexChecks::kRowsRead) {
  auto f = IndexFile::OpenRanged("mem/args.index", store->bytes.size(), store->Reader(), checks);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(f).value() : nullptr;
}

void ExpectSameRow(const ManifestRow& a, const ManifestRow& b) {
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(a)), 0);
}

void ExpectSameHits(const std::vector<QueryHit>& a, const std::vector<QueryHit>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].record_id, b[i].record_id);
    ExpectSameRow(a[i].row, b[i].row);
    EXPECT_EQ(a[i].manifest_index, b[i].manifest_index);
    EXPECT_EQ(a[i].stats.has_value(), b[i].stats.has_value());
    if (a[i].stats && b[i].stats) {
      EXPECT_EQ(a[i].stats->max, b[i].stats->max);
    }
  }
}


class RangedIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    capture_ = MakeCapture(7000);  // 21000 rows, about 70 blocks
    auto [path, bytes] = Write("ranged.index", capture_);
    store_.bytes = bytes;
    auto local = IndexFile::Open(path);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = std::move(local).value();
    blocks_ = (bytes.size() + kBlock - 1) / kBlock;
    ASSERT_GT(blocks_, 60u);
  }

  uint64_t task(uint64_t n) const { return EvenTask(n); }

  Capture capture_;
  MemoryStore store_;
  std::unique_ptr<IndexFile> local_;
  uint64_t blocks_ = 0;
};

TEST_F(RangedIndexTest, OpenReadsTheFirstBlockOnly) {
  auto f = OpenRanged(&store_);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(store_.total_reads(), 1);
  EXPECT_EQ(store_.reads.count(0), 1u);
  EXPECT_EQ(f->fetched_bytes(), kBlock);
  EXPECT_EQ(f->size(), capture_.rows.size());
  EXPECT_EQ(f->info().name(), "ranged.index");
  EXPECT_EQ(f->counters().total_args(), capture_.rows.size());
  EXPECT_EQ(local_->fetched_bytes(), 0u);
}

TEST_F(RangedIndexTest, AnswersAsTheLocalIndex) {
  auto f = OpenRanged(&store_);
  ASSERT_NE(f, nullptr);
  // By task, including tasks that are not there (between, before, after).
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{3500}, uint64_t{6999}}) {
    for (uint64_t t : {task(n), task(n) + 1, task(n) - 1}) {
      ArgFilter q;
      q.task_id = t;
      const QueryPage want = local_->Query(q, 0, 100, 1000);
      const QueryPage got = f->Query(q, 0, 100, 1000);
      ASSERT_TRUE(got.error.ok()) << got.error;
      ExpectSameHits(got.hits, want.hits);
      EXPECT_EQ(got.next, want.next);
      q.role = v1::ROLE_OUTPUT;
      ExpectSameHits(f->Query(q, 0, 100, 1000).hits, local_->Query(q, 0, 100, 1000).hits);
      auto range = f->TaskRows(t);
      ASSERT_TRUE(range.ok()) << range.status();
      EXPECT_EQ(range->end - range->begin, want.hits.size());
    }
  }
  // Pages over everything, with a filter, limited by the budget.
  ArgFilter outputs;
  outputs.role = v1::ROLE_OUTPUT;
  for (uint64_t from = 0, pages = 0; pages < 5; ++pages) {
    const QueryPage want = local_->Query(outputs, from, 50, 120);
    const QueryPage got = f->Query(outputs, from, 50, 120);
    ASSERT_TRUE(got.error.ok()) << got.error;
    ExpectSameHits(got.hits, want.hits);
    ASSERT_EQ(got.next, want.next);
    from = *got.next;
  }
  for (uint64_t id : {uint64_t{0}, uint64_t{1}, uint64_t{20999}, uint64_t{12345}}) {
    auto want = local_->RecordById(id);
    absl::Status error;
    auto got = f->RecordById(id, &error);
    ASSERT_TRUE(error.ok()) << error;
    ASSERT_TRUE(got && want);
    ExpectSameRow(*got, *want);
    auto hit = f->HitById(id);
    ASSERT_TRUE(hit.ok()) << hit.status();
    ExpectSameHits({*hit}, {*local_->HitById(id)});
  }
  EXPECT_FALSE(f->RecordById(capture_.rows.size()));
  EXPECT_TRUE(absl::IsNotFound(f->HitById(capture_.rows.size()).status()));
  absl::Status error;
  ExpectSameHits(f->ByArrival(outputs, 100, 400, &error), local_->ByArrival(outputs, 100, 400));
  EXPECT_TRUE(error.ok()) << error;
  for (uint64_t i : {uint64_t{0}, uint64_t{777}, uint64_t{20998}}) {
    EXPECT_EQ(f->StatsOf(i).has_value(), local_->StatsOf(i).has_value());
    auto row = f->CheckedRow(i);
    ASSERT_TRUE(row.ok()) << row.status();
    ExpectSameRow(*row, *local_->CheckedRow(i));
  }
  EXPECT_TRUE(absl::IsDataLoss(f->CheckedRow(capture_.rows.size()).status()));
}

TEST_F(RangedIndexTest, NextMatchWalksAsTheLocalIndex) {
  auto f = OpenRanged(&store_);
  ASSERT_NE(f, nullptr);
  ArgFilter all, one_task, inputs;
  one_task.task_id = task(4242);
  inputs.role = v1::ROLE_INPUT;
  for (const ArgFilter& q : {all, one_task, inputs}) {
    uint64_t a = 0, b = 0, steps = 0;
    ManifestRow sa, sb;
    absl::Status error;
    for (;;) {
      const ManifestRow* ra = local_->NextMatch(q, &a, &sa);
      const ManifestRow* rb = f->NextMatch(q, &b, &sb, &error);
      ASSERT_TRUE(error.ok()) << error;
      ASSERT_EQ(a, b);
      ASSERT_EQ(ra == nullptr, rb == nullptr);
      if (ra == nullptr) break;
      ExpectSameRow(*ra, *rb);
      EXPECT_EQ(f->RecordIdAt(b, &error), local_->RecordIdAt(a));
      ++a, ++b, ++steps;
    }
    EXPECT_EQ(a, f->size());
    EXPECT_GT(steps, 0u);
  }
}

TEST_F(RangedIndexTest, QueryByTaskReadsLogarithmicallyManyBlocks) {
  auto f = OpenRanged(&store_);
  ASSERT_NE(f, nullptr);
  ArgFilter q;
  q.task_id = task(1234);
  const QueryPage page = f->Query(q, 0, 100, 1000);
  ASSERT_TRUE(page.error.ok()) << page.error;
  EXPECT_EQ(page.hits.size(), 3u);
  // Two binary searches probe rows and their task_id entries: about
  // log2(blocks) blocks of each region, the header's, and the range's rows,
  // record ids and stats.
  const int log_blocks = static_cast<int>(std::ceil(std::log2(blocks_)));
  EXPECT_LE(store_.total_reads(), 2 * log_blocks + 6) << "of " << blocks_ << " blocks";
  EXPECT_LT(f->fetched_bytes(), blocks_ * kBlock / 3);
  // Asked again: nothing new is read.
  const int reads = store_.total_reads();
  ExpectSameHits(f->Query(q, 0, 100, 1000).hits, page.hits);
  EXPECT_EQ(store_.total_reads(), reads);
}

// Task ids far from evenly spread (the interpolation's guesses are poor):
// the same answers, still O(log n) blocks.
uint64_t SkewedTask(uint64_t n) {
  if (n == 6999) return uint64_t{1} << 62;  // one far outlier
  return n < 3500 ? 2 * n : 1000000 + n * n * n;
}

TEST(RangedIndexSkewTest, UnevenTaskIdsAnswerAsTheLocalIndexInFewBlocks) {
  const Capture capture = MakeCapture(7000, SkewedTask);
  auto [path, bytes] = Write("skewed.index", capture);
  auto local = IndexFile::Open(path);
  ASSERT_TRUE(local.ok()) << local.status();
  const uint64_t blocks = (bytes.size() + kBlock - 1) / kBlock;
  const int log_blocks = static_cast<int>(std::ceil(std::log2(blocks)));
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{3499}, uint64_t{3500}, uint64_t{5000},
                     uint64_t{6998}, uint64_t{6999}}) {
    for (uint64_t t : {SkewedTask(n), SkewedTask(n) + 1}) {
      MemoryStore store;
      store.bytes = bytes;
      auto f = OpenRanged(&store);
      ASSERT_NE(f, nullptr);
      ArgFilter q;
      q.task_id = t;
      const QueryPage page = f->Query(q, 0, 100, 1000);
      ASSERT_TRUE(page.error.ok()) << page.error;
      ExpectSameHits(page.hits, (*local)->Query(q, 0, 100, 1000).hits);
      EXPECT_EQ(page.hits.size(), t == SkewedTask(n) ? 3u : 0u) << t;
      EXPECT_LE(store.total_reads(), 2 * log_blocks + 6) << t << " of " << blocks << " blocks";
    }
  }
}

TEST_F(RangedIndexTest, ThreadsFetchEachBlockOnce) {
  auto f = OpenRanged(&store_);
  ASSERT_NE(f, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t n = 0; n < 7000; n += 97) {
        ArgFilter q;
        q.task_id = task((n + t * 13) % 7000);
        const QueryPage page = f->Query(q, 0, 100, 1000);
        if (!page.error.ok() || page.hits.size() != 3) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  std::lock_guard<std::mutex> lock(store_.mu);
  uint64_t fetched = 0;
  for (const auto& [offset, count] : store_.reads) {
    EXPECT_EQ(count, 1) << "block at " << offset;
    fetched += std::min<uint64_t>(kBlock, store_.bytes.size() - offset);
  }
  EXPECT_EQ(f->fetched_bytes(), fetched);
}

TEST_F(RangedIndexTest, EveryRowChecksReadEverythingAtOpen) {
  auto f = OpenRanged(&store_, IndexChecks::kEveryRow);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->fetched_bytes(), store_.bytes.size());
  EXPECT_EQ(static_cast<uint64_t>(store_.total_reads()), blocks_);
  // A damaged row anywhere fails the open, naming its byte.
  MemoryStore damaged;
  damaged.bytes = store_.bytes;
  const IndexLayout l = IndexLayoutOf(store_.bytes, capture_.rows.size());
  damaged.bytes[l.rows_at + 15000 * sizeof(ManifestRow)] ^= 0x40;  // its task id
  auto bad = IndexFile::OpenRanged("mem/damaged", damaged.bytes.size(), damaged.Reader(),
                                   IndexChecks::kEveryRow);
  EXPECT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
}

TEST_F(RangedIndexTest, FailedReadsAreErrorsAndRetriedLater) {
  // The header's block fails: no index.
  store_.fail_begin = 0;
  store_.fail_end = 1;
  auto none = IndexFile::OpenRanged("mem/args.index", store_.bytes.size(), store_.Reader());
  EXPECT_TRUE(absl::IsUnavailable(none.status())) << none.status();
  EXPECT_TRUE(absl::StrContains(none.status().message(), "mem/args.index: bytes 0 to 65536"))
      << none.status();
  store_.fail_end = 0;
  auto f = OpenRanged(&store_);
  ASSERT_NE(f, nullptr);
  // Everything past the first block fails.
  store_.fail_begin = kBlock;
  store_.fail_end = store_.bytes.size();
  ArgFilter q;
  q.task_id = task(77);
  QueryPage page = f->Query(q, 0, 100, 1000);
  EXPECT_TRUE(absl::IsUnavailable(page.error)) << page.error;
  EXPECT_TRUE(page.hits.empty());
  EXPECT_FALSE(page.next);
  absl::Status error;
  uint64_t position = 0;
  ManifestRow scratch;
  EXPECT_EQ(f->NextMatch(q, &position, &scratch, &error), nullptr);
  EXPECT_TRUE(absl::IsUnavailable(error)) << error;
  EXPECT_EQ(position, f->size());
  error = absl::OkStatus();
  EXPECT_FALSE(f->RecordById(5, &error));
  EXPECT_TRUE(absl::IsUnavailable(error)) << error;
  error = absl::OkStatus();
  EXPECT_TRUE(f->ByArrival(ArgFilter(), 0, 10, &error).empty());
  EXPECT_TRUE(absl::IsUnavailable(error)) << error;
  error = absl::OkStatus();
  EXPECT_FALSE(f->StatsOf(10, &error));
  EXPECT_TRUE(absl::IsUnavailable(error)) << error;
  error = absl::OkStatus();
  EXPECT_EQ(f->RecordIdAt(10, &error), f->size());
  EXPECT_TRUE(absl::IsUnavailable(error)) << error;
  EXPECT_TRUE(absl::IsUnavailable(f->HitById(5).status()));
  EXPECT_TRUE(absl::IsUnavailable(f->CheckedRow(5).status()));
  EXPECT_TRUE(absl::IsUnavailable(f->TaskRows(task(77)).status()));
  EXPECT_EQ(f->fetched_bytes(), kBlock);
  // The store is back: the same questions are answered, as locally.
  store_.fail_end = 0;
  page = f->Query(q, 0, 100, 1000);
  ASSERT_TRUE(page.error.ok()) << page.error;
  ExpectSameHits(page.hits, local_->Query(q, 0, 100, 1000).hits);
  auto hit = f->HitById(5);
  ASSERT_TRUE(hit.ok()) << hit.status();
  ExpectSameHits({*hit}, {*local_->HitById(5)});
}

TEST_F(RangedIndexTest, AStoreThatServesLessThanTheIndexIsAnError) {
  // The object is shorter than the size the caller was told: the reader's
  // OutOfRange for what lies past its end, never zeros read as rows.
  MemoryStore short_store;
  short_store.bytes = store_.bytes.substr(0, store_.bytes.size() - 1000);
  auto f = IndexFile::OpenRanged("mem/short", store_.bytes.size(), short_store.Reader());
  ASSERT_TRUE(f.ok()) << f.status();
  ArgFilter q;
  q.task_id = task(6999);  // the last task: its rows lie in the last blocks
  const QueryPage page = (*f)->Query(q, 0, 100, 1000);
  EXPECT_TRUE(absl::IsOutOfRange(page.error)) << page.error;
  // A size that does not fit the header's rows.
  auto wrong = IndexFile::OpenRanged("mem/short", short_store.bytes.size(), short_store.Reader());
  EXPECT_TRUE(absl::IsDataLoss(wrong.status())) << wrong.status();
  auto tiny = IndexFile::OpenRanged("mem/tiny", 10, short_store.Reader());
  EXPECT_TRUE(absl::IsDataLoss(tiny.status())) << tiny.status();
  // A size no index has (a damaged catalog row): refused before anything
  // is reserved or read.
  const int reads = short_store.total_reads();
  auto huge = IndexFile::OpenRanged("mem/huge", uint64_t{1} << 60, short_store.Reader());
  EXPECT_TRUE(absl::IsDataLoss(huge.status())) << huge.status();
  EXPECT_EQ(short_store.total_reads(), reads);
}

TEST_F(RangedIndexTest, DamagedBytesAreDataLossNamingTheByte) {
  const uint64_t rows = capture_.rows.size();
  const IndexLayout l = IndexLayoutOf(store_.bytes, rows);
  ASSERT_EQ(l.stats_at + rows * sizeof(StatsRow), store_.bytes.size());
  ArgFilter q;
  q.task_id = task(3000);
  auto range = local_->TaskRows(*q.task_id);
  ASSERT_TRUE(range.ok());
  const uint64_t row = range->begin + 1;
  const uint64_t id = local_->RecordIdAt(row);
  struct Case {
    std::string what;
    uint64_t byte;
    char damage;
  };
  const std::vector<Case> cases = {
      {"the row's dtype", l.rows_at + row * sizeof(ManifestRow) + offsetof(ManifestRow, dtype),
       0x70},
      {"the row's task id", l.rows_at + row * sizeof(ManifestRow), 0x01},
      {"the task_id column", l.tasks_at + row * 8 + 3, 0x10},
      {"the record id", l.record_ids_at + row * 4 + 3, 0x40},
      {"the stats row's present byte", l.stats_at + row * sizeof(StatsRow) +
                                           offsetof(StatsRow, present), 0x02},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    MemoryStore damaged;
    damaged.bytes = store_.bytes;
    damaged.damage_at = c.byte;
    damaged.damage = c.damage;
    auto f = IndexFile::OpenRanged("mem/damaged", damaged.bytes.size(), damaged.Reader());
    ASSERT_TRUE(f.ok()) << f.status();
    const QueryPage page = (*f)->Query(q, 0, 100, 1000);
    EXPECT_TRUE(absl::IsDataLoss(page.error)) << page.error;
    EXPECT_TRUE(page.hits.empty());
    // The row's byte, or the column's: the one that was damaged, or the
    // row it is checked against.
    const uint64_t row_byte = l.rows_at + row * sizeof(ManifestRow);
    const std::string message(page.error.message());
    EXPECT_TRUE(absl::StrContains(message, absl::StrCat("byte ", c.byte - c.byte % 4)) ||
                absl::StrContains(message, absl::StrCat("byte ", row_byte)))
        << message;
  }
  // A damaged position[] entry: the record's lookup names it.
  MemoryStore damaged;
  damaged.bytes = store_.bytes;
  damaged.damage_at = l.positions_at + id * 4;
  damaged.damage = 0x01;
  auto f = IndexFile::OpenRanged("mem/damaged", damaged.bytes.size(), damaged.Reader());
  ASSERT_TRUE(f.ok()) << f.status();
  auto hit = (*f)->HitById(id);
  EXPECT_TRUE(absl::IsDataLoss(hit.status())) << hit.status();
  EXPECT_TRUE(absl::StrContains(hit.status().message(), absl::StrCat("byte ", damaged.damage_at)))
      << hit.status();
  absl::Status error;
  EXPECT_FALSE((*f)->RecordById(id, &error));
  EXPECT_TRUE(absl::IsDataLoss(error)) << error;
}

}  // namespace
}  // namespace argsdump
