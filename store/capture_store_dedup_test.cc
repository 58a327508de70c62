// Content dedup in the capture store: which payloads are
// shared, that every entry still reads its own bytes, and that the journal,
// Reopen and Recover place shared payloads right.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "store/capture_store.h"
#include "store/payload_dedup.h"
#include "format/capture_index.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/record_batch.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

v1::CaptureInfo Info() {
  v1::CaptureInfo info;
  info.set_name("dedup");
  info.set_level(v1::DUMP_LEVEL_FULL);
  info.set_platform("a2a3sim");
  return info;
}

// Bytes no other call returns (for another seed).
std::string Unique(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  return s;
}

struct Arg {
  uint64_t task;
  v1::Stage stage;
  v1::Role role;
  std::string bytes;
  bool truncated = false;
};

v1::ArgRecord RecordOf(const Arg& a, uint32_t index) {
  // A truncated payload is the first bytes of a tensor twice its size.
  const uint32_t elements = static_cast<uint32_t>(a.bytes.size() / 4) * (a.truncated ? 2 : 1);
  return TensorRecord(a.task)
      .Stage(a.stage)
      .Arg(index)
      .Role(a.role)
      .FuncIds({3})
      .Shape({elements})
      .Contiguous()
      .Truncated(a.truncated)
      .Build();
}

// Appends `args` in batches of `per_batch` (payloads cut in two where they
// are long enough, as a stream cuts them) to a new store at `dir`.
std::unique_ptr<CaptureStore> Write(const std::string& dir, const std::vector<Arg>& args,
                                    bool dedup, size_t per_batch, bool finish = true) {
  auto created = CaptureStore::Create(dir, Info());
  EXPECT_TRUE(created.ok()) << created.status();
  std::unique_ptr<CaptureStore> store = std::move(created).value();
  store->set_payload_dedup(dedup);
  RecordBatch all;
  for (size_t i = 0; i < args.size(); ++i) all.Add(RecordOf(args[i], i % 4), args[i].bytes);
  for (size_t from = 0; from < args.size(); from += per_batch) {
    const size_t to = std::min(args.size(), from + per_batch);
    PreparedRecords prepared;
    std::vector<absl::string_view> cut;
    for (size_t i = from; i < to; ++i) {
      EXPECT_TRUE(prepared.Add(all.records()[i]).ok());
      const absl::string_view p = all.payload(i);
      cut.push_back(p.substr(0, p.size() / 3));
      cut.push_back(p.substr(p.size() / 3));
    }
    const absl::Status s = store->AppendPrepared(prepared, cut);
    EXPECT_TRUE(s.ok()) << s;
  }
  if (finish) {
    EXPECT_TRUE(store->Finish(v1::CaptureCounters()).ok());
  }
  return store;
}

// Record i's bytes as `dir`'s args.bin and its index say.
std::vector<std::string> EntryBytes(const CaptureStore& store) {
  const std::string bin = ReadFileOrEmpty(store.dir() + "/args.bin");
  std::vector<std::string> out;
  for (uint64_t i = 0; i < store.records(); ++i) {
    const ManifestRow row = *store.RecordById(i);
    EXPECT_LE(row.bin_offset + row.bin_size, bin.size()) << i;
    out.push_back(bin.substr(row.bin_offset, row.bin_size));
  }
  return out;
}

// A chain of kernels: task t reads tensor t and writes tensor t + 1, which
// task t + 1 reads; so every output is the next task's input.
std::vector<Arg> Chain(int tasks, size_t bytes) {
  std::vector<Arg> args;
  for (int t = 0; t < tasks; ++t) {
    args.push_back({uint64_t(t), v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, Unique(bytes, t)});
    args.push_back({uint64_t(t), v1::STAGE_AFTER_COMPLETION, v1::ROLE_OUTPUT, Unique(bytes, t + 1)});
  }
  return args;
}

