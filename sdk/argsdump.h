// The argsdump SDK: capture the arguments of your own kernels on the
// simulated device, from your own orchestration code, in your own tests.
// A SimSession owns one simulated device, its dump region, the host
// collector and the sink; you register kernels, allocate tensors, submit
// tasks step by step, and Finish() leaves a capture behind. The dump is
// switched on from outside the code (the test's command line, ARGSDUMP_*,
// a config file), so the same test runs with and without it.
//
//   absl::Status Saxpy(argsdump::KernelContext& ctx) { ... }   // y = a*x + b
//
//   argsdump::KernelRegistry kernels;
//   const uint16_t saxpy = *kernels.Register(
//       "saxpy", {argsdump::ArgDirection::kIn, argsdump::ArgDirection::kOut,
//                 argsdump::ArgDirection::kScalar}, &Saxpy, "elementwise");
//   auto session = argsdump::SimSession::Open(kernels);
//   argsdump::Tensor x = *(*session)->Alloc(argsdump::DataType::kFloat32, {64});
//   argsdump::Tensor y = *(*session)->Alloc(argsdump::DataType::kFloat32, {64});
//   x.Write<float>(values);
//   for (uint32_t step = 0; step < 3; ++step) {
//     (*session)->BeginStep(step);
//     argsdump::CoreTaskArgs args;
//     float a = 2.0f;
//     args.add_input(x); args.add_output(y); args.add_scalar(a);
//     (*session)->Submit(saxpy, std::move(args));
//   }
//   absl::StatusOr<argsdump::SessionResult> result = (*session)->Finish();
//
// Where the dump configuration comes from, highest priority first (each
// entry overrides only the items it sets; two that disagree are an ERROR
// line naming both, a bad value a WARNING, and the run goes on):
//   1. the process's command line: --dump-args [N], --dump-config F,
//      --output-prefix D, --capture-server H:P, --dump-verbose[=false],
//      --dump-snapshot-inputs[=false]
//      (ConsumeDumpFlags removes them from argv; //sdk:gtest_main does so
//      before gtest sees argv)
//   2. SessionOptions::dump (this code's own wishes: the API entry)
//   3. ARGSDUMP_* environment variables (device/dump_config.h lists them)
//   4. the config file (--dump-config, else SessionOptions::config_file)
//   5. the default level (--dump-args-default N, which argsdump_sim_test's
//      dump_args attribute passes), else 0: off.
// Level 0 allocates nothing and runs no dump code. --job NAME, --rank K and
// --world-size N on the command line are taken off argv the same way: the
// job identity (SessionOptions::job, which they override).
//
// Where the capture goes: <root>/<session name>/args_dump/, where <root> is
// the output prefix (D above, ARGSDUMP_PATH), else
// $TEST_UNDECLARED_OUTPUTS_DIR under `bazel test` (Bazel 4 zips it into
// bazel-testlogs/<pkg>/<target>/test.outputs/outputs.zip; dump_viewer opens
// it there, and every message names the capture so: that zip and the folder
// in it), else ./outputs; the session name is SessionOptions::name, else
// the running gtest case ("Suite.Case"), else the program's name, made
// unique in the process and the folder (_2, _3, ...). With a capture
// service set (--capture-server, ARGSDUMP_CAPTURE_SERVER), the capture
// streams there instead, named after the test target, case and run; an
// unreachable service is a WARNING naming it and the capture is kept
// locally; exception dumps stay in the session's folder and also go to the
// service, each a capture of its own. The dump never fails a run by itself:
// its own problems are in SessionResult::dump_status.
//
// Under `bazel test` every capture is labelled with the test's identity:
// target (TEST_TARGET), test_case, shard (TEST_SHARD_INDEX), steps; plus
// SessionOptions::labels and ARGSDUMP_LABELS.
//
// Threads: one thread drives a session (Open ... Finish); kernels run on
// the device's worker threads. Misuse (a call after Finish, a tensor of
// another session, a step that goes back) is an absl::Status, never a crash.
#ifndef ARGSDUMP_SDK_ARGSDUMP_H_
#define ARGSDUMP_SDK_ARGSDUMP_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "format/dtype.h"                // DataType, the element types
#include "device/dump_config.h"          // DumpConfigEntry, DumpConfig
#include "device/sim/core_task_args.h"   // CoreTaskArgs: a task's args and dump markers
#include "device/sim/kernel.h"           // KernelRegistry, KernelContext, ArgDirection
#include "device/sim/tensor.h"           // Tensor: device memory and views of it

