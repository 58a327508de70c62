#include "device/abi.h"

#include <cstring>
#include <vector>

#include "device/region.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

TEST(AbiLayoutTest, RecordIsTwoCacheLinesWithReferenceOffsets) {
  EXPECT_EQ(sizeof(abi::ArgsDumpRecord), 128u);
  EXPECT_EQ(offsetof(abi::ArgsDumpRecord, arg_index), 12u);
  EXPECT_EQ(offsetof(abi::ArgsDumpRecord, payload_offset), 24u);
  EXPECT_EQ(offsetof(abi::ArgsDumpRecord, scalar_value), 40u);
  EXPECT_EQ(offsetof(abi::ArgsDumpRecord, func_ids), 50u);
  EXPECT_EQ(offsetof(abi::ArgsDumpRecord, start_offset), 64u);
  EXPECT_EQ(offsetof(abi::ArgsDumpRecord, strides), 72u);
  EXPECT_EQ(offsetof(abi::ArgsDumpRecord, shapes), 92u);
}

TEST(AbiLayoutTest, QueueIndicesSitOnTheirOwnCacheLines) {
  EXPECT_EQ(offsetof(abi::ThreadState, ready) + offsetof(abi::SpscIndices, head), 0u);
  EXPECT_EQ(offsetof(abi::ThreadState, ready) + offsetof(abi::SpscIndices, tail), 64u);
  EXPECT_EQ(offsetof(abi::ThreadState, free) + offsetof(abi::SpscIndices, head), 128u);
  EXPECT_EQ(offsetof(abi::ThreadState, free) + offsetof(abi::SpscIndices, tail), 192u);
  // The device-written and host-written lines differ.
  EXPECT_NE(offsetof(abi::ThreadState, published_payload_count) / 64,
            offsetof(abi::ThreadState, completed_payload_count) / 64);
  EXPECT_EQ(alignof(abi::ThreadState), 64u);
}

TEST(DumpRegionTest, CreateLaysOutEveryPartInsideTheRegion) {
  DumpRegionConfig config;
  config.num_threads = 3;
  config.records_per_buffer = 16;
  config.buffers_per_thread = 4;
  config.ready_queue_depth = 2;
  config.arena_bytes = 8192;
  auto region = DumpRegion::Create(config);
  ASSERT_TRUE(region.ok()) << region.status();
  const abi::DumpRegionHeader& h = (*region)->header();
  EXPECT_EQ(h.magic, 0x44554D50u);
  EXPECT_EQ(h.abi_version, abi::kAbiVersion);
  EXPECT_EQ(h.dump_level, 2u);
  EXPECT_EQ(h.meta_buffer_bytes, 64u + 16 * 128);
  EXPECT_EQ(h.thread_states_offset % 64, 0u);
  EXPECT_EQ(h.meta_buffers_offset % 64, 0u);
  EXPECT_EQ(h.arenas_offset % 4096, 0u);
  EXPECT_LE(h.arenas_offset + 3 * 8192, h.region_bytes);
  EXPECT_LE(h.thread_states_offset + 3 * sizeof(abi::ThreadState), h.ready_slots_offset);
  EXPECT_LE(h.ready_slots_offset + 3 * 2 * 4, h.free_slots_offset);
  EXPECT_LE(h.free_slots_offset + 3 * 4 * 4, h.meta_buffers_offset);
  EXPECT_LE(h.meta_buffers_offset + 12 * h.meta_buffer_bytes, h.arenas_offset);
  // Every buffer starts in its own thread's free queue, in order.
  for (uint32_t t = 0; t < 3; ++t) {
    EXPECT_EQ((*region)->thread_state(t).current_buffer.load(), abi::kNoBuffer);
    SpscQueueView q = (*region)->free_queue(t);
    for (uint32_t i = 0; i < 4; ++i) {
      uint32_t b = 0;
      ASSERT_TRUE(q.TryPop(&b));
      EXPECT_EQ(b, t * 4 + i);
      EXPECT_EQ((*region)->buffer_header(b).owner_thread, t);
    }
    uint32_t b = 0;
    EXPECT_FALSE(q.TryPop(&b));
  }
}

