#include "store/live_query.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <random>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "format/kernel_table.h"
#include "format/capture_index_layout_testing.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

// Tasks 0..9 in reverse arrival order, each with 3 records (two inputs
// before dispatch, one output after), on two device threads.
RecordList Rows() {
  RecordList rows;
  for (int t = 9; t >= 0; --t) {
    for (int a = 0; a < 3; ++a) {
      ManifestRow r;
      r.task_id = 0x100000000ull + t;
      r.arg_index = a;
      r.stage = a < 2 ? v1::STAGE_BEFORE_DISPATCH : v1::STAGE_AFTER_COMPLETION;
      r.role = a < 2 ? v1::ROLE_INPUT : v1::ROLE_OUTPUT;
      r.kind = v1::KIND_TENSOR;
      r.dtype = a == 1 ? v1::DTYPE_INT32 : v1::DTYPE_FLOAT32;
      r.func_count = 1;
      r.func_ids[0] = static_cast<uint16_t>(t % 3);
      r.device_thread = t % 2;
      r.ndims = 1;
      r.shape[0] = 4;
      r.strides[0] = 1;
      r.numel = 4;
      r.is_contiguous = true;
      r.bin_offset = rows.size() * 16;
      r.bin_size = 16;
      rows.push_back(r);
    }
  }
  return rows;
}

std::unique_ptr<IndexFile> WriteAndOpen(const std::string& name, const RecordList& rows) {
  v1::CaptureInfo info;
  info.set_name(name);
  (*info.mutable_labels())["case"] = "index";
  v1::CaptureCounters counters;
  counters.set_total_args(rows.size());
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteIndex(path, info, counters, true, rows, ManifestOrder(rows)).ok());
  auto f = IndexFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(f).value() : nullptr;
}

TEST(CaptureIndexTest, QueriesByTaskInManifestOrder) {
  const RecordList rows = Rows();
  auto index = WriteAndOpen("by_task.index", rows);
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->size(), rows.size());
  EXPECT_EQ(index->info().labels().at("case"), "index");
  EXPECT_EQ(index->counters().total_args(), rows.size());
  EXPECT_TRUE(index->recovered());
  ArgFilter q;
  q.task_id = 0x100000003ull;
  QueryPage page = index->Query(q, 0, 100, 1000);
  ASSERT_EQ(page.hits.size(), 3u);
  EXPECT_FALSE(page.next);
  // Task 3 arrived 7th (tasks arrive 9, 8, ..., 0): ids 18, 19, 20.
  EXPECT_EQ(page.hits[0].record_id, 18u);
  EXPECT_EQ(page.hits[2].row.stage, v1::STAGE_AFTER_COMPLETION);
  q.role = v1::ROLE_OUTPUT;
  page = index->Query(q, 0, 100, 1000);
  ASSERT_EQ(page.hits.size(), 1u);
  EXPECT_EQ(page.hits[0].record_id, 20u);
  q.task_id = 0x100000077ull;  // absent
  EXPECT_TRUE(index->Query(q, 0, 100, 1000).hits.empty());
  // An odd number of rows (the task_id column must still be 8-aligned:
  // UBSan checks the loads under --config=asan).
  RecordList odd = rows;
  odd.pop_back();
  auto odd_index = WriteAndOpen("odd.index", odd);
  ASSERT_NE(odd_index, nullptr);
  ArgFilter first;
  first.task_id = 0x100000000ull;  // arrived last: lost its output
  EXPECT_EQ(odd_index->Query(first, 0, 100, 1000).hits.size(), 2u);
  first.task_id = 0x100000009ull;
  EXPECT_EQ(odd_index->Query(first, 0, 100, 1000).hits.size(), 3u);
}

