#include "apps/sim_run/sim_job.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "device/workload.h"
#include "format/names.h"
#include "sdk/argsdump.h"
#include "sdk/wiring.h"

namespace argsdump {

namespace {

// The SDK session's options, exactly as sim_run's flags said.
SessionOptions SessionOptionsFor(const v1::WorkloadSpec& workload,
                                 const SimJobOptions& options) {
  SessionOptions session;
  session.name = workload.name();
  session.drain_threads = options.drain_threads;
  session.collector_shards = options.collector_shards;
  session.dynamic_switch = options.dynamic;
  session.exception_dump = options.exception_dump;
  session.capture_retry_deadline = options.capture_retry_deadline;
  session.connect_timeout = options.capture_connect_timeout;
  for (const auto& [k, v] : options.labels) session.labels[k] = v;
  session.device_process = options.device_process;
  session.keep_journal = options.keep_journal;
  return session;
}

// The session's wiring for one job; the progress sampler's hooks are added by
// the caller, which owns the session they read.
SessionWiring SessionWiringFor(const v1::WorkloadSpec& workload,
                               const SimJobOptions& options) {
  SessionWiring wiring;
  wiring.resolved = options.dump;
  wiring.resolved->level = options.dump_level;
  if (!options.capture_server.empty()) wiring.resolved->capture_server = options.capture_server;
  wiring.output_prefix = options.output_prefix;
  wiring.workload = workload.name();
  wiring.claim_output_prefix = options.default_prefix;
  wiring.capture_name = options.capture_name;  // default: the prefix's last component
  wiring.auth_token = options.auth_token;
  wiring.platform = options.platform;
  wiring.sim = options.sim;
  wiring.region = options.region;
  wiring.dynamic_level = options.dynamic_level;
  wiring.test_labels = false;
  wiring.job = options.job;
  // The dump's own problems (a service that cannot be reached, a name it
  // refuses, a capture that cannot be written) are WARNINGs and the run
  // goes on, as for any session: the result says what happened.
  wiring.strict = false;
  wiring.print_summary = false;
  return wiring;
}

// One step at a time, as iterations run; a failed or hung step ends the run
// (Finish reports it). `tensors` holds the last step's outputs, or why its
// workload could not be submitted. The workload is made ready at its first
// step (validated, allocated, resolved) and each step after resets its
// buffers and submits its tasks again; the planted fault's workload, made
// ready at its step, runs on buffers of its own.
absl::Status RunJobSteps(SimSession& device, const v1::WorkloadSpec& workload,
                         const v1::WorkloadSpec* faulty, const KernelRegistry& kernels,
                         const SimJobOptions& options,
                         absl::StatusOr<std::map<std::string, Tensor>>& tensors) {
  SimRuntime& runtime = *SessionWiring::Runtime(device);
  std::optional<PreparedWorkload> prepared, prepared_faulty;
  const PreparedWorkload* last = nullptr;  // the last step's
  for (uint32_t step = 0; step < std::max<uint32_t>(1, options.steps); ++step) {
    if (step > 0 && !device.Synchronize().ok()) break;
    if (options.before_step) {
      if (auto c = options.before_step(step)) runtime.SetDumpConfig(*c);
    }
    if (!device.BeginStep(step).ok()) break;
    runtime.HoldDispatch();  // the whole step queued before any of it runs
    const bool fault = faulty != nullptr && step == options.fault->step;
    std::optional<PreparedWorkload>& ready = fault ? prepared_faulty : prepared;
    absl::Status submitted;
    if (!ready) {
      absl::StatusOr<PreparedWorkload> made =
          PreparedWorkload::Prepare(fault ? *faulty : workload, kernels, &runtime);
      if (made.ok()) {
        ready = *std::move(made);
      } else {
        submitted = made.status();
      }
    }
    if (ready) submitted = ready->Submit();
    runtime.ReleaseDispatch();
    if (!submitted.ok()) {
      tensors = submitted;
      return submitted;
    }
    last = &*ready;
    if (options.during_step) {
      if (auto c = options.during_step(step)) runtime.SetDumpConfig(*c);
    }
  }
  if (last != nullptr) tensors = last->tensors();
  return absl::OkStatus();
}

// What the finished session and its report say, into the job's result.
void FillJobResult(const SessionReport& report, const SessionResult& finished,
                   std::map<std::string, Tensor> tensors, SimJobResult& result) {
  result.dump_dir = report.prefix + "/args_dump";
  result.step_levels = report.step_levels;
  result.dump_off_reason = report.dump_off_reason;
  result.run_status = finished.run_status;
  result.tasks = finished.tasks;
  result.tasks_completed = finished.tasks_completed;
  result.collected = report.collected;
  result.losses = report.losses;
  result.dump_log = report.dump_log;
  result.overflow_tasks = finished.overflow_tasks;
  result.first_overflow_task = finished.first_overflow_task;
  result.exception_dumps = finished.exception_dumps;
  result.device_crashed = finished.device_crashed;
  result.device_crash = finished.device_crash;
  result.dump_status = finished.dump_status;
  result.wrote_capture = finished.wrote_capture;
  result.capture = finished.capture;
  result.tensors = std::move(tensors);
  result.seconds = report.seconds;
  result.sent_records = report.sent_records;
  result.acked_records = report.acked_records;
  result.kept_locally_dir = report.kept_locally_dir;
  result.kept_locally_records = report.kept_locally_records;
}

}  // namespace

absl::StatusOr<SimJobResult> RunSimJob(const v1::WorkloadSpec& workload,
                                       const KernelRegistry& kernels,
                                       const SimJobOptions& options) {
  if (options.dump_level < 0 || options.dump_level > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dump-args: level ", options.dump_level, " is not 0, 1, 2 or 3"));
  }
  // The fault, planted up front: a task it cannot be planted in is a bad
  // flag, before anything runs.
  std::optional<v1::WorkloadSpec> faulty;
  const uint32_t rank = options.job ? options.job->rank() : 0;
  if (options.fault && options.fault->rank == rank) {
    absl::StatusOr<v1::WorkloadSpec> planted = PlantFault(workload, *options.fault);
    if (!planted.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--fault: ", planted.status().message()));
    }
    faulty = *std::move(planted);
  }
  SimJobResult result;
  result.dump_dir = options.output_prefix + "/args_dump";
  // One wiring: the SDK's session, told exactly what sim_run's flags said.
  const SessionOptions session = SessionOptionsFor(workload, options);
  SessionWiring wiring = SessionWiringFor(workload, options);
  SimProgressSampler* const progress = options.progress;
  if (progress != nullptr) wiring.device_finished = [progress] { progress->Stop(); };
  // The sampler starts once the device runs (after the fork: no thread may
  // exist before it).
  SimSession* opened_session = nullptr;
  if (progress != nullptr) {
    wiring.device_started = [progress, &opened_session] {
      SimSession* s = opened_session;
      progress->Start([s] { return SessionWiring::Progress(*s); });
    };
  }
  auto opened = SimSession::Open(kernels, session, wiring);
  if (!opened.ok()) return opened.status();
  SimSession& s = **opened;
  opened_session = &s;
  // The sampler reads the session: it stops on every way out, before the
  // session goes.
  struct StopProgress {
    SimProgressSampler* progress;
    ~StopProgress() {
      if (progress != nullptr) progress->Stop();
    }
  } stop_progress{progress};
  absl::StatusOr<std::map<std::string, Tensor>> tensors = std::map<std::string, Tensor>();
  // With device_process the steps run in the device process.
  const absl::Status ran = s.RunDevice([&](SimSession& device) -> absl::Status {
    return RunJobSteps(device, workload, faulty ? &*faulty : nullptr, kernels, options, tensors);
  });
  absl::StatusOr<SessionResult> finished = s.Finish();
  if (!finished.ok()) return finished.status();
  // A workload that could not be submitted (in either process) is an error
  // of the job, not of the device.
  if (!ran.ok() && !finished->device_crashed && ran.code() != absl::StatusCode::kAborted) {
    return ran;
  }
  if (!tensors.ok()) return tensors.status();
  FillJobResult(SessionWiring::Report(s), *finished, std::move(tensors).value(), result);
  return result;
}

namespace {

// The levels the dump ran at, and what else was on (the overflow check,
// stats, the stages): one, or each change of the dynamic switch.
std::string DescribeDumpLevels(const SimJobResult& r, const SimJobOptions& o) {
  auto extras = [](const StepLevel& l) {
    DumpConfig c;
    c.level = static_cast<int>(l.level);
    c.overflow = l.overflow;
    c.stats = l.stats;
    c.mode = l.mode;
    const std::string e = c.DescribeExtras();
    return e.empty() ? e : " " + e;
  };
  std::string levels = absl::StrCat(o.dump_level, o.dump.DescribeExtras().empty() ? "" : " ",
                                    o.dump.DescribeExtras());
  if (r.step_levels.size() == 1) {
    levels = absl::StrCat(r.step_levels[0].level, extras(r.step_levels[0]));
  }
  if (r.step_levels.size() > 1) {
    levels.clear();
    for (size_t i = 0; i < r.step_levels.size(); ++i) {
      absl::StrAppend(&levels, i == 0 ? "" : ", ", r.step_levels[i].level,
                      extras(r.step_levels[i]), i == 0 ? " at step " : " from step ",
                      r.step_levels[i].first_step);
    }
  }
  return levels;
}

// One line per exception dump, saying what kind of dump its folder holds.
void AppendExceptionDumps(const SimJobResult& r, std::string& s) {
  for (const std::string& dir : r.exception_dumps) {
    const bool crash = dir.find("/crash_") != std::string::npos;
    const bool refused = dir.find("/refused_") != std::string::npos;
    absl::StrAppend(&s, "exception dump: ", dir,
                    refused ? " (a record the collector refused: its raw bytes in record.bin, "
                              "why and where in context.json)\n"
                    : crash ? " (the crashing task's args as captured before dispatch, its "
                              "tensors as the crash left them, and context.json)\n"
                            : " (the failing task's inputs, outputs and scalars as dump_viewer "
                              "reads them, and context.json)\n");
  }
}

// The records collected and the ones lost, by cause.
void AppendRecordsAndLosses(const SimJobResult& r, std::string& s) {
  const v1::CaptureCounters& l = r.losses;
  absl::StrAppend(&s, "records: ", r.collected.records, " (", r.collected.recovered_records,
                  " recovered from unflushed buffers",
                  r.collected.snapshot_records > 0
                      ? absl::StrCat(", ", r.collected.snapshot_records,
                                     " in-flight snapshots the host took from device memory")
                      : "",
                  "), payload bytes: ", r.collected.payload_bytes, "\n");
  absl::StrAppend(&s, "losses: dropped ", l.dropped_records(), " (ready queue full ",
                  l.dropped_ready_queue_full(), ", free queue empty ",
                  l.dropped_free_queue_empty(), ", arena ack timeout ",
                  l.dropped_arena_ack_timeout(), ", flush timeout ", l.dropped_flush_timeout(),
                  ", host gone ", l.dropped_host_gone(), "), overwritten ",
                  r.collected.overwritten, ", invalid ",
                  r.collected.invalid_records, "\n");
}

// Where the capture is: kept locally after the service lost it, on the
// service, in the output folder, or nowhere.
void AppendCapturePlace(const SimJobResult& r, const SimJobOptions& o, std::string& s) {
  if (!r.kept_locally_dir.empty()) {
    absl::StrAppend(&s, "capture: lost by the capture service (its resume was refused: the "
                        "capture is gone); ", r.acked_records, " records it had acknowledged "
                        "went with it, ", r.kept_locally_records, " records it had not "
                        "acknowledged are kept locally in ", r.kept_locally_dir, "\n");
  } else if (!r.capture.empty()) {
    absl::StrAppend(&s, "capture: ", r.capture, " on the capture service (", r.sent_records,
                    " records sent, ", r.acked_records, " acknowledged as durable)\n");
  } else if (r.wrote_capture) {
    absl::StrAppend(&s, "capture: ", r.dump_dir, "/args_dump.json\n");
  } else {
    absl::StrAppend(&s, "capture: none (no record was collected",
                    o.dump_level == 1 ? "; level 1 dumps only args marked with dump(...)" : "",
                    ")\n");
  }
}

}  // namespace

std::string SummarizeSimJob(const SimJobResult& r, const SimJobOptions& o) {
  std::string s = absl::StrCat("workload run: ", r.tasks_completed, " of ", r.tasks,
                               " tasks completed in ", absl::StrFormat("%.3f", r.seconds),
                               " s on ", PlatformName(o.platform), ", dump level ",
                               DescribeDumpLevels(r, o), "\n");
  if (!r.run_status.ok()) absl::StrAppend(&s, "run status: ", r.run_status.ToString(), "\n");
  if (r.device_crashed) {
    absl::StrAppend(&s, "device crash: ", r.device_crash,
                    r.wrote_capture || !r.capture.empty()
                        ? " (the capture holds every record made before, the running tasks' "
                          "outputs flagged in-flight, and device_crash)\n"
                        : "\n");
  }
  if (!r.dump_status.ok()) {
    absl::StrAppend(&s, "capture: incomplete: ", r.dump_status.ToString(), "\n");
  }
  AppendExceptionDumps(r, s);
  if (r.overflow_tasks > 0) {
    absl::StrAppend(&s, "overflow: ", r.overflow_tasks,
                    " task(s) wrote a NaN or an Inf; the first: task ",
                    TaskIdHex(*r.first_overflow_task),
                    " (dumped in full, flagged \"overflow\" in the manifest)\n");
  } else if (o.dump.overflow) {
    absl::StrAppend(&s, "overflow: no task wrote a NaN or an Inf\n");
  }
  if (!r.dump_off_reason.empty()) {
    return s + "dump: off (its buffers could not be allocated: " + r.dump_off_reason + ")\n";
  }
  if (o.dump_level == 0 && !o.dynamic && !o.dump.overflow) return s + "dump: off (level 0)\n";
  AppendRecordsAndLosses(r, s);
  AppendCapturePlace(r, o, s);
  return s;
}

}  // namespace argsdump