TEST(CaptureStoreDedupTest, AChainStoresEveryProducerConsumerPairOnce) {
  const std::vector<Arg> args = Chain(20, 4096);
  for (size_t per_batch : {1, 3, 40}) {
    SCOPED_TRACE(per_batch);
    auto shared = Write(TempPath(absl::StrCat("chain", per_batch, "/args_dump")), args, true,
                        per_batch);
    auto plain = Write(TempPath(absl::StrCat("chain_plain", per_batch, "/args_dump")), args,
                       false, per_batch);
    // 40 payloads of 4096 bytes, 21 distinct tensors: 19 inputs shared.
    EXPECT_EQ(ReadFileOrEmpty(plain->dir() + "/args.bin").size(), 40u * 4096);
    EXPECT_EQ(ReadFileOrEmpty(shared->dir() + "/args.bin").size(), 21u * 4096);
    EXPECT_EQ(shared->counters().payload_bytes(), 40u * 4096);
    EXPECT_EQ(shared->counters().payload_bytes_stored(), 21u * 4096);
    EXPECT_EQ(shared->counters().deduplicated_args(), 19u);
    EXPECT_EQ(plain->counters().payload_bytes_stored(), 40u * 4096);
    EXPECT_EQ(plain->counters().deduplicated_args(), 0u);
    // Entry by entry, the same bytes; and each is the arg's own.
    const std::vector<std::string> a = EntryBytes(*shared), b = EntryBytes(*plain);
    ASSERT_EQ(a.size(), args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      EXPECT_TRUE(a[i] == b[i]) << i;
      EXPECT_TRUE(a[i] == args[i].bytes) << i;
    }
    // Without sharing, args.bin is the stream as sent.
    std::string stream;
    for (const Arg& x : args) stream += x.bytes;
    EXPECT_TRUE(ReadFileOrEmpty(plain->dir() + "/args.bin") == stream);
    // The manifests differ in bin_offset and the stored counters only.
    const std::string m = ReadFileOrEmpty(shared->dir() + "/args_dump.json");
    EXPECT_NE(m.find("\"payload_bytes_stored\": 86016,"), std::string::npos);
    EXPECT_NE(m.find("\"deduplicated_args\": 19,"), std::string::npos);
  }
}

// An inout the kernel did not change is stored once; one it changed in one
// byte (where the fingerprint does not look: the compare must catch it) is
// stored twice; truncated payloads are equal only when their bytes are;
// small payloads are never shared.
TEST(CaptureStoreDedupTest, SharesExactlyTheEqualPayloads) {
  const std::string same = Unique(4096, 100);
  std::string changed = Unique(4096, 101);
  std::string after = changed;
  after[100] ^= 0x40;  // not in KeyOf's sample of a 4096-byte payload
  {
    const std::vector<absl::string_view> x = {changed}, y = {after};
    ASSERT_TRUE(PayloadIndex::KeyOf(x, 4096) == PayloadIndex::KeyOf(y, 4096));
  }
  const std::string cut = Unique(2048, 102);
  const std::string small = Unique(32, 103);
  const std::vector<Arg> args = {
      {1, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INOUT, same},
      {1, v1::STAGE_AFTER_COMPLETION, v1::ROLE_INOUT, same},       // shared
      {2, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INOUT, changed},
      {2, v1::STAGE_AFTER_COMPLETION, v1::ROLE_INOUT, after},      // written
      {3, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, cut, true},
      {4, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, cut, true},   // shared: truncated alike
      {5, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, cut.substr(0, 1024), true},  // written
      {6, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, small},
      {7, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, small},       // written: under kMinBytes
      {8, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, same},        // shared, an earlier batch's
      // Written again: a fingerprint keeps one candidate, the latest
      // (`after`), so that a payload costs one compare at most.
      {9, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, changed},
  };
  auto store = Write(TempPath("exact/args_dump"), args, true, 2);
  EXPECT_EQ(store->counters().deduplicated_args(), 3u);
  EXPECT_EQ(store->counters().payload_bytes_stored(), 4096u * 4 + 2048 + 1024 + 32 * 2);
  const std::vector<std::string> bytes = EntryBytes(*store);
  for (size_t i = 0; i < args.size(); ++i) EXPECT_TRUE(bytes[i] == args[i].bytes) << i;
  EXPECT_EQ(store->RecordById(1)->bin_offset, store->RecordById(0)->bin_offset);
  EXPECT_NE(store->RecordById(3)->bin_offset, store->RecordById(2)->bin_offset);
  EXPECT_EQ(store->RecordById(5)->bin_offset, store->RecordById(4)->bin_offset);
  EXPECT_NE(store->RecordById(8)->bin_offset, store->RecordById(7)->bin_offset);
  EXPECT_EQ(store->RecordById(9)->bin_offset, store->RecordById(0)->bin_offset);
  EXPECT_NE(store->RecordById(10)->bin_offset, store->RecordById(2)->bin_offset);
  EXPECT_TRUE(store->RecordById(5)->truncated);
}

