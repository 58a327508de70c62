// SimSession: one wiring of device, region, recorder, collector and sink
// (sdk/argsdump.h). sim_run's job (apps/sim_run/sim_job.cc) runs on it too.
//
// This file is the orchestration: the lifecycle (sdk/session_state.h) and
// the order in which the parts run. Each part is its own class: the setup
// (session_setup.h), the place (session_place.h), the dump and its sink
// (session_capture.h, session_sink.h), the device process
// (isolated_device.h), a crash's exception dumps (crash_readback.h) and
// the result (session_result.h).
#include <unistd.h>

#include <chrono>
#include <exception>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "sdk/exception_dump.h"
#include "device/sim/sim_runtime.h"
#include "format/names.h"
#include "proto/argsdump/v1/device_report.pb.h"
#include "sdk/argsdump.h"
#include "sdk/crash_readback.h"
#include "sdk/isolated_device.h"
#include "sdk/session_capture.h"
#include "sdk/session_log.h"
#include "sdk/session_place.h"
#include "sdk/session_result.h"
#include "sdk/session_setup.h"
#include "sdk/session_state.h"
#include "sdk/wiring.h"

namespace argsdump {
namespace {

using Orchestration = std::function<absl::Status(SimSession&)>;

// The orchestration function's status; an exception out of it is one too
// (on the device it must not unwind past the fork: the caller's code, the
// rest of a test suite, would run on in the device process), in either
// process, so the two behave alike.
absl::Status CallOrchestration(const Orchestration& orchestration, SimSession& session,
                               const char* where) {
  std::string why;
  try {
    return orchestration(session);
  } catch (const std::exception& e) {
    why = absl::StrCat(": ", e.what());
  } catch (...) {
    why = " (not a std::exception)";
  }
  const absl::Status fn =
      absl::UnknownError(absl::StrCat("RunDevice's function threw ", where, why));
  PrintDumpLog(DumpLog::kError, std::string(fn.message()));
  return fn;
}

}  // namespace

struct SimSession::Impl {
  Impl(const KernelRegistry& k, SessionOptions o, const SessionWiring& w)
      : kernels(k), options(std::move(o)), wiring(w), isolated(options.device_process) {}

  const KernelRegistry kernels;
  const SessionOptions options;
  const SessionWiring wiring;
  const bool isolated;  // options.device_process
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  SimSession* owner = nullptr;  // the session this is the Impl of

  // The parts, made at Open (the runtime: at Open, or in the device
  // process). Used by the thread that calls the session's methods.
  SessionSetup setup;
  SessionPlace place;
  CaptureLabels labels;
  std::unique_ptr<SessionCapture> capture;  // null: the dump is off
  std::unique_ptr<SimRuntime> runtime;
  std::unique_ptr<IsolatedDevice> device;   // device_process: the host's side
  std::vector<std::string> warnings;
  absl::Status dump_status;
  StepCount steps;
  SessionReport report;

  // Guards what other threads touch: the lifecycle, the exception dumps the
  // runtime's workers write, and (in the device process) the host watch's
  // view of the runtime.
  mutable std::mutex mu;
  SessionState state ABSL_GUARDED_BY(mu) = SessionState::kOpen;
  std::vector<std::string> exception_dumps ABSL_GUARDED_BY(mu);
  bool host_gone ABSL_GUARDED_BY(mu) = false;         // the device process: its host ended
  SimRuntime* abortable ABSL_GUARDED_BY(mu) = nullptr;  // the device process's runtime

  SessionState State() const {
    std::lock_guard<std::mutex> lock(mu);
    return state;
  }
  void Enter(SessionState next) {
    std::lock_guard<std::mutex> lock(mu);
    state = next;
  }
  absl::Status Check(SessionCall call) const { return CheckCall(State(), isolated, call); }
  bool Capturing() const { return capture != nullptr && !capture->abandoned(); }
  void Warn(const std::string& text) {
    PrintDumpLog(DumpLog::kWarning, text);
    warnings.push_back(text);
  }
  std::string Workload() const { return wiring.workload.empty() ? place.name : wiring.workload; }

