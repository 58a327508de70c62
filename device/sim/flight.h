// The flight table: what the host needs when the device process dies, kept
// by the device in shared memory. Mapped MAP_SHARED before
// the device process is forked; the device writes it, the host reads it only
// after the device process ended (waitpid), so no ordering between live
// processes is needed beyond the release/acquire pairs documented here.
//
//   slots    one per task a scheduler may keep dispatched: the task's id,
//            step, kernels, dump selection and every tensor view (by offset
//            into DeviceMemory) and scalar. Written by the dispatching
//            scheduler before the task's jobs are queued; freed when the
//            task is retired.
//   workers  per worker thread, the slot whose kernel it is executing.
//   crash    written by the device's fault handler (async-signal-safe
//            stores only): the signal, the fault address, and the worker
//            and slot of the kernel that raised it.
//   progress tasks submitted and completed (relaxed; the host's progress
//            line and its watch read them while the device runs), and a
//            heartbeat the device process's watch thread bumps a few times
//            a second: a heartbeat that stands still means the process is
//            stopped (SIGSTOP, a debugger, a frozen cgroup).
#ifndef ARGSDUMP_DEVICE_SIM_FLIGHT_H_
#define ARGSDUMP_DEVICE_SIM_FLIGHT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "device/abi.h"
#include "device/recorder.h"
#include "device/sim/device_memory.h"

namespace argsdump {
namespace abi {

inline constexpr uint32_t kFlightMagic = 0x464C5954;  // "FLYT"
inline constexpr uint32_t kFlightMaxTensors = 16;     // CoreTaskArgs::kMaxTensors
inline constexpr uint32_t kFlightMaxScalars = 16;
inline constexpr uint32_t kNoFlightSlot = 0xFFFFFFFFu;
// How often the device process's watch thread bumps FlightHeader::heartbeat.
inline constexpr uint32_t kFlightHeartbeatMs = 50;

struct FlightTensor {
  uint64_t memory_offset;  // 0   element 0 of the buffer, in DeviceMemory
  uint64_t buffer_bytes;   // 8   the buffer's bytes (the view lies inside)
  uint64_t start_offset;   // 16  elements
  uint32_t shape[kMaxDims];    // 24
  uint32_t strides[kMaxDims];  // 44
  uint32_t arg_index;      // 64
  uint8_t dtype;           // 68
  uint8_t ndims;           // 69
  uint8_t role;            // 70  ArgRole
  uint8_t flags;           // 71  bit0 marked, bit1 ambiguous
};
static_assert(sizeof(FlightTensor) == 72, "ABI");

struct FlightScalar {
  uint64_t bits;       // 0
  uint32_t arg_index;  // 8
  uint8_t dtype;       // 12
  uint8_t flags;       // 13  bit0 marked, bit1 ambiguous
  uint8_t reserved[2];
};
static_assert(sizeof(FlightScalar) == 16, "ABI");

inline constexpr uint8_t kFlightDumped = 1u << 0;     // the dump selected the task
inline constexpr uint8_t kFlightDumpAfter = 1u << 1;  // its after_completion stage is recorded
inline constexpr uint8_t kFlightHasMarker = 1u << 2;
// The device recorded the task's in-flight snapshot itself (its scheduler
// declared a hang): the host must not record another.
inline constexpr uint8_t kFlightSnapshotTaken = 1u << 3;

struct FlightSlot {
  // 0 free, 1 in flight: stored with release after everything below.
  std::atomic<uint32_t> state;  // 0
  uint32_t scheduler;           // 4
  uint64_t task_id;             // 8
  uint32_t step;                // 16
  uint16_t func_ids[kMaxFuncIds];  // 20
  uint8_t func_count;           // 26
  uint8_t level;                // 27  DumpTask::level
  uint8_t tensor_flags;         // 28
  uint8_t flags;                // 29  kFlight*
  uint8_t reserved[2];          // 30
  uint32_t tensor_count;        // 32
  uint32_t scalar_count;        // 36
  FlightTensor tensors[kFlightMaxTensors];  // 40
  FlightScalar scalars[kFlightMaxScalars];  // 1192
  // The task's inputs as dispatched (DumpConfig::snapshot_inputs): copies
  // in DeviceMemory at snapshot_offset (snapshot_bytes long, 0: none), and
  // per tensor above its copy's offset in them (kNoSnapshot: none).
  uint64_t snapshot_offset;                  // 1448
  uint64_t snapshot_bytes;                   // 1456
  uint64_t snapshot_at[kFlightMaxTensors];   // 1464
};
static_assert(sizeof(FlightSlot) == 1592, "ABI");
inline constexpr uint64_t kNoSnapshot = ~uint64_t{0};

struct FlightWorker {
  std::atomic<uint32_t> slot;  // the slot whose kernel runs here, or kNoFlightSlot
  uint32_t subtask;            // which of the task's kernels
};

struct FlightCrash {
  std::atomic<int32_t> signal;  // 0: no fault handler ran
  int32_t worker;               // -1: the signal came on no worker thread
  uint32_t slot;                // kNoFlightSlot when not known
  uint32_t subtask;
  uint64_t fault_address;
  uint32_t has_fault_address;
  uint32_t reserved;
};

struct FlightHeader {
  uint32_t magic;
  uint32_t slots;
  uint32_t workers;
  uint32_t slots_per_scheduler;
  std::atomic<uint64_t> tasks_submitted;
  std::atomic<uint64_t> tasks_completed;
  std::atomic<uint64_t> heartbeat;  // device watch thread, relaxed
  FlightCrash crash;
};

}  // namespace abi

// A task read back from a slot, as the recorder takes it (views point into
// DeviceMemory). Owns the arrays DumpTask points at.
struct FlightTask {
  uint32_t slot = 0;
  uint32_t scheduler = 0;
  bool dumped = false, dump_after = false;
  bool snapshot_taken = false;  // kFlightSnapshotTaken
  std::vector<DumpTensorArg> tensors;
  std::vector<DumpScalarArg> scalars;
  DumpTask task;  // tensors/scalars point at the vectors above
  // Its input and inout tensors as dispatched, when the device snapshotted
  // them (copies in DeviceMemory, checked to lie inside it).
  std::vector<DispatchedInput> inputs;
  FlightTask() = default;
  FlightTask(const FlightTask&) = delete;
  FlightTask& operator=(const FlightTask&) = delete;
};

class FlightTable {
 public:
  // `slots_per_scheduler` x `schedulers` slots, `workers` worker entries.
  static absl::StatusOr<std::unique_ptr<FlightTable>> Create(uint32_t schedulers,
                                                             uint32_t slots_per_scheduler,
                                                             uint32_t workers);
  ~FlightTable();
  FlightTable(const FlightTable&) = delete;
  FlightTable& operator=(const FlightTable&) = delete;

