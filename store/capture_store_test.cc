#include "store/capture_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "google/protobuf/util/json_util.h"
#include "absl/strings/numbers.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/record_batch.h"
#include "tests/testing/temp_dir.h"
#include "store/crc32c.h"
#include "store/journal_v1_testing.h"
#include "proto/argsdump/v1/manifest.pb.h"
#include "format/kernel_table.h"

namespace argsdump {
namespace {

using google::protobuf::Value;

std::string CaptureDir(const std::string& name) { return TempPath(name + "/args_dump"); }

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Strict: a field the schema does not know fails the parse.
v1::ManifestFile ParseManifest(const std::string& dir) {
  v1::ManifestFile s;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(ReadFileOrEmpty(dir + "/args_dump.json"),
                                                            &s, strict);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return s;
}

v1::CaptureInfo Info(v1::DumpLevel level) {
  v1::CaptureInfo info;
  info.set_name("test");
  info.set_level(level);
  info.set_platform("a2a3sim");
  return info;
}

// A float32 tensor of `size` bytes (a multiple of 4), all of them at `offset`.
v1::ArgRecord Tensor(uint64_t task, v1::Stage stage, uint32_t arg, v1::Role role,
                     uint64_t offset, uint64_t size) {
  return TensorRecord(task).Stage(stage).Arg(arg).Role(role).FuncIds({3})
      .Shape({static_cast<uint32_t>(size / 4)}).Contiguous().BinOffset(offset);
}

TEST(CaptureStoreTest, WritesSortedManifestAndPayloads) {
  const std::string dir = CaptureDir("sorted");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
  ASSERT_TRUE(store.ok()) << store.status();
  // Arrival (bin) order differs from manifest order.
  ASSERT_TRUE((*store)->Append(Tensor(0x20, v1::STAGE_AFTER_COMPLETION, 2, v1::ROLE_OUTPUT, 0, 8),
                               std::string(8, 'c')).ok());
  ASSERT_TRUE((*store)->Append(Tensor(0x10, v1::STAGE_BEFORE_DISPATCH, 1, v1::ROLE_INPUT, 8, 4),
                               std::string(4, 'b')).ok());
  const v1::ArgRecord scalar = ScalarRecord(0x10).Arg(3).Dtype(v1::DTYPE_FLOAT64)
                                   .ScalarBits(BitsOf(0.1)).AmbiguousArgIndex();
  ASSERT_TRUE((*store)->Append(scalar, "").ok());
  ASSERT_TRUE((*store)->Append(Tensor(0x10, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 12, 4),
                               std::string(4, 'a')).ok());
  v1::CaptureCounters losses;
  losses.set_dropped_records(7);
  losses.set_dropped_ready_queue_full(5);
  losses.set_dropped_host_gone(2);
  ASSERT_TRUE((*store)->Finish(losses).ok());

  EXPECT_EQ(ReadFileOrEmpty(dir + "/args.bin"), "ccccccccbbbbaaaa");
  v1::ManifestFile m = ParseManifest(dir);
  EXPECT_EQ(m.run_dir(), "args_dump");
  EXPECT_EQ(m.bin_format().type(), "logical_contiguous");
  EXPECT_EQ(m.bin_format().byte_order(), "little_endian");
  EXPECT_EQ(m.dump_args_level(), 2u);
  EXPECT_EQ(m.total_args(), 4u);
  EXPECT_EQ(m.before_dispatch(), 3u);
  EXPECT_EQ(m.after_completion(), 1u);
  EXPECT_EQ(m.input_args(), 3u);
  EXPECT_EQ(m.output_args(), 1u);
  EXPECT_EQ(m.dropped_records(), 7u);
  EXPECT_EQ(m.dropped_by_cause().ready_queue_full(), 5u);
  EXPECT_EQ(m.dropped_by_cause().host_gone(), 2u);
  EXPECT_EQ(m.dropped_overwrite(), 0u);
  EXPECT_EQ(m.bin_file().string_value(), "args.bin");
  ASSERT_EQ(m.args_size(), 4);
  EXPECT_EQ(m.args(0).task_id(), "0x0000000000000010");
  EXPECT_EQ(m.args(0).arg_index(), 0u);
  EXPECT_EQ(m.args(0).bin_offset(), 12u);
  EXPECT_EQ(m.args(0).dtype(), "FLOAT32");
  EXPECT_EQ(m.args(0).numel(), 1u);
  EXPECT_EQ(m.args(0).func_id(0), 3);
  EXPECT_EQ(m.args(1).arg_index(), 1u);
  EXPECT_EQ(m.args(2).kind(), "scalar");
  EXPECT_EQ(m.args(2).value().number_value(), 0.1);
  EXPECT_EQ(m.args(2).dtype(), "FLOAT64");
  EXPECT_TRUE(m.args(2).arg_index_ambiguous());
  EXPECT_FALSE(m.args(1).arg_index_ambiguous());
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args_dump.json").find("arg_index_ambiguous", 0),
            ReadFileOrEmpty(dir + "/args_dump.json").rfind("arg_index_ambiguous"));  // only where set
  EXPECT_EQ(m.args(3).stage(), "after_completion");
  EXPECT_EQ(m.args(3).role(), "output");
}

TEST(CaptureStoreTest, NothingCapturedLeavesNoDirectory) {
  const std::string dir = CaptureDir("empty");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_PARTIAL));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_FALSE(Exists(dir));
}

