#include "collector/collector.h"
#include "collector/local_sink.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include "base/files.h"
#include "collector/refused_record_dump.h"
#include "device/recorder.h"
#include "gtest/gtest.h"
#include "tests/capture_reader.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

std::string CaptureDir(const std::string& name) { return TempPath(name + "/args_dump"); }

v1::CaptureInfo Info() {
  v1::CaptureInfo info;
  info.set_name("t");
  info.set_level(v1::DUMP_LEVEL_FULL);
  return info;
}

DumpRegionConfig Config() {
  DumpRegionConfig c;
  c.num_threads = 2;
  c.records_per_buffer = 8;
  c.buffers_per_thread = 4;
  c.ready_queue_depth = 4;
  c.arena_bytes = 1 << 16;
  return c;
}

DumpTask ScalarTask(uint64_t id, std::vector<DumpScalarArg>* storage) {
  storage->assign(1, DumpScalarArg());
  (*storage)[0].dtype = DataType::kInt64;
  (*storage)[0].bits = id * 10;
  DumpTask t;
  t.task_id = id;
  t.func_count = 1;
  t.scalars = storage->data();
  t.scalar_count = 1;
  return t;
}

class CollectorTest : public ::testing::TestWithParam<Platform> {};

// Initialize -> Start -> Stop -> Reconcile -> Export -> Finalize, twice in one
// process; the second run also leaves records unflushed (a dead device
// thread), which Reconcile recovers.
TEST_P(CollectorTest, RunsTwiceAndRecoversUnflushedBuffers) {
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run);
    Collector collector(CollectorOptions{GetParam(), 1, 2});
    auto region = collector.Initialize(Config());
    ASSERT_TRUE(region.ok()) << region.status();
    const std::string dir = CaptureDir(absl::StrCat("twice_", PlatformName(GetParam()), run));
    auto sink = LocalSink::Create(dir, Info());
    ASSERT_TRUE(sink.ok());
    DumpRecorder recorder(**region);
    ASSERT_TRUE(collector.Start(sink->get()).ok());
    std::vector<DumpScalarArg> storage;
    for (uint64_t i = 0; i < 21; ++i) {
      recorder.thread(i % 2).RecordTask(ScalarTask(i, &storage), abi::Stage::kBeforeDispatch);
    }
    if (run == 0) {
      recorder.thread(0).Flush();
      recorder.thread(1).Flush();
    }
    ASSERT_TRUE(collector.Stop().ok());
    ASSERT_TRUE(collector.Reconcile().ok());
    ASSERT_TRUE(collector.Export().ok());
    EXPECT_EQ(collector.stats().records, 21u);
    // 11 and 10 records per thread: 3 and 2 left in unflushed buffers.
    EXPECT_EQ(collector.stats().recovered_records, run == 0 ? 0u : 5u);
    collector.Finalize();
    CaptureFiles c = ReadCapture(dir);
    ASSERT_EQ(c.entries.size(), 21u);
    for (uint64_t i = 0; i < 21; ++i) {
      EXPECT_EQ(c.entries[i].task_id, absl::StrCat("0x", absl::Hex(i, absl::kZeroPad16)));
      EXPECT_EQ(c.entries[i].value.number_value(), 10.0 * i);
      EXPECT_EQ(c.entries[i].dtype, DataType::kInt64);
    }
  }
}