TEST(CaptureIndexTest, PagesAndBudgetsAScanWithoutTask) {
  const RecordList rows = Rows();
  auto index = WriteAndOpen("scan.index", rows);
  ASSERT_NE(index, nullptr);
  ArgFilter q;
  q.dtype = v1::DTYPE_INT32;  // one per task
  std::vector<uint64_t> tasks;
  uint64_t from = 0;
  int calls = 0;
  for (;;) {
    QueryPage page = index->Query(q, from, 3, 7);  // at most 3 hits, 7 rows looked at
    ++calls;
    EXPECT_LE(page.hits.size(), 3u);
    for (const QueryHit& h : page.hits) tasks.push_back(h.row.task_id);
    if (!page.next) break;
    from = *page.next;
  }
  ASSERT_EQ(tasks.size(), 10u);
  for (size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(tasks[i], 0x100000000ull + i);
  EXPECT_GE(calls, 5);  // 30 rows, 7 per call
  ArgFilter f;
  f.func_id = 2;  // tasks 2, 5, 8
  EXPECT_EQ(index->Query(f, 0, 100, 1000).hits.size(), 9u);
}

TEST(CaptureIndexTest, RecordsByIdAndByArrival) {
  const RecordList rows = Rows();
  auto index = WriteAndOpen("by_id.index", rows);
  ASSERT_NE(index, nullptr);
  for (uint64_t id = 0; id < rows.size(); ++id) {
    auto r = index->RecordById(id);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->bin_offset, rows[id].bin_offset);
  }
  EXPECT_FALSE(index->RecordById(rows.size()).has_value());
  ArgFilter outputs;
  outputs.role = v1::ROLE_OUTPUT;
  const auto hits = index->ByArrival(outputs, 3, 9);
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].record_id, 5u);
  EXPECT_EQ(hits[1].record_id, 8u);
}

TEST(CaptureIndexTest, LiveQueryMatchesTheIndex) {
  const RecordList rows = Rows();
  auto index = WriteAndOpen("live.index", rows);
  ASSERT_NE(index, nullptr);
  std::vector<uint32_t> task_rows;
  for (uint32_t i = 0; i < rows.size(); ++i) {
    if (rows[i].task_id == 0x100000004ull) task_rows.push_back(i);
  }
  ArgFilter q;
  q.task_id = 0x100000004ull;
  const QueryPage live = QueryLive(rows, &task_rows, q, 0, 2, 1000);
  const QueryPage done = index->Query(q, 0, 2, 1000);
  ASSERT_EQ(live.hits.size(), 2u);
  ASSERT_EQ(done.hits.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(live.hits[i].record_id, done.hits[i].record_id);
  ASSERT_TRUE(live.next.has_value());
  EXPECT_EQ(QueryLive(rows, &task_rows, q, *live.next, 2, 1000).hits.size(), 1u);
}

// The kernel table rides in the index's capture info: it reads back, and
// a table over its bounds (the index is untrusted) is DataLoss naming the
// byte and the entry, for the service's and the viewer's checks alike.
TEST(CaptureIndexTest, TheKernelTableReadsBackAndAHostileOneIsRefused) {
  const RecordList rows = Rows();
  v1::CaptureInfo info;
  info.set_name("kernels");
  for (uint32_t id = 0; id < 3; ++id) {
    v1::Kernel* k = info.add_kernels();
    k->set_func_id(id);
    k->set_name(id == 2 ? "matmul" : absl::StrCat("k", id));
    k->set_type(id == 2 ? "matmul" : "elementwise");
    k->add_signature()->set_direction(v1::ARG_DIRECTION_IN);
  }
  v1::CaptureCounters counters;
  counters.set_total_args(rows.size());
  const std::string path = TempPath("kernels.index");
  ASSERT_TRUE(WriteIndex(path, info, counters, false, rows, ManifestOrder(rows)).ok());
  auto f = IndexFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->info().kernels_size(), 3);
  ArgFilter q;
  q.func_name = "matmul";  // func 2: tasks 2, 5, 8
  ASSERT_TRUE(ResolveKernelFilter((*f)->info().kernels(), &q).ok());
  EXPECT_EQ((*f)->Query(q, 0, 100, 1000).hits.size(), 9u);
  q = ArgFilter();
  q.func_type = "elementwise";  // funcs 0 and 1
  ASSERT_TRUE(ResolveKernelFilter((*f)->info().kernels(), &q).ok());
  EXPECT_EQ((*f)->Query(q, 0, 100, 1000).hits.size(), 21u);

  struct Case {
    std::function<void(v1::CaptureInfo*)> damage;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](v1::CaptureInfo* i) { i->mutable_kernels(1)->set_name("matmul"); },
       "kernels[2].name: \"matmul\" is given twice"},
      {[](v1::CaptureInfo* i) { i->mutable_kernels(0)->set_name(std::string(129, 'x')); },
       "kernels[0].name: 129 bytes, at most 128"},
      {[](v1::CaptureInfo* i) { i->mutable_kernels(0)->set_type("a\tb"); },
       "kernels[0].type: a control character (9)"},
      {[](v1::CaptureInfo* i) {
         i->mutable_kernels(2)->mutable_signature(0)->set_direction(
             static_cast<v1::ArgDirection>(12));
       },
       "kernels[2].signature[0]: direction 12"},
      {[](v1::CaptureInfo* i) {
         for (int k = 0; k < 5000; ++k) i->add_kernels()->set_name(absl::StrCat("n", k));
       },
       "kernels: 5003 kernels, at most 4096"},
  };
  for (const Case& c : cases) {
    v1::CaptureInfo bad = info;
    c.damage(&bad);
    ASSERT_TRUE(WriteIndex(path, bad, counters, false, rows, ManifestOrder(rows)).ok());
    for (IndexChecks checks : {IndexChecks::kEveryRow, IndexChecks::kRowsRead}) {
      auto opened = IndexFile::Open(path, checks);
      ASSERT_FALSE(opened.ok()) << c.says;
      EXPECT_TRUE(absl::IsDataLoss(opened.status())) << opened.status();
      EXPECT_NE(opened.status().message().find("byte 64: capture info: " + c.says),
                std::string::npos)
          << opened.status();
    }
  }
}