TEST(CaptureStoreTest, HybridWithoutPayloadHasNoBinFile) {
  const std::string dir = CaptureDir("hybrid");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_HYBRID));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Append(Tensor(1, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 0, 0), "").ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_FALSE(Exists(dir + "/args.bin"));
  v1::ManifestFile m = ParseManifest(dir);
  EXPECT_EQ(m.bin_file().kind_case(), Value::kNullValue);
  EXPECT_EQ(m.dump_args_level(), 3u);
}

TEST(CaptureStoreTest, EagerBinAtLevelOneEvenWhenEmpty) {
  const std::string dir = CaptureDir("eager");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_PARTIAL));
  ASSERT_TRUE((*store)->Append(ScalarRecord(0), "").ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_TRUE(Exists(dir + "/args.bin"));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args.bin"), "");
  EXPECT_EQ(ParseManifest(dir).bin_file().string_value(), "args.bin");
}

TEST(CaptureStoreTest, OutOfOrderOrMismatchedPairsAreRejectedAndHarmless) {
  const std::string dir = CaptureDir("reject");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
  ASSERT_TRUE((*store)->Append(Tensor(1, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 0, 4), "aaaa").ok());
  absl::Status s = (*store)->Append(Tensor(2, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 100, 4), "bbbb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bin_offset 100"), std::string::npos) << s;
  s = (*store)->Append(Tensor(2, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 4, 4), "bb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*store)->Append(Tensor(3, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 4, 4), "cccc").ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args.bin"), "aaaacccc");
  EXPECT_EQ(ParseManifest(dir).total_args(), 2u);
  EXPECT_EQ(CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL)).status().code(),
            absl::StatusCode::kAlreadyExists);
}

// The writer dies mid-run: a torn journal tail and payload bytes whose record
// never reached the journal. Recover keeps every acknowledged pair.
TEST(CaptureStoreTest, RecoverRebuildsTheManifestFromTheJournal) {
  const std::string dir = CaptureDir("crash");
  {
    auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
    for (uint64_t i = 0; i < 10; ++i) {
      ASSERT_TRUE((*store)->Append(Tensor(100 - i, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT,
                                          i * 4, 4),
                                   std::string(4, static_cast<char>('a' + i))).ok());
    }
  }  // no Finish: as if the process died
  std::ofstream(dir + "/args.journal", std::ios::app | std::ios::binary) << "\x30\x00\x00";
  std::ofstream(dir + "/args.bin", std::ios::app | std::ios::binary) << "zzzz";
  EXPECT_FALSE(Exists(dir + "/args_dump.json"));
  ASSERT_TRUE(CaptureStore::Recover(dir).ok());
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args.bin"), "aaaabbbbccccddddeeeeffffgggghhhhiiiijjjj");
  v1::ManifestFile m = ParseManifest(dir);
  EXPECT_EQ(m.total_args(), 10u);
  EXPECT_TRUE(m.recovered_from_journal());
  EXPECT_EQ(m.args(0).task_id(), "0x000000000000005b");
  EXPECT_EQ(m.args(0).bin_offset(), 36u);
  EXPECT_TRUE(CaptureStore::Recover(dir).ok());  // idempotent
  EXPECT_EQ(CaptureStore::Recover(CaptureDir("nothing_here")).code(), absl::StatusCode::kNotFound);
}

// Task 100 - i of a capture: a tensor of 4 bytes at i * 4 (payload 'a' + i)
// and a scalar.
absl::Status AppendTask(CaptureStore* store, uint64_t i) {
  absl::Status s =
      store->Append(Tensor(100 - i, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, i * 4, 4),
                    std::string(4, static_cast<char>('a' + i)));
  if (!s.ok()) return s;
  return store->Append(ScalarRecord(100 - i).Arg(1).ScalarBits(i), "");
}

// A dead writer's capture of tasks 100 down to 100 - n + 1 (AppendTask),
// without a manifest.
void WriteUnfinished(const std::string& dir, uint64_t n) {
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
  for (uint64_t i = 0; i < n; ++i) ASSERT_TRUE(AppendTask(store->get(), i).ok());
}