TEST(DumpRegionTest, SeedDefaults) {
  DumpRegionConfig config;
  EXPECT_EQ(config.records_per_buffer, 256u);
  EXPECT_EQ(config.buffers_per_thread, 8u);
  EXPECT_EQ(config.arena_bytes, 128ull << 20);
  EXPECT_EQ(config.wait_bound_ms, 30000u);
  EXPECT_EQ(config.full_policy, abi::FullPolicy::kStallThenDrop);
}

TEST(DumpRegionTest, RejectsBadSizesNamingTheField) {
  DumpRegionConfig config;
  config.records_per_buffer = 0;
  auto region = DumpRegion::Create(config);
  ASSERT_FALSE(region.ok());
  EXPECT_NE(region.status().message().find("records_per_buffer"), std::string::npos);
  config = DumpRegionConfig();
  config.num_threads = 1000;
  EXPECT_NE(DumpRegion::Create(config).status().message().find("num_threads"),
            std::string::npos);
  config = DumpRegionConfig();
  config.level = abi::DumpLevel::kOff;
  EXPECT_FALSE(DumpRegion::Create(config).ok());
}

TEST(DumpRegionTest, AttachValidatesAnotherMapping) {
  DumpRegionConfig config;
  config.num_threads = 2;
  config.arena_bytes = 4096;
  auto region = DumpRegion::Create(config);
  ASSERT_TRUE(region.ok());
  auto attached = DumpRegion::Attach((*region)->base(), (*region)->bytes());
  ASSERT_TRUE(attached.ok()) << attached.status();
  EXPECT_EQ((*attached)->arena(1), (*region)->arena(1));

  EXPECT_FALSE(DumpRegion::Attach((*region)->base(), 64).ok());
  std::vector<uint8_t> copy(static_cast<uint8_t*>((*region)->base()),
                            static_cast<uint8_t*>((*region)->base()) + 128);
  copy.resize((*region)->bytes());
  uint32_t bad_magic = 0x12345678;
  std::memcpy(copy.data(), &bad_magic, 4);
  auto bad = DumpRegion::Attach(copy.data(), copy.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("magic"), std::string::npos);
  std::memcpy(copy.data(), (*region)->base(), 128);
  uint16_t version = abi::kAbiVersion + 1;
  std::memcpy(copy.data() + 4, &version, 2);
  EXPECT_EQ(DumpRegion::Attach(copy.data(), copy.size()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::memcpy(copy.data(), (*region)->base(), 128);
  uint64_t arenas = 1;  // an offset that contradicts the sizes
  std::memcpy(copy.data() + 96, &arenas, 8);
  EXPECT_FALSE(DumpRegion::Attach(copy.data(), copy.size()).ok());
}

// host_gone is state, not layout: it starts clear, a mark through one
// mapping is seen through another, and a region whose host is gone still
// attaches (a host that gave up, a recovery).
TEST(DumpRegionTest, HostGoneIsSharedByEveryMapping) {
  DumpRegionConfig config;
  config.num_threads = 1;
  config.arena_bytes = 4096;
  auto region = DumpRegion::Create(config);
  ASSERT_TRUE(region.ok());
  auto attached = DumpRegion::Attach((*region)->base(), (*region)->bytes());
  ASSERT_TRUE(attached.ok()) << attached.status();
  EXPECT_FALSE((*region)->host_gone());
  EXPECT_FALSE((*attached)->host_gone());
  (*attached)->MarkHostGone();
  EXPECT_TRUE((*region)->host_gone());
  EXPECT_EQ((*region)->header().host_gone.load(), 1u);
  (*attached)->MarkHostGone();  // idempotent
  EXPECT_EQ((*region)->header().host_gone.load(), 1u);
  auto again = DumpRegion::Attach((*region)->base(), (*region)->bytes());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->host_gone());
}

}  // namespace
}  // namespace argsdump