  // Open's steps, in order.
  void SetUp();
  absl::Status StartCaptureOrGoWithout();
  absl::Status StartRuntime();
  std::function<void(const FailedTask&)> ExceptionDumpHook();
  // RunDevice, isolated: fork, collect, wait, and read how it ended.
  absl::Status RunIsolated(const Orchestration& orchestration);
  // The device process's side: the runtime, the orchestration, the report.
  std::string RunInDevice(const Orchestration& orchestration);
  void OnHostGone();
  // Finish's steps.
  void FromRuntime(SessionResult* result);
  void FromDevice(SessionResult* result);
  void WriteCrashDumps(SessionResult* result);
  absl::StatusOr<SessionResult> Finish();
};

// The configuration, the place, the labels.
void SimSession::Impl::SetUp() {
  setup = SessionSetup::Resolve(options, wiring);
  warnings = setup.warnings();
  const std::string test_case = RunningTestCase();
  place = PlaceSession(SessionBaseName(options.name, test_case), setup.WantsCapture(options),
                       setup.config().path, wiring, setup.job() ? &*setup.job() : nullptr);
  report.prefix = place.prefix;
  labels = SessionLabels(options, wiring, setup.config(), test_case);
}

// The region, recorder, collector and sink; a failure turns the dump off
// (or, strict, is the answer).
absl::Status SimSession::Impl::StartCaptureOrGoWithout() {
  if (!setup.WantsCapture(options)) return absl::OkStatus();
  SessionCapture::Context c;
  c.kernels = &kernels;
  c.options = &options;
  c.wiring = &wiring;
  c.config = &setup.config();
  c.place = place;
  c.labels = labels;
  c.job = setup.job();
  c.isolated = isolated;
  c.warn = [this](const std::string& w) { Warn(w); };
  capture = std::make_unique<SessionCapture>(std::move(c));
  absl::Status st = capture->Start(&report);
  if (st.ok()) return st;
  if (capture->region_failed()) {
    // An internal failure: an ERROR, and the run goes on without the dump.
    report.dump_off_reason = std::string(st.message());
    const std::string text = absl::StrCat(
        "the dump buffers cannot be allocated (", st.message(), "); the run goes on "
        "without the dump: lower arena_bytes / buffers_per_thread / records_per_buffer "
        "(sim_run: --arena-bytes, --buffers-per-thread, --records-per-buffer)");
    PrintDumpLog(DumpLog::kError, text);
    warnings.push_back(text);
  } else if (wiring.strict) {
    return st;
  } else {
    Warn(absl::StrCat("the dump is off for this session: ", st.message()));
    dump_status = st;
  }
  capture.reset();
  return absl::OkStatus();
}

std::function<void(const FailedTask&)> SimSession::Impl::ExceptionDumpHook() {
  return [this, workload = Workload()](const FailedTask& f) {
    auto dir = WriteExceptionDump(place.prefix, workload, f);
    std::lock_guard<std::mutex> lock(mu);
    if (dir.ok()) exception_dumps.push_back(*dir);
    // A dump that could not be written is said, and the run goes on stopping.
    PrintDumpLog(DumpLog::kError,
                 absl::StrCat("exception dump of task ", TaskIdHex(f.task_id),
                              dir.ok() ? absl::StrCat(" (its kernel failed): ", CapturePlace(*dir))
                                       : absl::StrCat(" failed: ", dir.status().message(),
                                                      "; the run stops without it")));
  };
}

// The device: the sim runtime with the dump's configuration and the
// exception dump (with device_process, made in the device process).
absl::Status SimSession::Impl::StartRuntime() {
  SimConfig sim = setup.RuntimeConfig(options, wiring);
  if (options.exception_dump) sim.exception_dump = ExceptionDumpHook();
  if (isolated) {
    auto made = IsolatedDevice::Create(sim, kernels);
    if (!made.ok()) return made.status();
    device = std::move(made).value();
    return absl::OkStatus();
  }
  runtime = std::make_unique<SimRuntime>(sim, kernels, capture ? capture->recorder() : nullptr);
  return runtime->Start();
}

absl::StatusOr<std::unique_ptr<SimSession>> SimSession::Open(const KernelRegistry& kernels,
                                                             SessionOptions options) {
  return Open(kernels, std::move(options), SessionWiring());
}

absl::StatusOr<std::unique_ptr<SimSession>> SimSession::Open(const KernelRegistry& kernels,
                                                             SessionOptions options,
                                                             const SessionWiring& wiring) {
  if (absl::Status st = CheckSessionOptions(options); !st.ok()) return st;
  auto impl = std::make_unique<Impl>(kernels, std::move(options), wiring);
  impl->SetUp();
  if (absl::Status st = impl->StartCaptureOrGoWithout(); !st.ok()) return st;
  if (absl::Status st = impl->StartRuntime(); !st.ok()) return st;
  return std::unique_ptr<SimSession>(new SimSession(std::move(impl)));
}

void SimSession::Impl::OnHostGone() {
  PrintDumpLog(DumpLog::kError,
               absl::StrCat("the host process (pid ", device->host_pid(),
                            ") is gone: the device stops (nothing more is dispatched; records "
                            "that would wait for the host are dropped, counted as host gone)"));
  if (capture != nullptr && capture->region() != nullptr) capture->region()->MarkHostGone();
  SimRuntime* r;
  {
    std::lock_guard<std::mutex> lock(mu);
    host_gone = true;
    r = abortable;
  }
  if (r != nullptr) r->Abort(absl::AbortedError("the host process is gone"));
}

std::string SimSession::Impl::RunInDevice(const Orchestration& orchestration) {
  Enter(SessionState::kInDevice);
  absl::Status started;
  {
    std::lock_guard<std::mutex> lock(mu);
    runtime = std::make_unique<SimRuntime>(device->sim(), kernels,
                                           capture ? capture->recorder() : nullptr);
    started = runtime->Start();
    abortable = runtime.get();
    if (host_gone) runtime->Abort(absl::AbortedError("the host process is gone"));
  }
  v1::DeviceReport r;
  // An exception out of the function must end here: unwinding past the
  // fork would run the caller's code (the rest of a test suite) in this
  // process. It is the function's status instead.
  const absl::Status fn =
      started.ok() ? CallOrchestration(orchestration, *owner, "on the device") : started;
  SetDeviceStatus(fn, r.mutable_orchestration());
  SetDeviceStatus(started.ok() ? runtime->Synchronize() : started, r.mutable_run_status());
  for (const std::string& w : warnings) r.add_warnings(w);
  ReportRuntime(*runtime, &r);
  r.set_steps_begun(steps.begun);
  if (steps.step) {
    r.set_has_step(true);
    r.set_step(*steps.step);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& d : exception_dumps) r.add_exception_dumps(d);
    r.set_host_gone(host_gone);
  }
  if (r.host_gone() && capture != nullptr) SayStoppedWithoutHost(r, capture->region());
  return r.SerializeAsString();
}

