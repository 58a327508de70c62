#include "server/http/byte_budget.h"

#include <algorithm>
#include <utility>

#include "absl/time/time.h"

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
  absl::MutexLock lock(&mu_);
  auto fits = [this, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return used_ + bytes <= total_;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&fits), absl::FromChrono(wait))) {
    return std::nullopt;
  }
  used_ += bytes;
  return std::optional<Reservation>(std::in_place, this, bytes);
}

uint64_t ByteBudget::used() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

void ByteBudget::Release(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_ -= bytes;
}

uint64_t ChunkBytesFor(uint64_t length) { return 2 * std::min(length, kPayloadChunkBytes); }

}  // namespace argsdump
