// Device-side cost of the recorder, next to the limits measured in the same
// binary: a metadata-only record in ns, contiguous capture and strided gather
// in bytes/s beside a plain memcpy of the same sizes into a ring of the same
// size as the arena. A host thread recycles buffers and acknowledges
// payloads without copying, so what is timed is the device side.
//   bazel run -c opt //device:recorder_benchmark
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "device/recorder.h"
#include "device/region.h"
#include "device/testing/null_host.h"

namespace argsdump {
namespace {

constexpr uint64_t kArenaBytes = 64ull << 20;

std::unique_ptr<DumpRegion> Region(abi::DumpLevel level) {
  DumpRegionConfig c;
  c.level = level;
  c.num_threads = 1;
  c.arena_bytes = kArenaBytes;
  c.buffers_per_thread = 32;  // headroom so a descheduled host is not timed
  c.ready_queue_depth = 32;
  c.full_policy = abi::FullPolicy::kStall;
  return std::move(DumpRegion::Create(c)).value();
}

TensorView Contiguous(const std::vector<uint8_t>& data) {
  TensorView v;
  v.dtype = DataType::kFloat32;
  v.ndims = 1;
  v.shape[0] = static_cast<uint32_t>(data.size() / 4);
  v.strides[0] = 1;
  v.data = data.data();
  return v;
}

// Rows of `row` float32 elements, every other row of a twice-as-wide matrix.
TensorView Strided(const std::vector<uint8_t>& data, uint32_t row) {
  TensorView v;
  v.dtype = DataType::kFloat32;
  v.ndims = 2;
  v.shape[0] = static_cast<uint32_t>(data.size() / 4 / (2 * row));
  v.shape[1] = row;
  v.strides[0] = 2 * row;
  v.strides[1] = 1;
  v.data = data.data();
  return v;
}

// Waits at the device's gates mean the host, not the recorder, was timed.
void Report(benchmark::State& state, const DumpRegion& region) {
  const abi::ThreadState& st = region.thread_state(0);
  state.counters["dropped"] = static_cast<double>(st.dropped_records.load());
  state.counters["gate_waits"] = static_cast<double>(st.gate_waits.load());
  state.counters["arena_waits"] = static_cast<double>(st.arena_waits.load());
}

void RunTask(benchmark::State& state, abi::DumpLevel level, TensorView view,
             uint64_t bytes_per_task) {
  auto region = Region(level);
  DumpRecorder recorder(*region);
  NullHost host(*region);
  DumpTensorArg arg;
  arg.view = view;
  DumpTask task;
  task.func_count = 1;
  // Times as the runtime sets them: each record stores them.
  task.dispatch_mono_ns = region->time_base_ns() + 1000;
  task.complete_mono_ns = region->time_base_ns() + 2000;
  task.func_ids[0] = 1;
  task.tensors = &arg;
  task.tensor_count = 1;
  ThreadRecorder& rec = recorder.thread(0);
  for (auto _ : state) {
    ++task.task_id;
    rec.RecordTask(task, abi::Stage::kBeforeDispatch);
  }
  rec.Flush();
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * bytes_per_task);
  Report(state, *region);
}

// One tensor record, metadata only (level 3, nothing marked).
void BM_RecordMetadata(benchmark::State& state) {
  std::vector<uint8_t> data(4096);
  RunTask(state, abi::DumpLevel::kHybrid, Contiguous(data), 0);
}
BENCHMARK(BM_RecordMetadata);

// One scalar record.
void BM_RecordScalar(benchmark::State& state) {
  auto region = Region(abi::DumpLevel::kFull);
  DumpRecorder recorder(*region);
  NullHost host(*region);
  DumpScalarArg arg;
  arg.dtype = DataType::kFloat64;
  DumpTask task;
  task.func_count = 1;
  // Times as the runtime sets them: each record stores them.
  task.dispatch_mono_ns = region->time_base_ns() + 1000;
  task.complete_mono_ns = region->time_base_ns() + 2000;
  task.scalars = &arg;
  task.scalar_count = 1;
  ThreadRecorder& rec = recorder.thread(0);
  for (auto _ : state) {
    ++task.task_id;
    arg.bits = task.task_id;
    rec.RecordTask(task, abi::Stage::kBeforeDispatch);
  }
  rec.Flush();
  state.SetItemsProcessed(state.iterations());
  Report(state, *region);
}
BENCHMARK(BM_RecordScalar);

void BM_CaptureContiguous(benchmark::State& state) {
  std::vector<uint8_t> data(state.range(0), 0x5A);
  RunTask(state, abi::DumpLevel::kFull, Contiguous(data), data.size());
}
BENCHMARK(BM_CaptureContiguous)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20);

// The logical payload is range(0) bytes, gathered from rows of range(1) elements.
void BM_GatherStrided(benchmark::State& state) {
  std::vector<uint8_t> data(2 * state.range(0), 0x5A);
  RunTask(state, abi::DumpLevel::kFull, Strided(data, state.range(1)), state.range(0));
}
BENCHMARK(BM_GatherStrided)
    ->Args({64 << 10, 64})
    ->Args({64 << 10, 256})
    ->Args({1 << 20, 64})
    ->Args({1 << 20, 256});

// The limit: memcpy of the same sizes into a ring as large as the arena.
void BM_Memcpy(benchmark::State& state) {
  const uint64_t size = state.range(0);
  std::vector<uint8_t> src(size, 0x5A);
  std::unique_ptr<uint8_t[]> ring(new uint8_t[kArenaBytes]);
  std::memset(ring.get(), 0, kArenaBytes);
  uint64_t offset = 0;
  for (auto _ : state) {
    if (offset + size > kArenaBytes) offset = 0;
    std::memcpy(ring.get() + offset, src.data(), size);
    benchmark::DoNotOptimize(ring.get() + offset);
    offset += size;
  }
  state.SetBytesProcessed(state.iterations() * size);
}
BENCHMARK(BM_Memcpy)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20);

}  // namespace
}  // namespace argsdump

BENCHMARK_MAIN();
