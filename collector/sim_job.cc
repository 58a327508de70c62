#include "collector/sim_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collector/exception_dump.h"
#include "collector/grpc_sink.h"
#include "device/recorder.h"
#include "device/workload.h"

namespace argsdump {

absl::StatusOr<SimJobResult> RunSimJob(const v1::WorkloadSpec& workload,
                                       const KernelRegistry& kernels,
                                       const SimJobOptions& options) {
  if (options.dump_level < 0 || options.dump_level > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dump-args: level ", options.dump_level, " is not 0, 1, 2 or 3"));
  }
  const auto start = std::chrono::steady_clock::now();
  SimJobResult result;
  result.dump_dir = options.output_prefix + "/args_dump";
  Collector collector(CollectorOptions{options.platform, options.drain_threads,
                                       options.collector_shards});
  std::unique_ptr<DumpRecorder> recorder;
  std::unique_ptr<CaptureSink> sink;
  LocalSink* local_sink = nullptr;
  const bool capture = options.dump_level > 0 || options.dynamic || options.dump.overflow;
  const int region_level = options.dump_level > 0 ? options.dump_level : options.dynamic_level;
  if (capture) {
    DumpRegionConfig rc = options.region;
    rc.level = static_cast<abi::DumpLevel>(region_level);
    rc.num_threads = options.sim.scheduler_threads;
    auto region = collector.Initialize(rc);
    if (!region.ok()) return region.status();
    v1::CaptureInfo info;
    info.set_name(workload.name());
    info.set_level(static_cast<v1::DumpLevel>(region_level));
    info.set_platform(PlatformName(options.platform));
    for (const auto& [k, v] : options.labels) (*info.mutable_labels())[k] = v;
    if (!options.capture_server.empty()) {
      GrpcSinkOptions g;
      g.target = options.capture_server;
      g.capture = options.capture_name;
      if (g.capture.empty()) {
        const size_t slash = options.output_prefix.find_last_of('/');
        g.capture = slash == std::string::npos ? options.output_prefix
                                                : options.output_prefix.substr(slash + 1);
      }
      info.set_name(g.capture);
      g.info = info;
      g.auth_token = options.auth_token;
      auto remote = GrpcSink::Connect(g);
      if (!remote.ok()) return remote.status();
      result.capture = absl::StrCat(options.capture_server, "/", g.capture);
      sink = std::move(remote).value();
    } else {
      auto local = LocalSink::Create(result.dump_dir, info);
      if (!local.ok()) return local.status();
      local_sink = local->get();
      sink = std::move(local).value();
    }
    recorder = std::make_unique<DumpRecorder>(**region);
    result.dump_log.push_back(absl::StrCat(
        "dump buffers created: ", rc.num_threads, " recording threads x (",
        rc.buffers_per_thread, " buffers of ", rc.records_per_buffer, " records + a ",
        rc.arena_bytes, "-byte payload arena), level ", region_level));
    std::fprintf(stderr, "%s\n",
                 FormatDumpLog({DumpLog::kInfo, result.dump_log.back()}).c_str());
    if (absl::Status s = collector.Start(sink.get()); !s.ok()) return s;
  }
  {
    SimConfig sim = options.sim;
    sim.dump = options.dump;
    sim.dump->level = options.dump_level;
    std::mutex exception_mu;
    if (options.exception_dump) {
      sim.exception_dump = [&](const FailedTask& f) {
        auto dir = WriteExceptionDump(options.output_prefix, workload.name(), f);
        std::lock_guard<std::mutex> lock(exception_mu);
        if (dir.ok()) {
          result.exception_dumps.push_back(*dir);
        } else {
          // Internal failure: say so and go on stopping the run.
          std::fprintf(stderr, "%s\n",
                       FormatDumpLog({DumpLog::kError,
                                      absl::StrCat("exception dump of task ", TaskIdHex(f.task_id),
                                                   " failed: ", dir.status().message(),
                                                   "; the run stops without it")})
                           .c_str());
        }
      };
    }
    SimRuntime runtime(sim, kernels, recorder.get());
    if (absl::Status s = runtime.Start(); !s.ok()) return s;
    absl::StatusOr<std::map<std::string, Tensor>> tensors;
    for (uint32_t step = 0; step < std::max<uint32_t>(1, options.steps); ++step) {
      if (options.before_step) {
        if (auto c = options.before_step(step)) runtime.SetDumpConfig(*c);
      }
      runtime.BeginStep(step);
      runtime.HoldDispatch();
      tensors = SubmitWorkload(workload, kernels, &runtime);
      runtime.ReleaseDispatch();
      if (!tensors.ok()) break;
      if (options.during_step) {
        if (auto c = options.during_step(step)) runtime.SetDumpConfig(*c);
      }
      // One step at a time, as iterations run; a failed or hung step ends
      // the run (Synchronize reports it).
      if (step + 1 < options.steps && !runtime.WaitIdle().ok()) break;
    }
    result.run_status = runtime.Synchronize();
    if (!tensors.ok()) return tensors.status();
    result.tasks = runtime.tasks_submitted();
    for (std::string& line : runtime.dump_log()) result.dump_log.push_back(std::move(line));
    result.overflow_tasks = runtime.overflow_tasks();
    result.first_overflow_task = runtime.first_overflow_task();
    result.tasks_completed = runtime.tasks_completed();
    result.tensors = std::move(tensors).value();
  }
  if (capture) {
    absl::Status collected = collector.Stop();
    absl::Status reconciled = collector.Reconcile();
    absl::Status exported = collector.Export();
    result.collected = collector.stats();
    result.losses = collector.losses();
    collector.Finalize();
    result.dump_log.push_back("dump buffers freed");
    std::fprintf(stderr, "%s\n", FormatDumpLog({DumpLog::kInfo, "dump buffers freed"}).c_str());
    if (!exported.ok()) return exported;
    if (!collected.ok()) return collected;
    if (!reconciled.ok()) return reconciled;
    result.wrote_capture =
        local_sink != nullptr ? local_sink->store().created() : result.collected.records > 0;
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string SummarizeSimJob(const SimJobResult& r, const SimJobOptions& o) {
  std::string s = absl::StrCat("workload run: ", r.tasks_completed, " of ", r.tasks,
                               " tasks completed in ", absl::StrFormat("%.3f", r.seconds),
                               " s on ", PlatformName(o.platform), ", dump level ",
                               o.dump_level, "\n");
  if (!r.run_status.ok()) absl::StrAppend(&s, "run status: ", r.run_status.ToString(), "\n");
  for (const std::string& dir : r.exception_dumps) {
    absl::StrAppend(&s, "exception dump: ", dir,
                    " (the failing task's inputs, outputs and scalars as dump_viewer reads "
                    "them, and context.json)\n");
  }
  if (r.overflow_tasks > 0) {
    absl::StrAppend(&s, "overflow: ", r.overflow_tasks,
                    " task(s) wrote a NaN or an Inf; the first: task ",
                    TaskIdHex(*r.first_overflow_task),
                    " (dumped in full, flagged \"overflow\" in the manifest)\n");
  } else if (o.dump.overflow) {
    absl::StrAppend(&s, "overflow: no task wrote a NaN or an Inf\n");
  }
  if (o.dump_level == 0 && !o.dynamic && !o.dump.overflow) return s + "dump: off (level 0)\n";
  const v1::CaptureCounters& l = r.losses;
  absl::StrAppend(&s, "records: ", r.collected.records, " (", r.collected.recovered_records,
                  " recovered from unflushed buffers), payload bytes: ",
                  r.collected.payload_bytes, "\n");
  absl::StrAppend(&s, "losses: dropped ", l.dropped_records(), " (ready queue full ",
                  l.dropped_ready_queue_full(), ", free queue empty ",
                  l.dropped_free_queue_empty(), ", arena ack timeout ",
                  l.dropped_arena_ack_timeout(), ", flush timeout ", l.dropped_flush_timeout(),
                  "), overwritten ", r.collected.overwritten, ", invalid ",
                  r.collected.invalid_records, "\n");
  if (!r.capture.empty()) {
    absl::StrAppend(&s, "capture: ", r.capture, " on the capture service\n");
  } else if (r.wrote_capture) {
    absl::StrAppend(&s, "capture: ", r.dump_dir, "/args_dump.json\n");
  } else {
    absl::StrAppend(&s, "capture: none (no record was collected",
                    o.dump_level == 1 ? "; level 1 dumps only args marked with dump(...)" : "",
                    ")\n");
  }
  return s;
}

}  // namespace argsdump
