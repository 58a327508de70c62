// The device-side recorder: the hot path that writes one task's arguments into
// the shared region. One ThreadRecorder per
// recording (scheduler) thread, used only by that thread: no locks, no
// allocation after construction. The level is latched from the region header
// when the DumpRecorder is built, before the first dispatch.
//
// What a task produces, by level (inputs before dispatch, outputs after
// completion, inout at both, scalars before dispatch, inline):
//   1 partial  only tasks with a marker; only their marked args, with payload
//   2 full     every arg of every task, with payload
//   3 hybrid   every arg as metadata; payload only for marked tensors
// Outputs with an empty shape (a dimension of 0) are never recorded (seed
// 003: optional outputs with empty shape skip the dump); empty inputs are.
// Pressure (abi::FullPolicy, bounded by wait_bound_ms): a tensor larger than
// the arena is cut to arena/2 bytes and flagged; a full arena waits for this
// thread's acknowledgement; a full ready queue or empty free queue waits at
// the gate. After the bound the records are dropped and counted by cause.
// Once a bound expired, the host is treated as unresponsive for this thread
// (no more waits) until it is seen making progress again, so a crashed host
// costs one bound, not one per record.
// Host gone (DumpRegion::MarkHostGone, abi::DumpRegionHeader::host_gone, set
// by the device process's host watch or by a host that gives up): a wait in
// progress ends at once, whatever the policy (kStall too) and the bound, and
// a record that would have to wait is dropped at once; every drop from then
// on is counted as abi::DropCause::kHostGone instead of its own cause. A
// record that needs no wait is still written (the flag is read only inside
// waits and drops, never on the path of such a record), but no buffer is
// handed over any more: a full buffer, and the one Flush() would publish, are
// counted as dropped (host gone), since nobody will drain them. So after the
// flag is set the device ends without another wait, and every record it
// made since is counted. A buffer is handed over when it is full, or as
// soon as the payload behind it reaches a quarter of the arena: the host then
// writes while the device fills the rest of the cycle, instead of the two
// taking turns a whole arena at a time.
#ifndef ARGSDUMP_DEVICE_RECORDER_H_
#define ARGSDUMP_DEVICE_RECORDER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "device/abi.h"
#include "format/dtype.h"
#include "device/region.h"
#include "device/spsc_queue.h"
#include "device/tensor_view.h"

namespace argsdump {

// One tensor argument of a task, as the runtime resolved it from the kernel
// signature and the task's payload.
struct DumpTensorArg {
  TensorView view;
  abi::ArgRole role = abi::ArgRole::kInput;
  uint32_t arg_index = 0;
  bool marked = false;     // selected by CoreTaskArgs::dump(...)
  bool ambiguous = false;  // selected by a first match among equal args
};

struct DumpScalarArg {
  DataType dtype = DataType::kFloat32;
  uint64_t bits = 0;  // raw little-endian value, zero-extended
  uint32_t arg_index = 0;
  bool marked = false;
  bool ambiguous = false;
};

struct DumpTask {
  uint64_t task_id = 0;
  uint16_t func_ids[abi::kMaxFuncIds] = {abi::kUnknownFuncId, abi::kUnknownFuncId,
                                         abi::kUnknownFuncId};
  uint8_t func_count = 0;
  bool has_marker = false;  // any dump(...) / dump() on the task
  // The workload step (iteration) the task belongs to.
  uint32_t step = 0;
  // The level for this task (a dump reconfigured between steps), or
  // kUseRecorderLevel for the one latched from the region.
  uint8_t level = kUseRecorderLevel;
  static constexpr uint8_t kUseRecorderLevel = 0xFF;
  // abi::kFlag* bits put on every tensor record of the task (stats mode).
  uint8_t tensor_flags = 0;
  // When the task was dispatched to its kernel and when it completed, on
  // CLOCK_MONOTONIC (std::chrono::steady_clock) in ns; 0: not known (not
  // dispatched yet, still running). Its records carry them after the region's
  // time base (abi::kTimeDispatch).
  uint64_t dispatch_mono_ns = 0;
  uint64_t complete_mono_ns = 0;
  const DumpTensorArg* tensors = nullptr;
  uint32_t tensor_count = 0;
  const DumpScalarArg* scalars = nullptr;
  uint32_t scalar_count = 0;
};

class ThreadRecorder {
 public:
  ThreadRecorder(const DumpRegion& region, uint32_t thread);
  ThreadRecorder(const ThreadRecorder&) = delete;
  ThreadRecorder& operator=(const ThreadRecorder&) = delete;

  // Records the args of `task` that belong to `stage` under the latched
  // level. `extra_flags` (e.g. abi::kFlagInFlightSnapshot) go on every record.
  void RecordTask(const DumpTask& task, abi::Stage stage, uint8_t extra_flags = 0);

  // The overflow dump: every tensor arg of `task` at after_completion with
  // its payload (inputs as they are now), flagged kFlagOverflow, whatever
  // the level; and every scalar that RecordTask did not record before
  // dispatch (all of them unless `recorded_before`; at level 1 the unmarked
  // ones), so the task is in the dump in full.
  void RecordOverflow(const DumpTask& task, bool recorded_before);

  // Hands the partly filled buffer to the host and marks this thread flushed.
  // Call once at the end of a run (also after a hang).
  void Flush();

