#include "device/sim/device_memory.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {
constexpr uint64_t kPage = 4096;
}  // namespace

uint64_t DeviceMemory::MachineBytes() {
  struct sysinfo info;
  if (::sysinfo(&info) != 0) return uint64_t{1} << 36;
  return (static_cast<uint64_t>(info.totalram) + info.totalswap) * info.mem_unit;
}

absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::Create(uint64_t bytes) {
  // No more than the machine could back (RAM + swap): a buffer larger than
  // that is refused at Alloc, as the heap refuses it in one process.
  bytes = std::min(bytes, MachineBytes());
  bytes = (bytes + kPage - 1) / kPage * kPage;
  if (bytes == 0) return absl::InvalidArgumentError("device memory: 0 bytes");
  const int fd = ::memfd_create("argsdump-device-memory", MFD_CLOEXEC);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("device memory: memfd_create: ", std::strerror(errno)));
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("device memory: ftruncate to ", bytes, " bytes: ", std::strerror(e)));
  }
  void* p = MAP_FAILED;
  // Under an address-space limit (ulimit -v) a smaller reservation may
  // still be had: halve it down to 64 MiB before giving up.
  for (;;) {
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p != MAP_FAILED || errno != ENOMEM || bytes <= (uint64_t{64} << 20)) break;
    bytes = bytes / 2 / kPage * kPage;
  }
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("device memory: mmap of ", bytes, " bytes: ", std::strerror(e)));
  }
  return std::unique_ptr<DeviceMemory>(new DeviceMemory(fd, static_cast<uint8_t*>(p), bytes));
}

DeviceMemory::~DeviceMemory() {
  ::munmap(base_, size_);
  ::close(fd_);
}

absl::StatusOr<uint8_t*> DeviceMemory::Allocate(uint64_t bytes) {
  if (bytes > size_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("device memory: ", bytes, " bytes are more than its ", size_));
  }
  const uint64_t rounded = bytes == 0 ? kPage : (bytes + kPage - 1) / kPage * kPage;
  std::lock_guard<std::mutex> lock(mu_);
  // First fit among the freed ranges (their pages were given back: they
  // read as zero), else the untouched end.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < rounded) continue;
    const uint64_t offset = it->first, left = it->second - rounded;
    free_.erase(it);
    if (left > 0) free_[offset + rounded] = left;
    return base_ + offset;
  }
  if (rounded > size_ - next_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device memory: ", bytes, " bytes do not fit in what is free of its ", size_,
        " bytes"));
  }
  uint8_t* data = base_ + next_;
  next_ += rounded;
  return data;  // fresh pages of a memfd read as zero
}

void DeviceMemory::Free(uint8_t* data, uint64_t bytes) {
  const uint64_t rounded = bytes == 0 ? kPage : (bytes + kPage - 1) / kPage * kPage;
  // The pages go back to the kernel (the range reads as zero if reused).
  ::madvise(data, rounded, MADV_REMOVE);
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t offset = OffsetOf(data), size = rounded;
  // Merged with free neighbours, so fragments become whole ranges again.
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  if (offset + size == next_) {
    next_ = offset;  // the end: back to untouched space
  } else {
    free_[offset] = size;
  }
}

}  // namespace argsdump