absl::Status SimSession::Impl::RunIsolated(const Orchestration& orchestration) {
  bool uncollected = false;
  IsolatedDevice::Hooks hooks;
  hooks.device = [this, &orchestration] { return RunInDevice(orchestration); };
  hooks.host_gone = [this] { OnHostGone(); };
  hooks.forked = [this, &uncollected] {
    Enter(SessionState::kDeviceForked);
    if (capture == nullptr) return absl::OkStatus();
    absl::Status st = capture->StartCollecting();
    if (!st.ok()) {
      // Nothing collects what the device records: it is stopped, and the
      // dump is off.
      uncollected = true;
      dump_status = st;
    }
    return st;
  };
  hooks.started = wiring.device_started;
  hooks.collected_region = capture ? capture->region() : nullptr;
  absl::Status ran = device->Run(hooks);
  if (uncollected) capture->Abandon();
  return ran;
}

SimSession::SimSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { impl_->owner = this; }

absl::Status SimSession::RunDevice(const Orchestration& orchestration) {
  Impl& s = *impl_;
  if (absl::Status st = s.Check(SessionCall::kRunDevice); !st.ok()) return st;
  if (s.isolated) return s.RunIsolated(orchestration);  // kDeviceForked once it forked
  if (s.State() == SessionState::kOpen && s.wiring.device_started) s.wiring.device_started();
  s.Enter(SessionState::kRanInProcess);
  return CallOrchestration(orchestration, *this, "in this process");
}

SimSession::~SimSession() {
  // On the device (a session destroyed in the forked child: exit() there
  // runs static destructors) the host finishes the session, not this copy.
  if (impl_ == nullptr) return;
  const SessionState state = impl_->State();
  if (state != SessionState::kFinished && state != SessionState::kInDevice) {
    impl_->Finish().IgnoreError();
  }
}

