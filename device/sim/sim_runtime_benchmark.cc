// What the dump costs the sim runtime when it is off: level 0 (dump code
// built in, no recorder) against the same runtime with the dump code
// compiled out (sim_runtime_benchmark_without_dump.cc), in one binary.
//   bazel run -c opt //device:sim_runtime_benchmark -- \
//     --benchmark_repetitions=15 --benchmark_enable_random_interleaving=true
#include "benchmark/benchmark.h"
#include "device/sim/sim_runtime.h"
#include "device/sim/tiny_tasks.h"

namespace argsdump {
namespace {

void BM_SimLevel0(benchmark::State& state) {
  TinyTasksBenchmark<SimRuntime, SimConfig>(state);
}
BENCHMARK(BM_SimLevel0)->Arg(20000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace argsdump

BENCHMARK_MAIN();