  abi::FlightHeader& header() const { return *header_; }
  uint32_t slots() const { return header_->slots; }
  uint32_t workers() const { return header_->workers; }
  abi::FlightSlot& slot(uint32_t i) const { return slots_[i]; }
  abi::FlightWorker& worker(uint32_t i) const { return workers_[i]; }

  // Device: publishes a task into `slot` (the scheduler's own) and frees it.
  // `task` holds the views; their buffers must lie in `memory`. `snapshot`
  // (in `memory`, `snapshot_bytes` long): the copies SnapshotInputs made of
  // its inputs, `snapshot_at` their offsets (one per task.tensors entry).
  void Publish(uint32_t slot, uint32_t scheduler, const DumpTask& task, bool dumped,
               bool dump_after, const DeviceMemory& memory, const uint8_t* snapshot = nullptr,
               uint64_t snapshot_bytes = 0, const uint64_t* snapshot_at = nullptr);
  void Release(uint32_t slot) { slots_[slot].state.store(0, std::memory_order_release); }
  // Device: the task's in-flight snapshot is recorded (kFlightSnapshotTaken;
  // the host reads it after the device process ended).
  void MarkSnapshotTaken(uint32_t slot) { slots_[slot].flags |= abi::kFlightSnapshotTaken; }

  // Device, on a worker thread: it runs / stopped running a slot's kernel.
  // Also what the fault handler reads (thread-local), so it knows who faulted.
  void EnterKernel(uint32_t worker, uint32_t slot, uint32_t subtask);
  void LeaveKernel(uint32_t worker);

  // Host, after the device process ended: the task in `slot` when in flight,
  // with its views checked against `memory` (a view outside it is dropped
  // from the task: the table is untrusted, like everything in shared memory).
  bool ReadTask(uint32_t slot, const DeviceMemory& memory, FlightTask* out) const;

  // The fault handler's store (async-signal-safe): the signal, the address,
  // and the calling thread's kernel if it is a worker running one.
  void RecordFault(int signal, const void* address, bool has_address);

 private:
  FlightTable(void* base, uint64_t bytes);
  void* base_;
  uint64_t bytes_;
  abi::FlightHeader* header_;
  abi::FlightWorker* workers_;
  abi::FlightSlot* slots_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_FLIGHT_H_
