#include "device/spsc_queue.h"

#include <thread>

#include "device/region.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

struct QueueFixture {
  explicit QueueFixture(uint32_t capacity) : slots(capacity) {
    new (&indices) abi::SpscIndices();
    queue = SpscQueueView(&indices, slots.data(), capacity);
  }
  abi::SpscIndices indices;
  std::vector<uint32_t> slots;
  SpscQueueView queue;
};

TEST(SpscQueueTest, FullEmptyAndWrapAround) {
  QueueFixture f(3);  // not a power of two on purpose
  uint32_t v = 0;
  EXPECT_FALSE(f.queue.TryPop(&v));
  EXPECT_FALSE(f.queue.HasItem());
  for (uint32_t round = 0; round < 5; ++round) {
    EXPECT_TRUE(f.queue.TryPush(round * 10 + 1));
    EXPECT_TRUE(f.queue.TryPush(round * 10 + 2));
    EXPECT_TRUE(f.queue.TryPush(round * 10 + 3));
    EXPECT_FALSE(f.queue.HasSpace());
    EXPECT_FALSE(f.queue.TryPush(99));
    EXPECT_EQ(f.queue.SizeApprox(), 3u);
    for (uint32_t i = 1; i <= 3; ++i) {
      ASSERT_TRUE(f.queue.TryPop(&v));
      EXPECT_EQ(v, round * 10 + i);
    }
    EXPECT_FALSE(f.queue.TryPop(&v));
  }
}

// Two threads, a million values: FIFO order, nothing lost or duplicated.
// Run under --config=tsan as well.
TEST(SpscQueueTest, TwoThreadFifo) {
  QueueFixture f(8);
  constexpr uint32_t kCount = 1000000;
  std::thread producer([&] {
    for (uint32_t i = 0; i < kCount;) {
      if (f.queue.TryPush(i)) {
        ++i;
      } else {
        std::this_thread::yield();
      }
    }
  });
  uint32_t expected = 0;
  while (expected < kCount) {
    uint32_t v = 0;
    if (f.queue.TryPop(&v)) {
      ASSERT_EQ(v, expected);
      ++expected;
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  uint32_t v = 0;
  EXPECT_FALSE(f.queue.TryPop(&v));
}

// The same through two views of one region, as two processes would see it.
TEST(SpscQueueTest, ViewsFromTwoAttachmentsShareTheRing) {
  DumpRegionConfig config;
  config.num_threads = 1;
  config.buffers_per_thread = 4;
  config.ready_queue_depth = 4;
  config.arena_bytes = 4096;
  auto region = DumpRegion::Create(config);
  ASSERT_TRUE(region.ok());
  auto other = DumpRegion::Attach((*region)->base(), (*region)->bytes());
  ASSERT_TRUE(other.ok());
  SpscQueueView device = (*region)->ready_queue(0);
  SpscQueueView host = (*other)->ready_queue(0);
  EXPECT_TRUE(device.TryPush(7));
  uint32_t v = 0;
  ASSERT_TRUE(host.TryPop(&v));
  EXPECT_EQ(v, 7u);
}

}  // namespace
}  // namespace argsdump
