#include "device/region.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {

uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// Fills every offset field of `h` from its size fields; returns total bytes.
uint64_t ComputeLayout(abi::DumpRegionHeader& h) {
  uint64_t offset = sizeof(abi::DumpRegionHeader);
  h.thread_states_offset = AlignUp(offset, abi::kCacheLineBytes);
  offset = h.thread_states_offset + uint64_t{h.num_threads} * sizeof(abi::ThreadState);
  h.ready_slots_offset = AlignUp(offset, abi::kCacheLineBytes);
  offset = h.ready_slots_offset +
           uint64_t{h.num_threads} * h.ready_queue_depth * sizeof(uint32_t);
  h.free_slots_offset = AlignUp(offset, abi::kCacheLineBytes);
  offset = h.free_slots_offset +
           uint64_t{h.num_threads} * h.buffers_per_thread * sizeof(uint32_t);
  h.meta_buffers_offset = AlignUp(offset, abi::kCacheLineBytes);
  h.meta_buffer_bytes = sizeof(abi::MetaBufferHeader) +
                        uint64_t{h.records_per_buffer} * sizeof(abi::ArgsDumpRecord);
  offset = h.meta_buffers_offset +
           uint64_t{h.num_threads} * h.buffers_per_thread * h.meta_buffer_bytes;
  h.arenas_offset = AlignUp(offset, abi::kArenaAlignment);
  return AlignUp(h.arenas_offset + uint64_t{h.num_threads} * h.arena_bytes,
                 abi::kArenaAlignment);
}

// The header holds an atomic (host_gone), so it is not trivially copyable:
// it is moved as bytes, only where nothing else writes it (a header under
// construction, a local copy).
void CopyHeader(abi::DumpRegionHeader* dst, const void* src) {
  std::memcpy(static_cast<void*>(dst), src, sizeof(*dst));
}

// Reads the header of a mapping someone else may be using: host_gone may be
// set concurrently (another process's host watch), so it is loaded
// atomically and the bytes around it are copied.
void ReadHeader(const void* base, abi::DumpRegionHeader* h) {
  constexpr size_t kAt = offsetof(abi::DumpRegionHeader, host_gone);
  constexpr size_t kAfter = kAt + sizeof(h->host_gone);
  const auto* src = static_cast<const uint8_t*>(base);
  auto* dst = reinterpret_cast<uint8_t*>(h);
  std::memcpy(dst, src, kAt);
  std::memcpy(dst + kAfter, src + kAfter, sizeof(*h) - kAfter);
  h->host_gone.store(
      static_cast<const abi::DumpRegionHeader*>(base)->host_gone.load(std::memory_order_acquire),
      std::memory_order_relaxed);
}

