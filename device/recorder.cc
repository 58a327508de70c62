#include "device/recorder.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace argsdump {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Zeroes a record slot in place: two cache lines, written whole, so the
// stores combine and no stale bytes of the buffer's previous use survive.
inline void ClearRecord(abi::ArgsDumpRecord& r) {
  uint64_t* words = reinterpret_cast<uint64_t*>(&r);
  for (int i = 0; i < 16; ++i) words[i] = 0;
}

bool CapturedAt(abi::ArgRole role, abi::Stage stage) {
  switch (role) {
    case abi::ArgRole::kInput: return stage == abi::Stage::kBeforeDispatch;
    case abi::ArgRole::kOutput: return stage == abi::Stage::kAfterCompletion;
    case abi::ArgRole::kInOut: return true;
  }
  return false;
}

// Seed 003: an (optional) output with an empty shape is not dumped.
bool EmptyOutput(const DumpTensorArg& arg) {
  if (arg.role != abi::ArgRole::kOutput) return false;
  for (uint32_t d = 0; d < arg.view.ndims; ++d) {
    if (arg.view.shape[d] == 0) return true;
  }
  return false;
}

}  // namespace

ThreadRecorder::ThreadRecorder(const DumpRegion& region, uint32_t thread)
    : thread_(thread),
      state_(&region.thread_state(thread)),
      region_(region),
      ready_(region.ready_queue(thread)),
      free_(region.free_queue(thread)),
      arena_(region.arena(thread)),
      arena_bytes_(region.arena_bytes()),
      records_per_buffer_(region.records_per_buffer()),
      level_(region.level()),
      policy_(static_cast<abi::FullPolicy>(region.header().full_policy)),
      wait_bound_ms_(region.header().wait_bound_ms),
      time_base_ns_(region.time_base_ns()) {}

void ThreadRecorder::StampTimes(const DumpTask& task, abi::Stage stage,
                                abi::ArgsDumpRecord& r) const {
  if (task.dispatch_mono_ns == 0) return;
  // A clock read before the base (it cannot be, on one monotonic clock)
  // counts as the base itself.
  const uint64_t dispatch =
      task.dispatch_mono_ns > time_base_ns_ ? task.dispatch_mono_ns - time_base_ns_ : 0;
  const bool complete = stage == abi::Stage::kAfterCompletion && task.complete_mono_ns != 0;
  const uint64_t duration = complete && task.complete_mono_ns > task.dispatch_mono_ns
                                ? task.complete_mono_ns - task.dispatch_mono_ns
                                : 0;
  abi::SetTaskTimes(r, true, dispatch, complete, duration);
}

template <typename Ready>
bool ThreadRecorder::WaitFor(Ready ready) {
  if (ready()) {
    host_unresponsive_ = false;
    return true;
  }
  if (policy_ == abi::FullPolicy::kDrop) return false;
  const bool bounded = policy_ == abi::FullPolicy::kStallThenDrop;
  if (bounded && host_unresponsive_) return false;
  // Spin briefly, then yield, then back off with short sleeps: the host
  // usually answers within microseconds; a sleeping waiter must not burn the
  // core the host needs.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(wait_bound_ms_);
  auto pause = std::chrono::microseconds(10);
  for (uint32_t round = 0;; ++round) {
    if (ready()) {
      host_unresponsive_ = false;
      return true;
    }
    // Whatever the policy and the bound: no host will ever answer. The first
    // round checks before any pause, so once the host is gone a record that
    // needs a wait is dropped at once (one acquire load; waits only).
    if (region_.host_gone()) return false;
    if (round < 64) {
      CpuRelax();
    } else if (round < 256) {
      std::this_thread::yield();
    } else {
      if (bounded && std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(50));
    }
  }
  host_unresponsive_ = true;
  return false;
}

void ThreadRecorder::Drop(abi::DropCause cause, uint64_t records) {
  // Whichever wait failed, the reason is that nobody is left to drain it.
  if (region_.host_gone()) cause = abi::DropCause::kHostGone;
  dropped_ += records;
  dropped_by_cause_[static_cast<uint32_t>(cause)] += records;
  state_->dropped_records.store(dropped_, std::memory_order_relaxed);
  state_->dropped_by_cause[static_cast<uint32_t>(cause)].store(
      dropped_by_cause_[static_cast<uint32_t>(cause)], std::memory_order_relaxed);
}