namespace argsdump {

struct SessionWiring;  // project-internal (sdk/wiring.h)

// 16-bit floats. A FLOAT16 (IEEE binary16) or BFLOAT16 (the top half of a
// float32) tensor holds each element's bits: Tensor::Write<uint16_t> and
// Get<uint16_t> take them; these convert from and to float. To 16 bits:
// round to nearest, ties to even; a value beyond the format's range is an
// infinity of its sign, one below half its smallest subnormal a zero of its
// sign; infinities and signed zeros are kept; a NaN stays a NaN of its sign
// with the top bits of its payload (a payload only in the bits dropped
// becomes the quiet bit). From 16 bits every value is exact (a NaN keeps
// its payload), so bits -> float -> bits gives back all 65536 patterns.
// Bfloat16ToFloat is format/dtype.h's.
uint16_t FloatToBfloat16(float value);
uint16_t FloatToFloat16(float value);
float Float16ToFloat(uint16_t bits);
// A FLOAT32, FLOAT16 or BFLOAT16 tensor's elements (a view: in logical
// row-major order) from or to floats, converted as above. InvalidArgument
// for another dtype or a count other than numel().
absl::Status WriteFloats(const Tensor& tensor, const std::vector<float>& values);
absl::StatusOr<std::vector<float>> ReadFloats(const Tensor& tensor);

struct SessionOptions {
  // The session's name (the capture's folder; part of its name on a
  // service). Empty: the running gtest case, else the program's name.
  std::string name;
  // What this code asks of the dump (the API entry; unset items are left to
  // the entries below it). E.g. dump.level = 2, dump.mode = DumpMode::kOutput.
  DumpConfigEntry dump;
  // A JSON dump config file (the file entry; --dump-config replaces it).
  // It is read again at every BeginStep: editing it switches the dump.
  std::string config_file;
  // Build the dump buffers even when the level resolves to 0, so that
  // SetDumpConfig or an edited config file can switch the dump on later.
  bool dynamic_switch = false;
  // More labels for the capture (ARGSDUMP_LABELS and the test's identity
  // are added; these win over ARGSDUMP_LABELS).
  std::map<std::string, std::string> labels;

  // The simulated device: scheduler ("AICPU", recording) and worker
  // ("AICore") threads, and tasks one scheduler keeps in flight.
  uint32_t scheduler_threads = 4;
  uint32_t worker_threads = 4;
  uint32_t max_inflight_per_scheduler = 4;
  // The dump buffers per recording thread (the reference's defaults):
  // records per metadata buffer, buffers, ready-queue depth, payload arena
  // bytes (a tensor larger than arena/2 is truncated and flagged), and how
  // long the device waits for the host before it drops records.
  uint32_t records_per_buffer = 256;
  uint32_t buffers_per_thread = 8;
  uint32_t ready_queue_depth = 8;
  uint64_t arena_bytes = 128ull << 20;
  uint32_t wait_bound_ms = 30000;
  // The host collector's drain and shard threads.
  uint32_t drain_threads = 1;
  uint32_t collector_shards = 2;
  // How long Open waits for a capture service before it keeps the capture
  // locally instead.
  std::chrono::milliseconds connect_timeout{5000};
  // Once streaming, how long the session keeps reconnecting (with backoff)
  // through a service restart or a network break before it gives up; every
  // record the service acknowledged stays in the capture either way.
  std::chrono::milliseconds capture_retry_deadline{60000};
  // A failing kernel's task is saved with its context under
  // <root>/<name>/exception_dump/ (and the run stops either way).
  bool exception_dump = true;
  // The device in its own process: RunDevice forks it and
  // runs the orchestration function there, over device memory and dump
  // buffers shared with this process, where the collector and the sink
  // stay. A kernel that kills that process (SIGSEGV, abort(), _exit(), a
  // SIGKILL from outside) loses nothing recorded before: the host recovers
  // the buffers the device never flushed, records the running tasks'
  // outputs from the shared memory (after_completion, flagged in-flight),
  // writes the crashing task's exception dump (exception_dump/crash_...:
  // its inputs as captured before dispatch, its tensors as the crash left
  // them, context.json with the signal and fault address), puts
  // device_crash into the capture, and the result says device_crashed.
  // Limits: open such a session before this process starts any other
  // thread (a gRPC channel, a thread pool): RunDevice refuses to fork a
  // process with threads. Alloc, Submit, BeginStep, Synchronize and
  // SetDumpConfig work only inside RunDevice's function (in the device
  // process); what that function changes in memory other than device
  // memory stays in the device process; the function's captures must be
  // valid there (a fork copies them). One RunDevice per session.
  bool device_process = false;
  // A local capture keeps args.journal once it is finished (by default it
  // is removed with the manifest in place: its only use is recovering a
  // capture that never finished). sim_run --keep-journal.
  bool keep_journal = false;

