// Built with ARGSDUMP_DUMP_COMPILED_OUT: the baseline of sim_runtime_benchmark.
#include "benchmark/benchmark.h"
#include "device/sim/sim_runtime.h"
#include "device/sim/tiny_tasks.h"

namespace argsdump {
namespace {

void BM_SimDumpCompiledOut(benchmark::State& state) {
  TinyTasksBenchmark<SimRuntime, SimConfig>(state);
}
BENCHMARK(BM_SimDumpCompiledOut)->Arg(20000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace argsdump
