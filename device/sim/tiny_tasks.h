// A benchmark workload used by two builds of the runtime (with and without
// the dump code): `tasks` relu tasks over 16-element buffers, in chains of
// eight independent streams. A template so each build instantiates its own.
#ifndef ARGSDUMP_DEVICE_SIM_TINY_TASKS_H_
#define ARGSDUMP_DEVICE_SIM_TINY_TASKS_H_

#include <cstdlib>
#include <vector>

#include "device/sim/kernels.h"

namespace argsdump {

template <typename Runtime>
void RunTinyTasks(Runtime& runtime, int tasks) {
  const uint16_t relu = *BuiltinKernels().IdOf("relu");
  std::vector<Tensor> buffers;
  for (int i = 0; i < 16; ++i) buffers.push_back(*runtime.Alloc(DataType::kFloat32, {16}));
  if (!runtime.Start().ok()) std::abort();
  for (int i = 0; i < tasks; ++i) {
    CoreTaskArgs args;
    const int stream = i % 8;
    const bool forward = (i / 8) % 2 == 0;
    (void)args.add_input(buffers[2 * stream + (forward ? 0 : 1)]);
    (void)args.add_output(buffers[2 * stream + (forward ? 1 : 0)]);
    if (!runtime.Submit({relu}, std::move(args)).ok()) std::abort();
  }
  if (!runtime.Synchronize().ok()) std::abort();
}

// The benchmark body both builds register: one runtime per iteration.
template <typename Runtime, typename Config, typename State>
void TinyTasksBenchmark(State& state) {
  Config c;
  c.timeouts.emplace();  // defaults, not the environment
  for (auto _ : state) {
    Runtime runtime(c, BuiltinKernels(), /*recorder=*/nullptr);
    RunTinyTasks(runtime, static_cast<int>(state.range(0)));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_TINY_TASKS_H_