TEST(CaptureIndexTest, DamagedFilesAreDataLoss) {
  const RecordList rows = Rows();
  ASSERT_NE(WriteAndOpen("damaged.index", rows), nullptr);
  const std::string path = TempPath("damaged.index");
  ASSERT_EQ(::truncate(path.c_str(), 1000), 0);  // cut short
  auto cut = IndexFile::Open(path);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("damaged.index"), std::string::npos);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << std::string(200, 'x');
  }
  EXPECT_EQ(IndexFile::Open(path).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(IndexFile::Open(TempPath("absent.index")).status().code(), absl::StatusCode::kNotFound);
}

void Put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Every way a file of the right size can lie: each is refused at open
// (DataLoss naming the file and the byte), so that no lookup reads it.
TEST(CaptureIndexTest, EveryRowAndArrayIsCheckedAtOpen) {
  const RecordList rows = Rows();
  ASSERT_NE(WriteAndOpen("lies.index", rows), nullptr);
  const std::string path = TempPath("lies.index");
  const std::string good = ReadFileOrEmpty(path);
  const IndexLayout l = IndexLayoutOf(good, rows.size());
  struct Lie {
    std::string what;
    uint64_t at;
    std::string bytes;
    std::string says;
  };
  const uint64_t row5 = l.rows_at + 5 * sizeof(ManifestRow);
  const std::vector<Lie> lies = {
      {"positions all 0xFF", l.positions_at, std::string(rows.size() * 4, '\xff'), "record id"},
      {"a record id out of range", l.record_ids_at + 8, std::string("\xff\xff\xff\xff", 4),
       "has record id 4294967295"},
      {"a repeated record id", l.record_ids_at + 4, good.substr(l.record_ids_at, 4), "repeated"},
      {"a bool holding 0x9f", row5 + offsetof(ManifestRow, truncated), "\x9f", "holds 159"},
      {"a role out of range", row5 + offsetof(ManifestRow, role), "\x09", "enum out of range"},
      {"a dtype out of range", row5 + offsetof(ManifestRow, dtype), "\x7f", "enum out of range"},
      {"9 dims", row5 + offsetof(ManifestRow, ndims), "\x09", "9 dims"},
      {"7 func ids", row5 + offsetof(ManifestRow, func_count), "\x07", "7 func ids"},
      {"bin_offset + bin_size overflowing", row5 + offsetof(ManifestRow, bin_size),
       std::string(8, '\xff'), "overflows"},
      {"the task column out of order", l.tasks_at, std::string(8, '\xff'), "task_id column"},
      {"a row's task_id unlike its column", row5, std::string(8, '\x01'), "task_id column"},
      // Fields that disagree (found by the capture_index fuzzer): a reader
      // would size the payload by one and read it by the other.
      {"a shape unlike numel", row5 + offsetof(ManifestRow, shape), std::string("\x06\x00\x10\x02", 4),
       "is not the shape's product"},
      {"a bin_size unlike numel", row5 + offsetof(ManifestRow, bin_size), std::string("\x11", 1),
       "is not numel x element size"},
      {"an unset stage", row5 + offsetof(ManifestRow, stage), std::string("\x00", 1),
       "stage unset"},
  };
  for (const Lie& lie : lies) {
    std::string bad = good;
    bad.replace(lie.at, lie.bytes.size(), lie.bytes);
    Put(path, bad);
    auto f = IndexFile::Open(path);
    ASSERT_FALSE(f.ok()) << lie.what;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << lie.what;
    EXPECT_NE(f.status().message().find("lies.index: byte "), std::string::npos)
        << lie.what << ": " << f.status();
    EXPECT_NE(f.status().message().find(lie.says), std::string::npos)
        << lie.what << ": " << f.status();
  }
  Put(path, good);
  EXPECT_TRUE(IndexFile::Open(path).ok());
}