absl::StatusOr<Tensor> SimSession::Alloc(DataType dtype, const std::vector<uint32_t>& shape) {
  if (absl::Status st = impl_->Check(SessionCall::kAlloc); !st.ok()) return st;
  return impl_->runtime->Alloc(dtype, shape);
}

absl::StatusOr<uint64_t> SimSession::Submit(uint16_t func_id, CoreTaskArgs args) {
  return Submit(std::vector<uint16_t>{func_id}, std::move(args));
}

absl::StatusOr<uint64_t> SimSession::Submit(const std::vector<uint16_t>& func_ids,
                                            CoreTaskArgs args) {
  if (absl::Status st = impl_->Check(SessionCall::kSubmit); !st.ok()) return st;
  return impl_->runtime->Submit(func_ids, std::move(args));
}

absl::Status SimSession::BeginStep(uint32_t step) {
  Impl& s = *impl_;
  if (absl::Status st = s.Check(SessionCall::kBeginStep); !st.ok()) return st;
  const std::optional<uint32_t>& last = s.steps.step;
  const bool step0_used = !last && s.runtime->tasks_submitted() > 0;
  if ((last && step <= *last) || (step0_used && step == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("BeginStep(", step, "): step ",
                                                   last ? *last : 0,
                                                   " has begun already; steps only go forward"));
  }
  if (absl::Status st = s.runtime->WaitIdle(); !st.ok()) return st;
  if (step0_used) ++s.steps.begun;  // step 0 ran without a BeginStep
  if ((last || step0_used) && s.setup.PollFile()) s.runtime->SetDumpConfig(s.setup.config());
  s.runtime->BeginStep(step);
  s.steps.step = step;
  ++s.steps.begun;
  return absl::OkStatus();
}

void SimSession::SetDumpConfig(const DumpConfigEntry& api) {
  Impl& s = *impl_;
  if (absl::Status st = s.Check(SessionCall::kSetDumpConfig); !st.ok()) {
    PrintDumpLog(DumpLog::kWarning, st.ToString());
    return;
  }
  s.setup.SetApi(api, s.wiring.resolved.has_value());
  s.runtime->SetDumpConfig(s.setup.config());
}

absl::Status SimSession::Synchronize() {
  if (absl::Status st = impl_->Check(SessionCall::kSynchronize); !st.ok()) return st;
  return impl_->runtime->WaitIdle();
}

absl::StatusOr<SessionResult> SimSession::Finish() {
  if (absl::Status st = impl_->Check(SessionCall::kFinish); !st.ok()) return st;
  return impl_->Finish();
}

// What the in-process runtime did, into the result.
void SimSession::Impl::FromRuntime(SessionResult* result) {
  result->run_status = runtime->Synchronize();
  if (wiring.device_finished) wiring.device_finished();
  if (Capturing() && capture->region() != nullptr) {
    LogFlush(*capture->region(), &report, &warnings);
  }
  ApplyRuntime(*runtime, result, &report, &warnings, &steps);
  std::lock_guard<std::mutex> lock(mu);
  result->exception_dumps = exception_dumps;
}

// What the device process reported (or, when it died, what the flight
// table says), into the result.
void SimSession::Impl::FromDevice(SessionResult* result) {
  if (wiring.device_finished) wiring.device_finished();
  if (Capturing() && capture->region() != nullptr) {
    LogFlush(*capture->region(), &report, &warnings);
  }
  if (device->report()) {
    ApplyDeviceReport(*device->report(), result, &report, &warnings, &steps);
  } else if (device->crash()) {
    const StepLevel start = StartLevel(setup.config(), capture ? capture->region() : nullptr,
                                       options.dynamic_switch);
    ApplyDeviceLoss(*device->crash(), device->hang(), start, result, &report, &steps);
  } else {
    result->run_status = !device->error().ok()
                             ? device->error()
                             : absl::FailedPreconditionError("the device process did not run");
  }
}

