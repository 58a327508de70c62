// The in-flight byte budget: reservations add up to at most the total, a
// request past it waits for one to be given back, or gives up.
#include "server/http/byte_budget.h"

#include <chrono>
#include <optional>
#include <thread>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

TEST(ByteBudgetTest, ReservationsAreGivenBackWhenDestroyed) {
  ByteBudget budget(100);
  {
    std::optional<ByteBudget::Reservation> a = budget.Reserve(60, std::chrono::milliseconds(0));
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(budget.used(), 60u);
    std::optional<ByteBudget::Reservation> moved(std::move(*a));
    a.reset();  // the moved-from one gives nothing back
    EXPECT_EQ(budget.used(), 60u);
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(ByteBudgetTest, PastTheTotalAReservationGivesUpAfterItsWait) {
  ByteBudget budget(100);
  auto a = budget.Reserve(60, std::chrono::milliseconds(0));
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(budget.Reserve(41, std::chrono::milliseconds(0)).has_value());
  EXPECT_TRUE(budget.Reserve(40, std::chrono::milliseconds(0)).has_value());
}

TEST(ByteBudgetTest, MoreThanTheTotalAsksForAllOfIt) {
  ByteBudget budget(100);
  auto all = budget.Reserve(1000, std::chrono::milliseconds(0));
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(budget.used(), 100u);
  EXPECT_EQ(budget.total(), 100u);
}

TEST(ByteBudgetTest, AWaitingReservationTakesWhatAnotherGivesBack) {
  ByteBudget budget(100);
  auto first = std::make_optional(*budget.Reserve(100, std::chrono::milliseconds(0)));
  bool reserved = false;
  uint64_t used_while_held = 0;
  // The waiter waits up to an hour: it can only get its bytes from the
  // release below.
  std::thread waiter([&] {
    std::optional<ByteBudget::Reservation> second = budget.Reserve(50, std::chrono::hours(1));
    reserved = second.has_value();
    used_while_held = budget.used();
  });
  first.reset();
  waiter.join();
  EXPECT_TRUE(reserved);
  EXPECT_EQ(used_while_held, 50u);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(ByteBudgetTest, ChunkBytesAreTwoChunksAtMost) {
  EXPECT_EQ(ChunkBytesFor(10), 20u);
  EXPECT_EQ(ChunkBytesFor(uint64_t{1} << 30), 2 * kPayloadChunkBytes);
}

}  // namespace
}  // namespace argsdump
