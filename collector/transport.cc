#include "collector/transport.h"

#include <sys/mman.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/host_endpoint.h"

namespace argsdump {
namespace {

DeviceThreadCounters Counters(const abi::ThreadState& st) {
  DeviceThreadCounters c;
  c.records_written = st.records_written.load(std::memory_order_acquire);
  c.truncated = st.truncated_records.load(std::memory_order_acquire);
  c.dropped = st.dropped_records.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < abi::kDropCauseCount; ++i) {
    c.dropped_by_cause[i] = st.dropped_by_cause[i].load(std::memory_order_acquire);
  }
  c.arena_waits = st.arena_waits.load(std::memory_order_acquire);
  c.gate_waits = st.gate_waits.load(std::memory_order_acquire);
  c.flushed = st.flushed.load(std::memory_order_acquire) != 0;
  return c;
}

// True when the device's cursor shows it may have written over the bytes of a
// payload that started at `offset` (one full arena later).
bool Lapped(const abi::ThreadState& st, const abi::ArgsDumpRecord& r, uint64_t arena) {
  return st.arena_write_offset.load(std::memory_order_acquire) > r.payload_offset + arena;
}

class DirectTransport : public RegionTransport {
 public:
  explicit DirectTransport(const DumpRegion& region) : region_(region), endpoint_(region) {}
  Platform platform() const override { return Platform::kA2a3Sim; }
  const abi::DumpRegionHeader& header() const override { return region_.header(); }

  absl::StatusOr<bool> PopReady(uint32_t thread, uint32_t* buffer) override {
    return endpoint_.PopReady(thread, buffer);
  }
  uint64_t BufferSequence(uint32_t, uint32_t buffer) override {
    return region_.buffer_header(buffer).sequence;
  }
  BufferRecords ReadBuffer(uint32_t /*thread*/, uint32_t buffer) override {
    BufferRecords b;
    b.count = endpoint_.RecordCount(buffer);
    b.records = region_.buffer_records(buffer);
    b.sequence = region_.buffer_header(buffer).sequence;
    return b;
  }
  absl::StatusOr<absl::string_view> PayloadView(uint32_t thread,
                                                const abi::ArgsDumpRecord& record,
                                                bool* overwritten) override {
    auto bytes = endpoint_.Payload(thread, record);
    if (!bytes.ok()) return bytes.status();
    *overwritten = Lapped(region_.thread_state(thread), record, region_.arena_bytes());
    return absl::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  }
  void ReturnBuffer(uint32_t thread, uint32_t buffer) override {
    endpoint_.ReturnBuffer(thread, buffer);
  }
  void AckPayloads(uint32_t thread, uint64_t count) override {
    endpoint_.AckPayloads(thread, count);
  }
  std::optional<uint32_t> UnflushedBuffer(uint32_t thread, uint64_t next_sequence) override {
    return endpoint_.UnflushedBuffer(thread, next_sequence);
  }
  DeviceThreadCounters ReadCounters(uint32_t thread) override {
    return Counters(region_.thread_state(thread));
  }

 private:
  const DumpRegion& region_;
  HostEndpoint endpoint_;
};

// The a5 path: every access to device memory is an explicit copy between the
// device region and a host shadow of the same layout; the HostEndpoint logic
// then runs on the shadow.
class ShadowTransport : public RegionTransport {
 public:
  ShadowTransport(const DumpRegion& device, void* shadow_base,
                  std::unique_ptr<DumpRegion> shadow)
      : device_(device), shadow_base_(shadow_base), shadow_(std::move(shadow)),
        endpoint_(*shadow_) {}
  ~ShadowTransport() override {
    const uint64_t bytes = shadow_->bytes();
    shadow_.reset();
    munmap(shadow_base_, bytes);
  }

  Platform platform() const override { return Platform::kA5Sim; }
  const abi::DumpRegionHeader& header() const override { return shadow_->header(); }

  absl::StatusOr<bool> PopReady(uint32_t thread, uint32_t* buffer) override {
    abi::SpscIndices& dev = device_.thread_state(thread).ready;
    abi::SpscIndices& sh = shadow_->thread_state(thread).ready;
    // copy_from_device: the producer's tail, then the slots it published.
    const uint64_t tail = dev.tail.value.load(std::memory_order_acquire);
    const uint64_t head = sh.head.value.load(std::memory_order_relaxed);
    if (tail == head) return false;
    const uint32_t depth = device_.header().ready_queue_depth;
    uint32_t* dev_slots = SlotPtr(device_, device_.header().ready_slots_offset, thread, depth);
    uint32_t* sh_slots = SlotPtr(*shadow_, shadow_->header().ready_slots_offset, thread, depth);
    for (uint64_t i = head; i < tail && i < head + depth; ++i) {
      sh_slots[i % depth] = dev_slots[i % depth];
    }
    sh.tail.value.store(tail, std::memory_order_release);
    auto popped = endpoint_.PopReady(thread, buffer);
    // copy_to_device: only the consumer index the host owns.
    dev.head.value.store(sh.head.value.load(std::memory_order_relaxed),
                         std::memory_order_release);
    return popped;
  }

  uint64_t BufferSequence(uint32_t, uint32_t buffer) override {
    // copy_from_device: the one header field.
    const uint64_t seq = device_.buffer_header(buffer).sequence;
    shadow_->buffer_header(buffer).sequence = seq;
    return seq;
  }