// A crash (not a hang): the exception dumps of the tasks it names, their
// inputs read back from the run's capture.
void SimSession::Impl::WriteCrashDumps(SessionResult* result) {
  if (!options.exception_dump) return;
  CrashDumpRequest request;
  request.prefix = place.prefix;
  request.workload = Workload();
  request.snapshot_inputs = setup.config().snapshot_inputs;
  if (capture != nullptr) request.capture = capture->Readback(result->wrote_capture);
  for (std::string& dir : WriteCrashExceptionDumps(*device->crash(), request)) {
    result->exception_dumps.push_back(std::move(dir));
  }
}

absl::StatusOr<SessionResult> SimSession::Impl::Finish() {
  // A session with device_process and no device work: an empty run.
  if (isolated && State() == SessionState::kOpen) {
    RunIsolated([](SimSession&) { return absl::OkStatus(); }).IgnoreError();
  }
  Enter(SessionState::kFinished);
  SessionResult r;
  r.name = place.name;
  if (isolated) {
    FromDevice(&r);
  } else {
    FromRuntime(&r);
  }
  r.dump = setup.config();
  if (setup.job()) {
    r.job = setup.job()->job();
    r.rank = setup.job()->rank();
    r.world_size = setup.job()->world_size();
  }
  r.steps = steps.begun;
  r.kernels = KernelNames(kernels);
  const DeviceCrashAnalysis* crash = device && device->crash() ? &*device->crash() : nullptr;
  const bool hang = device != nullptr && device->hang().has_value();
  const bool crashed = crash != nullptr && !hang;
  if (Capturing()) capture->Finish({crash, hang, steps.begun}, &labels, &report, &r, &dump_status);
  if (crashed) WriteCrashDumps(&r);
  if (capture) capture->UploadExceptionDumps(labels, crashed ? &crash->crash : nullptr, &r);
  if (place.claimed) ::rmdir(place.prefix.c_str());  // only if nothing went in
  r.dump_status = dump_status;
  r.labels = {labels.begin(), labels.end()};
  if (capture != nullptr) capture->Locate(report, &r);
  CopyCounts(report, &r);
  r.warnings = warnings;
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!dump_status.ok()) {
    // A dead device is the run's answer (its result says what the capture
    // kept); only a run that otherwise worked fails on the dump.
    if (wiring.strict && !r.device_crashed) {
      if (capture == nullptr || capture->sink().remote == nullptr) return dump_status;
      return absl::Status(dump_status.code(),
                          absl::StrCat(dump_status.message(), " (", report.sent_records,
                                       " records sent, ", report.acked_records,
                                       " acknowledged as durable: the capture holds those)"));
    }
    PrintDumpLog(DumpLog::kWarning, absl::StrCat("session ", place.name,
                                                 ": the capture is incomplete: ",
                                                 dump_status.message()));
  }
  if (wiring.print_summary && Capturing()) {
    PrintDumpLog(DumpLog::kInfo, SessionSummary(place.name, r));
  }
  return r;
}

const std::string& SimSession::name() const { return impl_->place.name; }
const DumpConfig& SimSession::dump_config() const { return impl_->setup.config(); }

std::string SimSession::capture_location() const {
  const SessionCapture* capture = impl_->capture.get();
  if (capture != nullptr && !capture->sink().remote_name.empty()) {
    return absl::StrCat(capture->sink().remote_server, "/", capture->sink().remote_name);
  }
  return impl_->place.dump_dir;
}

SimRuntime* SessionWiring::Runtime(SimSession& session) { return session.impl_->runtime.get(); }

const SessionReport& SessionWiring::Report(const SimSession& session) {
  return session.impl_->report;
}

SessionProgress SessionWiring::Progress(const SimSession& session) {
  const SimSession::Impl& s = *session.impl_;
  SessionProgress p;
  if (s.runtime != nullptr) {
    p.tasks_submitted = s.runtime->tasks_submitted();
    p.tasks_completed = s.runtime->tasks_completed();
  } else if (s.device != nullptr) {
    const abi::FlightHeader& h = s.device->flight().header();
    p.tasks_submitted = h.tasks_submitted.load(std::memory_order_relaxed);
    p.tasks_completed = h.tasks_completed.load(std::memory_order_relaxed);
  }
  if (s.capture != nullptr) {
    const CollectorStats c = s.capture->collector().stats_snapshot();
    p.records = c.records;
    p.payload_bytes = c.payload_bytes;
  }
  return p;
}

}  // namespace argsdump
