// DumpRegion: one shared-memory region laid out as abi.h describes, created
// and initialised by the host (every metadata buffer starts in its thread's
// free queue), then used by the device recorder and the host collector. The
// region is an anonymous MAP_SHARED mapping, so a forked collector process
// sees the same bytes; Attach() validates a mapping someone else created.
#ifndef ARGSDUMP_DEVICE_REGION_H_
#define ARGSDUMP_DEVICE_REGION_H_

#include <cstddef>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "device/abi.h"
#include "device/spsc_queue.h"

namespace argsdump {

// Run-time sizes of a region; defaults are the reference's (8 x 256 x 64 KiB =
// 128 MiB of arena per thread; untouched arena pages cost no memory).
struct DumpRegionConfig {
  abi::DumpLevel level = abi::DumpLevel::kFull;
  uint32_t num_threads = 4;
  uint32_t records_per_buffer = 256;
  uint32_t buffers_per_thread = 8;
  uint32_t ready_queue_depth = 8;
  uint64_t arena_bytes = 8ull * 256 * 64 * 1024;
  abi::FullPolicy full_policy = abi::FullPolicy::kStallThenDrop;
  uint32_t wait_bound_ms = 30000;
};

// Upper bounds Create() accepts (sanity, not hardware limits).
inline constexpr uint32_t kMaxDumpThreads = 64;
inline constexpr uint32_t kMaxRecordsPerBuffer = 1u << 20;
inline constexpr uint32_t kMaxBuffersPerThread = 1u << 16;

class DumpRegion {
 public:
  // Validates `config`, maps and initialises a region. InvalidArgument names
  // the offending field.
  static absl::StatusOr<std::unique_ptr<DumpRegion>> Create(
      const DumpRegionConfig& config);

  // Wraps memory someone else initialised (not owned). Checks magic, ABI
  // version, record size and that every offset fits in `bytes`.
  static absl::StatusOr<std::unique_ptr<DumpRegion>> Attach(void* base,
                                                            uint64_t bytes);

  ~DumpRegion();
  DumpRegion(const DumpRegion&) = delete;
  DumpRegion& operator=(const DumpRegion&) = delete;

  void* base() const { return base_; }
  uint64_t bytes() const { return bytes_; }
  const abi::DumpRegionHeader& header() const { return *header_; }
  abi::DumpLevel level() const {
    return static_cast<abi::DumpLevel>(header_->dump_level);
  }
  uint32_t num_threads() const { return header_->num_threads; }
  uint32_t records_per_buffer() const { return header_->records_per_buffer; }
  uint32_t buffers_per_thread() const { return header_->buffers_per_thread; }
  uint32_t total_buffers() const {
    return header_->num_threads * header_->buffers_per_thread;
  }
  uint64_t arena_bytes() const { return header_->arena_bytes; }
  // CLOCK_MONOTONIC ns when the region was made: the base of the records'
  // task times (abi::kTimeDispatch).
  uint64_t time_base_ns() const { return header_->time_base_ns; }

  abi::ThreadState& thread_state(uint32_t thread) const;
  SpscQueueView ready_queue(uint32_t thread) const;
  SpscQueueView free_queue(uint32_t thread) const;
  abi::MetaBufferHeader& buffer_header(uint32_t buffer) const;
  abi::ArgsDumpRecord* buffer_records(uint32_t buffer) const;
  uint8_t* arena(uint32_t thread) const;

  // The host is gone (abi::DumpRegionHeader::host_gone): called by the
  // device process's host watch when the host process died, or by a host
  // that gives up on the device. From then on every recorder wait on this
  // region ends at once and every drop counts as abi::DropCause::kHostGone
  // (recorder.h). Idempotent, never undone; any thread of any process that
  // maps the region.
  void MarkHostGone() const;
  // Whether MarkHostGone() was called (acquire), by this mapping or another.
  bool host_gone() const {
    return header_->host_gone.load(std::memory_order_acquire) != 0;
  }

  // The host's doorbell (abi::DumpRegionHeader::host_doorbell). Ring: the
  // host has work (a buffer published or returned); costs a fence and a load
  // when no host thread sleeps. Wait: sleeps until rung, `timeout` passed,
  // or - checked after this thread counted itself a sleeper - `ready()` is
  // true (then it does not sleep). Any thread of any process that maps the
  // region.
  void RingHostDoorbell() const;
  void WaitHostDoorbell(const std::function<bool()>& ready,
                        std::chrono::microseconds timeout) const;

  // True when `buffer` is a valid index owned by `thread` (host-side check
  // of indices that come out of shared memory).
  bool BufferBelongsTo(uint32_t buffer, uint32_t thread) const {
    return buffer < total_buffers() &&
           buffer / header_->buffers_per_thread == thread;
  }

 private:
  DumpRegion(void* base, uint64_t bytes, bool owned);

  uint8_t* at(uint64_t offset) const { return static_cast<uint8_t*>(base_) + offset; }

  void* base_;
  uint64_t bytes_;
  bool owned_;
  abi::DumpRegionHeader* header_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_REGION_H_