absl::Status CheckRange(const char* field, uint64_t value, uint64_t lo,
                        uint64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dump region: ", field, " = ", value, " is outside [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DumpRegion>> DumpRegion::Create(
    const DumpRegionConfig& config) {
  const auto level = static_cast<uint32_t>(config.level);
  if (level > static_cast<uint32_t>(abi::DumpLevel::kHybrid)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dump region: level = ", level, " is not 0..3"));
  }
  if (config.level == abi::DumpLevel::kOff) {
    return absl::InvalidArgumentError(
        "dump region: level 0 (off) allocates no region");
  }
  if (auto s = CheckRange("num_threads", config.num_threads, 1, kMaxDumpThreads); !s.ok()) return s;
  if (auto s = CheckRange("records_per_buffer", config.records_per_buffer, 1, kMaxRecordsPerBuffer); !s.ok()) return s;
  if (auto s = CheckRange("buffers_per_thread", config.buffers_per_thread, 1, kMaxBuffersPerThread); !s.ok()) return s;
  if (auto s = CheckRange("ready_queue_depth", config.ready_queue_depth, 1, kMaxBuffersPerThread); !s.ok()) return s;
  if (auto s = CheckRange("arena_bytes", config.arena_bytes, 64, uint64_t{1} << 40); !s.ok()) return s;
  if (config.full_policy != abi::FullPolicy::kStall &&
      config.full_policy != abi::FullPolicy::kDrop &&
      config.full_policy != abi::FullPolicy::kStallThenDrop) {
    return absl::InvalidArgumentError("dump region: unknown full_policy");
  }

  abi::DumpRegionHeader h;
  std::memset(static_cast<void*>(&h), 0, sizeof(h));  // host_gone = 0 too
  h.magic = abi::kMagic;
  h.abi_version = abi::kAbiVersion;
  h.header_bytes = sizeof(abi::DumpRegionHeader);
  h.record_bytes = sizeof(abi::ArgsDumpRecord);
  h.dump_level = level;
  h.num_threads = config.num_threads;
  h.records_per_buffer = config.records_per_buffer;
  h.buffers_per_thread = config.buffers_per_thread;
  h.ready_queue_depth = config.ready_queue_depth;
  h.arena_bytes = config.arena_bytes;
  h.full_policy = static_cast<uint32_t>(config.full_policy);
  h.wait_bound_ms = config.wait_bound_ms;
  h.time_base_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now().time_since_epoch())
                                             .count());
  h.region_bytes = ComputeLayout(h);

  void* base = mmap(nullptr, h.region_bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "dump region: mmap of ", h.region_bytes, " bytes failed: ",
        std::strerror(errno)));
  }
  // Anonymous mappings are zero-filled; construct the atomics in place.
  CopyHeader(static_cast<abi::DumpRegionHeader*>(base), &h);
  std::unique_ptr<DumpRegion> region(new DumpRegion(base, h.region_bytes, true));
  for (uint32_t t = 0; t < h.num_threads; ++t) {
    abi::ThreadState* st = new (region->at(h.thread_states_offset +
                                           uint64_t{t} * sizeof(abi::ThreadState)))
        abi::ThreadState();
    st->current_buffer.store(abi::kNoBuffer, std::memory_order_relaxed);
  }
  for (uint32_t b = 0; b < region->total_buffers(); ++b) {
    auto* bh = new (region->at(h.meta_buffers_offset + b * h.meta_buffer_bytes))
        abi::MetaBufferHeader();
    bh->owner_thread = b / h.buffers_per_thread;
  }
  for (uint32_t t = 0; t < h.num_threads; ++t) {
    SpscQueueView free_queue = region->free_queue(t);
    for (uint32_t i = 0; i < h.buffers_per_thread; ++i) {
      const bool pushed = free_queue.TryPush(t * h.buffers_per_thread + i);
      (void)pushed;  // capacity == buffers_per_thread: always fits
    }
  }
  return region;
}

absl::StatusOr<std::unique_ptr<DumpRegion>> DumpRegion::Attach(void* base,
                                                               uint64_t bytes) {
  if (base == nullptr || bytes < sizeof(abi::DumpRegionHeader)) {
    return absl::InvalidArgumentError("dump region: mapping too small for a header");
  }
  abi::DumpRegionHeader h;
  ReadHeader(base, &h);
  if (h.magic != abi::kMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("dump region: bad magic 0x", absl::Hex(h.magic),
                     " (expected 0x44554D50 \"DUMP\")"));
  }
  if (h.abi_version != abi::kAbiVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("dump region: ABI version ", h.abi_version,
                     ", this build reads ", abi::kAbiVersion));
  }
  if (h.header_bytes != sizeof(abi::DumpRegionHeader) ||
      h.record_bytes != sizeof(abi::ArgsDumpRecord)) {
    return absl::FailedPreconditionError("dump region: header or record size differs");
  }
  if (h.num_threads < 1 || h.num_threads > kMaxDumpThreads ||
      h.records_per_buffer < 1 || h.records_per_buffer > kMaxRecordsPerBuffer ||
      h.buffers_per_thread < 1 || h.buffers_per_thread > kMaxBuffersPerThread ||
      h.ready_queue_depth < 1 || h.ready_queue_depth > kMaxBuffersPerThread ||
      h.arena_bytes < 64 || h.dump_level > 3) {
    return absl::InvalidArgumentError("dump region: header sizes out of range");
  }
  // host_gone is state, not layout: a region whose host is gone attaches.
  abi::DumpRegionHeader expected;
  CopyHeader(&expected, &h);
  const uint64_t needed = ComputeLayout(expected);
  if (std::memcmp(&expected, &h, sizeof(h)) != 0 || needed != h.region_bytes ||
      needed > bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dump region: layout does not match its header (needs ", needed,
        " bytes, mapping has ", bytes, ")"));
  }
  return std::unique_ptr<DumpRegion>(new DumpRegion(base, bytes, false));
}