abi::ArgsDumpRecord* ThreadRecorder::NextSlot() {
  if (buffer_ == abi::kNoBuffer) {
    if (!free_.HasItem()) ++gate_waits_;
    uint32_t next = abi::kNoBuffer;
    if (!WaitFor([&] { return free_.HasItem(); }) || !free_.TryPop(&next) ||
        !region_.BufferBelongsTo(next, thread_)) {
      state_->gate_waits.store(gate_waits_, std::memory_order_relaxed);
      Drop(abi::DropCause::kFreeQueueEmpty, 1);
      return nullptr;
    }
    state_->gate_waits.store(gate_waits_, std::memory_order_relaxed);
    buffer_ = next;
    buffer_header_ = &region_.buffer_header(next);
    buffer_records_ = region_.buffer_records(next);
    buffer_count_ = 0;
    buffer_payloads_ = 0;
    buffer_payload_bytes_ = 0;
    buffer_header_->sequence = kUnpublishedSequence;
    buffer_header_->payload_records = 0;
    buffer_header_->count.store(0, std::memory_order_release);
    state_->current_buffer.store(next, std::memory_order_release);
  }
  return &buffer_records_[buffer_count_];
}

void ThreadRecorder::CommitSlot(uint64_t payload_bytes) {
  const bool has_payload = payload_bytes > 0;
  // The next slot's lines were last read by the host: ask for them now.
  __builtin_prefetch(&buffer_records_[buffer_count_ + 1], 1);
  __builtin_prefetch(reinterpret_cast<const uint8_t*>(&buffer_records_[buffer_count_ + 1]) + 64, 1);
  ++buffer_count_;
  buffer_payloads_ += has_payload ? 1 : 0;
  buffer_payload_bytes_ += payload_bytes;
  ++records_written_;
  // Release: a host recovering this buffer after a crash reads whole records.
  buffer_header_->count.store(buffer_count_, std::memory_order_release);
  state_->records_written.store(records_written_, std::memory_order_relaxed);
  if (buffer_count_ == records_per_buffer_ || buffer_payload_bytes_ >= arena_bytes_ / 4) {
    PublishCurrent(abi::DropCause::kReadyQueueFull);
  }
}

bool ThreadRecorder::PublishCurrent(abi::DropCause cause) {
  if (buffer_ == abi::kNoBuffer || buffer_count_ == 0) return true;
  if (!ready_.HasSpace()) ++gate_waits_;
  state_->gate_waits.store(gate_waits_, std::memory_order_relaxed);
  // With the host gone nobody drains what is handed over: the buffer's
  // records are counted as dropped (host gone) instead of published.
  if (region_.host_gone() || !WaitFor([&] { return ready_.HasSpace(); })) {
    // Lost: the records never reach the host; their payloads were never
    // published, so their arena space is reused without a wait.
    records_written_ -= buffer_count_;
    state_->records_written.store(records_written_, std::memory_order_relaxed);
    pending_first_start_ = kNoStart;  // never published: nothing to wait for
    Drop(cause, buffer_count_);
    buffer_count_ = 0;
    buffer_payloads_ = 0;
    buffer_payload_bytes_ = 0;
    buffer_header_->count.store(0, std::memory_order_release);
    return false;
  }
  buffer_header_->sequence = published_buffers_++;
  buffer_header_->payload_records = buffer_payloads_;
  published_payloads_ += buffer_payloads_;
  if (buffer_payloads_ > 0 && pending_first_start_ != kNoStart) {
    extents_.push_back(Extent{pending_first_start_, published_payloads_});
  }
  pending_first_start_ = kNoStart;
  state_->published_payload_count.store(published_payloads_, std::memory_order_release);
  state_->published_buffer_count.store(published_buffers_, std::memory_order_relaxed);
  ready_.TryPush(buffer_);  // has space: only this thread pushes
  region_.RingHostDoorbell();  // a host asleep for want of work wakes
  state_->current_buffer.store(abi::kNoBuffer, std::memory_order_release);
  buffer_ = abi::kNoBuffer;
  buffer_header_ = nullptr;
  buffer_records_ = nullptr;
  buffer_count_ = 0;
  buffer_payloads_ = 0;
  buffer_payload_bytes_ = 0;
  return true;
}