// A capture whose writer died goes on after Reopen exactly as if it had
// not (the same files as an uninterrupted one: sharing with payloads from
// before the restart), and Recover places every shared payload.
TEST(CaptureStoreDedupTest, ReopenAndRecoverPlaceSharedPayloads) {
  std::vector<Arg> args = Chain(12, 1024);
  const std::vector<Arg> first(args.begin(), args.begin() + 10);
  const std::vector<Arg> rest(args.begin() + 10, args.end());
  const std::string whole = TempPath("reopen_whole/args_dump");
  auto uninterrupted = Write(whole, args, true, 4);

  const std::string dir = TempPath("reopen_dedup/args_dump");
  Write(dir, first, true, 4, /*finish=*/false).reset();  // the writer dies
  {
    // Recover a copy: every entry reads its own bytes.
    const std::string copy = TempPath("reopen_copy/args_dump");
    ASSERT_EQ(std::system(("mkdir -p " + copy + " && cp " + dir + "/* " + copy).c_str()), 0);
    RecoveryReport report;
    ASSERT_TRUE(CaptureStore::Recover(copy, &report).ok()) << report.Describe();
    EXPECT_EQ(report.records, first.size());
    const std::string m = ReadFileOrEmpty(copy + "/args_dump.json");
    EXPECT_NE(m.find("\"deduplicated_args\": 4,"), std::string::npos) << m.substr(0, 900);
  }
  auto reopened = CaptureStore::Reopen(dir);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->stream_bytes(), 10u * 1024);
  EXPECT_EQ((*reopened)->bin_bytes(), 6u * 1024);
  RecordBatch tail((*reopened)->stream_bytes());
  for (size_t i = 0; i < rest.size(); ++i) tail.Add(RecordOf(rest[i], (10 + i) % 4), rest[i].bytes);
  ASSERT_TRUE((*reopened)->AppendBatch(tail.RecordPtrs(), tail.PayloadViews()).ok());
  ASSERT_TRUE((*reopened)->Finish(v1::CaptureCounters()).ok());
  EXPECT_TRUE(ReadFileOrEmpty(dir + "/args.bin") == ReadFileOrEmpty(whole + "/args.bin"));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args_dump.json"), ReadFileOrEmpty(whole + "/args_dump.json"));
}

// The journal's entries, as (offset, type) (the format of journal.h).
std::vector<std::pair<size_t, int>> Entries(const std::string& journal) {
  std::vector<std::pair<size_t, int>> out;
  for (size_t at = kJournalFileHeaderBytes; at + kJournalHeaderBytes <= journal.size();) {
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= uint32_t{static_cast<uint8_t>(journal[at + 4 + i])} << (8 * i);
    out.emplace_back(at, journal[at + 12]);
    at += kJournalHeaderBytes + length;
  }
  return out;
}

