// The shared-memory ABI between the device-side recorder (producer of records
// and payload bytes) and the host collector (consumer). This header is a
// stable ABI: a region written by one build must be readable by another build
// with the same kAbiVersion, possibly in another process. Hence:
//   - only fixed-width fields, every offset pinned by static_assert;
//   - offsets and indices inside the region, never pointers;
//   - std::atomic fields are lock-free and address-free, so they work when the
//     region is mapped twice; every atomic says which side writes it and with
//     which memory order.
//
// Region layout (all offsets from the region base, from DumpRegionHeader):
//
//   [DumpRegionHeader]                       128 B, host writes once at create
//   [ThreadState x num_threads]              512 B each, cache-line separated
//   [ready-queue slots x num_threads]        u32 buffer indices, device -> host
//   [free-queue slots x num_threads]         u32 buffer indices, host -> device
//   [MetaBuffer x num_threads*buffers]       64 B header + records_per_buffer
//                                            ArgsDumpRecords (128 B each)
//   [arena x num_threads]                    arena_bytes each, page aligned
//
// Metadata buffers rotate: the host fills each thread's free queue, the device
// pops one, appends records, and pushes it to the thread's ready queue when it
// is full (or at flush); the host reads it and returns it to the free queue.
// Payload bytes go to the thread's circular arena at a monotonic cursor
// (physical offset = cursor % arena_bytes, a payload never straddles the end);
// the device reuses arena space only after the host acknowledged every
// payload that thread published (per-thread watermark).
#ifndef ARGSDUMP_DEVICE_ABI_H_
#define ARGSDUMP_DEVICE_ABI_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace argsdump {
namespace abi {

inline constexpr uint32_t kMagic = 0x44554D50;  // "DUMP"
// 2: DumpRegionHeader::host_gone; DropCause::kHostGone (ThreadState's
// counters after dropped_by_cause moved by 8 bytes).
// 3: task times (ArgsDumpRecord::time_flags, duration_ns, dispatch_ns) and
// their base (DumpRegionHeader::time_base_ns).
inline constexpr uint16_t kAbiVersion = 3;
inline constexpr uint32_t kMaxDims = 5;
inline constexpr uint32_t kMaxFuncIds = 3;
inline constexpr uint16_t kUnknownFuncId = 0xFFFF;
inline constexpr uint32_t kNoBuffer = 0xFFFFFFFFu;
inline constexpr uint32_t kCacheLineBytes = 64;
inline constexpr uint32_t kArenaAlignment = 4096;

// What the device captures. Host-written in the header before launch; the
// device latches it once, before the first dispatch.
enum class DumpLevel : uint32_t {
  kOff = 0,      // no region, no dump code path
  kPartial = 1,  // only args marked with CoreTaskArgs::dump(...)
  kFull = 2,     // every arg of every task, with payload
  kHybrid = 3,   // metadata for every arg; payload only for marked tensors
};

enum class ArgRole : uint8_t { kInput = 0, kOutput = 1, kInOut = 2 };
enum class Stage : uint8_t { kBeforeDispatch = 0, kAfterCompletion = 1 };
enum class ArgKind : uint8_t { kTensor = 0, kScalar = 1 };

// ArgsDumpRecord::flags bits.
inline constexpr uint8_t kFlagArgIndexAmbiguous = 1u << 0;
// An after_completion snapshot of a task that was still running when the
// scheduler declared a hang: partial output, not a completion.
inline constexpr uint8_t kFlagInFlightSnapshot = 1u << 1;
// The level selected this tensor for payload but the payload was not kept
// (size 0 tensor, or truncated to nothing); set only with payload_size == 0.
inline constexpr uint8_t kFlagPayloadEmpty = 1u << 2;
// Recorded by the overflow check: the task's output held a NaN or an Inf,
// so the whole task (outputs, and inputs as they are at completion) was
// captured at after_completion whatever the level and filters said.
inline constexpr uint8_t kFlagOverflow = 1u << 3;
// The stats dump mode: the host computes statistics of the payload and
// stores them with the record; with kFlagStatsOnly it then drops the
// payload (the device still copies it, for the host to read).
inline constexpr uint8_t kFlagStats = 1u << 4;
inline constexpr uint8_t kFlagStatsOnly = 1u << 5;

// Task times. The clock is CLOCK_MONOTONIC (std::chrono::steady_clock on
// Linux), in nanoseconds: the host reads it when it makes the region
// (DumpRegionHeader::time_base_ns) and the device reads it when it dispatches
// a task to its kernel and when the task completes. A device in a forked
// process over the shared region reads the same clock. A record's times are
// ns after the base, little-endian in bytes that were reserved before:
// dispatch_ns (56 bits: 2.28 years) and duration_ns (40 bits, completion
// minus dispatch: 18.3 minutes). A value too large for its bytes is stored as
// the largest one (saturated, never wrapped). time_flags says which are there:
// a before_dispatch record has the dispatch time, an after_completion record
// of a completed task both, an in-flight snapshot (the task never completed)
// the dispatch time only; a record written by a runtime that keeps no times
// has neither (the bytes are zero).
inline constexpr uint8_t kTimeDispatch = 1u << 0;  // dispatch_ns is set
inline constexpr uint8_t kTimeComplete = 1u << 1;  // duration_ns is set
inline constexpr uint64_t kMaxDispatchNs = (uint64_t{1} << 56) - 1;
inline constexpr uint64_t kMaxDurationNs = (uint64_t{1} << 40) - 1;

// What the device does when the host falls behind (a full ready queue, an
// empty free queue, an arena not yet acknowledged).
enum class FullPolicy : uint32_t {
  kStall = 0,          // wait for the host, however long
  kDrop = 1,           // never wait: drop and count
  kStallThenDrop = 2,  // wait up to wait_bound_ms, then drop and count
};

// Why records were dropped; indexes ThreadState::dropped_by_cause.
enum class DropCause : uint32_t {
  kReadyQueueFull = 0,   // a full buffer could not be handed to the host
  kFreeQueueEmpty = 1,   // no empty buffer came back from the host
  kArenaAckTimeout = 2,  // the arena was full and the host never acked it
  kFlushTimeout = 3,     // the final flush could not hand its buffer over
  kHostGone = 4,         // dropped while DumpRegionHeader::host_gone was set:
                         // no host left to hand anything to
};
inline constexpr uint32_t kDropCauseCount = 5;

// One captured argument: 128 bytes, two cache lines. Offsets 0..111 keep the
// reference implementation's layout. Written by the device into a metadata
// buffer it owns; read by the host only after the buffer was published
// through the ready queue (or, after the device stopped, up to
// MetaBufferHeader::count).
struct ArgsDumpRecord {
  uint64_t task_id;        // 0
  uint8_t role;            // 8   ArgRole
  uint8_t stage;           // 9   Stage
  uint8_t ndims;           // 10  0 for scalars, 1..kMaxDims for tensors
  uint8_t time_flags;      // 11  kTime* bits
  uint32_t arg_index;      // 12  tensor slot, or tensor_count + scalar index
  uint8_t dtype;           // 16  DataType
  uint8_t truncated;       // 17  1 when payload_size < logical_bytes
  uint8_t is_contiguous;   // 18
  uint8_t duration_ns[5];  // 19  completion - dispatch, 40-bit LE (kTimeComplete)
  uint64_t payload_offset; // 24  monotonic arena cursor where payload starts
  uint64_t payload_size;   // 32  bytes in the arena (0: metadata only)
  uint64_t scalar_value;   // 40  raw little-endian bits of a scalar
  uint8_t kind;            // 48  ArgKind
  uint8_t flags;           // 49  kFlag* bits
  uint16_t func_ids[kMaxFuncIds];  // 50  kUnknownFuncId past func_count
  uint8_t func_count;      // 56
  uint8_t dispatch_ns[7];  // 57  dispatch - time base, 56-bit LE (kTimeDispatch)
  uint64_t start_offset;   // 64  in elements
  uint32_t strides[kMaxDims];  // 72  in elements
  uint32_t shapes[kMaxDims];   // 92
  uint64_t logical_bytes;  // 112 numel x element size of the logical view
  uint32_t step;           // 120 the workload step (iteration) of the task
  uint8_t reserved3[4];    // 124
};
static_assert(sizeof(ArgsDumpRecord) == 128, "record is two cache lines");
static_assert(offsetof(ArgsDumpRecord, task_id) == 0, "ABI");
static_assert(offsetof(ArgsDumpRecord, role) == 8, "ABI");
static_assert(offsetof(ArgsDumpRecord, stage) == 9, "ABI");
static_assert(offsetof(ArgsDumpRecord, ndims) == 10, "ABI");
static_assert(offsetof(ArgsDumpRecord, time_flags) == 11, "ABI");
static_assert(offsetof(ArgsDumpRecord, arg_index) == 12, "ABI");
static_assert(offsetof(ArgsDumpRecord, dtype) == 16, "ABI");
static_assert(offsetof(ArgsDumpRecord, truncated) == 17, "ABI");
static_assert(offsetof(ArgsDumpRecord, is_contiguous) == 18, "ABI");
static_assert(offsetof(ArgsDumpRecord, duration_ns) == 19, "ABI");
static_assert(offsetof(ArgsDumpRecord, payload_offset) == 24, "ABI");
static_assert(offsetof(ArgsDumpRecord, payload_size) == 32, "ABI");
static_assert(offsetof(ArgsDumpRecord, scalar_value) == 40, "ABI");
static_assert(offsetof(ArgsDumpRecord, kind) == 48, "ABI");
static_assert(offsetof(ArgsDumpRecord, flags) == 49, "ABI");
static_assert(offsetof(ArgsDumpRecord, func_ids) == 50, "ABI");
static_assert(offsetof(ArgsDumpRecord, func_count) == 56, "ABI");
static_assert(offsetof(ArgsDumpRecord, dispatch_ns) == 57, "ABI");
static_assert(offsetof(ArgsDumpRecord, start_offset) == 64, "ABI");
static_assert(offsetof(ArgsDumpRecord, strides) == 72, "ABI");
static_assert(offsetof(ArgsDumpRecord, shapes) == 92, "ABI");
static_assert(offsetof(ArgsDumpRecord, logical_bytes) == 112, "ABI");
static_assert(offsetof(ArgsDumpRecord, step) == 120, "ABI");
static_assert(offsetof(ArgsDumpRecord, reserved3) == 124, "ABI");

// The task times of a record (see kTimeDispatch): n-byte little-endian
// fields, written by the device, read by the host.
inline void StoreTimeBytes(uint8_t* dst, int n, uint64_t value) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the ABI is little-endian");
  std::memcpy(dst, &value, static_cast<size_t>(n));
}
inline uint64_t LoadTimeBytes(const uint8_t* src, int n) {
  uint64_t value = 0;
  std::memcpy(&value, src, static_cast<size_t>(n));
  return value;
}
// Sets `r`'s times; `dispatch_ns` and `duration_ns` saturate. A record
// without a dispatch time gets no duration either.
inline void SetTaskTimes(ArgsDumpRecord& r, bool has_dispatch, uint64_t dispatch_ns,
                         bool has_complete, uint64_t duration_ns) {
  if (!has_dispatch) return;
  StoreTimeBytes(r.dispatch_ns, 7, dispatch_ns < kMaxDispatchNs ? dispatch_ns : kMaxDispatchNs);
  uint8_t flags = kTimeDispatch;
  if (has_complete) {
    StoreTimeBytes(r.duration_ns, 5, duration_ns < kMaxDurationNs ? duration_ns : kMaxDurationNs);
    flags |= kTimeComplete;
  }
  r.time_flags = flags;
}
inline uint64_t DispatchNs(const ArgsDumpRecord& r) { return LoadTimeBytes(r.dispatch_ns, 7); }
inline uint64_t DurationNs(const ArgsDumpRecord& r) { return LoadTimeBytes(r.duration_ns, 5); }

