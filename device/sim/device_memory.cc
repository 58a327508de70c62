#include "device/sim/device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {
constexpr uint64_t kPage = 4096;
}  // namespace

absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::Create(uint64_t bytes) {
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
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
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
  const uint64_t rounded = bytes == 0 ? kPage : (bytes + kPage - 1) / kPage * kPage;
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > size_ || rounded > size_ - next_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device memory: ", bytes, " bytes do not fit in what is left of the ", size_,
        "-byte reservation (", size_ - next_, " bytes)"));
  }
  uint8_t* data = base_ + next_;
  next_ += rounded;
  return data;  // fresh pages of a memfd read as zero
}

void DeviceMemory::Free(uint8_t* data, uint64_t bytes) {
  const uint64_t rounded = bytes == 0 ? kPage : (bytes + kPage - 1) / kPage * kPage;
  // The pages go back to the kernel; the range is not handed out again (a
  // bump allocator), so a stale view reads zeros, never another tensor.
  ::madvise(data, rounded, MADV_REMOVE);
}

}  // namespace argsdump