// A damaged payload map costs its batch's payload records, and Recover
// says so; no entry is left pointing at the wrong bytes.
TEST(CaptureStoreDedupTest, ADamagedMapDropsItsBatchAndSaysSo) {
  const std::vector<Arg> args = Chain(6, 512);  // 12 records, 3 batches of 4
  const std::string dir = TempPath("damaged_map/args_dump");
  Write(dir, args, true, 4, /*finish=*/false).reset();
  std::string journal = ReadFileOrEmpty(dir + "/args.journal");
  std::vector<size_t> maps;
  for (const auto& [at, type] : Entries(journal)) {
    if (type == static_cast<int>(JournalEntryType::kPayloadMap)) maps.push_back(at);
  }
  ASSERT_EQ(maps.size(), 4u);  // the opening one, one per batch
  journal[maps[2] + kJournalHeaderBytes] ^= 0x01;  // the second batch's
  std::ofstream(dir + "/args.journal", std::ios::binary | std::ios::trunc) << journal;
  RecoveryReport report;
  const absl::Status s = CaptureStore::Recover(dir, &report);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(report.records_unplaced, 4u);
  EXPECT_EQ(report.records, 8u);
  EXPECT_NE(report.Describe().find("dropped 4 records whose payload map"), std::string::npos)
      << report.Describe();
  const std::string m = ReadFileOrEmpty(dir + "/args_dump.json");
  EXPECT_NE(m.find("\"records_unplaced\": 4"), std::string::npos);
  // What was kept reads the right bytes: batches 1 and 3 (the index is in
  // manifest order: by task, then stage).
  const std::string bin = ReadFileOrEmpty(dir + "/args.bin");
  auto index = IndexFile::Open(dir + "/args.index");
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ((*index)->size(), 8u);
  for (uint64_t i = 0; i < (*index)->size(); ++i) {
    const ManifestRow row = *(*index)->RecordById(i);
    const size_t arg = row.task_id * 2 + (row.stage == v1::STAGE_AFTER_COMPLETION ? 1 : 0);
    EXPECT_TRUE(arg < 4 || arg >= 8) << arg;
    ASSERT_LE(row.bin_offset + row.bin_size, bin.size());
    EXPECT_TRUE(bin.substr(row.bin_offset, row.bin_size) == args[arg].bytes) << arg;
  }
  auto reopened = CaptureStore::Reopen(dir);
  EXPECT_FALSE(reopened.ok());
}

// Every kept entry of a recovered capture at `dir` reads its own arg's
// bytes (args of Chain: record i is task i / 2, stage i % 2); returns how
// many the index holds.
size_t ExpectKeptEntriesRight(const std::string& dir, const std::vector<Arg>& args) {
  const std::string bin = ReadFileOrEmpty(dir + "/args.bin");
  auto index = IndexFile::Open(dir + "/args.index");
  EXPECT_TRUE(index.ok()) << index.status();
  if (!index.ok()) return 0;
  for (uint64_t i = 0; i < (*index)->size(); ++i) {
    const ManifestRow row = *(*index)->RecordById(i);
    const size_t arg = row.task_id * 2 + (row.stage == v1::STAGE_AFTER_COMPLETION ? 1 : 0);
    EXPECT_LE(row.bin_offset + row.bin_size, bin.size()) << arg;
    EXPECT_TRUE(bin.substr(row.bin_offset, row.bin_size) == args[arg].bytes) << arg;
  }
  return (*index)->size();
}