// Region header. Every field but host_gone is written once by the host
// (DumpRegion::Create) before the region is handed to the device; the region
// hand-off (thread start or a second mapping opened afterwards) orders those
// writes before any device read. host_gone is the one field written later.
struct DumpRegionHeader {
  uint32_t magic;               // 0   kMagic
  uint16_t abi_version;         // 4   kAbiVersion
  uint16_t header_bytes;        // 6   sizeof(DumpRegionHeader)
  uint32_t record_bytes;        // 8   sizeof(ArgsDumpRecord)
  uint32_t dump_level;          // 12  DumpLevel
  uint32_t num_threads;         // 16  device threads that record
  uint32_t records_per_buffer;  // 20
  uint32_t buffers_per_thread;  // 24  also the free queue's capacity
  uint32_t ready_queue_depth;   // 28  ready queue capacity per thread
  uint64_t arena_bytes;         // 32  per thread
  uint64_t region_bytes;        // 40  whole region
  uint32_t full_policy;         // 48  FullPolicy
  uint32_t wait_bound_ms;       // 52  bound for kStallThenDrop
  uint64_t thread_states_offset;  // 56
  uint64_t ready_slots_offset;    // 64
  uint64_t free_slots_offset;     // 72
  uint64_t meta_buffers_offset;   // 80
  uint64_t meta_buffer_bytes;     // 88  stride between metadata buffers
  uint64_t arenas_offset;         // 96  arena t at arenas_offset + t*arena_bytes
  // 0 at create; 1 once the host is gone. Written (release, never back to 0)
  // by the device process's host watch when the host process died, or by a
  // host that gives up on the device. Read with acquire by the recorder's
  // waits (ThreadRecorder: a wait ends at once, every drop counts as
  // DropCause::kHostGone). Not part of the layout Attach() checks.
  std::atomic<uint32_t> host_gone;  // 104
  // The host's doorbell (a futex word): a host with nothing to drain sleeps
  // on it instead of polling. host_sleepers counts the host threads about
  // to sleep or sleeping; whoever hands the host work (the device after it
  // publishes a buffer, a host thread returning one) rings it: a seq_cst
  // fence, then, only when host_sleepers is not 0, host_doorbell += 1 and a
  // futex wake. A sleeper counts itself (seq_cst) before it looks for work a
  // last time and sleeps only while host_doorbell still holds the value it
  // read before counting itself, so a publish is never missed; it sleeps
  // with a bound all the same. Zero at create; DumpRegion::RingHostDoorbell,
  // WaitHostDoorbell.
  std::atomic<uint32_t> host_doorbell;  // 108
  // CLOCK_MONOTONIC in ns when the host made the region: the base of every
  // record's times (kTimeDispatch). Host writes once at create.
  uint64_t time_base_ns;            // 112
  std::atomic<uint32_t> host_sleepers;  // 120
  uint8_t reserved[4];              // 124
};
static_assert(sizeof(DumpRegionHeader) == 128, "ABI");
static_assert(offsetof(DumpRegionHeader, dump_level) == 12, "ABI");
static_assert(offsetof(DumpRegionHeader, arena_bytes) == 32, "ABI");
static_assert(offsetof(DumpRegionHeader, full_policy) == 48, "ABI");
static_assert(offsetof(DumpRegionHeader, thread_states_offset) == 56, "ABI");
static_assert(offsetof(DumpRegionHeader, arenas_offset) == 96, "ABI");
static_assert(offsetof(DumpRegionHeader, host_gone) == 104, "ABI");
static_assert(offsetof(DumpRegionHeader, time_base_ns) == 112, "ABI");
static_assert(offsetof(DumpRegionHeader, host_doorbell) == 108, "ABI");
static_assert(offsetof(DumpRegionHeader, host_sleepers) == 120, "ABI");
static_assert(offsetof(DumpRegionHeader, reserved) == 124, "ABI");