uint8_t* ThreadRecorder::ReserveArena(uint64_t bytes) {
  if (cursor_ + bytes > cycle_start_ + arena_bytes_) {
    // The rest of this cycle is too small: the next payload goes at the
    // arena's start (the tail is skipped), in a buffer of its own, so that
    // a buffer's payloads never cross the arena's end.
    if (buffer_payloads_ > 0) PublishCurrent(abi::DropCause::kReadyQueueFull);
    cycle_start_ += arena_bytes_;
    cursor_ = cycle_start_;
  }
  // Every published payload that lay where [cursor_, cursor_ + bytes) goes,
  // one cycle ago, must be on the host's side first: the buffers whose
  // first payload started before end - arena (a buffer's payloads are
  // contiguous and never cross the arena's end).
  const uint64_t end = cursor_ + bytes;
  uint64_t target = 0;
  size_t covered = 0;
  for (const Extent& e : extents_) {
    if (e.first_start + arena_bytes_ >= end) break;
    target = e.payloads_through;
    ++covered;
  }
  if (covered > 0) {
    auto acked = [&] {
      return state_->completed_payload_count.load(std::memory_order_acquire) >= target;
    };
    if (!acked()) {
      ++arena_waits_;
      state_->arena_waits.store(arena_waits_, std::memory_order_relaxed);
      if (!WaitFor(acked)) {
        Drop(abi::DropCause::kArenaAckTimeout, 1);
        return nullptr;
      }
    }
    extents_.erase(extents_.begin(), extents_.begin() + covered);
  }
  if (pending_first_start_ == kNoStart) pending_first_start_ = cursor_;
  uint8_t* dst = arena_ + (cursor_ - cycle_start_);
  cursor_ += bytes;
  state_->arena_write_offset.store(cursor_, std::memory_order_relaxed);
  return dst;
}

void ThreadRecorder::RecordTensor(const DumpTask& task, const DumpTensorArg& arg,
                                  abi::Stage stage, bool with_payload,
                                  uint8_t flags) {
  const TensorView& v = arg.view;
  const uint64_t logical = v.logical_bytes();
  uint64_t copy = with_payload ? logical : 0;
  bool truncated = false;
  if (copy > arena_bytes_) {
    copy = arena_bytes_ / 2;
    truncated = true;
  }
  uint64_t offset = cursor_;
  if (copy > 0) {
    uint8_t* dst = ReserveArena(copy);
    if (dst == nullptr) return;
    offset = cursor_ - copy;
    GatherLogical(v, dst, copy);
  }
  abi::ArgsDumpRecord* slot = NextSlot();
  if (slot == nullptr) return;
  abi::ArgsDumpRecord& r = *slot;
  ClearRecord(r);
  r.task_id = task.task_id;
  r.role = static_cast<uint8_t>(arg.role);
  r.stage = static_cast<uint8_t>(stage);
  r.ndims = static_cast<uint8_t>(v.ndims);
  r.arg_index = arg.arg_index;
  r.dtype = static_cast<uint8_t>(v.dtype);
  r.truncated = truncated ? 1 : 0;
  r.is_contiguous = v.is_contiguous() ? 1 : 0;
  r.payload_offset = offset;
  r.payload_size = copy;
  r.kind = static_cast<uint8_t>(abi::ArgKind::kTensor);
  r.flags = static_cast<uint8_t>(flags | task.tensor_flags |
                                 (arg.ambiguous ? abi::kFlagArgIndexAmbiguous : 0) |
                                 (with_payload && copy == 0 ? abi::kFlagPayloadEmpty : 0));
  std::memcpy(r.func_ids, task.func_ids, sizeof(r.func_ids));
  r.func_count = task.func_count;
  r.start_offset = v.start_offset;
  for (uint32_t d = 0; d < v.ndims; ++d) {
    r.strides[d] = v.strides[d];
    r.shapes[d] = v.shape[d];
  }
  r.logical_bytes = logical;
  r.step = task.step;
  StampTimes(task, stage, r);
  if (truncated) {
    ++truncated_;
    state_->truncated_records.store(truncated_, std::memory_order_relaxed);
  }
  if (copy > 0) {
    payload_bytes_ += copy;
    state_->payload_bytes.store(payload_bytes_, std::memory_order_relaxed);
  }
  CommitSlot(copy);
}

void ThreadRecorder::RecordScalar(const DumpTask& task, const DumpScalarArg& arg,
                                  uint8_t flags) {
  abi::ArgsDumpRecord* slot = NextSlot();
  if (slot == nullptr) return;
  abi::ArgsDumpRecord& r = *slot;
  ClearRecord(r);
  r.task_id = task.task_id;
  r.role = static_cast<uint8_t>(abi::ArgRole::kInput);
  r.stage = static_cast<uint8_t>(abi::Stage::kBeforeDispatch);
  r.arg_index = arg.arg_index;
  r.dtype = static_cast<uint8_t>(arg.dtype);
  r.is_contiguous = 1;
  r.payload_offset = 0;
  r.scalar_value = arg.bits;
  r.kind = static_cast<uint8_t>(abi::ArgKind::kScalar);
  r.flags = static_cast<uint8_t>(flags | (arg.ambiguous ? abi::kFlagArgIndexAmbiguous : 0));
  std::memcpy(r.func_ids, task.func_ids, sizeof(r.func_ids));
  r.func_count = task.func_count;
  r.logical_bytes = PayloadBytes(arg.dtype, 1);
  r.step = task.step;
  StampTimes(task, abi::Stage::kBeforeDispatch, r);
  CommitSlot(0);
}