// A batch cut short by a crash leaves its map covering stream bytes no
// record of it holds; after Reopen the next batch has its own map, and
// when that one is lost to damage, its records are dropped, never placed
// by the torn batch's map.
TEST(CaptureStoreDedupTest, ATornBatchsMapPlacesNothingAfterIt) {
  const std::vector<Arg> args = Chain(6, 512);  // 12 records
  const std::vector<Arg> first(args.begin(), args.begin() + 8);
  const std::string dir = TempPath("torn_map/args_dump");
  Write(dir, first, true, 4, /*finish=*/false).reset();
  // Tear the last record: batch 2's map covers records 4..7, 7 is gone.
  std::string journal = ReadFileOrEmpty(dir + "/args.journal");
  std::ofstream(dir + "/args.journal", std::ios::binary | std::ios::trunc)
      << journal.substr(0, journal.size() - 5);
  auto reopened = CaptureStore::Reopen(dir);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  ASSERT_EQ((*reopened)->records(), 7u);
  RecordBatch rest((*reopened)->stream_bytes());
  for (size_t i = 7; i < args.size(); ++i) rest.Add(RecordOf(args[i], i % 4), args[i].bytes);
  ASSERT_TRUE((*reopened)->AppendBatch(rest.RecordPtrs(), rest.PayloadViews()).ok());
  reopened->reset();  // the writer dies again
  journal = ReadFileOrEmpty(dir + "/args.journal");
  std::vector<size_t> maps;
  for (const auto& [at, type] : Entries(journal)) {
    if (type == static_cast<int>(JournalEntryType::kPayloadMap)) maps.push_back(at);
  }
  ASSERT_EQ(maps.size(), 4u);
  journal[maps.back() + kJournalHeaderBytes] ^= 0x01;
  std::ofstream(dir + "/args.journal", std::ios::binary | std::ios::trunc) << journal;
  RecoveryReport report;
  EXPECT_EQ(CaptureStore::Recover(dir, &report).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(report.records_unplaced, args.size() - 7);
  EXPECT_EQ(ExpectKeptEntriesRight(dir, args), 7u);
}

// A damaged version byte in the journal's header: the entries are read all
// the same, and the map written right after the header still says that
// every payload is placed by one (none is read at its stream offset).
TEST(CaptureStoreDedupTest, ADamagedHeaderStillPlacesSharedPayloads) {
  const std::vector<Arg> args = Chain(6, 512);
  const std::string dir = TempPath("damaged_header/args_dump");
  Write(dir, args, true, 4, /*finish=*/false).reset();
  std::string journal = ReadFileOrEmpty(dir + "/args.journal");
  journal[4] ^= 0x7F;
  std::ofstream(dir + "/args.journal", std::ios::binary | std::ios::trunc) << journal;
  RecoveryReport report;
  EXPECT_EQ(CaptureStore::Recover(dir, &report).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(report.records_unplaced, 0u);
  EXPECT_EQ(ExpectKeptEntriesRight(dir, args), args.size());
}

// A batch that could not be written (args.bin over the file size limit)
// leaves the payload index as it was: a payload equal to one stored before
// it is still shared afterwards, as a reopened store would share it.
TEST(CaptureStoreDedupTest, AFailedBatchLeavesTheIndexAsItWas) {
  const std::string p1 = Unique(4096, 1);
  std::string p2 = p1;
  p2[100] ^= 1;  // the same fingerprint, other bytes
  const std::string dir = TempPath("failed_batch/args_dump");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = std::move(CaptureStore::Create(dir, Info())).value();
    RecordBatch batch;
    batch.Add(RecordOf({1, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, p1}, 0), p1);
    if (!store->AppendBatch(batch.RecordPtrs(), batch.PayloadViews()).ok()) ::_exit(10);
    // The next batch does not fit: it is refused whole.
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {4096 + 1000, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    RecordBatch big(batch.end_bin_offset());
    big.Add(RecordOf({2, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, p2}, 0), p2);
    if (store->AppendBatch(big.RecordPtrs(), big.PayloadViews()).ok()) ::_exit(11);
    limit.rlim_cur = RLIM_INFINITY;
    ::setrlimit(RLIMIT_FSIZE, &limit);
    RecordBatch again(batch.end_bin_offset());
    again.Add(RecordOf({3, v1::STAGE_BEFORE_DISPATCH, v1::ROLE_INPUT, p1}, 0), p1);
    if (!store->AppendBatch(again.RecordPtrs(), again.PayloadViews()).ok()) ::_exit(12);
    if (store->RecordById(1)->bin_offset != 0) ::_exit(13);  // shared with p1
    if (store->bin_bytes() != 4096) ::_exit(14);
    if (!store->Finish(v1::CaptureCounters()).ok()) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args.bin").size(), 4096u);
}

// Sharing off: no maps in the journal, args.bin as sent (the files of a
// build without sharing).
TEST(CaptureStoreDedupTest, OffWritesNoMaps) {
  const std::string dir = TempPath("off/args_dump");
  Write(dir, Chain(4, 256), false, 2, /*finish=*/false).reset();
  for (const auto& [at, type] : Entries(ReadFileOrEmpty(dir + "/args.journal"))) {
    EXPECT_NE(type, static_cast<int>(JournalEntryType::kPayloadMap)) << at;
  }
  auto reopened = CaptureStore::Reopen(dir);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->bin_bytes(), (*reopened)->stream_bytes());
}

}  // namespace
}  // namespace argsdump