// A 64-bit counter alone on its cache line, so the two sides of a queue never
// false-share. Counters are free-running (never wrap in practice: 2^64).
struct alignas(kCacheLineBytes) LineCounter {
  std::atomic<uint64_t> value;
  uint8_t pad[kCacheLineBytes - sizeof(std::atomic<uint64_t>)];
};
static_assert(sizeof(LineCounter) == kCacheLineBytes, "ABI");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "atomics in shm");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "atomics in shm");

// Indices of one single-producer single-consumer ring of u32 slots. Item i
// lives in slot i % capacity. The producer writes the slot, then
// tail.store(release); the consumer reads tail with acquire, reads the slot,
// then head.store(release); the producer reads head with acquire before it
// reuses a slot. Size = tail - head, never above capacity.
struct SpscIndices {
  LineCounter head;  // written by the consumer only
  LineCounter tail;  // written by the producer only
};
static_assert(sizeof(SpscIndices) == 2 * kCacheLineBytes, "ABI");

// Per recording thread. The queues' owners: ready = device produces, host
// consumes; free = host produces, device consumes.
struct ThreadState {
  SpscIndices ready;  // 0
  SpscIndices free;   // 128

  // Device-written line (host reads with acquire).
  // The buffer the device is filling, or kNoBuffer. Stored with release after
  // the buffer was popped; read by the host's reconcile after the device
  // stopped (or crashed) to recover records never flushed.
  alignas(kCacheLineBytes) std::atomic<uint32_t> current_buffer;  // 256
  // 1 after the device's final flush handed everything over (release).
  std::atomic<uint32_t> flushed;                                   // 260
  // Monotonic arena cursor: next payload byte (relaxed; informative).
  std::atomic<uint64_t> arena_write_offset;                        // 264
  // Payload records in buffers pushed to the ready queue (release, before
  // the push that publishes them).
  std::atomic<uint64_t> published_payload_count;                   // 272
  // Metadata buffers pushed to the ready queue so far (relaxed).
  std::atomic<uint64_t> published_buffer_count;                    // 280

