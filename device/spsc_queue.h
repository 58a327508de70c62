// A view of one single-producer single-consumer ring of u32 values that lives
// in the shared region (abi::SpscIndices + a slot array). The view holds no
// state of its own, so producer and consumer may each build one in their own
// address space. Exactly one thread calls TryPush and exactly one calls
// TryPop; ordering is documented on abi::SpscIndices.
#ifndef ARGSDUMP_DEVICE_SPSC_QUEUE_H_
#define ARGSDUMP_DEVICE_SPSC_QUEUE_H_

#include <atomic>
#include <cstdint>

#include "device/abi.h"

namespace argsdump {

class SpscQueueView {
 public:
  SpscQueueView() = default;
  SpscQueueView(abi::SpscIndices* indices, uint32_t* slots, uint32_t capacity)
      : indices_(indices), slots_(slots), capacity_(capacity) {}

  uint32_t capacity() const { return capacity_; }

  // Producer only. False when the ring is full.
  bool TryPush(uint32_t value) {
    const uint64_t tail = indices_->tail.value.load(std::memory_order_relaxed);
    const uint64_t head = indices_->head.value.load(std::memory_order_acquire);
    if (tail - head >= capacity_) return false;
    slots_[tail % capacity_] = value;
    indices_->tail.value.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Producer only: true when a TryPush now would succeed (it stays true until
  // this producer pushes, since only the consumer changes head).
  bool HasSpace() const {
    const uint64_t tail = indices_->tail.value.load(std::memory_order_relaxed);
    return tail - indices_->head.value.load(std::memory_order_acquire) <
           capacity_;
  }

  // Consumer only. False when the ring is empty.
  bool TryPop(uint32_t* value) {
    const uint64_t head = indices_->head.value.load(std::memory_order_relaxed);
    const uint64_t tail = indices_->tail.value.load(std::memory_order_acquire);
    if (head == tail) return false;
    *value = slots_[head % capacity_];
    indices_->head.value.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer only: true when a TryPop now would succeed.
  bool HasItem() const {
    const uint64_t head = indices_->head.value.load(std::memory_order_relaxed);
    return indices_->tail.value.load(std::memory_order_acquire) != head;
  }

  // Either side: an estimate (exact when the other side is idle).
  uint64_t SizeApprox() const {
    const uint64_t head = indices_->head.value.load(std::memory_order_acquire);
    const uint64_t tail = indices_->tail.value.load(std::memory_order_acquire);
    return tail >= head ? tail - head : 0;
  }

 private:
  abi::SpscIndices* indices_ = nullptr;
  uint32_t* slots_ = nullptr;
  uint32_t capacity_ = 0;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SPSC_QUEUE_H_