DumpRegion::DumpRegion(void* base, uint64_t bytes, bool owned)
    : base_(base),
      bytes_(bytes),
      owned_(owned),
      header_(static_cast<abi::DumpRegionHeader*>(base)) {}

DumpRegion::~DumpRegion() {
  if (owned_) munmap(base_, bytes_);
}

void DumpRegion::MarkHostGone() const {
  header_->host_gone.store(1, std::memory_order_release);
  RingHostDoorbell();
}

void DumpRegion::RingHostDoorbell() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header_->host_sleepers.load(std::memory_order_relaxed) == 0) return;
  header_->host_doorbell.fetch_add(1, std::memory_order_seq_cst);
  // Not FUTEX_PRIVATE: the word is in memory another process maps.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header_->host_doorbell), FUTEX_WAKE,
            INT_MAX, nullptr, nullptr, 0);
}

void DumpRegion::WaitHostDoorbell(const std::function<bool()>& ready,
                                  std::chrono::microseconds timeout) const {
  const uint32_t seen = header_->host_doorbell.load(std::memory_order_seq_cst);
  header_->host_sleepers.fetch_add(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!ready()) {
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1000000) * 1000;
    // Returns at once when the word moved on since `seen` (EAGAIN), on a
    // wake, a signal or the timeout: the caller looks again either way.
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header_->host_doorbell), FUTEX_WAIT, seen,
              &ts, nullptr, 0);
  }
  header_->host_sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

abi::ThreadState& DumpRegion::thread_state(uint32_t thread) const {
  return *reinterpret_cast<abi::ThreadState*>(
      at(header_->thread_states_offset + uint64_t{thread} * sizeof(abi::ThreadState)));
}

SpscQueueView DumpRegion::ready_queue(uint32_t thread) const {
  auto* slots = reinterpret_cast<uint32_t*>(
      at(header_->ready_slots_offset +
         uint64_t{thread} * header_->ready_queue_depth * sizeof(uint32_t)));
  return SpscQueueView(&thread_state(thread).ready, slots,
                       header_->ready_queue_depth);
}

SpscQueueView DumpRegion::free_queue(uint32_t thread) const {
  auto* slots = reinterpret_cast<uint32_t*>(
      at(header_->free_slots_offset +
         uint64_t{thread} * header_->buffers_per_thread * sizeof(uint32_t)));
  return SpscQueueView(&thread_state(thread).free, slots,
                       header_->buffers_per_thread);
}

abi::MetaBufferHeader& DumpRegion::buffer_header(uint32_t buffer) const {
  return *reinterpret_cast<abi::MetaBufferHeader*>(
      at(header_->meta_buffers_offset + uint64_t{buffer} * header_->meta_buffer_bytes));
}

abi::ArgsDumpRecord* DumpRegion::buffer_records(uint32_t buffer) const {
  return reinterpret_cast<abi::ArgsDumpRecord*>(
      at(header_->meta_buffers_offset + uint64_t{buffer} * header_->meta_buffer_bytes +
         sizeof(abi::MetaBufferHeader)));
}

uint8_t* DumpRegion::arena(uint32_t thread) const {
  return at(header_->arenas_offset + uint64_t{thread} * header_->arena_bytes);
}

}  // namespace argsdump