  // Host-written line (device reads with acquire).
  // Payload records of this thread whose bytes the host has made durable
  // (release, after the bytes were copied out of the arena). The device may
  // reuse the arena once this reaches its published_payload_count.
  alignas(kCacheLineBytes) std::atomic<uint64_t> completed_payload_count;  // 320

  // Device-written loss and volume counters (relaxed; exact once flushed).
  alignas(kCacheLineBytes) std::atomic<uint64_t> records_written;  // 384
  std::atomic<uint64_t> truncated_records;                          // 392
  std::atomic<uint64_t> payload_bytes;                              // 400
  std::atomic<uint64_t> dropped_records;                            // 408
  std::atomic<uint64_t> dropped_by_cause[kDropCauseCount];          // 416
  std::atomic<uint64_t> arena_waits;                                // 456
  std::atomic<uint64_t> gate_waits;                                 // 464
  uint8_t reserved[40];                                             // 472
};
static_assert(sizeof(ThreadState) == 512, "ABI");
static_assert(offsetof(ThreadState, free) == 128, "ABI");
static_assert(offsetof(ThreadState, current_buffer) == 256, "ABI");
static_assert(offsetof(ThreadState, published_payload_count) == 272, "ABI");
static_assert(offsetof(ThreadState, completed_payload_count) == 320, "ABI");
static_assert(offsetof(ThreadState, records_written) == 384, "ABI");
static_assert(offsetof(ThreadState, dropped_by_cause) == 416, "ABI");
static_assert(offsetof(ThreadState, arena_waits) == 456, "ABI");
static_assert(offsetof(ThreadState, gate_waits) == 464, "ABI");
static_assert(offsetof(ThreadState, reserved) == 472, "ABI");

// Header of one metadata buffer; ArgsDumpRecords follow at +64.
struct MetaBufferHeader {
  // Records written so far. Device: release store after each record, so a
  // host recovering an unflushed buffer reads only whole records. Host:
  // acquire load.
  std::atomic<uint32_t> count;  // 0
  uint32_t owner_thread;        // 4   host writes at create
  uint64_t sequence;            // 8   device: per-thread publish number
  uint32_t payload_records;     // 16  device: records with payload_size > 0
  uint8_t reserved[44];         // 20
};
static_assert(sizeof(MetaBufferHeader) == kCacheLineBytes, "ABI");
static_assert(offsetof(MetaBufferHeader, sequence) == 8, "ABI");
static_assert(offsetof(MetaBufferHeader, payload_records) == 16, "ABI");

}  // namespace abi
}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_ABI_H_
