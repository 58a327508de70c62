// The main job: run a sim workload with the dump at a level, collect it on
// the host while it runs, and leave <output_prefix>/args_dump/ behind.
#ifndef ARGSDUMP_APPS_SIM_RUN_SIM_JOB_H_
#define ARGSDUMP_APPS_SIM_RUN_SIM_JOB_H_

#include <cstdint>
#include <chrono>
#include <functional>
#include <map>
#include <vector>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "collector/collector.h"
#include "apps/sim_run/planted_fault.h"
#include "apps/sim_run/sim_progress.h"
#include "device/dump_config.h"
#include "device/region.h"
#include "device/sim/kernel.h"
#include "device/sim/sim_runtime.h"
#include "device/sim/tensor.h"
#include "proto/argsdump/v1/workload.pb.h"

namespace argsdump {

struct SimJobOptions {
  int dump_level = 2;  // 0..3
  Platform platform = Platform::kA2a3Sim;
  std::string output_prefix;  // the capture goes to <output_prefix>/args_dump
  // output_prefix is a default (outputs/<workload>_<stamp>), not the
  // user's: when another run holds it, <output_prefix>_2, _3, ... is used.
  bool default_prefix = false;
  SimConfig sim;
  DumpRegionConfig region;  // level and num_threads are set from the above
  uint32_t drain_threads = 1;
  uint32_t collector_shards = 2;
  // Set: stream the capture to this capture service (host:port) instead of
  // writing <output_prefix>/args_dump locally; it replaces
  // dump.capture_server (where sim_run puts the resolved one). A service
  // that cannot be reached within capture_connect_timeout, or refuses the
  // capture, is a WARNING and the capture is written locally; a name it
  // refuses is replaced by one it takes, a taken one gets _2, _3, ...
  std::string capture_server;
  std::chrono::milliseconds capture_connect_timeout{30000};
  std::string capture_name;  // default: the output prefix's last component
  std::string auth_token;  // empty: dump.auth_token_file's, if set
  // How long a broken stream to the service is retried (with backoff).
  std::chrono::milliseconds capture_retry_deadline{60000};
  std::map<std::string, std::string> labels;
  // Steps: the workload runs `steps` times in one process (one runtime, one
  // capture; every record carries its step), on the same buffers, set back
  // as new before each step (PreparedWorkload). `dump` is what the dump
  // covers (mode, funcs, block_funcs, steps); its level is dump_level.
  uint32_t steps = 1;
  DumpConfig dump;
  // The dump may be switched on later (a watched config file): the region
  // and recorder exist even at level 0, at level `dynamic_level`.
  bool dynamic = false;
  int dynamic_level = 2;
  // Called before each step (a new configuration returned takes effect at
  // that step) and right after a step's tasks were submitted, while they
  // run (what is returned then takes effect at the next step).
  std::function<std::optional<DumpConfig>(uint32_t step)> before_step;
  std::function<std::optional<DumpConfig>(uint32_t step)> during_step;
  // A kernel that fails leaves <output_prefix>/exception_dump/... behind
  // (exception_dump.h) and stops the run.
  bool exception_dump = true;
  // The device (runtime, kernels, recorder, the workload's submission) in
  // a forked process of its own, over shared memory (sim_run's default):
  // a kernel that crashes it loses nothing recorded before (see
  // SessionOptions::device_process). The fork needs a process with no
  // other thread. Results then hold no tensors (they are the device's).
  bool device_process = false;
  bool keep_journal = false;  // SessionOptions::keep_journal (--keep-journal)
  // Set (not owned): started once the device runs, stopped when the
  // device finished (the progress line ends before the flush lines).
  SimProgressSampler* progress = nullptr;
  // The job this run is a rank of (the capture carries it; a service
  // capture is named <job>.rank<k> unless capture_name says otherwise).
  std::optional<v1::JobMember> job;
  // Planted into the workload of its step when its rank is this run's (the
  // job's rank, 0 without a job): apps/sim_run/planted_fault.h.
  std::optional<PlantedFault> fault;
};

struct SimJobResult {
  absl::Status run_status;  // the device's: OK, or the hang / kernel error
  uint64_t tasks = 0;
  uint64_t tasks_completed = 0;
  CollectorStats collected;
  v1::CaptureCounters losses;
  std::string dump_dir;   // local captures
  std::string capture;    // remote captures: host:port/name
  bool wrote_capture = false;
  double seconds = 0;
  std::map<std::string, Tensor> tensors;  // the workload's, after the run
  std::vector<std::string> dump_log;      // the runtime's dump state changes
  uint64_t overflow_tasks = 0;            // the overflow check's finds
  std::optional<uint64_t> first_overflow_task;
  std::vector<std::string> exception_dumps;  // folders written
  // device_process: the device process died; how, in one line.
  bool device_crashed = false;
  std::string device_crash;
  // Set when the capture is incomplete (a dead device's run goes on to its
  // summary; any other run fails on it instead).
  absl::Status dump_status;
  // Streamed captures: records sent to the service, and acknowledged.
  uint64_t sent_records = 0, acked_records = 0;
  // The service lost the capture: the records it had not acknowledged are
  // in this local capture (SessionReport::kept_locally_*).
  std::string kept_locally_dir;
  uint64_t kept_locally_records = 0;
  // The level the dump ran at, from which step on (one entry per change).
  std::vector<StepLevel> step_levels;
  // Set when the dump could not run (its buffers could not be allocated).
  std::string dump_off_reason;
};

// Fails only when the job could not run or the capture could not be written;
// a device-side hang or kernel error is reported in run_status, with the
// capture still exported.
absl::StatusOr<SimJobResult> RunSimJob(const v1::WorkloadSpec& workload,
                                       const KernelRegistry& kernels,
                                       const SimJobOptions& options);

// One line per fact, for people: tasks, records, bytes, losses, where.
std::string SummarizeSimJob(const SimJobResult& result, const SimJobOptions& options);

}  // namespace argsdump

#endif  // ARGSDUMP_APPS_SIM_RUN_SIM_JOB_H_