void ThreadRecorder::RecordTask(const DumpTask& task, abi::Stage stage,
                                uint8_t extra_flags) {
  const abi::DumpLevel level = task.level == DumpTask::kUseRecorderLevel
                                   ? level_
                                   : static_cast<abi::DumpLevel>(task.level);
  const bool partial = level == abi::DumpLevel::kPartial;
  if (level == abi::DumpLevel::kOff || (partial && !task.has_marker)) return;
  for (uint32_t i = 0; i < task.tensor_count; ++i) {
    const DumpTensorArg& arg = task.tensors[i];
    if (!CapturedAt(arg.role, stage)) continue;
    if (partial && !arg.marked) continue;
    if (EmptyOutput(arg)) continue;
    const bool payload = level != abi::DumpLevel::kHybrid || arg.marked;
    RecordTensor(task, arg, stage, payload, extra_flags);
  }
  if (stage != abi::Stage::kBeforeDispatch) return;
  for (uint32_t i = 0; i < task.scalar_count; ++i) {
    const DumpScalarArg& arg = task.scalars[i];
    if (partial && !arg.marked) continue;
    RecordScalar(task, arg, extra_flags);
  }
}

void ThreadRecorder::RecordOverflow(const DumpTask& task, bool recorded_before) {
  for (uint32_t i = 0; i < task.tensor_count; ++i) {
    if (EmptyOutput(task.tensors[i])) continue;
    RecordTensor(task, task.tensors[i], abi::Stage::kAfterCompletion, /*with_payload=*/true,
                 abi::kFlagOverflow);
  }
  // The scalars RecordTask did not record before dispatch (the same
  // selection as there), so that the task is in the dump in full.
  const abi::DumpLevel level = task.level == DumpTask::kUseRecorderLevel
                                   ? level_
                                   : static_cast<abi::DumpLevel>(task.level);
  const bool partial = level == abi::DumpLevel::kPartial;
  const bool before = recorded_before && level != abi::DumpLevel::kOff &&
                      !(partial && !task.has_marker);
  for (uint32_t i = 0; i < task.scalar_count; ++i) {
    const DumpScalarArg& arg = task.scalars[i];
    if (before && (!partial || arg.marked)) continue;
    RecordScalar(task, arg, abi::kFlagOverflow);
  }
}

void ThreadRecorder::Flush() {
  PublishCurrent(abi::DropCause::kFlushTimeout);
  state_->flushed.store(1, std::memory_order_release);
}

namespace {

constexpr uint64_t kSnapshotAlignment = 64;

uint64_t AlignSnapshot(uint64_t bytes) {
  return (bytes + kSnapshotAlignment - 1) / kSnapshotAlignment * kSnapshotAlignment;
}

}  // namespace

uint64_t InputSnapshotBytes(const DumpTensorArg* tensors, uint32_t count) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (tensors[i].role == abi::ArgRole::kOutput) continue;
    total += AlignSnapshot(tensors[i].view.logical_bytes());
  }
  return total;
}

void SnapshotInputs(const DumpTensorArg* tensors, uint32_t count, uint8_t* dst,
                    std::vector<DispatchedInput>* out, uint64_t* offsets) {
  uint64_t at = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const DumpTensorArg& a = tensors[i];
    if (a.role == abi::ArgRole::kOutput) {
      if (offsets != nullptr) offsets[i] = ~uint64_t{0};
      continue;
    }
    const uint64_t bytes = a.view.logical_bytes();
    GatherLogical(a.view, dst + at, bytes);
    out->push_back(DispatchedInput{a, dst + at});
    if (offsets != nullptr) offsets[i] = at;
    at += AlignSnapshot(bytes);
  }
}

DumpRecorder::DumpRecorder(const DumpRegion& region) : level_(region.level()) {
  threads_.reserve(region.num_threads());
  for (uint32_t t = 0; t < region.num_threads(); ++t) {
    threads_.push_back(std::make_unique<ThreadRecorder>(region, t));
  }
}

}  // namespace argsdump