  // The job this session is one rank of (a job of many processes, each with
  // its own device): its name, this process's rank and the number of ranks.
  // Unset fields come from --job / --rank / --world-size on the command
  // line (which win over these), then ARGSDUMP_JOB / ARGSDUMP_RANK /
  // ARGSDUMP_WORLD_SIZE, then a launcher's variables (torchrun, Open MPI,
  // MPICH / Intel MPI, Slurm; docs/jobs.md names them). With a job, the
  // capture goes to <root>/<job>/rank<k>/args_dump, or to a capture
  // service as <job>.rank<k>. A value that cannot be used is a WARNING and
  // the session is no job's.
  std::string job;
  std::optional<uint32_t> rank;
  std::optional<uint32_t> world_size;
};

// What a finished session leaves behind.
struct SessionResult {
  std::string name;             // the session's (unique) name
  absl::Status run_status;      // the device's: OK, a kernel's error, or a hang
  absl::Status dump_status;     // the dump's: OK, or why the capture is incomplete
  DumpConfig dump;              // the configuration the session resolved
  bool wrote_capture = false;   // false at level 0, or when nothing was selected
  std::string capture_dir;      // local captures: .../args_dump
  std::string capture;          // streamed captures: "host:port/name"
  std::string capture_name;     // streamed captures: the name on the service
  std::string capture_server;   // streamed captures: host:port
  std::map<std::string, std::string> labels;
  // The job the session was a rank of (empty: none), its rank, and the
  // number of ranks (0: not known).
  std::string job;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  uint32_t steps = 0;           // steps begun (step 0 counts once it has a task)
  uint64_t tasks = 0;           // submitted
  uint64_t tasks_completed = 0;
  uint64_t dump_skipped_tasks = 0;  // signature and args disagreed: run, not dumped
  uint64_t records = 0;         // records collected (the capture's args)
  uint64_t recovered_records = 0;   // of them, from buffers the device never flushed
  uint64_t payload_bytes = 0;
  // Losses by cause (all zero in a healthy run).
  uint64_t dropped_records = 0;
  uint64_t dropped_ready_queue_full = 0, dropped_free_queue_empty = 0,
           dropped_arena_ack_timeout = 0, dropped_flush_timeout = 0,
           dropped_host_gone = 0;  // dropped once the host process was gone
  uint64_t overwritten = 0;     // payloads the device overwrote before the host read them
  uint64_t invalid_records = 0; // rejected by the host's validation
  // The overflow check (dump.overflow): tasks whose output held NaN/Inf.
  uint64_t overflow_tasks = 0;
  std::optional<uint64_t> first_overflow_task;
  std::vector<std::string> exception_dumps;  // folders written
  // Streamed captures: each exception dump also went to the service as a
  // capture of its own, "host:port/<capture>.<exception|crash>.<task id>",
  // labelled with the session's labels (the test's target and case) and
  // exception_dump, scenario, task_id and run_capture (the run's capture).
  std::vector<std::string> exception_dump_captures;
  // device_process: the device process died (run_status is ABORTED); how,
  // in one line (the capture's device_crash has the details).
  bool device_crashed = false;
  std::string device_crash;
  std::vector<std::string> warnings;  // the device's dump warnings (also on stderr)
  std::map<uint16_t, std::string> kernels;  // func_id -> name, of the session
};

// The dump flags of a process's command line (see above), removed from
// argv; what they set is the highest entry of every SimSession this process
// opens. A value that is not one (--dump-args=x, --dump-args 7,
// --capture-server without host:port, a flag without its value) is a
// WARNING naming the flag and the fallback, printed when a session opens
// and kept in its SessionResult::warnings: the returned status is always
// OK (a bad dump flag never fails a test). Without a call, sessions read
// the flags from /proc/self/cmdline (without removing them).
absl::Status ConsumeDumpFlags(int* argc, char** argv);

class SimSession {
 public:
  // Starts the device (and, when the dump is on, the region, the collector
  // and the sink). `kernels` is copied: register every kernel before.
  // InvalidArgument for options out of range; errors of the dump itself
  // (a service that cannot be reached, a folder that cannot be written)
  // are WARNINGs and land in the result, not here.
  static absl::StatusOr<std::unique_ptr<SimSession>> Open(const KernelRegistry& kernels,
                                                          SessionOptions options = {});
  // Finishes the session if Finish was not called (an early return or a
  // failed ASSERT keeps the capture).
  ~SimSession();
  SimSession(const SimSession&) = delete;
  SimSession& operator=(const SimSession&) = delete;