// The task times and the clock are kept: every row reads back with its
// dispatch_ns/complete_ns, the info with its clock.
TEST(CaptureIndexTest, TaskTimesAndTheClockReadBack) {
  RecordList rows = Rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].dispatch_ns = 1000 + i;
    rows[i].complete_ns = i % 3 == 0 ? 0 : 5000 + i;  // some not known
  }
  v1::CaptureInfo info;
  info.mutable_clock()->set_base_monotonic_ns(123);
  info.mutable_clock()->set_base_unix_ns(1795953930000000000);
  info.mutable_clock()->set_host("node7");
  const std::string path = TempPath("times.index");
  ASSERT_TRUE(WriteIndex(path, info, v1::CaptureCounters(), false, rows, ManifestOrder(rows)).ok());
  for (IndexChecks checks : {IndexChecks::kEveryRow, IndexChecks::kRowsRead}) {
    auto index = IndexFile::Open(path, checks);
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ((*index)->info().clock().host(), "node7");
    EXPECT_EQ((*index)->info().clock().base_unix_ns(), 1795953930000000000);
    for (uint64_t id = 0; id < rows.size(); ++id) {
      absl::StatusOr<QueryHit> hit = (*index)->HitById(id);
      ASSERT_TRUE(hit.ok()) << hit.status();
      EXPECT_EQ(hit->row.dispatch_ns, rows[id].dispatch_ns) << id;
      EXPECT_EQ(hit->row.complete_ns, rows[id].complete_ns) << id;
      EXPECT_EQ(RecordFromRow(hit->row).complete_ns(), rows[id].complete_ns);
    }
  }
}

// Every row NextMatch walks to for `q`, checked against Query's page of the
// same filter: the same positions, record ids and row bytes.
void ExpectNextMatchAgreesWithQuery(const IndexFile& index, const ArgFilter& q) {
  const QueryPage page = index.Query(q, 0, 1 << 20, 1 << 20);
  std::vector<std::pair<uint64_t, ManifestRow>> walked;
  ManifestRow scratch;
  uint64_t position = 0;
  for (const ManifestRow* r; (r = index.NextMatch(q, &position, &scratch)) != nullptr;
       ++position) {
    walked.emplace_back(position, *r);
  }
  EXPECT_EQ(position, index.size());
  ASSERT_EQ(walked.size(), page.hits.size());
  for (size_t i = 0; i < walked.size(); ++i) {
    EXPECT_EQ(walked[i].first, page.hits[i].manifest_index.value()) << i;
    EXPECT_EQ(index.RecordIdAt(walked[i].first), page.hits[i].record_id) << i;
    EXPECT_EQ(std::memcmp(&walked[i].second, &page.hits[i].row, sizeof(ManifestRow)), 0) << i;
  }
}

