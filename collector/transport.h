// How the host reaches the device's dump region. Two transports, one per
// simulated platform:
//   a2a3sim  DirectTransport: the host reads and writes the shared region in
//            place (the device memory is mapped into the host).
//   a5sim    ShadowTransport: the host keeps a shadow copy of the region and
//            moves only what it needs with explicit copy calls: queue indices
//            and slots, a popped buffer's records, a record's arena slice;
//            it writes back only the fields the host owns (ready head, free
//            slots and tail, completed payload count).
// Both are driven by the same collector and must yield identical captures.
// Per device thread, PopReady and ReturnBuffer come from one host thread.
#ifndef ARGSDUMP_COLLECTOR_TRANSPORT_H_
#define ARGSDUMP_COLLECTOR_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "device/abi.h"
#include "device/region.h"

namespace argsdump {

enum class Platform { kA2a3Sim, kA5Sim };

// "a2a3sim" / "a5sim".
std::optional<Platform> PlatformFromName(const std::string& name);
const char* PlatformName(Platform platform);

struct BufferRecords {
  const abi::ArgsDumpRecord* records = nullptr;  // valid until ReturnBuffer
  uint32_t count = 0;
  uint64_t sequence = 0;
};

// A device thread's loss and volume counters, read once the device stopped.
struct DeviceThreadCounters {
  uint64_t records_written = 0;
  uint64_t truncated = 0;
  uint64_t dropped = 0;
  uint64_t dropped_by_cause[abi::kDropCauseCount] = {};
  uint64_t arena_waits = 0;
  uint64_t gate_waits = 0;
  bool flushed = false;
};

class RegionTransport {
 public:
  virtual ~RegionTransport() = default;
  virtual Platform platform() const = 0;
  virtual const abi::DumpRegionHeader& header() const = 0;

  // Next published buffer of `thread`; false when none (DataLoss for an
  // index that is not the thread's).
  virtual absl::StatusOr<bool> PopReady(uint32_t thread, uint32_t* buffer) = 0;
  // The publish sequence of a popped buffer (reads only its header).
  virtual uint64_t BufferSequence(uint32_t thread, uint32_t buffer) = 0;
  // The records of a buffer popped by PopReady (or found by UnflushedBuffer).
  virtual BufferRecords ReadBuffer(uint32_t thread, uint32_t buffer) = 0;
  // A record's payload bytes, readable on the host until that payload is
  // acknowledged (the device does not reuse unacknowledged arena space, so
  // they can be written to the sink without another copy). DataLoss when the
  // record points outside the arena; *overwritten when the device's cursor
  // shows it already lapped that space (the bytes cannot be trusted).
  virtual absl::StatusOr<absl::string_view> PayloadView(uint32_t thread,
                                                        const abi::ArgsDumpRecord& record,
                                                        bool* overwritten) = 0;
  virtual void ReturnBuffer(uint32_t thread, uint32_t buffer) = 0;
  // `count` more payload records of `thread` are durable.
  virtual void AckPayloads(uint32_t thread, uint64_t count) = 0;
  // After the device stopped: its unpublished current buffer, if any.
  virtual std::optional<uint32_t> UnflushedBuffer(uint32_t thread,
                                                  uint64_t next_sequence) = 0;
  virtual DeviceThreadCounters ReadCounters(uint32_t thread) = 0;
};

absl::StatusOr<std::unique_ptr<RegionTransport>> MakeTransport(Platform platform,
                                                               const DumpRegion& device);

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_TRANSPORT_H_
