// The bytes payload and tensor answers hold across requests: read chunks,
// a tensor's grid, an answer not yet sent. A request reserves what it will
// hold before it reads, and gives it back when its answer is gone (its
// Reservation destroyed). Thread-safe: every connection thread reserves.
#ifndef ARGSDUMP_SERVER_HTTP_BYTE_BUDGET_H_
#define ARGSDUMP_SERVER_HTTP_BYTE_BUDGET_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

#include "absl/base/thread_annotations.h"

namespace argsdump {

class ByteBudget {
 public:
  explicit ByteBudget(uint64_t total);

  class Reservation {
   public:
    Reservation(ByteBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    Reservation(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    Reservation& operator=(Reservation&&) = delete;
    ~Reservation();

   private:
    ByteBudget* budget_;
    uint64_t bytes_;
  };

  // `bytes` (at most the whole budget) once they are free, waiting up to
  // `wait` for other requests to give theirs back; nullopt after that.
  std::optional<Reservation> Reserve(uint64_t bytes, std::chrono::milliseconds wait);

  uint64_t total() const { return total_; }
  uint64_t used() const;

 private:
  void Release(uint64_t bytes);

  const uint64_t total_;
  // A std::mutex, not absl::Mutex: TSan sees its locks (Debian's Abseil is
  // not instrumented), and connection threads wait on `freed_` with it.
  mutable std::mutex mu_;
  std::condition_variable freed_;  // notified when bytes are given back
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

// What ReadPayload sends in one message (the service reads args.bin in
// pieces of this size): a reader holds one, the service one more.
inline constexpr uint64_t kPayloadChunkBytes = 1 << 20;

// What reading `length` bytes of a payload holds of the budget.
uint64_t ChunkBytesFor(uint64_t length);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_BYTE_BUDGET_H_