// An index of version 2 (120-byte rows, no times) still reads: the same
// rows, their times 0. It is made from a version 3 index of the same rows
// by cutting the times off every row.
TEST(CaptureIndexTest, AVersion2IndexReadsWithTimesZero) {
  RecordList rows = Rows();
  for (ManifestRow& r : rows) r.dispatch_ns = 77;  // cut off below
  ASSERT_NE(WriteAndOpen("v3.index", rows), nullptr);
  const std::string v3 = ReadFileOrEmpty(TempPath("v3.index"));
  const IndexLayout l = IndexLayoutOf(v3, rows.size());
  std::string v2 = v3.substr(0, l.rows_at);
  const uint32_t version = 2, row_bytes = kIndexRowBytesV2;
  std::memcpy(&v2[4], &version, 4);
  std::memcpy(&v2[8], &row_bytes, 4);
  for (size_t i = 0; i < rows.size(); ++i) {
    v2 += v3.substr(l.rows_at + i * sizeof(ManifestRow), kIndexRowBytesV2);
  }
  v2 += v3.substr(l.record_ids_at);
  const std::string path = TempPath("v2.index");
  Put(path, v2);
  for (IndexChecks checks : {IndexChecks::kEveryRow, IndexChecks::kRowsRead}) {
    auto old = IndexFile::Open(path, checks);
    ASSERT_TRUE(old.ok()) << old.status();
    ASSERT_EQ((*old)->size(), rows.size());
    for (uint64_t id = 0; id < rows.size(); ++id) {
      absl::StatusOr<QueryHit> hit = (*old)->HitById(id);
      ASSERT_TRUE(hit.ok()) << hit.status();
      ManifestRow want = rows[id];
      want.dispatch_ns = 0;
      EXPECT_EQ(std::memcmp(&hit->row, &want, sizeof(want)), 0) << id;
    }
    ArgFilter q;
    q.task_id = 0x100000003ull;
    QueryPage page = (*old)->Query(q, 0, 100, 1000);
    ASSERT_EQ(page.hits.size(), 3u);
    EXPECT_EQ(page.hits[0].record_id, 18u);
    EXPECT_EQ(page.hits[0].row.dispatch_ns, 0u);
    if (checks == IndexChecks::kEveryRow) {  // NextMatch: from the shorter rows, times 0
      ExpectNextMatchAgreesWithQuery(**old, ArgFilter());
      ExpectNextMatchAgreesWithQuery(**old, q);
    }
  }
  // Version 2 with version 3's row size, or a version from the future: refused.
  std::string wrong = v2;
  const uint32_t big_rows = sizeof(ManifestRow), future = 4;
  std::memcpy(&wrong[8], &big_rows, 4);
  Put(path, wrong);
  EXPECT_TRUE(absl::IsDataLoss(IndexFile::Open(path).status()));
  wrong = v3;
  std::memcpy(&wrong[4], &future, 4);
  Put(path, wrong);
  EXPECT_NE(IndexFile::Open(path).status().message().find("version 4"), std::string::npos);
}

TEST(CaptureIndexTest, NextMatchWalksTheRowsAQueryFinds) {
  RecordList rows = Rows();
  for (size_t i = 0; i < rows.size(); ++i) rows[i].dispatch_ns = 1000 + i;
  std::unique_ptr<IndexFile> index = WriteAndOpen("next_match.index", rows);
  ASSERT_NE(index, nullptr);
  ExpectNextMatchAgreesWithQuery(*index, ArgFilter());
  ArgFilter task;
  task.task_id = 0x100000003ull;
  ExpectNextMatchAgreesWithQuery(*index, task);
  ArgFilter outputs;
  outputs.role = v1::ROLE_OUTPUT;
  ExpectNextMatchAgreesWithQuery(*index, outputs);
  ArgFilter none;
  none.task_id = 0x7777ull;
  ExpectNextMatchAgreesWithQuery(*index, none);
  // From a position past a task's rows, a task filter finds nothing.
  ManifestRow scratch;
  uint64_t position = index->size();
  EXPECT_EQ(index->NextMatch(task, &position, &scratch), nullptr);
  EXPECT_EQ(position, index->size());
}

// Random damage anywhere: refused at open, or (bytes no query trusts, such
// as a shape or a counter) served without a crash: every lookup of the
// opened index stays in bounds (ASan runs this too).
TEST(CaptureIndexTest, RandomDamageIsRefusedOrHarmless) {
  const RecordList rows = Rows();
  ASSERT_NE(WriteAndOpen("random.index", rows), nullptr);
  const std::string path = TempPath("random.index");
  const std::string good = ReadFileOrEmpty(path);
  std::mt19937 rng(3);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
      bad[rng() % bad.size()] = static_cast<char>(rng());
    }
    Put(path, bad);
    auto f = IndexFile::Open(path);
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
      ++refused;
      continue;
    }
    for (uint64_t id = 0; id < (*f)->size() + 2; ++id) (*f)->RecordById(id);
    for (const ManifestRow& r : rows) {
      ArgFilter q;
      q.task_id = r.task_id;
      (*f)->Query(q, 0, 100, 1000);
    }
    (*f)->Query(ArgFilter(), 0, 1000, 1000);
    (*f)->ByArrival(ArgFilter(), 0, 1000);
    ManifestRow scratch;
    for (uint64_t at = 0; (*f)->NextMatch(ArgFilter(), &at, &scratch) != nullptr; ++at) {
      ASSERT_LT((*f)->RecordIdAt(at), (*f)->size());
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace argsdump
