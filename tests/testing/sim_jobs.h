// Sim jobs small enough for a test: a few threads, the default timeouts
// (never the environment's), a 1 MiB arena per recording thread. A test
// sets on the result what its case is about (platform, steps, dump).
#ifndef ARGSDUMP_TESTS_TESTING_SIM_JOBS_H_
#define ARGSDUMP_TESTS_TESTING_SIM_JOBS_H_

#include <cstdint>
#include <string>

#include "apps/sim_run/sim_job.h"

namespace argsdump {

// The dump at `level` into <output_prefix>/args_dump, `threads` scheduler
// and as many worker threads.
inline SimJobOptions SmallSimJob(int level, const std::string& output_prefix, uint32_t threads) {
  SimJobOptions o;
  o.dump_level = level;
  o.output_prefix = output_prefix;
  o.sim.scheduler_threads = threads;
  o.sim.worker_threads = threads;
  o.sim.timeouts = SimTimeouts();
  o.region.arena_bytes = 1 << 20;
  return o;
}

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_SIM_JOBS_H_
