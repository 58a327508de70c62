#include "device/sim/flight.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "format/dtype.h"

namespace argsdump {
namespace {

// The calling worker thread's kernel, for the fault handler (plain
// thread-locals of the executable: async-signal-safe to read).
thread_local int32_t t_worker = -1;
thread_local uint32_t t_slot = abi::kNoFlightSlot;
thread_local uint32_t t_subtask = 0;

uint8_t ArgFlags(bool marked, bool ambiguous) {
  return static_cast<uint8_t>((marked ? 1 : 0) | (ambiguous ? 2 : 0));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FlightTable>> FlightTable::Create(uint32_t schedulers,
                                                                 uint32_t slots_per_scheduler,
                                                                 uint32_t workers) {
  if (schedulers == 0 || slots_per_scheduler == 0 || workers == 0 || schedulers > 4096 ||
      slots_per_scheduler > (1u << 16) || workers > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flight table: ", schedulers, " schedulers x ", slots_per_scheduler, " slots, ",
        workers, " workers is out of range"));
  }
  const uint64_t slots = uint64_t{schedulers} * slots_per_scheduler;
  const uint64_t workers_at = (sizeof(abi::FlightHeader) + 63) / 64 * 64;
  const uint64_t slots_at = (workers_at + workers * sizeof(abi::FlightWorker) + 63) / 64 * 64;
  const uint64_t bytes = slots_at + slots * sizeof(abi::FlightSlot);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("flight table: mmap of ", bytes, " bytes: ", std::strerror(errno)));
  }
  std::unique_ptr<FlightTable> t(new FlightTable(p, bytes));
  uint8_t* base = static_cast<uint8_t*>(p);
  t->header_ = new (base) abi::FlightHeader();
  t->header_->magic = abi::kFlightMagic;
  t->header_->slots = static_cast<uint32_t>(slots);
  t->header_->workers = workers;
  t->header_->slots_per_scheduler = slots_per_scheduler;
  t->header_->crash.worker = -1;
  t->header_->crash.slot = abi::kNoFlightSlot;
  t->workers_ = reinterpret_cast<abi::FlightWorker*>(base + workers_at);
  for (uint32_t w = 0; w < workers; ++w) {
    new (&t->workers_[w]) abi::FlightWorker();
    t->workers_[w].slot.store(abi::kNoFlightSlot, std::memory_order_relaxed);
  }
  t->slots_ = reinterpret_cast<abi::FlightSlot*>(base + slots_at);
  for (uint64_t s = 0; s < slots; ++s) new (&t->slots_[s]) abi::FlightSlot();
  return t;
}

FlightTable::FlightTable(void* base, uint64_t bytes) : base_(base), bytes_(bytes) {}

FlightTable::~FlightTable() { ::munmap(base_, bytes_); }

void FlightTable::Publish(uint32_t index, uint32_t scheduler, const DumpTask& task, bool dumped,
                          bool dump_after, const DeviceMemory& memory, const uint8_t* snapshot,
                          uint64_t snapshot_bytes, const uint64_t* snapshot_at) {
  abi::FlightSlot& s = slots_[index];
  const bool snapshotted = snapshot != nullptr && snapshot_at != nullptr && memory.Owns(snapshot);
  s.snapshot_offset = snapshotted ? memory.OffsetOf(snapshot) : 0;
  s.snapshot_bytes = snapshotted ? snapshot_bytes : 0;
  s.scheduler = scheduler;
  s.task_id = task.task_id;
  s.step = task.step;
  std::copy(std::begin(task.func_ids), std::end(task.func_ids), std::begin(s.func_ids));
  s.func_count = task.func_count;
  s.level = task.level;
  s.tensor_flags = task.tensor_flags;
  s.flags = static_cast<uint8_t>((dumped ? abi::kFlightDumped : 0) |
                                 (dump_after ? abi::kFlightDumpAfter : 0) |
                                 (task.has_marker ? abi::kFlightHasMarker : 0));
  uint32_t n = 0;
  for (uint32_t i = 0; i < task.tensor_count && n < abi::kFlightMaxTensors; ++i) {
    const DumpTensorArg& a = task.tensors[i];
    if (!memory.Owns(a.view.data)) continue;  // not device memory: nothing to read back
    abi::FlightTensor& t = s.tensors[n++];
    t.memory_offset = memory.OffsetOf(a.view.data);
    t.buffer_bytes = PayloadBytes(a.view.dtype, a.view.extent_elements());
    t.start_offset = a.view.start_offset;
    std::copy(std::begin(a.view.shape), std::end(a.view.shape), std::begin(t.shape));
    std::copy(std::begin(a.view.strides), std::end(a.view.strides), std::begin(t.strides));
    t.arg_index = a.arg_index;
    t.dtype = static_cast<uint8_t>(a.view.dtype);
    t.ndims = static_cast<uint8_t>(a.view.ndims);
    t.role = static_cast<uint8_t>(a.role);
    t.flags = ArgFlags(a.marked, a.ambiguous);
    s.snapshot_at[n - 1] = snapshotted ? snapshot_at[i] : abi::kNoSnapshot;
  }
  s.tensor_count = n;
  n = 0;
  for (uint32_t i = 0; i < task.scalar_count && n < abi::kFlightMaxScalars; ++i) {
    const DumpScalarArg& a = task.scalars[i];
    abi::FlightScalar& c = s.scalars[n++];
    c.bits = a.bits;
    c.arg_index = a.arg_index;
    c.dtype = static_cast<uint8_t>(a.dtype);
    c.flags = ArgFlags(a.marked, a.ambiguous);
  }
  s.scalar_count = n;
  s.state.store(1, std::memory_order_release);
}