  BufferRecords ReadBuffer(uint32_t /*thread*/, uint32_t buffer) override {
    // copy_from_device: header, then exactly the records it counts.
    const abi::MetaBufferHeader& dh = device_.buffer_header(buffer);
    abi::MetaBufferHeader& sh = shadow_->buffer_header(buffer);
    const uint32_t count = std::min(dh.count.load(std::memory_order_acquire),
                                    device_.records_per_buffer());
    sh.count.store(count, std::memory_order_relaxed);
    sh.sequence = dh.sequence;
    sh.payload_records = dh.payload_records;
    std::memcpy(shadow_->buffer_records(buffer), device_.buffer_records(buffer),
                uint64_t{count} * sizeof(abi::ArgsDumpRecord));
    BufferRecords b;
    b.records = shadow_->buffer_records(buffer);
    b.count = count;
    b.sequence = sh.sequence;
    return b;
  }

  absl::StatusOr<absl::string_view> PayloadView(uint32_t thread,
                                                const abi::ArgsDumpRecord& record,
                                                bool* overwritten) override {
    auto span = endpoint_.Payload(thread, record);  // validates against the shadow
    if (!span.ok()) return span.status();
    // copy_from_device: the arena slice into the shadow arena.
    const uint64_t physical = record.payload_offset % device_.arena_bytes();
    std::memcpy(shadow_->arena(thread) + physical, device_.arena(thread) + physical,
                record.payload_size);
    *overwritten = Lapped(device_.thread_state(thread), record, device_.arena_bytes());
    return absl::string_view(reinterpret_cast<const char*>(span->data()), span->size());
  }

  void ReturnBuffer(uint32_t thread, uint32_t buffer) override {
    abi::SpscIndices& dev = device_.thread_state(thread).free;
    abi::SpscIndices& sh = shadow_->thread_state(thread).free;
    // copy_from_device: the consumer's head (for the space check).
    sh.head.value.store(dev.head.value.load(std::memory_order_acquire),
                        std::memory_order_release);
    const uint64_t tail = sh.tail.value.load(std::memory_order_relaxed);
    endpoint_.ReturnBuffer(thread, buffer);
    // copy_to_device: the slot written, then the producer index.
    const uint32_t cap = device_.buffers_per_thread();
    SlotPtr(device_, device_.header().free_slots_offset, thread, cap)[tail % cap] =
        SlotPtr(*shadow_, shadow_->header().free_slots_offset, thread, cap)[tail % cap];
    dev.tail.value.store(sh.tail.value.load(std::memory_order_relaxed),
                         std::memory_order_release);
  }

  void AckPayloads(uint32_t thread, uint64_t count) override {
    if (count == 0) return;
    endpoint_.AckPayloads(thread, count);
    device_.thread_state(thread).completed_payload_count.store(
        shadow_->thread_state(thread).completed_payload_count.load(std::memory_order_relaxed),
        std::memory_order_release);
  }

  std::optional<uint32_t> UnflushedBuffer(uint32_t thread, uint64_t next_sequence) override {
    const uint32_t current =
        device_.thread_state(thread).current_buffer.load(std::memory_order_acquire);
    shadow_->thread_state(thread).current_buffer.store(current, std::memory_order_relaxed);
    if (!device_.BufferBelongsTo(current, thread)) return std::nullopt;
    ReadBuffer(thread, current);
    return endpoint_.UnflushedBuffer(thread, next_sequence);
  }

  DeviceThreadCounters ReadCounters(uint32_t thread) override {
    return Counters(device_.thread_state(thread));
  }

 private:
  static uint32_t* SlotPtr(const DumpRegion& r, uint64_t offset, uint32_t thread,
                           uint32_t per_thread) {
    return reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(r.base()) + offset +
                                       uint64_t{thread} * per_thread * sizeof(uint32_t));
  }

  const DumpRegion& device_;
  void* shadow_base_;
  std::unique_ptr<DumpRegion> shadow_;
  HostEndpoint endpoint_;
};

}  // namespace

std::optional<Platform> PlatformFromName(const std::string& name) {
  if (name == "a2a3sim") return Platform::kA2a3Sim;
  if (name == "a5sim") return Platform::kA5Sim;
  return std::nullopt;
}

const char* PlatformName(Platform platform) {
  return platform == Platform::kA2a3Sim ? "a2a3sim" : "a5sim";
}

absl::StatusOr<std::unique_ptr<RegionTransport>> MakeTransport(Platform platform,
                                                               const DumpRegion& device) {
  if (platform == Platform::kA2a3Sim) {
    return std::unique_ptr<RegionTransport>(new DirectTransport(device));
  }
  // The shadow starts as a copy of the device's header, queue state and
  // buffer headers (all host-initialised, the device has not run yet);
  // arenas and records are copied on demand.
  const uint64_t bytes = device.bytes();
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a5sim: cannot map a host shadow of ", bytes, " bytes"));
  }
  std::memcpy(base, device.base(), device.header().meta_buffers_offset);
  for (uint32_t b = 0; b < device.total_buffers(); ++b) {
    std::memcpy(static_cast<uint8_t*>(base) + device.header().meta_buffers_offset +
                    uint64_t{b} * device.header().meta_buffer_bytes,
                &device.buffer_header(b), sizeof(abi::MetaBufferHeader));
  }
  auto shadow = DumpRegion::Attach(base, bytes);
  if (!shadow.ok()) {
    munmap(base, bytes);
    return shadow.status();
  }
  return std::unique_ptr<RegionTransport>(
      new ShadowTransport(device, base, std::move(shadow).value()));
}

}  // namespace argsdump
