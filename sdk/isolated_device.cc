#include "sdk/isolated_device.h"

#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/sim/timeouts.h"
#include "format/names.h"
#include "sdk/session_log.h"

namespace argsdump {

absl::StatusOr<std::unique_ptr<IsolatedDevice>> IsolatedDevice::Create(
    SimConfig sim, const KernelRegistry& kernels) {
  // Device memory and the flight table outlive the device process: made
  // here, before the fork; the runtime is made in the child.
  auto memory = DeviceMemory::Create();
  if (!memory.ok()) return memory.status();
  auto flight = FlightTable::Create(sim.scheduler_threads, sim.max_inflight_per_scheduler,
                                    sim.worker_threads);
  if (!flight.ok()) return flight.status();
  std::unique_ptr<IsolatedDevice> d(new IsolatedDevice(sim, kernels));
  d->memory_ = std::move(memory).value();
  d->flight_ = std::move(flight).value();
  d->sim_.memory = d->memory_.get();
  d->sim_.flight = d->flight_.get();
  return d;
}

absl::Status IsolatedDevice::Run(const Hooks& hooks) {
  host_pid_ = ::getpid();
  auto started = DeviceProcess::Start(flight_.get(), hooks.device, hooks.host_gone);
  if (!started.ok()) {
    error_ = started.status();  // Run may be tried again
    return started.status();
  }
  forked_ = true;
  error_ = absl::OkStatus();
  process_ = std::move(started).value();
  if (absl::Status st = hooks.forked(); !st.ok()) {
    // Nothing collects what the device records: stop it.
    process_->Kill();
    process_->Wait();
    return st;
  }
  if (hooks.started) hooks.started();
  // The host's own bound: the stream-sync budget, past the device's own.
  std::vector<std::string> ignored;  // the runtime prints them
  const std::chrono::microseconds budget =
      (sim_.timeouts ? *sim_.timeouts : TimeoutsFromEnvironment(&ignored)).stream_sync;
  DeviceWatch watch(budget, std::chrono::steady_clock::now());
  const DumpRegion* region = hooks.collected_region;
  const DeviceExit exit = process_->Wait(
      [&]() -> std::optional<std::string> {
        std::optional<std::string> why =
            watch.Observe(SampleDevice(*flight_, region), std::chrono::steady_clock::now());
        if (why && process_->State() != 0) {
          absl::StrAppend(&*why, "; its state: ", std::string(1, process_->State()));
        }
        return why;
      },
      std::clamp<std::chrono::milliseconds>(
          std::chrono::duration_cast<std::chrono::milliseconds>(budget / 10),
          std::chrono::milliseconds(1), std::chrono::milliseconds(100)));
  return Ended(exit);
}

absl::Status IsolatedDevice::Ended(const DeviceExit& exit) {
  if (exit.no_watch) {
    error_ = absl::ResourceExhaustedError(
        "the device process could not start its watch thread (the system refused a thread: "
        "an address-space limit such as ulimit -v, or a limit on threads); nothing ran");
    return error_;
  }
  if (!exit.killed_by_host.empty()) {
    // A hang the device could not report: what it was running, from the
    // flight table; their outputs are recorded as the device's own hang
    // path records them (in-flight snapshots), when the session finishes.
    crash_ = AnalyzeDeviceCrash(exit, *flight_, *memory_, kernels_);
    std::string running;
    for (const auto& t : crash_->in_flight) {
      absl::StrAppend(&running, running.empty() ? "" : ", ", TaskIdHex(t->task.task_id));
    }
    hang_ = absl::StrCat("host watch: ", exit.killed_by_host,
                         "; the host killed it (SIGKILL); running tasks: ",
                         running.empty() ? "none" : running);
    PrintDumpLog(DumpLog::kError, *hang_);
    return absl::AbortedError(*hang_);
  }
  if (exit.reported) {
    v1::DeviceReport r;
    if (r.ParseFromString(exit.report)) {
      report_ = std::move(r);
      return DeviceStatusOf(report_->orchestration());
    }
  }
  crash_ = AnalyzeDeviceCrash(exit, *flight_, *memory_, kernels_);
  PrintDumpLog(DumpLog::kError, crash_->crash.description());
  return absl::AbortedError(crash_->crash.description());
}

DeviceProgress SampleDevice(const FlightTable& flight, const DumpRegion* collected) {
  DeviceProgress p;
  const abi::FlightHeader& h = flight.header();
  p.heartbeat = h.heartbeat.load(std::memory_order_relaxed);
  p.tasks_submitted = h.tasks_submitted.load(std::memory_order_relaxed);
  p.tasks_completed = h.tasks_completed.load(std::memory_order_relaxed);
  if (collected == nullptr) return p;
  for (uint32_t t = 0; t < collected->num_threads(); ++t) {
    const abi::ThreadState& st = collected->thread_state(t);
    p.records += st.records_written.load(std::memory_order_relaxed) +
                 st.dropped_records.load(std::memory_order_relaxed);
    p.host_behind = p.host_behind ||
                    st.ready.tail.value.load(std::memory_order_acquire) !=
                        st.ready.head.value.load(std::memory_order_acquire) ||
                    st.completed_payload_count.load(std::memory_order_acquire) <
                        st.published_payload_count.load(std::memory_order_acquire) ||
                    st.free.tail.value.load(std::memory_order_acquire) ==
                        st.free.head.value.load(std::memory_order_acquire);
  }
  return p;
}

void SetDeviceStatus(const absl::Status& s, v1::DeviceStatus* out) {
  out->set_code(static_cast<int>(s.code()));
  out->set_message(std::string(s.message()));
}

absl::Status DeviceStatusOf(const v1::DeviceStatus& s) {
  const int code = s.code();
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(absl::StrCat("the device reported status code ", code, ": ",
                                            s.message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), s.message());
}

void ReportRuntime(const SimRuntime& runtime, v1::DeviceReport* report) {
  v1::DeviceReport& r = *report;
  r.set_tasks_submitted(runtime.tasks_submitted());
  r.set_tasks_completed(runtime.tasks_completed());
  r.set_dump_skipped_tasks(runtime.dump_skipped_tasks());
  r.set_overflow_tasks(runtime.overflow_tasks());
  if (auto first = runtime.first_overflow_task()) {
    r.set_has_first_overflow_task(true);
    r.set_first_overflow_task(*first);
  }
  for (const std::string& line : runtime.dump_log()) r.add_dump_log(line);
  for (const std::string& w : runtime.warnings()) r.add_warnings(w);
  for (const StepLevel& l : runtime.step_levels()) {
    v1::DeviceReport::Level* e = r.add_step_levels();
    e->set_first_step(l.first_step);
    e->set_level(l.level);
    e->set_overflow(l.overflow);
    e->set_stats(static_cast<uint32_t>(l.stats));
    e->set_mode(static_cast<uint32_t>(l.mode));
  }
}

uint64_t HostGoneDrops(const DumpRegion& region) {
  uint64_t dropped = 0;
  for (uint32_t t = 0; t < region.num_threads(); ++t) {
    dropped += region.thread_state(t)
                   .dropped_by_cause[static_cast<uint32_t>(abi::DropCause::kHostGone)]
                   .load(std::memory_order_acquire);
  }
  return dropped;
}

void SayStoppedWithoutHost(const v1::DeviceReport& r, const DumpRegion* region) {
  if (region == nullptr) return;
  PrintDumpLog(DumpLog::kError,
               absl::StrCat("the device stopped without its host: ", r.tasks_completed(), " of ",
                            r.tasks_submitted(), " tasks completed; ", HostGoneDrops(*region),
                            " records dropped (host gone)"));
}

}  // namespace argsdump
