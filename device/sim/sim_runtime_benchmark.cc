// What the dump costs the sim runtime when it is off: level 0 (dump code
// built in, no recorder) against the same runtime with the dump code
// compiled out (sim_runtime_benchmark_without_dump.cc), in one binary,
// run with (one command line):
//   bazel run -c opt //device:sim_runtime_benchmark --
//     --benchmark_repetitions=15 --benchmark_enable_random_interleaving=true
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include <memory>

#include "benchmark/benchmark.h"
#include "device/recorder.h"
#include "device/region.h"
#include "device/sim/device_memory.h"
#include "device/sim/flight.h"
#include "device/sim/kernels.h"
#include "device/sim/sim_runtime.h"
#include "device/sim/tiny_tasks.h"
#include "device/testing/null_host.h"

namespace argsdump {
namespace {

void BM_SimLevel0(benchmark::State& state) {
  TinyTasksBenchmark<SimRuntime, SimConfig>(state);
}
BENCHMARK(BM_SimLevel0)->Arg(20000)->Unit(benchmark::kMillisecond)->UseRealTime();

// One step of `n` tasks queued while dispatch is held (as sim_run submits a
// step), then run, at dump level arg 1 (0: no recorder; 2: every arg, 64-byte
// payloads, drained by a NullHost): every task reads a shared input (a fan-out whose reader
// list grows with the step) and, in one of 64 streams, reads one buffer of
// the stream and writes the other, turn about (so writers follow readers).
// Submit must stay O(1) amortised: tasks/s is flat from 10^4 to 10^6.
void BM_StepOfTasks(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int level = static_cast<int>(state.range(1));
  const uint16_t add = *BuiltinKernels().IdOf("add");
  SimConfig c;
  c.timeouts.emplace();
  double submit_s = 0;
  for (auto _ : state) {
    std::unique_ptr<DumpRegion> region;
    std::unique_ptr<DumpRecorder> recorder;
    std::unique_ptr<NullHost> host;
    if (level > 0) {
      DumpRegionConfig rc;
      rc.level = static_cast<abi::DumpLevel>(level);
      rc.num_threads = c.scheduler_threads;
      rc.arena_bytes = 16 << 20;
      rc.full_policy = abi::FullPolicy::kStall;
      region = std::move(DumpRegion::Create(rc)).value();
      recorder = std::make_unique<DumpRecorder>(*region);
      host = std::make_unique<NullHost>(*region);
    }
    SimRuntime runtime(c, BuiltinKernels(), recorder.get());
    const Tensor shared = *runtime.Alloc(DataType::kFloat32, {16});
    std::vector<Tensor> ring;
    for (int i = 0; i < 128; ++i) ring.push_back(*runtime.Alloc(DataType::kFloat32, {16}));
    if (!runtime.Start().ok()) std::abort();
    runtime.HoldDispatch();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      CoreTaskArgs args;
      (void)args.add_input(shared);
      const int stream = i % 64;
      const bool forward = (i / 64) % 2 == 0;
      (void)args.add_input(ring[2 * stream + (forward ? 0 : 1)]);
      (void)args.add_output(ring[2 * stream + (forward ? 1 : 0)]);
      if (!runtime.Submit({add}, std::move(args)).ok()) std::abort();
    }
    submit_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    runtime.ReleaseDispatch();
    if (!runtime.Synchronize().ok()) std::abort();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["submit_tasks_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * n / submit_s);
}
BENCHMARK(BM_StepOfTasks)
    ->Args({10000, 0})
    ->Args({100000, 0})
    ->Args({1000000, 0})
    ->Args({10000, 2})
    ->Args({100000, 2})
    ->Args({1000000, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

// What snapshot_inputs costs at level 0: a step of 20000 tasks (each reads
// a shared tensor and one of 64 streams, and writes the other, arg 0
// floats each) with exception dumps armed, snapshot_inputs on against off,
// paired per iteration (alternating which runs first). Arg 1: 0 the
// tensors on the heap (a device in this process), 1 in shared device
// memory with the flight table (sim_run's device process: the copies live
// there, for a host that outlives a crash). snapshot_to_off: the median
// ratio of the on run's time to the off run's.
double StepSeconds(uint32_t elements, bool shared_memory, bool snapshot) {
  constexpr int kTasks = 20000;
  const uint16_t add = *BuiltinKernels().IdOf("add");
  SimConfig c;
  c.timeouts.emplace();
  DumpConfig dump;  // level 0
  dump.snapshot_inputs = snapshot;
  c.dump = dump;
  c.exception_dump = [](const FailedTask&) {};
  std::unique_ptr<DeviceMemory> memory;
  std::unique_ptr<FlightTable> flight;
  if (shared_memory) {
    memory = std::move(DeviceMemory::Create(uint64_t{1} << 32)).value();
    flight = std::move(FlightTable::Create(c.scheduler_threads, c.max_inflight_per_scheduler,
                                           c.worker_threads))
                 .value();
    c.memory = memory.get();
    c.flight = flight.get();
  }
  SimRuntime runtime(c, BuiltinKernels(), nullptr);
  const Tensor shared = *runtime.Alloc(DataType::kFloat32, {elements});
  std::vector<Tensor> ring;
  for (int i = 0; i < 128; ++i) ring.push_back(*runtime.Alloc(DataType::kFloat32, {elements}));
  if (!runtime.Start().ok()) std::abort();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kTasks; ++i) {
    CoreTaskArgs args;
    (void)args.add_input(shared);
    const int stream = i % 64;
    const bool forward = (i / 64) % 2 == 0;
    (void)args.add_input(ring[2 * stream + (forward ? 0 : 1)]);
    (void)args.add_output(ring[2 * stream + (forward ? 1 : 0)]);
    if (!runtime.Submit({add}, std::move(args)).ok()) std::abort();
  }
  if (!runtime.Synchronize().ok()) std::abort();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BM_SnapshotInputsRatio(benchmark::State& state) {
  const auto elements = static_cast<uint32_t>(state.range(0));
  const bool shared_memory = state.range(1) != 0;
  std::vector<double> ratios;
  uint64_t n = 0;
  for (auto _ : state) {
    double seconds[2];
    for (int k = 0; k < 2; ++k) {
      const bool on = (k + n) % 2 == 0;
      seconds[on] = StepSeconds(elements, shared_memory, on);
    }
    ++n;
    ratios.push_back(seconds[1] / seconds[0]);
    state.SetIterationTime(seconds[1]);
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["snapshot_to_off"] = ratios[ratios.size() / 2];
  state.SetItemsProcessed(state.iterations() * 20000);
}
BENCHMARK(BM_SnapshotInputsRatio)
    ->Args({16, 0})
    ->Args({16, 1})
    ->Args({16384, 0})
    ->Args({16384, 1})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

}  // namespace
}  // namespace argsdump

BENCHMARK_MAIN();