// One flipped byte in the middle of the journal costs the entry it is in,
// not the ones after it; args.bin is not cut (its bytes may be the lost
// entry's); the manifest and the status say what was dropped and where.
TEST(CaptureStoreTest, RecoverKeepsEveryEntryAfterADamagedOne) {
  const std::string dir = CaptureDir("damaged_middle");
  WriteUnfinished(dir, 20);
  const std::string journal = ReadFileOrEmpty(dir + "/args.journal");
  const std::string bin = ReadFileOrEmpty(dir + "/args.bin");
  std::string bad = journal;
  const size_t at = journal.size() / 2;
  bad[at] ^= 0x10;
  std::ofstream(dir + "/args.journal", std::ios::trunc | std::ios::binary) << bad;
  std::ofstream(dir + "/args.bin", std::ios::app | std::ios::binary) << "tail";
  RecoveryReport report;
  const absl::Status s = CaptureStore::Recover(dir, &report);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(report.wrote_files);
  EXPECT_EQ(report.records, 39u);  // 40 written, the damaged one lost
  ASSERT_EQ(report.damage.size(), 1u);
  EXPECT_FALSE(report.damage[0].tail);
  EXPECT_LE(report.damage[0].offset, at);
  EXPECT_GT(report.damage[0].offset + report.damage[0].bytes, at);
  EXPECT_NE(std::string(s.message()).find("kept 39 records; dropped "), std::string::npos) << s;
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args.bin"), bin + "tail");  // not cut
  const v1::ManifestFile m = ParseManifest(dir);
  EXPECT_EQ(m.total_args(), 39u);
  EXPECT_EQ(m.recovery().records_kept(), 39u);
  ASSERT_EQ(m.recovery().journal_damage_size(), 1);
  EXPECT_EQ(m.recovery().journal_damage(0).offset(), report.damage[0].offset);
  EXPECT_EQ(m.recovery().journal_damage(0).why(), "checksum mismatch");
  // Every kept tensor still points at its own bytes.
  for (const v1::ManifestEntry& e : m.args()) {
    if (e.kind() != "tensor") continue;
    uint64_t task;
    ASSERT_TRUE(absl::SimpleHexAtoi(e.task_id().substr(2), &task));
    EXPECT_EQ(bin.substr(e.bin_offset(), 4), std::string(4, static_cast<char>('a' + 100 - task)));
  }
}

// Entries that claim payload args.bin does not hold: dropped and counted,
// DATA_LOSS -- never a manifest that points past the end.
TEST(CaptureStoreTest, RecoverWithArgsBinMissingOrShortIsDataLoss) {
  for (const bool missing : {true, false}) {
    const std::string dir = CaptureDir(missing ? "bin_missing" : "bin_short");
    WriteUnfinished(dir, 10);
    if (missing) {
      ASSERT_EQ(std::remove((dir + "/args.bin").c_str()), 0);
    } else {
      ASSERT_EQ(::truncate((dir + "/args.bin").c_str(), 22), 0);  // 5 whole payloads and 2 bytes
    }
    RecoveryReport report;
    const absl::Status s = CaptureStore::Recover(dir, &report);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_EQ(report.records_without_payload, missing ? 10u : 5u);
    EXPECT_EQ(report.records, missing ? 10u : 15u);  // the scalars, and the whole payloads
    const v1::ManifestFile m = ParseManifest(dir);
    EXPECT_EQ(m.total_args(), report.records);
    EXPECT_EQ(m.recovery().records_without_payload(), report.records_without_payload);
    EXPECT_EQ(m.recovery().bin_missing(), missing);
    EXPECT_EQ(m.bin_file().has_null_value(), missing);
    for (const v1::ManifestEntry& e : m.args()) {
      EXPECT_LE(e.bin_offset() + e.bin_size(), missing ? 0u : 22u) << e.task_id();
    }
  }
}

// A torn last entry (a crash mid-append) loses nothing acknowledged: OK,
// and args.bin is cut back to the last journaled payload.
TEST(CaptureStoreTest, RecoverAfterATornTailIsOk) {
  const std::string dir = CaptureDir("torn_tail");
  WriteUnfinished(dir, 5);
  const std::string journal = ReadFileOrEmpty(dir + "/args.journal");
  std::ofstream(dir + "/args.journal", std::ios::app | std::ios::binary)
      << journal.substr(8, 20);  // the start of an entry, cut
  std::ofstream(dir + "/args.bin", std::ios::app | std::ios::binary) << "unjournaled";
  RecoveryReport report;
  EXPECT_TRUE(CaptureStore::Recover(dir, &report).ok());
  EXPECT_EQ(report.records, 10u);
  ASSERT_EQ(report.damage.size(), 1u);
  EXPECT_TRUE(report.damage[0].tail);
  EXPECT_TRUE(report.bin_cut);
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args.bin").size(), 20u);
  EXPECT_TRUE(ParseManifest(dir).recovery().journal_damage(0).tail());
}

