#include "device/host_endpoint.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/recorder.h"

namespace argsdump {

absl::StatusOr<bool> HostEndpoint::PopReady(uint32_t thread, uint32_t* buffer) {
  SpscQueueView ready = region_.ready_queue(thread);
  uint32_t index = abi::kNoBuffer;
  if (!ready.TryPop(&index)) return false;
  if (!region_.BufferBelongsTo(index, thread)) {
    return absl::DataLossError(absl::StrCat(
        "dump region: thread ", thread, " published buffer index ", index,
        " which is not one of its buffers"));
  }
  *buffer = index;
  return true;
}

uint32_t HostEndpoint::RecordCount(uint32_t buffer) const {
  const uint32_t count =
      region_.buffer_header(buffer).count.load(std::memory_order_acquire);
  return count <= region_.records_per_buffer() ? count : region_.records_per_buffer();
}

absl::StatusOr<absl::Span<const uint8_t>> HostEndpoint::Payload(
    uint32_t thread, const abi::ArgsDumpRecord& record) const {
  if (record.payload_size == 0) return absl::Span<const uint8_t>();
  const uint64_t arena = region_.arena_bytes();
  const uint64_t physical = record.payload_offset % arena;
  if (record.payload_size > arena || physical + record.payload_size > arena) {
    return absl::DataLossError(absl::StrCat(
        "dump region: payload of ", record.payload_size, " bytes at cursor ",
        record.payload_offset, " does not fit thread ", thread, "'s arena of ",
        arena, " bytes"));
  }
  return absl::Span<const uint8_t>(region_.arena(thread) + physical,
                                   record.payload_size);
}

void HostEndpoint::AckPayloads(uint32_t thread, uint64_t count) {
  if (count == 0) return;
  region_.thread_state(thread).completed_payload_count.fetch_add(
      count, std::memory_order_release);
}

void HostEndpoint::ReturnBuffer(uint32_t thread, uint32_t buffer) {
  // The free queue holds every buffer of the thread at most once, so it can
  // never be full here.
  region_.free_queue(thread).TryPush(buffer);
}

std::optional<uint32_t> HostEndpoint::UnflushedBuffer(
    uint32_t thread, uint64_t next_sequence) const {
  const uint32_t current = region_.thread_state(thread).current_buffer.load(
      std::memory_order_acquire);
  if (!region_.BufferBelongsTo(current, thread)) return std::nullopt;
  const abi::MetaBufferHeader& header = region_.buffer_header(current);
  if (RecordCount(current) == 0) return std::nullopt;
  // Published and already received: not a leftover.
  if (header.sequence != kUnpublishedSequence && header.sequence < next_sequence) {
    return std::nullopt;
  }
  return current;
}

}  // namespace argsdump