  uint32_t thread() const { return thread_; }

 private:
  void RecordTensor(const DumpTask& task, const DumpTensorArg& arg,
                    abi::Stage stage, bool with_payload, uint8_t flags);
  void RecordScalar(const DumpTask& task, const DumpScalarArg& arg, uint8_t flags);
  // The task's times into a cleared record, after the region's time base:
  // the dispatch time always, the completion only at after_completion.
  void StampTimes(const DumpTask& task, abi::Stage stage, abi::ArgsDumpRecord& r) const;
  // Next free record slot, acquiring a buffer if needed; null = dropped.
  abi::ArgsDumpRecord* NextSlot();
  // `payload_bytes` 0 for metadata-only records.
  void CommitSlot(uint64_t payload_bytes);
  // Pushes the current buffer to the ready queue (waiting per policy); on
  // failure its records are counted as dropped with `cause` and it is reused.
  bool PublishCurrent(abi::DropCause cause);
  // Makes room for `bytes` in the arena; returns the physical write pointer
  // or null (record dropped for an arena that was never acknowledged).
  uint8_t* ReserveArena(uint64_t bytes);
  template <typename Ready>
  bool WaitFor(Ready ready);
  void Drop(abi::DropCause cause, uint64_t records);

  const uint32_t thread_;
  abi::ThreadState* const state_;
  const DumpRegion& region_;
  SpscQueueView ready_;
  SpscQueueView free_;
  uint8_t* const arena_;
  const uint64_t arena_bytes_;
  const uint32_t records_per_buffer_;
  const abi::DumpLevel level_;
  const abi::FullPolicy policy_;
  const uint32_t wait_bound_ms_;
  const uint64_t time_base_ns_;

  // Device-local mirrors of this thread's state (single writer).
  uint32_t buffer_ = abi::kNoBuffer;
  abi::MetaBufferHeader* buffer_header_ = nullptr;
  abi::ArgsDumpRecord* buffer_records_ = nullptr;
  uint32_t buffer_count_ = 0;
  uint32_t buffer_payloads_ = 0;
  uint64_t buffer_payload_bytes_ = 0;  // arena bytes behind the current buffer
  uint64_t cursor_ = 0;       // monotonic arena cursor
  uint64_t cycle_start_ = 0;  // cursor at the start of this arena cycle
  uint64_t published_payloads_ = 0;
  // The arena is a ring: space is reused once the host acknowledged the
  // payloads the previous cycle put there, not the whole cycle's. Per
  // published buffer with payloads, where its first payload starts and how
  // many payloads the host must have acknowledged to have all of its own
  // (oldest first; dropped as the ring passes them).
  struct Extent {
    uint64_t first_start;
    uint64_t payloads_through;
  };
  std::deque<Extent> extents_;
  static constexpr uint64_t kNoStart = ~uint64_t{0};
  uint64_t pending_first_start_ = kNoStart;  // of payloads reserved since the last publish
  uint64_t published_buffers_ = 0;
  // A bound expired with no progress from the host (reset on progress).
  bool host_unresponsive_ = false;
  uint64_t records_written_ = 0;
  uint64_t truncated_ = 0;
  uint64_t payload_bytes_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dropped_by_cause_[abi::kDropCauseCount] = {};
  uint64_t arena_waits_ = 0;
  uint64_t gate_waits_ = 0;
};

// Latches the level from the region header and owns one ThreadRecorder per
// region thread.
class DumpRecorder {
 public:
  explicit DumpRecorder(const DumpRegion& region);
  abi::DumpLevel level() const { return level_; }
  uint32_t num_threads() const { return static_cast<uint32_t>(threads_.size()); }
  ThreadRecorder& thread(uint32_t t) { return *threads_[t]; }

 private:
  const abi::DumpLevel level_;
  std::vector<std::unique_ptr<ThreadRecorder>> threads_;
};

// A task's input or inout tensor as it was when the task was dispatched:
// the view (its geometry; `arg.view.data` is the tensor's, which the kernel
// may change) and a copy of its elements taken before dispatch, row-major
// (view.logical_bytes() bytes, what a before_dispatch record's payload
// holds). What an exception dump keeps of a task's inputs when
// DumpConfig::snapshot_inputs is on, whatever the level.
struct DispatchedInput {
  DumpTensorArg arg;
  const uint8_t* copy = nullptr;
};

// The bytes SnapshotInputs needs for the input and inout tensors among
// `tensors`: each copy starts at a multiple of 64.
uint64_t InputSnapshotBytes(const DumpTensorArg* tensors, uint32_t count);
// Copies the input and inout tensors among `tensors` into `dst` (at least
// InputSnapshotBytes of them), in order, and appends each to `out` with its
// copy's place; returns each copy's offset from `dst` through `offsets`
// (one per tensor, ~0 for an output) when not null.
void SnapshotInputs(const DumpTensorArg* tensors, uint32_t count, uint8_t* dst,
                    std::vector<DispatchedInput>* out, uint64_t* offsets = nullptr);

// MetaBufferHeader::sequence of a buffer the device holds and has not
// published (lets the host's reconcile tell it from a published one).
inline constexpr uint64_t kUnpublishedSequence = ~uint64_t{0};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_RECORDER_H_