  // Device memory, zero-filled, as a compact row-major tensor; views of it
  // with Tensor::View. InvalidArgument for more than 5 dims or a shape
  // whose strides do not fit 32 bits, ResourceExhausted when it cannot be
  // allocated.
  absl::StatusOr<Tensor> Alloc(DataType dtype, const std::vector<uint32_t>& shape);

  // Queues a task running kernel `func_id` (or up to 3 kernels: a mix task)
  // over `args`; returns its task id. It runs once every task that last
  // wrote what it reads (and read what it writes) has completed. Errors:
  // unknown kernels, args whose add_*/dump(...) failed, tensors of another
  // session, a call after Finish.
  absl::StatusOr<uint64_t> Submit(uint16_t func_id, CoreTaskArgs args);
  absl::StatusOr<uint64_t> Submit(const std::vector<uint16_t>& func_ids, CoreTaskArgs args);

  // Steps (iterations): tasks submitted after BeginStep(n) belong to step n
  // and carry it in their records (step filters: ARGSDUMP_STEPS). Waits for
  // the tasks of the step before (a step ends when its tasks completed) and
  // returns its run status; a configuration changed since (SetDumpConfig,
  // an edited config file) takes effect here. Before the first call tasks
  // are in step 0. InvalidArgument unless n is after every step begun.
  absl::Status BeginStep(uint32_t step);
  // The dynamic switch from code: `api` replaces the API entry, the
  // configuration is resolved again and applies from the next BeginStep.
  void SetDumpConfig(const DumpConfigEntry& api);
  // Waits until every task submitted so far has completed (tensors may be
  // read then); returns a kernel's error or the hang, if any.
  absl::Status Synchronize();

  // Runs `orchestration` (Alloc, Submit, steps, Synchronize) on the device:
  // in this process, or with device_process in the forked device process,
  // where it returns once the function returned and the device finished
  // its tasks. Returns what the function returned, or ABORTED when the
  // device process died (Finish then reports how). The same code runs
  // either way, so a test can switch device_process alone.
  absl::Status RunDevice(const std::function<absl::Status(SimSession&)>& orchestration);

  // Waits for every task, stops the device, and writes (or finishes
  // streaming) the capture. Once: FailedPrecondition the second time.
  absl::StatusOr<SessionResult> Finish();

  const std::string& name() const;
  // The configuration as resolved at Open (or by the last SetDumpConfig).
  const DumpConfig& dump_config() const;
  // Where the capture goes: a local .../args_dump, or host:port/name.
  std::string capture_location() const;

  // Project-internal (sdk/wiring.h): sim_run's options.
  static absl::StatusOr<std::unique_ptr<SimSession>> Open(const KernelRegistry& kernels,
                                                          SessionOptions options,
                                                          const SessionWiring& wiring);

 private:
  friend struct SessionWiring;
  struct Impl;
  explicit SimSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_ARGSDUMP_H_