// Garbage in shared memory: the bad record is rejected with a message, the
// good ones are kept, and the bad record's payload is still acknowledged so
// the device never waits for it.
TEST_P(CollectorTest, InvalidRecordsAreRejectedAndStillAcknowledged) {
  Collector collector(CollectorOptions{GetParam(), 1, 1});
  auto region = collector.Initialize(Config());
  ASSERT_TRUE(region.ok());
  const DumpRegion& r = **region;
  const std::string dir = CaptureDir(absl::StrCat("invalid_", PlatformName(GetParam())));
  auto sink = LocalSink::Create(dir, Info());
  ASSERT_TRUE(collector.Start(sink->get()).ok());
  // Play a (broken) device by hand on thread 0.
  uint32_t buffer = 0;
  ASSERT_TRUE(r.free_queue(0).TryPop(&buffer));
  abi::ArgsDumpRecord* recs = r.buffer_records(buffer);
  std::memset(recs, 0, 3 * sizeof(abi::ArgsDumpRecord));
  recs[0].task_id = 1;
  recs[0].kind = static_cast<uint8_t>(abi::ArgKind::kScalar);
  recs[0].dtype = static_cast<uint8_t>(DataType::kInt32);
  recs[0].logical_bytes = 4;
  recs[1].task_id = 2;
  recs[1].kind = static_cast<uint8_t>(abi::ArgKind::kTensor);
  recs[1].dtype = 200;  // no such dtype
  recs[1].payload_size = 16;
  recs[2].task_id = 3;
  recs[2].kind = static_cast<uint8_t>(abi::ArgKind::kTensor);
  recs[2].dtype = static_cast<uint8_t>(DataType::kUint8);
  recs[2].ndims = 1;
  recs[2].shapes[0] = 8;
  recs[2].strides[0] = 1;
  recs[2].logical_bytes = 8;
  recs[2].payload_size = 8;
  recs[2].payload_offset = 16;
  recs[2].is_contiguous = 1;
  std::memcpy(r.arena(0) + 16, "payload!", 8);
  abi::MetaBufferHeader& h = r.buffer_header(buffer);
  h.sequence = 0;
  h.payload_records = 2;
  h.count.store(3, std::memory_order_release);
  r.thread_state(0).published_payload_count.store(2, std::memory_order_release);
  ASSERT_TRUE(r.ready_queue(0).TryPush(buffer));
  absl::Status stopped = collector.Stop();
  EXPECT_EQ(stopped.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stopped.message().find("unknown dtype 200"), std::string::npos) << stopped;
  EXPECT_EQ(collector.stats().invalid_records, 1u);
  EXPECT_EQ(collector.stats().records, 2u);
  EXPECT_EQ(r.thread_state(0).completed_payload_count.load(), 2u);
  ASSERT_TRUE(collector.Reconcile().code() == absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(collector.Export().ok());
  CaptureFiles c = ReadCapture(dir);
  ASSERT_EQ(c.entries.size(), 2u);
  EXPECT_EQ(c.entries[1].payload, "payload!");
  collector.Finalize();
}

// Publishes `count` forged records on device thread `thread` as the buffer
// of sequence `sequence`, `payload_records` of them with payload.
void PublishForged(const DumpRegion& r, uint32_t thread, uint64_t sequence,
                   const std::vector<abi::ArgsDumpRecord>& records, uint32_t payload_records,
                   uint64_t* published_payloads) {
  uint32_t buffer = 0;
  ASSERT_TRUE(r.free_queue(thread).TryPop(&buffer));
  std::memcpy(r.buffer_records(buffer), records.data(),
              records.size() * sizeof(abi::ArgsDumpRecord));
  abi::MetaBufferHeader& h = r.buffer_header(buffer);
  h.sequence = sequence;
  h.payload_records = payload_records;
  h.count.store(static_cast<uint32_t>(records.size()), std::memory_order_release);
  *published_payloads += payload_records;
  r.thread_state(thread).published_payload_count.store(*published_payloads,
                                                       std::memory_order_release);
  ASSERT_TRUE(r.ready_queue(thread).TryPush(buffer));
}

abi::ArgsDumpRecord Zeroed(uint64_t task_id) {
  abi::ArgsDumpRecord rec;
  std::memset(&rec, 0, sizeof(rec));
  rec.task_id = task_id;
  return rec;
}

abi::ArgsDumpRecord ByteTensor(uint64_t task_id, uint64_t payload_offset) {
  abi::ArgsDumpRecord rec = Zeroed(task_id);
  rec.kind = static_cast<uint8_t>(abi::ArgKind::kTensor);
  rec.dtype = static_cast<uint8_t>(DataType::kUint8);
  rec.ndims = 1;
  rec.shapes[0] = 8;
  rec.strides[0] = 1;
  rec.logical_bytes = 8;
  rec.payload_size = 8;
  rec.payload_offset = payload_offset;
  rec.is_contiguous = 1;
  return rec;
}

uint64_t BytesUnder(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

// Corrupt records forged into the shared region: each refused record is
// still counted and acknowledged, the first max_records are saved with their
// raw bytes, the bytes they point to (bounded) and why, and the rest are
// only counted; the good records around them are captured.
TEST_P(CollectorTest, RefusedRecordsGetABoundedExceptionDump) {
  const std::string root = FreshTempDir(absl::StrCat("refused_", PlatformName(GetParam())));
  RefusedRecordDumpOptions dump_options;
  dump_options.root = root;
  dump_options.max_records = 3;
  dump_options.max_payload_bytes = 4;
  RefusedRecordDump dump(dump_options);
  Collector collector(CollectorOptions{GetParam(), 1, 1, &dump});
  auto region = collector.Initialize(Config());
  ASSERT_TRUE(region.ok());
  const DumpRegion& r = **region;
  auto sink = LocalSink::Create(root + "/args_dump", Info());
  ASSERT_TRUE(collector.Start(sink->get()).ok());

  std::memcpy(r.arena(0), "ABCDEFGHIJKLMNOP", 16);
  std::memcpy(r.arena(0) + 16, "payload!", 8);
  std::vector<abi::ArgsDumpRecord> first;
  first.push_back(Zeroed(1));  // a good scalar
  first[0].kind = static_cast<uint8_t>(abi::ArgKind::kScalar);
  first[0].dtype = static_cast<uint8_t>(DataType::kInt32);
  first[0].logical_bytes = 4;
  first.push_back(ByteTensor(2, 0));
  first[1].dtype = 200;  // no such dtype
  first[1].payload_size = 16;
  first[1].logical_bytes = 16;
  first[1].shapes[0] = 16;
  // Well formed, but its payload runs past the end of the arena.
  first.push_back(ByteTensor(3, Config().arena_bytes - 4));
  for (uint64_t task = 4; task < 9; ++task) {
    first.push_back(Zeroed(task));
    first.back().role = 7;  // no such role
  }
  uint64_t payloads = 0;
  PublishForged(r, 0, 0, first, 2, &payloads);
  std::vector<abi::ArgsDumpRecord> second;
  second.push_back(ByteTensor(9, 16));  // a good tensor
  for (uint64_t task = 10; task < 17; ++task) {
    second.push_back(Zeroed(task));
    second.back().kind = 9;  // no such kind
  }
  PublishForged(r, 0, 1, second, 1, &payloads);

  EXPECT_EQ(collector.Stop().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(collector.stats().invalid_records, 14u);
  EXPECT_EQ(collector.stats().records, 2u);
  EXPECT_EQ(r.thread_state(0).completed_payload_count.load(), 3u);
  (void)collector.Reconcile();
  ASSERT_TRUE(collector.Export().ok());
  collector.Finalize();
  CaptureFiles c = ReadCapture(root + "/args_dump");
  ASSERT_EQ(c.entries.size(), 2u);
  EXPECT_EQ(c.entries[1].payload, "payload!");

  const std::vector<std::string> folders = dump.folders();
  ASSERT_EQ(folders.size(), 3u);
  EXPECT_EQ(dump.not_dumped(), 11u);
  const std::string base = root + "/exception_dump/";
  EXPECT_EQ(folders[0], base + "refused_001_0_0x0000000000000002");
  EXPECT_EQ(folders[1], base + "refused_002_0_0x0000000000000003");
  EXPECT_EQ(folders[2], base + "refused_003_0_0x0000000000000004");

  // The unknown dtype: its bytes exactly as forged, 4 of its 16 payload
  // bytes, and why.
  auto raw = ReadFileToString(folders[0] + "/record.bin");
  ASSERT_TRUE(raw.ok()) << raw.status();
  ASSERT_EQ(raw->size(), sizeof(abi::ArgsDumpRecord));
  EXPECT_EQ(std::memcmp(raw->data(), &first[1], sizeof(abi::ArgsDumpRecord)), 0);
  auto payload = ReadFileToString(folders[0] + "/payload.bin");
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(*payload, "ABCD");
  auto context = ReadFileToString(folders[0] + "/context.json");
  ASSERT_TRUE(context.ok());
  for (const char* want :
       {"\"scenario\": \"refused_record\"", "unknown dtype 200", "\"device_thread\": 0",
        "\"buffer_sequence\": 0", "\"index_in_buffer\": 1", "\"dtype\": 200",
        "\"task_id\": \"0x0000000000000002\"", "\"bytes\": 16, \"kept_bytes\": 4"}) {
    EXPECT_NE(context->find(want), std::string::npos) << want << " in " << *context;
  }
  // The payload outside the arena: refused for that, and not read.
  auto outside = ReadFileToString(folders[1] + "/context.json");
  ASSERT_TRUE(outside.ok());
  EXPECT_NE(outside->find("does not fit"), std::string::npos) << *outside;
  EXPECT_NE(outside->find("\"readable\": false"), std::string::npos) << *outside;
  EXPECT_FALSE(ReadFileToString(folders[1] + "/payload.bin").ok());
  auto role = ReadFileToString(folders[2] + "/context.json");
  ASSERT_TRUE(role.ok());
  EXPECT_NE(role->find("unknown role"), std::string::npos) << *role;
  EXPECT_NE(role->find("\"role\": 7"), std::string::npos) << *role;
  EXPECT_NE(role->find("the record has no payload"), std::string::npos) << *role;
  // The bound: nothing else was written, and the whole is small.
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(base)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 3u);
  EXPECT_LE(BytesUnder(base), 3 * (sizeof(abi::ArgsDumpRecord) + 4 + 4096));
}

// A dump that cannot be written (its root is a file) ends the dumping; the
// collection goes on and every refused record is still counted.
TEST_P(CollectorTest, RefusedRecordDumpThatCannotBeWrittenDoesNotStopCollecting) {
  const std::string dir =
      FreshTempDir(absl::StrCat("refused_unwritable_", PlatformName(GetParam())));
  ASSERT_TRUE(WriteStringToFile(dir + "/root", "a file, not a folder").ok());
  RefusedRecordDump dump(RefusedRecordDumpOptions{dir + "/root", 16, 4096});
  Collector collector(CollectorOptions{GetParam(), 1, 1, &dump});
  auto region = collector.Initialize(Config());
  ASSERT_TRUE(region.ok());
  const DumpRegion& r = **region;
  auto sink = LocalSink::Create(dir + "/args_dump", Info());
  ASSERT_TRUE(collector.Start(sink->get()).ok());
  std::memcpy(r.arena(0), "payload!", 8);
  std::vector<abi::ArgsDumpRecord> records = {ByteTensor(1, 0), Zeroed(2), Zeroed(3)};
  records[1].stage = 5;  // no such stage
  records[2].stage = 5;
  uint64_t payloads = 0;
  PublishForged(r, 0, 0, records, 1, &payloads);
  EXPECT_FALSE(collector.Stop().ok());
  EXPECT_EQ(collector.stats().invalid_records, 2u);
  EXPECT_EQ(collector.stats().records, 1u);
  EXPECT_TRUE(dump.folders().empty());
  EXPECT_EQ(dump.not_dumped(), 2u);
  (void)collector.Reconcile();
  ASSERT_TRUE(collector.Export().ok());
  collector.Finalize();
  EXPECT_EQ(ReadCapture(dir + "/args_dump").entries.size(), 1u);
}

TEST(ConvertRecordTest, RejectsInconsistentGeometry) {
  abi::ArgsDumpRecord r;
  std::memset(&r, 0, sizeof(r));
  r.kind = static_cast<uint8_t>(abi::ArgKind::kTensor);
  r.dtype = static_cast<uint8_t>(DataType::kFloat32);
  r.ndims = 6;
  EXPECT_NE(ConvertRecord(r, 0).status().message().find("ndims 6"), std::string::npos);
  r.ndims = 2;
  r.shapes[0] = 4;
  r.shapes[1] = 4;
  r.logical_bytes = 63;  // not 16 x 4
  EXPECT_NE(ConvertRecord(r, 0).status().message().find("logical_bytes"), std::string::npos);
  r.logical_bytes = 64;
  r.payload_size = 32;  // short, but not flagged truncated
  EXPECT_NE(ConvertRecord(r, 0).status().message().find("truncated"), std::string::npos);
  r.truncated = 1;
  auto ok = ConvertRecord(r, 3);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->numel(), 16u);
  EXPECT_EQ(ok->device_thread(), 3u);
  EXPECT_TRUE(ok->truncated());
  r.role = 9;
  EXPECT_FALSE(ConvertRecord(r, 0).ok());
}

TEST(ConvertRecordTest, TaskTimesBecomeNanosecondsAfterTheBase) {
  abi::ArgsDumpRecord r;
  std::memset(&r, 0, sizeof(r));
  r.kind = static_cast<uint8_t>(abi::ArgKind::kScalar);
  r.dtype = static_cast<uint8_t>(DataType::kFloat32);
  auto none = ConvertRecord(r, 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->dispatch_ns(), 0u);
  EXPECT_EQ(none->complete_ns(), 0u);
  abi::SetTaskTimes(r, true, 5000, false, 0);
  auto dispatched = ConvertRecord(r, 0);
  ASSERT_TRUE(dispatched.ok()) << dispatched.status();
  EXPECT_EQ(dispatched->dispatch_ns(), 5000u);
  EXPECT_EQ(dispatched->complete_ns(), 0u);
  abi::SetTaskTimes(r, true, 5000, true, 250);
  auto done = ConvertRecord(r, 0);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->dispatch_ns(), 5000u);
  EXPECT_EQ(done->complete_ns(), 5250u);
  abi::SetTaskTimes(r, true, 0, true, 0);  // at the base: still known
  auto at_base = ConvertRecord(r, 0);
  ASSERT_TRUE(at_base.ok()) << at_base.status();
  EXPECT_EQ(at_base->dispatch_ns(), 1u);
  EXPECT_EQ(at_base->complete_ns(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Platforms, CollectorTest,
                         ::testing::Values(Platform::kA2a3Sim, Platform::kA5Sim),
                         [](const auto& info) { return std::string(PlatformName(info.param)); });

}  // namespace
}  // namespace argsdump
