#include "collector/collector.h"
#include "collector/local_sink.h"

#include <cstring>
#include <vector>

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
      EXPECT_EQ(c.entries[i].dtype, "INT64");
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

INSTANTIATE_TEST_SUITE_P(Platforms, CollectorTest,
                         ::testing::Values(Platform::kA2a3Sim, Platform::kA5Sim),
                         [](const auto& info) { return std::string(PlatformName(info.param)); });

}  // namespace
}  // namespace argsdump