// A journal written before sync markers (version 1) still recovers.
TEST(CaptureStoreTest, RecoverReadsVersionOneJournals) {
  const std::string dir = CaptureDir("v1_journal");
  ASSERT_TRUE(CreateDirectories(dir).ok());
  const auto v1_entry = VersionOneJournalEntry;
  std::string journal = v1_entry(1, Info(v1::DUMP_LEVEL_FULL).SerializeAsString());
  for (uint64_t i = 0; i < 3; ++i) {
    journal += v1_entry(2, Tensor(7 + i, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, i * 4, 4)
                               .SerializeAsString());
  }
  std::ofstream(dir + "/args.journal", std::ios::binary) << journal;
  std::ofstream(dir + "/args.bin", std::ios::binary) << "aaaabbbbcccc";
  RecoveryReport report;
  EXPECT_TRUE(CaptureStore::Recover(dir, &report).ok());
  EXPECT_EQ(report.records, 3u);
  EXPECT_EQ(ParseManifest(dir).total_args(), 3u);
}

// Payloads are written in bounded slices: one batch whose payloads are
// smaller than, equal to and many times a slice, with empty (scalar) ones
// between, lands in args.bin byte for byte, in order.
// A live capture whose writer went away reopens live where its journal
// ends (a torn last append and the payload bytes behind it cut away), takes
// more records, and finishes as if it had never stopped.
TEST(CaptureStoreTest, ReopenContinuesALiveCapture) {
  const std::string dir = CaptureDir("reopen");
  const std::string whole = CaptureDir("reopen_whole");
  WriteUnfinished(dir, 3);
  WriteUnfinished(whole, 5);
  std::ofstream(dir + "/args.journal", std::ios::app | std::ios::binary) << "AJNL\x30";
  std::ofstream(dir + "/args.bin", std::ios::app | std::ios::binary) << "zz";
  auto store = CaptureStore::Reopen(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->records(), 6u);
  EXPECT_EQ((*store)->bin_bytes(), 12u);
  for (uint64_t i = 3; i < 5; ++i) ASSERT_TRUE(AppendTask(store->get(), i).ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  auto finished_whole = CaptureStore::Reopen(whole);
  ASSERT_TRUE(finished_whole.ok());
  ASSERT_TRUE((*finished_whole)->Finish(v1::CaptureCounters()).ok());
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args.bin"), ReadFileOrEmpty(whole + "/args.bin"));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args_dump.json"), ReadFileOrEmpty(whole + "/args_dump.json"));
}

// What cannot be reopened live is refused, saying why, and left as it is
// (recovery, not a live writer, is what such a capture gets).
TEST(CaptureStoreTest, ReopenRefusesWhatIsNotALiveCapture) {
  struct Case {
    std::string name, says;
    std::function<void(const std::string& dir)> damage;
  };
  const std::vector<Case> cases = {
      {"finished", "has a manifest", [](const std::string& d) {
         auto s = CaptureStore::Reopen(d);
         ASSERT_TRUE(s.ok());
         ASSERT_TRUE((*s)->Finish(v1::CaptureCounters()).ok());
       }},
      {"damaged", "journal is damaged", [](const std::string& d) {
         std::string j = ReadFileOrEmpty(d + "/args.journal");
         j[j.size() / 2] ^= 0x20;
         std::ofstream(d + "/args.journal", std::ios::binary | std::ios::trunc) << j;
       }},
      {"bin_short", "args.bin holds", [](const std::string& d) {
         ASSERT_EQ(::truncate((d + "/args.bin").c_str(), 5), 0);
       }},
      {"no_journal", "cannot open", [](const std::string& d) {
         ASSERT_EQ(::unlink((d + "/args.journal").c_str()), 0);
       }},
  };
  for (const Case& c : cases) {
    const std::string dir = CaptureDir("reopen_refused_" + c.name);
    WriteUnfinished(dir, 4);
    c.damage(dir);
    const std::string before = ReadFileOrEmpty(dir + "/args.journal");
    auto store = CaptureStore::Reopen(dir);
    ASSERT_FALSE(store.ok()) << c.name;
    EXPECT_NE(store.status().message().find(c.says), std::string::npos)
        << c.name << ": " << store.status();
    EXPECT_EQ(ReadFileOrEmpty(dir + "/args.journal"), before) << c.name;
  }
}

