#include "server/http/byte_budget.h"

#include <algorithm>
#include <utility>


namespace argsdump {

ByteBudget::ByteBudget(uint64_t total) : total_(std::max<uint64_t>(total, 1)) {}

ByteBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(other.bytes_) {}

ByteBudget::Reservation::~Reservation() {
  if (budget_ != nullptr) budget_->Release(bytes_);
}

std::optional<ByteBudget::Reservation> ByteBudget::Reserve(uint64_t bytes,
                                                            std::chrono::milliseconds wait) {
  bytes = std::min(bytes, total_);
  std::unique_lock<std::mutex> lock(mu_);
  if (!freed_.wait_for(lock, wait, [&] { return used_ + bytes <= total_; })) {
    return std::nullopt;
  }
  used_ += bytes;
  return std::optional<Reservation>(std::in_place, this, bytes);
}

uint64_t ByteBudget::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

void ByteBudget::Release(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= bytes;
  freed_.notify_all();
}

uint64_t ChunkBytesFor(uint64_t length) { return 2 * std::min(length, kPayloadChunkBytes); }

}  // namespace argsdump