void FlightTable::EnterKernel(uint32_t worker, uint32_t slot, uint32_t subtask) {
  workers_[worker].subtask = subtask;
  workers_[worker].slot.store(slot, std::memory_order_release);
  t_worker = static_cast<int32_t>(worker);
  t_subtask = subtask;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_slot = slot;
}

void FlightTable::LeaveKernel(uint32_t worker) {
  t_slot = abi::kNoFlightSlot;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  workers_[worker].slot.store(abi::kNoFlightSlot, std::memory_order_release);
}

bool FlightTable::ReadTask(uint32_t index, const DeviceMemory& memory, FlightTask* out) const {
  if (index >= header_->slots) return false;
  const abi::FlightSlot& s = slots_[index];
  if (s.state.load(std::memory_order_acquire) != 1) return false;
  out->slot = index;
  out->scheduler = s.scheduler;
  out->dumped = (s.flags & abi::kFlightDumped) != 0;
  out->dump_after = (s.flags & abi::kFlightDumpAfter) != 0;
  out->snapshot_taken = (s.flags & abi::kFlightSnapshotTaken) != 0;
  out->tensors.clear();
  out->scalars.clear();
  out->inputs.clear();
  // The input copies, when they lie in the memory.
  const bool snapshotted =
      s.snapshot_bytes > 0 && memory.Contains(s.snapshot_offset, s.snapshot_bytes);
  DumpTask& t = out->task;
  t = DumpTask();
  t.task_id = s.task_id;
  t.step = s.step;
  t.func_count = std::min<uint8_t>(s.func_count, abi::kMaxFuncIds);
  std::copy(std::begin(s.func_ids), std::end(s.func_ids), std::begin(t.func_ids));
  t.level = s.level;
  t.tensor_flags = s.tensor_flags;
  t.has_marker = (s.flags & abi::kFlightHasMarker) != 0;
  const uint32_t tensors = std::min(s.tensor_count, abi::kFlightMaxTensors);
  for (uint32_t i = 0; i < tensors; ++i) {
    const abi::FlightTensor& f = s.tensors[i];
    if (!IsValidDataType(f.dtype) || f.ndims > abi::kMaxDims || f.role > 2 ||
        !memory.Contains(f.memory_offset, f.buffer_bytes)) {
      continue;
    }
    DumpTensorArg a;
    a.view.dtype = static_cast<DataType>(f.dtype);
    a.view.ndims = f.ndims;
    std::copy(std::begin(f.shape), std::end(f.shape), std::begin(a.view.shape));
    std::copy(std::begin(f.strides), std::end(f.strides), std::begin(a.view.strides));
    a.view.start_offset = f.start_offset;
    a.view.data = memory.base() + f.memory_offset;
    // The view must lie in the bytes the slot claims for its buffer.
    const uint64_t elements_in_buffer =
        f.buffer_bytes * 8 / std::max<uint32_t>(1, ElementBits(a.view.dtype));
    if (!ValidateView(a.view, elements_in_buffer).ok()) continue;
    a.role = static_cast<abi::ArgRole>(f.role);
    a.arg_index = f.arg_index;
    a.marked = (f.flags & 1) != 0;
    a.ambiguous = (f.flags & 2) != 0;
    out->tensors.push_back(a);
    const uint64_t at = s.snapshot_at[i];
    if (snapshotted && a.role != abi::ArgRole::kOutput && at != abi::kNoSnapshot &&
        at <= s.snapshot_bytes && a.view.logical_bytes() <= s.snapshot_bytes - at) {
      out->inputs.push_back(DispatchedInput{a, memory.base() + s.snapshot_offset + at});
    }
  }
  const uint32_t scalars = std::min(s.scalar_count, abi::kFlightMaxScalars);
  for (uint32_t i = 0; i < scalars; ++i) {
    const abi::FlightScalar& f = s.scalars[i];
    if (!IsValidDataType(f.dtype)) continue;
    DumpScalarArg a;
    a.dtype = static_cast<DataType>(f.dtype);
    a.bits = f.bits;
    a.arg_index = f.arg_index;
    a.marked = (f.flags & 1) != 0;
    out->scalars.push_back(a);
  }
  t.tensors = out->tensors.data();
  t.tensor_count = static_cast<uint32_t>(out->tensors.size());
  t.scalars = out->scalars.data();
  t.scalar_count = static_cast<uint32_t>(out->scalars.size());
  return true;
}

void FlightTable::RecordFault(int signal, const void* address, bool has_address) {
  abi::FlightCrash& c = header_->crash;
  int32_t expected = 0;
  // The first fault wins (another thread may fault while this one records).
  if (!c.signal.compare_exchange_strong(expected, -1, std::memory_order_acq_rel)) return;
  c.worker = t_worker;
  c.slot = t_slot;
  c.subtask = t_subtask;
  c.fault_address = reinterpret_cast<uint64_t>(address);
  c.has_fault_address = has_address ? 1 : 0;
  c.signal.store(signal, std::memory_order_release);
}

}  // namespace argsdump