// A finish that fails on the way (the manifest cannot be written) leaves
// the capture live: more records, and a second finish that works.
TEST(CaptureStoreTest, AFailedFinishLeavesTheCaptureLive) {
  const std::string dir = CaptureDir("finish_fails");
  WriteUnfinished(dir, 2);
  auto store = CaptureStore::Reopen(dir);
  ASSERT_TRUE(store.ok());
  // A folder where the manifest goes: the rename onto it fails.
  ASSERT_EQ(::mkdir((dir + "/args_dump.json").c_str(), 0755), 0);
  EXPECT_FALSE((*store)->Finish(v1::CaptureCounters()).ok());
  ASSERT_EQ(::rmdir((dir + "/args_dump.json").c_str()), 0);
  ASSERT_TRUE((*store)->Append(Tensor(7, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 8, 4),
                               "wxyz").ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_EQ(ParseManifest(dir).total_args(), 5u);
  // The journal says the same: a counters entry followed by records is not
  // the end, and recovery counts what is there.
  ASSERT_EQ(::unlink((dir + "/args_dump.json").c_str()), 0);
  ASSERT_EQ(::unlink((dir + "/args.index").c_str()), 0);
  ASSERT_TRUE(CaptureStore::Recover(dir).ok());
  EXPECT_EQ(ParseManifest(dir).total_args(), 5u);
}

// The index and the manifest are written side by side; an index that
// cannot be written leaves no manifest (nor its temporary), so the capture
// stays live and a second finish writes both.
TEST(CaptureStoreTest, AFailedIndexLeavesNoManifest) {
  const std::string dir = CaptureDir("index_fails");
  WriteUnfinished(dir, 2);
  auto store = CaptureStore::Reopen(dir);
  ASSERT_TRUE(store.ok());
  // A non-empty folder where the index goes: the rename onto it fails.
  ASSERT_EQ(::mkdir((dir + "/args.index").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir + "/args.index/x").c_str(), 0755), 0);
  const absl::Status failed = (*store)->Finish(v1::CaptureCounters());
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(std::string(failed.message()).find("args.index"), std::string::npos) << failed;
  struct stat st;
  EXPECT_NE(::stat((dir + "/args_dump.json").c_str(), &st), 0);
  EXPECT_NE(::stat((dir + "/args_dump.json.tmp").c_str(), &st), 0);
  ASSERT_EQ(::rmdir((dir + "/args.index/x").c_str()), 0);
  ASSERT_EQ(::rmdir((dir + "/args.index").c_str()), 0);
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_EQ(ParseManifest(dir).total_args(), 4u);
  EXPECT_EQ(::stat((dir + "/args.index").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

// A finished capture keeps args.journal only when asked to (the service
// does; the embedded default does not), and Finish removes it only once the
// manifest and the index are in place.
TEST(CaptureStoreTest, FinishRemovesTheJournalUnlessKept) {
  struct stat st;
  for (const bool keep : {false, true}) {
    const std::string dir = CaptureDir(keep ? "journal_kept" : "journal_dropped");
    auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
    ASSERT_TRUE(store.ok());
    (*store)->set_keep_journal(keep);
    ASSERT_TRUE(AppendTask(store->get(), 0).ok());
    EXPECT_EQ(::stat((dir + "/args.journal").c_str(), &st), 0);
    ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
    EXPECT_EQ(::stat((dir + "/args.journal").c_str(), &st) == 0, keep) << dir;
    EXPECT_EQ(ParseManifest(dir).total_args(), 2u);
    EXPECT_EQ(::stat((dir + "/args.index").c_str(), &st), 0);
  }
  // A finish that fails (no manifest) leaves the journal, whatever the choice.
  const std::string dir = CaptureDir("journal_failed_finish");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
  ASSERT_TRUE(store.ok());
  (*store)->set_keep_journal(false);
  ASSERT_TRUE(AppendTask(store->get(), 0).ok());
  ASSERT_EQ(::mkdir((dir + "/args_dump.json").c_str(), 0755), 0);
  EXPECT_FALSE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_EQ(::stat((dir + "/args.journal").c_str(), &st), 0);
  ASSERT_EQ(::rmdir((dir + "/args_dump.json").c_str()), 0);
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_NE(::stat((dir + "/args.journal").c_str(), &st), 0);
}

TEST(CaptureStoreTest, BatchOfMixedPayloadSizesIsWrittenExactly) {
  const std::string dir = CaptureDir("mixed_sizes");
  auto store = *CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
  const std::vector<uint64_t> sizes = {4, 0, 65536, 65540, 0, 300000, 8, 131072, 12};
  RecordBatch batch;  // payloads back to back
  std::string expected;
  for (size_t i = 0; i < sizes.size(); ++i) {
    // The empty ones are scalars (of the tensors' dtype and func).
    const v1::ArgRecord r =
        sizes[i] == 0
            ? ScalarRecord(i + 1).Dtype(v1::DTYPE_FLOAT32).FuncIds({3}).Contiguous().Build()
            : Tensor(i + 1, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 0, sizes[i]);
    std::string b(sizes[i], '\0');
    for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<char>((k * 7 + i * 13) & 0xFF);
    expected += b;
    batch.Add(r, std::move(b));
  }
  ASSERT_TRUE(store->AppendBatch(batch.RecordPtrs(), batch.PayloadViews()).ok());
  EXPECT_EQ(store->bin_bytes(), expected.size());
  ASSERT_TRUE(store->Finish(v1::CaptureCounters()).ok());
  EXPECT_TRUE(ReadFileOrEmpty(dir + "/args.bin") == expected);
  EXPECT_EQ(ParseManifest(dir).args_size(), static_cast<int>(sizes.size()));
}

}  // namespace
}  // namespace argsdump

namespace argsdump {
namespace {

// Tasks 0x100000003 (the crashing one) and 0x100000002, an input each.
void AppendCrashRun(CaptureStore* store) {
  ASSERT_TRUE(store->Append(Tensor(0x100000003, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT,
                                   0, 4), "abcd").ok());
  ASSERT_TRUE(store->Append(Tensor(0x100000002, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT,
                                   4, 4), "efgh").ok());
}

v1::CaptureInfo CrashEnd() {
  v1::CaptureInfo end;
  *end.mutable_device_crash() = SegvCrash(0x100000003, 0x100000002);
  return end;
}

// What the manifest says of SegvCrash, read through its reader schema.
void ExpectSegvCrash(const v1::ManifestFile& m) {
  ASSERT_TRUE(m.has_device_crash());
  const v1::ManifestDeviceCrash& d = m.device_crash();
  EXPECT_EQ(d.signal(), 11);
  EXPECT_EQ(d.signal_name(), "SIGSEGV");
  EXPECT_EQ(d.exit_status(), 0);
  EXPECT_EQ(d.fault_address(), "0x0");
  EXPECT_EQ(d.tasks_in_flight(), 3u);
  EXPECT_EQ(d.description(), "the device process died of SIGSEGV in kernel crash_segv");
  ASSERT_EQ(d.executing_size(), 2);
  EXPECT_EQ(d.executing(0).task_id(), "0x0000000100000002");
  EXPECT_FALSE(d.executing(0).crashing());
  const v1::ManifestCrashedTask& t = d.executing(1);
  EXPECT_EQ(t.task_id(), "0x0000000100000003");
  ASSERT_EQ(t.func_ids_size(), 1);
  EXPECT_EQ(t.func_ids(0), 7u);
  EXPECT_EQ(t.func(), "crash_segv");
  EXPECT_EQ(t.func_type(), "aiv");
  EXPECT_EQ(t.worker(), 2u);
  EXPECT_EQ(t.thread(), 1u);
  EXPECT_EQ(t.step(), 0u);
  EXPECT_TRUE(t.crashing());
}

// Amend's device_crash goes into the manifest (as the schema spells it:
// hex task ids and fault address) and into args.index's capture info.
TEST(CaptureStoreTest, ADeviceCrashIsInTheManifestAndTheIndex) {
  const std::string dir = CaptureDir("device_crash");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
  ASSERT_TRUE(store.ok());
  AppendCrashRun(store->get());
  ASSERT_TRUE((*store)->Amend(CrashEnd()).ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  ExpectSegvCrash(ParseManifest(dir));
  const std::string text = ReadFileOrEmpty(dir + "/args_dump.json");
  EXPECT_NE(text.find("  \"device_crash\": {\"signal\": 11, \"signal_name\": \"SIGSEGV\", "
                      "\"exit_status\": 0, \"fault_address\": \"0x0\", \"tasks_in_flight\": 3, "
                      "\"description\": \"the device process died of SIGSEGV in kernel "
                      "crash_segv\", \"executing\": [\n"
                      "    {\"task_id\": \"0x0000000100000002\", \"func_ids\": [1], \"func\": "
                      "\"add\", \"func_type\": \"aiv\", \"worker\": 0, \"thread\": 0, \"step\": 0, "
                      "\"crashing\": false},\n"
                      "    {\"task_id\": \"0x0000000100000003\", \"func_ids\": [7], \"func\": "
                      "\"crash_segv\", \"func_type\": \"aiv\", \"worker\": 2, \"thread\": 1, "
                      "\"step\": 0, \"crashing\": true}]},\n"
                      "  \"bin_file\": \"args.bin\",\n"),
            std::string::npos)
      << text;
  auto index = IndexFile::Open(dir + "/args.index");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ((*index)->info().device_crash().SerializeAsString(),
            CrashEnd().device_crash().SerializeAsString());
}

// Without a fault address (an exit), the manifest has no "fault_address";
// without a device_crash, no "device_crash" at all.
TEST(CaptureStoreTest, AnExitHasNoFaultAddressAndACleanRunNoCrash) {
  const std::string dir = CaptureDir("device_exit");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
  AppendCrashRun(store->get());
  v1::CaptureInfo end;
  end.mutable_device_crash()->set_exit_status(3);
  ASSERT_TRUE((*store)->Amend(end).ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  const v1::ManifestFile m = ParseManifest(dir);
  ASSERT_TRUE(m.has_device_crash());
  EXPECT_EQ(m.device_crash().exit_status(), 3);
  EXPECT_EQ(m.device_crash().signal(), 0);
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args_dump.json").find("fault_address"), std::string::npos);

  const std::string clean = CaptureDir("device_clean");
  auto other = CaptureStore::Create(clean, Info(v1::DUMP_LEVEL_FULL));
  AppendCrashRun(other->get());
  ASSERT_TRUE((*other)->Amend(v1::CaptureInfo()).ok());
  ASSERT_TRUE((*other)->Finish(v1::CaptureCounters()).ok());
  EXPECT_FALSE(ParseManifest(clean).has_device_crash());
  EXPECT_EQ(ReadFileOrEmpty(clean + "/args_dump.json").find("device_crash"), std::string::npos);
}

// The device_crash is journaled: a capture whose writer died after Amend
// keeps it, reopened live or recovered as finished.
TEST(CaptureStoreTest, ADeviceCrashSurvivesReopenAndRecover) {
  const std::string live = CaptureDir("device_crash_reopen");
  const std::string dead = CaptureDir("device_crash_recover");
  for (const std::string& dir : {live, dead}) {
    auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
    AppendCrashRun(store->get());
    ASSERT_TRUE((*store)->Amend(CrashEnd()).ok());
  }  // no Finish: the writer died
  auto reopened = CaptureStore::Reopen(live);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->info().device_crash().SerializeAsString(),
            CrashEnd().device_crash().SerializeAsString());
  ASSERT_TRUE((*reopened)->Finish(v1::CaptureCounters()).ok());
  ExpectSegvCrash(ParseManifest(live));

  ASSERT_TRUE(CaptureStore::Recover(dead).ok());
  const v1::ManifestFile m = ParseManifest(dead);
  EXPECT_TRUE(m.recovered_from_journal());
  ExpectSegvCrash(m);
  auto index = IndexFile::Open(dead + "/args.index");
  ASSERT_TRUE(index.ok());
  EXPECT_TRUE((*index)->info().has_device_crash());
}

// A device_crash over its bounds is refused, naming the field, and
// changes nothing: the capture finishes without it.
TEST(CaptureStoreTest, AmendRefusesABadDeviceCrash) {
  const std::string dir = CaptureDir("device_crash_bad");
  auto store = CaptureStore::Create(dir, Info(v1::DUMP_LEVEL_FULL));
  AppendCrashRun(store->get());
  v1::CaptureInfo end = CrashEnd();
  end.mutable_device_crash()->mutable_executing(1)->set_func(std::string(5000, 'f'));
  (*end.mutable_labels())["k"] = "v";
  const absl::Status s = (*store)->Amend(end);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("device_crash.executing[1].func: 5000 bytes"), std::string::npos)
      << s;
  EXPECT_FALSE((*store)->info().has_device_crash());
  EXPECT_TRUE((*store)->info().labels().empty());
  end = CrashEnd();
  for (int i = 0; i < 4; ++i) end.mutable_device_crash()->mutable_executing(0)->add_func_ids(i);
  EXPECT_TRUE(absl::IsInvalidArgument((*store)->Amend(end)));
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  EXPECT_FALSE(ParseManifest(dir).has_device_crash());
}

// A kernel table as the SDK fills it: names, types, directions, and the
// dtypes declared.
google::protobuf::RepeatedPtrField<v1::Kernel> Kernels() {
  google::protobuf::RepeatedPtrField<v1::Kernel> t;
  v1::Kernel* add = t.Add();
  add->set_func_id(0);
  add->set_name("add");
  add->set_type("elementwise");
  for (v1::ArgDirection d : {v1::ARG_DIRECTION_IN, v1::ARG_DIRECTION_IN, v1::ARG_DIRECTION_OUT}) {
    v1::KernelArg* a = add->add_signature();
    a->set_direction(d);
    a->set_dtype(v1::DTYPE_FLOAT32);
  }
  v1::Kernel* affine = t.Add();
  affine->set_func_id(3);
  affine->set_name("strided_affine \"v2\"");
  affine->add_signature()->set_direction(v1::ARG_DIRECTION_IN);
  affine->add_signature()->set_direction(v1::ARG_DIRECTION_OUT);
  v1::KernelArg* s = affine->add_signature();
  s->set_direction(v1::ARG_DIRECTION_SCALAR);
  s->set_dtype(v1::DTYPE_BFLOAT16);
  return t;
}

v1::CaptureInfo InfoWithKernels() {
  v1::CaptureInfo info = Info(v1::DUMP_LEVEL_FULL);
  *info.mutable_kernels() = Kernels();
  return info;
}

// The table is in the manifest's head (before args[], in the schema's
// spelling), in args.index's capture info, and filters by name and type
// select through it.
TEST(CaptureStoreTest, TheKernelTableIsInTheManifestAndTheIndex) {
  const std::string dir = CaptureDir("kernels");
  auto store = CaptureStore::Create(dir, InfoWithKernels());
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Append(Tensor(0x10, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 0, 4),
                               std::string(4, 'a')).ok());
  v1::ArgRecord of_add = Tensor(0x11, v1::STAGE_AFTER_COMPLETION, 2, v1::ROLE_OUTPUT, 4, 4);
  of_add.clear_func_ids();
  of_add.add_func_ids(0);
  ASSERT_TRUE((*store)->Append(of_add, std::string(4, 'b')).ok());
  ASSERT_TRUE((*store)->Finish(v1::CaptureCounters()).ok());
  const std::string text = ReadFileOrEmpty(dir + "/args_dump.json");
  EXPECT_NE(text.find(
                "  \"kernels\": [\n"
                "    {\"func_id\": 0, \"name\": \"add\", \"type\": \"elementwise\", \"signature\": "
                "[{\"direction\": \"in\", \"dtype\": \"FLOAT32\"}, {\"direction\": \"in\", "
                "\"dtype\": \"FLOAT32\"}, {\"direction\": \"out\", \"dtype\": \"FLOAT32\"}]},\n"
                "    {\"func_id\": 3, \"name\": \"strided_affine \\\"v2\\\"\", \"signature\": "
                "[{\"direction\": \"in\"}, {\"direction\": \"out\"}, {\"direction\": \"scalar\", "
                "\"dtype\": \"BFLOAT16\"}]}],\n"
                "  \"bin_file\": \"args.bin\",\n"),
            std::string::npos)
      << text;
  const v1::ManifestFile m = ParseManifest(dir);
  ASSERT_EQ(m.kernels_size(), 2);
  EXPECT_EQ(m.kernels(1).name(), "strided_affine \"v2\"");
  EXPECT_EQ(m.kernels(1).signature(2).dtype(), "BFLOAT16");
  auto index = IndexFile::Open(dir + "/args.index");
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ((*index)->info().kernels_size(), 2);
  EXPECT_EQ((*index)->info().kernels(1).SerializeAsString(), Kernels().Get(1).SerializeAsString());
  // Tensor() records run func 3: the name selects them, the type the other.
  ArgFilter by_name;
  by_name.func_name = "strided_affine \"v2\"";
  ASSERT_TRUE(ResolveKernelFilter((*index)->info().kernels(), &by_name).ok());
  QueryPage page = (*index)->Query(by_name, 0, 10, 100);
  ASSERT_EQ(page.hits.size(), 1u);
  EXPECT_EQ(page.hits[0].row.task_id, 0x10u);
  ArgFilter by_type;
  by_type.func_type = "elementwise";
  ASSERT_TRUE(ResolveKernelFilter((*index)->info().kernels(), &by_type).ok());
  page = (*index)->Query(by_type, 0, 10, 100);
  ASSERT_EQ(page.hits.size(), 1u);
  EXPECT_EQ(page.hits[0].row.task_id, 0x11u);
}

// The table is journaled with the header: a capture whose writer died
// keeps it, reopened or recovered.
TEST(CaptureStoreTest, TheKernelTableSurvivesReopenAndRecover) {
  const std::string live = CaptureDir("kernels_reopen");
  const std::string dead = CaptureDir("kernels_recover");
  for (const std::string& dir : {live, dead}) {
    auto store = CaptureStore::Create(dir, InfoWithKernels());
    ASSERT_TRUE((*store)->Append(Tensor(0x10, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT, 0, 4),
                                 std::string(4, 'a')).ok());
    ASSERT_TRUE((*store)->Amend(CrashEnd()).ok());  // journals the info again
  }
  auto reopened = CaptureStore::Reopen(live);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->info().kernels_size(), 2);
  ASSERT_TRUE((*reopened)->Finish(v1::CaptureCounters()).ok());
  EXPECT_EQ(ParseManifest(live).kernels_size(), 2);
  ASSERT_TRUE(CaptureStore::Recover(dead).ok());
  const v1::ManifestFile m = ParseManifest(dead);
  ASSERT_EQ(m.kernels_size(), 2);
  EXPECT_EQ(m.kernels(0).name(), "add");
}

// A table over its bounds is refused before anything is created.
TEST(CaptureStoreTest, AHostileKernelTableIsRefused) {
  const std::string dir = CaptureDir("kernels_hostile");
  v1::CaptureInfo info = InfoWithKernels();
  info.mutable_kernels(1)->set_name("add");  // a name twice
  auto store = CaptureStore::Create(dir, info);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(store.status()));
  EXPECT_NE(store.status().message().find("kernels[1].name: \"add\" is given twice"),
            std::string::npos)
      << store.status();
  info = InfoWithKernels();
  info.mutable_kernels(0)->set_name(std::string("a\xff", 2));
  EXPECT_TRUE(absl::IsInvalidArgument(CaptureStore::Create(dir, info).status()));
  EXPECT_FALSE(Exists(dir));
}

}  // namespace
}  // namespace argsdump
