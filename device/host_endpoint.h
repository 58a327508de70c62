// HostEndpoint: the host's side of the shared-memory ABI, the mirror of
// ThreadRecorder. It pops published metadata buffers, validates every index
// and offset that comes out of shared memory before using it, hands out
// payload bytes from the arena, acknowledges payloads per thread, and returns
// buffers to the device. The collector builds on it; tests use it to play the
// host. Per thread, PopReady/ReturnBuffer must be called from one host thread
// at a time (each queue has one consumer and one producer).
#ifndef ARGSDUMP_DEVICE_HOST_ENDPOINT_H_
#define ARGSDUMP_DEVICE_HOST_ENDPOINT_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "device/abi.h"
#include "device/region.h"

namespace argsdump {

class HostEndpoint {
 public:
  explicit HostEndpoint(const DumpRegion& region) : region_(region) {}

  const DumpRegion& region() const { return region_; }

  // Pops the next published buffer of `thread` into *buffer. Returns false
  // when none is ready; DataLoss when the device published an index that is
  // not one of this thread's buffers.
  absl::StatusOr<bool> PopReady(uint32_t thread, uint32_t* buffer);

  // Records in `buffer` (acquire: every counted record is whole).
  uint32_t RecordCount(uint32_t buffer) const;
  const abi::ArgsDumpRecord& Record(uint32_t buffer, uint32_t index) const {
    return region_.buffer_records(buffer)[index];
  }

  // The arena bytes of a record's payload (empty for payload_size 0).
  // DataLoss when the record points outside the thread's arena.
  absl::StatusOr<absl::Span<const uint8_t>> Payload(
      uint32_t thread, const abi::ArgsDumpRecord& record) const;

  // Marks `count` more of `thread`'s payload records as durable: the device
  // may reuse their arena space once all it published are acknowledged.
  void AckPayloads(uint32_t thread, uint64_t count);

  // Gives an emptied buffer back to the device's free queue.
  void ReturnBuffer(uint32_t thread, uint32_t buffer);

  // After the device stopped (or died): the buffer `thread` was filling and
  // never published, if it holds records. `next_sequence` is the sequence the
  // host expects next from that thread (buffers it already received are not
  // returned again).
  std::optional<uint32_t> UnflushedBuffer(uint32_t thread,
                                          uint64_t next_sequence) const;

 private:
  const DumpRegion& region_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_HOST_ENDPOINT_H_
