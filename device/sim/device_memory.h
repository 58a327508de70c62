// DeviceMemory: the storage behind DeviceBuffers when the device runs in its
// own process. One memfd, mapped MAP_SHARED before the
// device process is forked, so the host keeps reading it after the device
// process died, as real device memory outlives the AICPU process. Pages cost
// nothing until touched; a freed buffer's pages are given back at once.
//
// Only the device process allocates (first fit over freed ranges, then the
// untouched end; the allocator's state is not shared); the host only reads,
// by offset: Contains() checks an offset that came out of shared
// memory before it is used.
#ifndef ARGSDUMP_DEVICE_SIM_DEVICE_MEMORY_H_
#define ARGSDUMP_DEVICE_SIM_DEVICE_MEMORY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"

namespace argsdump {

class DeviceMemory {
 public:
  // Reserves `bytes` of address space (64 GiB by default: virtual, sparse),
  // at most MachineBytes() and, under an address-space limit (RLIMIT_AS),
  // a quarter of it (less again when even that does not fit).
  // ResourceExhausted when the memfd or the mapping cannot be had.
  static absl::StatusOr<std::unique_ptr<DeviceMemory>> Create(
      uint64_t bytes = uint64_t{1} << 36);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // `bytes` zero-filled bytes: page-aligned from a megabyte on, else
  // 64-byte aligned; ResourceExhausted when the reservation is used up.
  // Thread-safe.
  absl::StatusOr<uint8_t*> Allocate(uint64_t bytes);
  // Gives back what Allocate(bytes) returned (a large buffer's pages are
  // released at once).
  void Free(uint8_t* data, uint64_t bytes);
  // Zero-fills what Allocate(bytes) returned, as Allocate hands out freed
  // space again: a large buffer's pages go back (they read as zero), a
  // small one is written over. Thread-safe; the caller owns the bytes.
  void Zero(uint8_t* data, uint64_t bytes);

  // RAM + swap: what the machine could back.
  static uint64_t MachineBytes();

  uint8_t* base() const { return base_; }
  uint64_t size() const { return size_; }
  // True when [offset, offset + bytes) lies inside the mapping.
  bool Contains(uint64_t offset, uint64_t bytes) const {
    return offset <= size_ && bytes <= size_ - offset;
  }
  uint64_t OffsetOf(const uint8_t* data) const {
    return static_cast<uint64_t>(data - base_);
  }
  bool Owns(const uint8_t* data) const {
    return data >= base_ && data < base_ + size_;
  }

 private:
  DeviceMemory(int fd, uint8_t* base, uint64_t size) : fd_(fd), base_(base), size_(size) {}
  int fd_;
  uint8_t* base_;
  uint64_t size_;
  std::mutex mu_;
  uint64_t next_ = 0;                  // unallocated from here on
  uint64_t high_water_ = 0;            // never handed out from here on (reads zero)
  std::map<uint64_t, uint64_t> free_;  // freed ranges: offset -> bytes
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_DEVICE_MEMORY_H_
