#include "device/sim/device_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

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
  // Under an address-space limit (ulimit -v) at most a quarter of it: the
  // dump region, the collector's and gRPC's threads (their stacks and malloc
  // arenas) need the rest; taking all that fits left them none.
  struct rlimit limit;
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    bytes = std::min<uint64_t>(bytes, std::max<uint64_t>(limit.rlim_cur / 4, kPage));
  }
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

namespace {

// Buffers of a megabyte or more are page-aligned and give their pages back
// when freed (as the heap mmaps them in one process); smaller ones are
// 64-byte aligned and zeroed when reused (a page and a hole punched per
// small tensor made a step of small tasks 1.7x slower than in process).
constexpr uint64_t kLargeBytes = 1 << 20;
constexpr uint64_t kSmallAlignment = 64;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint64_t AlignmentOf(uint64_t bytes) { return bytes >= kLargeBytes ? kPage : kSmallAlignment; }

}  // namespace

absl::StatusOr<uint8_t*> DeviceMemory::Allocate(uint64_t bytes) {
  if (bytes > size_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("device memory: ", bytes, " bytes are more than its ", size_));
  }
  const uint64_t align = AlignmentOf(bytes);
  const uint64_t rounded = AlignUp(std::max<uint64_t>(bytes, 1), align);
  std::lock_guard<std::mutex> lock(mu_);
  // First fit among the freed ranges, else the untouched end.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t offset = it->first, length = it->second;
    const uint64_t start = AlignUp(offset, align);
    if (start + rounded > offset + length) continue;
    free_.erase(it);
    if (start > offset) free_[offset] = start - offset;
    if (offset + length > start + rounded) free_[start + rounded] = offset + length - start - rounded;
    uint8_t* data = base_ + start;
    Zero(data, bytes);
    return data;
  }
  const uint64_t start = AlignUp(next_, align);
  if (start > size_ || rounded > size_ - start) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device memory: ", bytes, " bytes do not fit in what is free of its ", size_,
        " bytes"));
  }
  if (start > next_) free_[next_] = start - next_;
  next_ = start + rounded;
  uint8_t* data = base_ + start;
  if (start < high_water_) {
    // Space given back to the end by a free: it may hold a small buffer's
    // bytes. Beyond the high-water mark, fresh memfd pages read as zero.
    const uint64_t used = std::min(start + rounded, high_water_) - start;
    if (align == kPage) {
      ::madvise(data, AlignUp(used, kPage), MADV_REMOVE);
    } else {
      std::memset(data, 0, used);
    }
  }
  high_water_ = std::max(high_water_, next_);
  return data;
}

void DeviceMemory::Zero(uint8_t* data, uint64_t bytes) {
  const uint64_t align = AlignmentOf(bytes);
  const uint64_t rounded = AlignUp(std::max<uint64_t>(bytes, 1), align);
  if (align == kPage) {
    ::madvise(data, rounded, MADV_REMOVE);  // zero pages again, nothing copied
  } else {
    std::memset(data, 0, rounded);
  }
}

void DeviceMemory::Free(uint8_t* data, uint64_t bytes) {
  const uint64_t align = AlignmentOf(bytes);
  const uint64_t rounded = AlignUp(std::max<uint64_t>(bytes, 1), align);
  if (align == kPage) ::madvise(data, rounded, MADV_REMOVE);  // the pages go back
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
