// SimSession: one wiring of device, region, recorder, collector and sink
// (sdk/argsdump.h). sim_run's job (apps/sim_run/sim_job.cc) runs on it too.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <mutex>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "collector/collector.h"
#include "sdk/exception_dump.h"
#include "collector/refused_record_dump.h"
#include "collector/grpc_sink.h"
#include "collector/local_sink.h"
#include "device/recorder.h"
#include "device/region.h"
#include "device/sim/sim_runtime.h"
#include "proto/argsdump/v1/device_report.pb.h"
#include "sdk/argsdump.h"
#include "sdk/device_crash.h"
#include "sdk/device_process.h"
#include "sdk/device_watch.h"
#include "sdk/wiring.h"
#include "store/capture_store.h"
#include "format/kernel_table.h"
#include "format/names.h"
#include "format/record.h"

extern char* program_invocation_short_name;

namespace argsdump {
namespace {

void Print(DumpLog::Severity severity, const std::string& text) {
  std::fprintf(stderr, "%s\n", FormatDumpLog({severity, text}).c_str());
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

bool HoldsCapture(const std::string& dir) {
  struct stat st;
  return ::stat((dir + "/" + kManifestName).c_str(), &st) == 0 ||
         ::stat((dir + "/" + kJournalName).c_str(), &st) == 0;
}

// A name as a folder (and capture) name: [A-Za-z0-9._-], the rest '_', no
// leading '.', at most 96 characters.
std::string FolderName(const std::string& s) {
  std::string out = SafeFileName(s);
  while (!out.empty() && out.front() == '.') out.erase(out.begin());  // no "." or ".."
  if (out.size() > 96) out.resize(96);
  return out.empty() ? "session" : out;
}

v1::ArgDirection ToProtoDirection(ArgDirection d) {
  switch (d) {
    case ArgDirection::kIn: return v1::ARG_DIRECTION_IN;
    case ArgDirection::kOut: return v1::ARG_DIRECTION_OUT;
    case ArgDirection::kInOut: return v1::ARG_DIRECTION_INOUT;
    case ArgDirection::kScalar: return v1::ARG_DIRECTION_SCALAR;
  }
  return v1::ARG_DIRECTION_UNSPECIFIED;
}

// The capture's kernel table (CaptureInfo.kernels) from the session's
// kernels. A kernel the table cannot hold (format/kernel_table.h: a name
// or type too long, not UTF-8, with a control character; past the table's
// size) is left out with a WARNING: its records keep their func id.
void FillKernelTable(const KernelRegistry& kernels, v1::CaptureInfo* info,
                     const std::function<void(const std::string&)>& warn) {
  info->clear_kernels();
  for (size_t f = 0; f < kernels.size(); ++f) {
    const KernelInfo* k = kernels.Find(static_cast<uint16_t>(f));
    if (k == nullptr) continue;
    if (info->kernels_size() >= kMaxKernels) {
      warn(absl::StrCat("the capture's kernel table holds ", kMaxKernels, " kernels; ",
                        kernels.size() - f, " more are known by func id only"));
      return;
    }
    v1::Kernel* out = info->add_kernels();
    out->set_func_id(k->func_id);
    out->set_name(k->name);
    out->set_type(k->type);
    for (size_t a = 0; a < k->signature.size(); ++a) {
      v1::KernelArg* arg = out->add_signature();
      arg->set_direction(ToProtoDirection(k->signature[a]));
      if (a < k->dtypes.size() && k->dtypes[a]) arg->set_dtype(ToProtoDType(*k->dtypes[a]));
    }
    google::protobuf::RepeatedPtrField<v1::Kernel> one;
    *one.Add() = *out;
    if (absl::Status s = CheckKernelTable(one); !s.ok()) {
      warn(absl::StrCat("kernel ", k->func_id, " is left out of the capture's kernel table (",
                        s.message().substr(s.message().find(':') + 2),
                        "); its records keep their func id"));
      info->mutable_kernels()->RemoveLast();
    }
  }
}

std::string Stamp(const char* format) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), format, std::localtime(&now));
  return stamp;
}

// Session names taken in this process (several sessions of one test case).
std::mutex names_mu;
std::set<std::string>& TakenNames() {
  static auto* names = new std::set<std::string>;
  return *names;
}

// The first of name, name_2, name_3, ... no session of this process took
// and whose folder under `root` holds no capture.
std::string UniqueName(const std::string& root, const std::string& name) {
  std::lock_guard<std::mutex> lock(names_mu);
  for (int k = 1;; ++k) {
    const std::string candidate = k == 1 ? name : absl::StrCat(name, "_", k);
    if (TakenNames().count(candidate) > 0) continue;
    if (!root.empty() && HoldsCapture(absl::StrCat(root, "/", candidate, "/args_dump"))) continue;
    TakenNames().insert(candidate);
    return candidate;
  }
}

// Claims a folder <root>/<name>, <root>/<name>_2, ...: the first that no
// session of this process took and that mkdir creates, so two processes
// naming it in the same second do not share it. `claimed` tells whether a
// folder was created (it is removed at Finish if it stays empty); when
// `root` cannot hold one, the name is returned unclaimed and writing the
// capture says why.
std::string ClaimFolder(const std::string& root, const std::string& name, bool* claimed) {
  *claimed = false;
  if (!CreateDirectories(root).ok()) return UniqueName(root, name);
  std::lock_guard<std::mutex> lock(names_mu);
  for (int k = 1;; ++k) {
    const std::string candidate = k == 1 ? name : absl::StrCat(name, "_", k);
    if (TakenNames().count(candidate) > 0) continue;
    if (::mkdir(absl::StrCat(root, "/", candidate).c_str(), 0755) != 0) {
      if (errno == EEXIST && k < 100000) continue;
      return candidate;  // not claimed: writing there will say why
    }
    TakenNames().insert(candidate);
    *claimed = true;
    return candidate;
  }
}

// The capture's name on a service: <target>.<session>.<stamp>.<tag>, in
// [A-Za-z0-9._-], at most 128 characters (unique per run).
std::string RemoteName(const std::string& target, const std::string& session) {
  std::string t = target;
  if (t.rfind("//", 0) == 0) t = t.substr(2);
  for (char& c : t) {
    if (c == ':') c = '.';
  }
  // Seconds and a random tag: test sandboxes reuse pids, and
  // --runs_per_test starts the same test several times at once.
  std::random_device random;
  const uint32_t tag = random();
  std::string name = absl::StrCat(t.empty() ? "" : FolderName(t) + ".", session, ".",
                                  Stamp("%Y%m%d-%H%M%S"), ".",
                                  absl::Hex(tag, absl::kZeroPad8));
  if (name.size() > 128) {
    const size_t hash = std::hash<std::string>()(name);
    name = absl::StrCat(name.substr(0, 111), ".", absl::Hex(hash, absl::kZeroPad16));
  }
  return name;
}

void SetLabel(std::vector<std::pair<std::string, std::string>>* labels, const std::string& key,
              const std::string& value) {
  for (auto& [k, v] : *labels) {
    if (k == key) {
      v = value;
      return;
    }
  }
  labels->emplace_back(key, value);
}

// What the dump runs with, for the capture (CaptureInfo.scope).
v1::DumpScope DumpScopeOf(const DumpConfig& config) {
  v1::DumpScope scope;
  scope.set_level(static_cast<uint32_t>(config.level));
  scope.set_overflow(config.overflow);
  scope.set_stats(StatsModeName(config.stats));
  scope.set_mode(DumpModeName(config.mode));
  return scope;
}

}  // namespace

struct SimSession::Impl {
  KernelRegistry kernels;
  SessionOptions options;
  SessionWiring wiring;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  // The configuration and where it came from (SetDumpConfig re-resolves).
  DumpConfig config;
  std::vector<DumpConfigSource> above_file;  // command line, API, environment
  std::string config_file;
  std::unique_ptr<DumpConfigWatcher> watcher;
  std::optional<int> default_level;

  std::string name;         // the session's unique name
  std::string prefix;       // <root>/<name>: the capture's parent
  bool prefix_claimed = false;  // created by this session (removed if left empty)
  std::string dump_dir;     // <prefix>/args_dump
  std::string remote_name, remote_server, remote_token;
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<std::string> warnings;
  absl::Status dump_status;

  std::unique_ptr<RefusedRecordDump> refused_records;  // outlives the collector
  std::unique_ptr<Collector> collector;
  const DumpRegion* region = nullptr;
  bool region_failed = false;  // the region could not be had: run without dump
  std::unique_ptr<DumpRecorder> recorder;
  std::unique_ptr<CaptureSink> sink;
  LocalSink* local_sink = nullptr;
  GrpcSink* remote_sink = nullptr;
  std::unique_ptr<SimRuntime> runtime;
  bool capture = false;

  // The device in its own process (options.device_process): the shared
  // device memory and flight table are made at Open, the runtime only in
  // the forked child (in_device there), the sink once it was forked.
  bool isolated = false;
  bool in_device = false;      // this is the device process
  bool device_ran = false;     // RunDevice was called
  bool collecting = false;     // the collector was started
  absl::Status device_error;   // why the device process could not be started
  SimConfig sim;               // the runtime's configuration (made at Open)
  v1::CaptureInfo info;        // the capture's, for a sink made after the fork
  std::unique_ptr<DeviceMemory> memory;
  std::unique_ptr<FlightTable> flight;
  std::unique_ptr<DeviceProcess> device;
  std::optional<v1::DeviceReport> device_report;  // what the device sent
  std::optional<DeviceCrashAnalysis> crash;       // how it died, if it did
  // The host's watch found it hung and killed it: why (crash then holds
  // what the flight table says, but the run is a hang, not a crash).
  std::optional<std::string> hang;
  SimSession* owner = nullptr;  // the session this is the Impl of
  std::mutex device_mu;        // the child: runtime vs. the host watch
  bool host_gone = false;      // the child: the host process ended (device_mu)
  pid_t host_pid = 0;          // the process that forked the device

  std::mutex exception_mu;
  std::vector<std::string> exception_dumps;

  std::optional<uint32_t> step;  // the last step begun (nullopt: none yet)
  uint32_t steps_begun = 0;
  bool finished = false;
  SessionReport report;

  void Warn(const std::string& text) {
    Print(DumpLog::kWarning, text);
    warnings.push_back(text);
  }
  void Resolve(std::vector<DumpLog>* logs);
  // The dump as it started (a device that died reported no steps): the
  // region's level, or 0 when only the overflow check was on.
  StepLevel StartLevel() const {
    const bool overflow_only = config.level == 0 && config.overflow && !options.dynamic_switch;
    const int level = region == nullptr || overflow_only ? 0 : static_cast<int>(region->level());
    return {0, static_cast<uint32_t>(level), region != nullptr && config.overflow, config.stats,
            config.mode};
  }
  absl::Status StartCapture();
  // Open's steps, in order.
  void Configure();
  void Place(const std::string& test_case);
  void Label(const std::string& test_case);
  absl::Status StartCaptureOrGoWithout();
  absl::Status StartRuntime();
  // The sink and the collector's threads (after the fork, when isolated).
  absl::Status StartCollecting();
  absl::Status MakeSink();
  // The device's progress counters now (the host's watch samples them).
  DeviceProgress SampleDevice() const;
  // RunDevice, isolated: fork, collect, wait, and read how it ended.
  absl::Status RunIsolated(const std::function<absl::Status(SimSession&)>& orchestration,
                           SimSession& session);
  // The child's side: the runtime, the orchestration, the report.
  std::string RunInDevice(const std::function<absl::Status(SimSession&)>& orchestration,
                          SimSession& session);
  void OnHostGone();
  // After a crash, before Export: the running tasks' snapshots and the
  // capture's device_crash; after Export: the exception dumps.
  absl::Status RecordCrash();
  void WriteCrashDumps(SessionResult* result);
  // Streaming: each exception dump also goes to the service, as a capture
  // of its own (it stays in the local folder too).
  void UploadExceptionDumps(SessionResult* result);
  void FromDevice(SessionResult* result);
  // Finish's steps.
  void FinishCapture(SessionResult* result);
  void CopyCounts(SessionResult* result) const;
  // Seed 000's dump_args_flush line, per recording thread, once the device
  // flushed: what each wrote and lost (ERROR for drops, WARNING for cuts).
  void LogFlush();
  absl::StatusOr<SessionResult> Finish();
};

void SimSession::Impl::Resolve(std::vector<DumpLog>* logs) {
  config = ResolveDumpSources(above_file, watcher.get(), default_level, logs);
}

namespace {

// SessionOptions within their ranges; InvalidArgument naming the field.
absl::Status CheckOptions(const SessionOptions& options) {
  struct Range {
    const char* name;
    uint64_t value, min, max;
  };
  const Range ranges[] = {
      {"scheduler_threads", options.scheduler_threads, 1, kMaxDumpThreads},
      {"worker_threads", options.worker_threads, 1, 256},
      {"max_inflight_per_scheduler", options.max_inflight_per_scheduler, 1, 1 << 16},
      {"records_per_buffer", options.records_per_buffer, 1, kMaxRecordsPerBuffer},
      {"buffers_per_thread", options.buffers_per_thread, 1, kMaxBuffersPerThread},
      {"ready_queue_depth", options.ready_queue_depth, 1, 1 << 16},
      {"arena_bytes", options.arena_bytes, 64, uint64_t{1} << 40},
      {"wait_bound_ms", options.wait_bound_ms, 1, 1u << 30},
      {"drain_threads", options.drain_threads, 1, 64},
      {"collector_shards", options.collector_shards, 1, 64},
  };
  for (const Range& r : ranges) {
    if (r.value < r.min || r.value > r.max) {
      return absl::InvalidArgumentError(absl::StrCat("SessionOptions.", r.name, ": ", r.value,
                                                     " is outside ", r.min, "..", r.max));
    }
  }
  if (options.connect_timeout.count() < 0) {
    return absl::InvalidArgumentError("SessionOptions.connect_timeout: negative");
  }
  if (options.capture_retry_deadline.count() < 0) {
    return absl::InvalidArgumentError("SessionOptions.capture_retry_deadline: negative");
  }
  return absl::OkStatus();
}

}  // namespace

// The configuration: the command line > API > environment > file; its
// warnings printed and kept.
void SimSession::Impl::Configure() {
  Impl& s = *this;
  std::vector<DumpLog> logs;
  if (wiring.resolved) {
    s.config = *wiring.resolved;
  } else {
    // The one resolution sim_run uses too (device/dump_config.h).
    CommandLineDump cli = CommandLineDumpFlags();
    DumpEntryPoints points;
    points.command_line = cli.entry;
    points.command_line_warnings = cli.warnings;
    points.api = s.options.dump;
    points.environment = DumpEnvironment();
    points.config_file = !cli.config_file.empty() ? cli.config_file : s.options.config_file;
    points.default_level = cli.default_level;
    DumpResolution r = ResolveDumpEntryPoints(points, &logs);
    s.config = r.config;
    s.above_file = std::move(r.above_file);
    s.config_file = r.config_file;
    s.watcher = std::move(r.watcher);
    s.default_level = r.default_level;
  }
  for (const DumpLog& l : logs) {
    Print(l.severity, l.text);
    if (l.severity != DumpLog::kInfo) s.warnings.push_back(l.text);
  }

}

// The capture's name and folder.
void SimSession::Impl::Place(const std::string& test_case) {
  Impl& s = *this;
  std::string base = s.options.name;
  if (base.empty()) base = test_case;
  if (base.empty()) base = program_invocation_short_name;
  s.capture = s.config.level > 0 || s.options.dynamic_switch || s.config.overflow;
  if (!wiring.output_prefix.empty() && !wiring.claim_output_prefix) {
    s.name = base;
    s.prefix = wiring.output_prefix;
  } else if (!wiring.output_prefix.empty()) {
    // A default prefix: it, or a sibling _2, _3, ... (only a session that
    // may write claims a folder).
    const size_t slash = wiring.output_prefix.find_last_of('/');
    const std::string root =
        slash == std::string::npos ? "." : wiring.output_prefix.substr(0, slash);
    const std::string leaf = wiring.output_prefix.substr(slash + 1);
    const std::string taken = s.capture ? ClaimFolder(root, leaf, &s.prefix_claimed) : leaf;
    s.name = base;
    s.prefix = slash == std::string::npos ? taken : absl::StrCat(root, "/", taken);
  } else {
    std::string root = s.config.path;
    std::string name = FolderName(base);
    if (root.empty()) root = Env("TEST_UNDECLARED_OUTPUTS_DIR");
    if (root.empty()) {
      const std::string cwd = Env("BUILD_WORKING_DIRECTORY");
      root = cwd.empty() ? "outputs" : cwd + "/outputs";
      name = absl::StrCat(name, "_", Stamp("%Y%m%d_%H%M%S"));
    }
    s.name = s.capture ? ClaimFolder(root, name, &s.prefix_claimed) : UniqueName(root, name);
    s.prefix = absl::StrCat(root, "/", s.name);
  }
  s.report.prefix = s.prefix;
  s.dump_dir = s.prefix + "/args_dump";

}

// Labels: the test's identity, then the configuration's, then the code's.
void SimSession::Impl::Label(const std::string& test_case) {
  Impl& s = *this;
  const bool under_test = !Env("TEST_TARGET").empty();
  if (wiring.test_labels && under_test) {
    SetLabel(&s.labels, "target", Env("TEST_TARGET"));
    if (!test_case.empty()) SetLabel(&s.labels, "test_case", test_case);
    if (!Env("TEST_SHARD_INDEX").empty()) SetLabel(&s.labels, "shard", Env("TEST_SHARD_INDEX"));
  }
  for (const auto& [k, v] : s.config.labels) SetLabel(&s.labels, k, v);
  for (const auto& [k, v] : s.options.labels) SetLabel(&s.labels, k, v);

}

// The region, recorder, collector and sink; a failure turns the dump off
// (or, strict, is the answer).
absl::Status SimSession::Impl::StartCaptureOrGoWithout() {
  Impl& s = *this;
  if (s.capture) {
    if (absl::Status st = s.StartCapture(); !st.ok()) {
      if (s.region_failed) {
        // An internal failure (seed 003): an ERROR, and the run goes on
        // without the dump.
        s.report.dump_off_reason = std::string(st.message());
        const std::string text = absl::StrCat(
            "the dump buffers cannot be allocated (", st.message(), "); the run goes on "
            "without the dump: lower arena_bytes / buffers_per_thread / records_per_buffer "
            "(sim_run: --arena-bytes, --buffers-per-thread, --records-per-buffer)");
        Print(DumpLog::kError, text);
        s.warnings.push_back(text);
      } else if (wiring.strict) {
        return st;
      } else {
        s.Warn(absl::StrCat("the dump is off for this session: ", st.message()));
        s.dump_status = st;
      }
      s.capture = false;
      s.sink.reset();
      s.recorder.reset();
      s.collector.reset();
    }
  }

  return absl::OkStatus();
}

// The device: the sim runtime with the dump's configuration and the
// exception dump.
absl::Status SimSession::Impl::StartRuntime() {
  Impl& s = *this;
  SimConfig sim;
  if (wiring.sim) {
    sim = *wiring.sim;
  } else {
    sim.scheduler_threads = s.options.scheduler_threads;
    sim.worker_threads = s.options.worker_threads;
    sim.max_inflight_per_scheduler = s.options.max_inflight_per_scheduler;
  }
  sim.dump = s.config;
  if (s.options.exception_dump) {
    Impl* self = &s;
    const std::string workload = wiring.workload.empty() ? s.name : wiring.workload;
    sim.exception_dump = [self, workload](const FailedTask& f) {
      auto dir = WriteExceptionDump(self->prefix, workload, f);
      std::lock_guard<std::mutex> lock(self->exception_mu);
      if (dir.ok()) {
        self->exception_dumps.push_back(*dir);
        Print(DumpLog::kError, absl::StrCat("exception dump of task ", TaskIdHex(f.task_id),
                                            " (its kernel failed): ", CapturePlace(*dir)));
      } else {
        // Internal failure: say so and go on stopping the run.
        Print(DumpLog::kError, absl::StrCat("exception dump of task ", TaskIdHex(f.task_id),
                                            " failed: ", dir.status().message(),
                                            "; the run stops without it"));
      }
    };
  }
  if (s.isolated) {
    // Device memory and the flight table outlive the device process: made
    // here, before the fork; the runtime is made in the child.
    auto memory = DeviceMemory::Create();
    if (!memory.ok()) return memory.status();
    auto flight = FlightTable::Create(sim.scheduler_threads, sim.max_inflight_per_scheduler,
                                      sim.worker_threads);
    if (!flight.ok()) return flight.status();
    s.memory = std::move(memory).value();
    s.flight = std::move(flight).value();
    sim.memory = s.memory.get();
    sim.flight = s.flight.get();
    s.sim = sim;
    return absl::OkStatus();
  }
  s.runtime = std::make_unique<SimRuntime>(sim, s.kernels, s.recorder.get());
  return s.runtime->Start();
}

absl::StatusOr<std::unique_ptr<SimSession>> SimSession::Open(const KernelRegistry& kernels,
                                                             SessionOptions options) {
  return Open(kernels, std::move(options), SessionWiring());
}

absl::StatusOr<std::unique_ptr<SimSession>> SimSession::Open(const KernelRegistry& kernels,
                                                             SessionOptions options,
                                                             const SessionWiring& wiring) {
  if (absl::Status st = CheckOptions(options); !st.ok()) return st;
  auto impl = std::make_unique<Impl>();
  impl->kernels = kernels;
  impl->options = std::move(options);
  impl->wiring = wiring;
  impl->isolated = impl->options.device_process;
  impl->Configure();
  const std::string test_case = RunningTestCase();
  impl->Place(test_case);
  impl->Label(test_case);
  if (absl::Status st = impl->StartCaptureOrGoWithout(); !st.ok()) return st;
  if (absl::Status st = impl->StartRuntime(); !st.ok()) return st;
  return std::unique_ptr<SimSession>(new SimSession(std::move(impl)));
}

absl::Status SimSession::Impl::StartCapture() {
  DumpRegionConfig rc;
  if (wiring.region) {
    rc = *wiring.region;
  } else {
    rc.records_per_buffer = options.records_per_buffer;
    rc.buffers_per_thread = options.buffers_per_thread;
    rc.ready_queue_depth = options.ready_queue_depth;
    rc.arena_bytes = options.arena_bytes;
    rc.wait_bound_ms = options.wait_bound_ms;
  }
  const int region_level = config.level > 0 ? config.level : wiring.dynamic_level;
  rc.level = static_cast<abi::DumpLevel>(region_level);
  rc.num_threads = wiring.sim ? wiring.sim->scheduler_threads : options.scheduler_threads;
  // Records the collector refuses are corrupt data: saved like an exception.
  if (options.exception_dump) {
    refused_records = std::make_unique<RefusedRecordDump>(RefusedRecordDumpOptions{prefix});
  }
  collector = std::make_unique<Collector>(
      CollectorOptions{wiring.platform, options.drain_threads, options.collector_shards,
                       refused_records.get()});
  auto region = collector->Initialize(rc);
  if (!region.ok()) {
    region_failed = region.status().code() == absl::StatusCode::kResourceExhausted;
    return region.status();
  }
  this->region = *region;
  info.Clear();
  info.set_name(wiring.workload.empty() ? name : wiring.workload);
  info.set_level(static_cast<v1::DumpLevel>(region_level));
  *info.mutable_scope() = DumpScopeOf(config);
  info.set_platform(PlatformName(wiring.platform));
  for (const auto& [k, v] : labels) (*info.mutable_labels())[k] = v;
  FillKernelTable(kernels, &info, [this](const std::string& w) { Warn(w); });
  // A gRPC channel starts threads: an isolated session makes that sink
  // once the device process was forked.
  if (!isolated || config.capture_server.empty()) {
    if (absl::Status st = MakeSink(); !st.ok()) return st;
  }
  recorder = std::make_unique<DumpRecorder>(**region);
  report.dump_log.push_back(absl::StrCat(
      "dump buffers created: ", rc.num_threads, " recording threads x (", rc.buffers_per_thread,
      " buffers of ", rc.records_per_buffer, " records + a ", rc.arena_bytes,
      "-byte payload arena) for recording at level ", region_level, "; the dump runs at ",
      config.DescribeScope()));
  Print(DumpLog::kInfo, report.dump_log.back());
  if (isolated) return absl::OkStatus();  // StartCollecting, after the fork
  return StartCollecting();
}

absl::Status SimSession::Impl::StartCollecting() {
  if (sink == nullptr) {
    if (absl::Status st = MakeSink(); !st.ok()) return st;
  }
  absl::Status started = collector->Start(sink.get());
  collecting = started.ok();
  return started;
}

// The sink: the capture service's when one is configured and reachable,
// else the local store.
absl::Status SimSession::Impl::MakeSink() {
  v1::CaptureInfo info = this->info;
  if (!config.capture_server.empty()) {
    GrpcSinkOptions g;
    g.target = config.capture_server;
    const size_t slash = prefix.find_last_of('/');
    g.capture = !wiring.capture_name.empty() ? wiring.capture_name
                : !wiring.output_prefix.empty()
                    ? (slash == std::string::npos ? prefix : prefix.substr(slash + 1))
                    : RemoteName(wiring.test_labels ? Env("TEST_TARGET") : "", name);
    // A name the service would refuse (its rule, checked here before any
    // wait for the service): a WARNING and a name it takes.
    if (absl::Status valid = ValidateCaptureName(g.capture); !valid.ok()) {
      if (wiring.strict) {
        return absl::InvalidArgumentError(
            absl::StrCat("capture name '", g.capture, "': ", valid.message()));
      }
      const std::string usable = RemoteName(wiring.test_labels ? Env("TEST_TARGET") : "", name);
      Warn(absl::StrCat("capture name '", g.capture, "' cannot be used on the capture service (",
                        valid.message(), "); the capture is named '", usable, "' instead"));
      g.capture = usable;
    }
    info.set_name(g.capture);
    g.info = info;
    g.payload_dedup = config.dedup;
    g.auth_token = wiring.auth_token;
    if (g.auth_token.empty() && !config.auth_token_file.empty()) {
      // Checked when the configuration was resolved; unreadable now: none.
      g.auth_token = ReadTokenFile(config.auth_token_file).value_or("");
    }
    if (!wiring.strict) g.connect_timeout = options.connect_timeout;
    g.retry_deadline = options.capture_retry_deadline;
    // A service that lost the capture (deleted while it was down): what it
    // had not acknowledged is kept here instead.
    g.fallback = [this, info = g.info]() -> absl::StatusOr<std::unique_ptr<CaptureSink>> {
      auto local = LocalSink::Create(dump_dir, info,
                                     LocalSinkOptions{options.keep_journal, config.dedup});
      if (!local.ok()) return local.status();
      return std::unique_ptr<CaptureSink>(std::move(local).value());
    };
    auto remote = GrpcSink::Connect(g);
    // A name another capture holds: the first free <name>_2, _3, ..., with
    // a WARNING naming both (as a local capture takes a fresh folder).
    const std::string wanted = g.capture;
    for (int k = 2; k <= 100 && !remote.ok() &&
                    remote.status().code() == absl::StatusCode::kAlreadyExists;
         ++k) {
      const std::string suffix = absl::StrCat("_", k);
      g.capture = absl::StrCat(wanted.substr(0, 128 - suffix.size()), suffix);
      g.info.set_name(g.capture);
      remote = GrpcSink::Connect(g);
      if (remote.ok()) {
        Warn(absl::StrCat("capture service ", config.capture_server, ": capture name '", wanted,
                          "' is taken; the capture is named '", g.capture, "' instead"));
      }
    }
    if (remote.ok()) {
      remote_token = g.auth_token;
      remote_name = g.capture;
      remote_server = config.capture_server;
      remote_sink = remote->get();
      sink = std::move(remote).value();
      Print(DumpLog::kInfo, absl::StrCat("capture service ", remote_server, ": capture '",
                                         remote_name, "' opened; streaming to it"));
    } else if (wiring.strict) {
      return remote.status();
    } else {
      Warn(absl::StrCat("capture service ", config.capture_server,
                        remote.status().code() == absl::StatusCode::kUnavailable ||
                                remote.status().code() == absl::StatusCode::kDeadlineExceeded
                            ? " cannot be reached ("
                            : " refused the capture (",
                        remote.status().message(), "); the capture is kept locally in ",
                        CapturePlace(dump_dir)));
    }
  }
  if (sink == nullptr) {
    auto local = LocalSink::Create(dump_dir, info,
                                   LocalSinkOptions{options.keep_journal, config.dedup});
    if (!local.ok()) return local.status();
    local_sink = local->get();
    sink = std::move(local).value();
  }
  return absl::OkStatus();
}

void SimSession::Impl::LogFlush() {
  if (region == nullptr) return;
  // Each cause, and what to raise against it (seed 000, 7.5).
  static constexpr const char* kCauses[][2] = {
      {"ready queue full", "ready_queue_depth (--ready-queue-depth)"},
      {"free queue empty", "buffers_per_thread (--buffers-per-thread)"},
      {"arena ack timeout", "arena_bytes (--arena-bytes)"},
      {"flush timeout", "ready_queue_depth (--ready-queue-depth)"},
      {"host gone", "nothing (the host process ended)"}};
  static_assert(sizeof(kCauses) / sizeof(kCauses[0]) == abi::kDropCauseCount);
  uint64_t written = 0, dropped = 0, truncated = 0;
  for (uint32_t t = 0; t < region->num_threads(); ++t) {
    const abi::ThreadState& st = region->thread_state(t);
    const uint64_t w = st.records_written.load(std::memory_order_acquire);
    const uint64_t d = st.dropped_records.load(std::memory_order_acquire);
    const uint64_t c = st.truncated_records.load(std::memory_order_acquire);
    written += w;
    dropped += d;
    truncated += c;
    if (d > 0) {
      std::vector<std::string> causes, raise;
      for (uint32_t k = 0; k < abi::kDropCauseCount; ++k) {
        const uint64_t n = st.dropped_by_cause[k].load(std::memory_order_acquire);
        if (n == 0) continue;
        causes.push_back(absl::StrCat(kCauses[k][0], " ", n));
        if (std::find(raise.begin(), raise.end(), kCauses[k][1]) == raise.end()) {
          raise.push_back(kCauses[k][1]);
        }
      }
      raise.push_back("wait_bound_ms (--wait-bound-ms)");
      const std::string text = absl::StrCat(
          "dump flush: thread ", t, " wrote ", w, " records and lost ", d, " (",
          absl::StrJoin(causes, ", "), "): the host did not take them within the wait bound; "
          "they are counted in dropped_records. Raise ", absl::StrJoin(raise, " or "));
      Print(DumpLog::kError, text);
      warnings.push_back(text);
    }
    if (c > 0) {
      const std::string text = absl::StrCat(
          "dump flush: thread ", t, " cut ", c, " tensors larger than the arena to arena/2 "
          "bytes (flagged truncated); raise arena_bytes (sim_run: --arena-bytes) to keep them "
          "whole");
      Print(DumpLog::kWarning, text);
      warnings.push_back(text);
    }
  }
  report.dump_log.push_back(absl::StrCat(
      "dump flush: ", region->num_threads(), " recording threads wrote ", written, " records",
      dropped + truncated == 0 ? "; none dropped or truncated"
                               : absl::StrCat("; dropped ", dropped, ", truncated ", truncated)));
  Print(DumpLog::kInfo, report.dump_log.back());
}

void SimSession::Impl::OnHostGone() {
  Print(DumpLog::kError,
        absl::StrCat("the host process (pid ", host_pid,
                     ") is gone: the device stops (nothing more is dispatched; records that "
                     "would wait for the host are dropped, counted as host gone)"));
  if (region != nullptr) region->MarkHostGone();
  std::lock_guard<std::mutex> lock(device_mu);
  host_gone = true;
  if (runtime != nullptr) runtime->Abort(absl::AbortedError("the host process is gone"));
}

namespace {

void SetStatus(const absl::Status& s, v1::DeviceStatus* out) {
  out->set_code(static_cast<int>(s.code()));
  out->set_message(std::string(s.message()));
}

absl::Status StatusOf(const v1::DeviceStatus& s) {
  const int code = s.code();
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(absl::StrCat("the device reported status code ", code, ": ",
                                            s.message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), s.message());
}

}  // namespace

namespace {

// The orchestration function's status; an exception out of it is one too
// (on the device it must not unwind past the fork: the caller's code, the
// rest of a test suite, would run on in the device process), in either
// process, so the two behave alike.
absl::Status CallOrchestration(const std::function<absl::Status(SimSession&)>& orchestration,
                               SimSession& session, const char* where) {
  absl::Status fn;
  try {
    return orchestration(session);
  } catch (const std::exception& e) {
    fn = absl::UnknownError(absl::StrCat("RunDevice's function threw ", where, ": ", e.what()));
  } catch (...) {
    fn = absl::UnknownError(
        absl::StrCat("RunDevice's function threw ", where, " (not a std::exception)"));
  }
  Print(DumpLog::kError, std::string(fn.message()));
  return fn;
}

}  // namespace

std::string SimSession::Impl::RunInDevice(
    const std::function<absl::Status(SimSession&)>& orchestration, SimSession& session) {
  in_device = true;
  absl::Status started;
  {
    std::lock_guard<std::mutex> lock(device_mu);
    runtime = std::make_unique<SimRuntime>(sim, kernels, recorder.get());
    started = runtime->Start();
    if (host_gone) runtime->Abort(absl::AbortedError("the host process is gone"));
  }
  v1::DeviceReport r;
  // An exception out of the function must end here: unwinding past the
  // fork would run the caller's code (the rest of a test suite) in this
  // process. It is the function's status instead.
  const absl::Status fn =
      started.ok() ? CallOrchestration(orchestration, session, "on the device") : started;
  SetStatus(fn, r.mutable_orchestration());
  SetStatus(started.ok() ? runtime->Synchronize() : started, r.mutable_run_status());
  r.set_tasks_submitted(runtime->tasks_submitted());
  r.set_tasks_completed(runtime->tasks_completed());
  r.set_dump_skipped_tasks(runtime->dump_skipped_tasks());
  r.set_overflow_tasks(runtime->overflow_tasks());
  if (auto first = runtime->first_overflow_task()) {
    r.set_has_first_overflow_task(true);
    r.set_first_overflow_task(*first);
  }
  for (const std::string& line : runtime->dump_log()) r.add_dump_log(line);
  for (const std::string& w : warnings) r.add_warnings(w);
  for (const std::string& w : runtime->warnings()) r.add_warnings(w);
  for (const StepLevel& l : runtime->step_levels()) {
    v1::DeviceReport::Level* e = r.add_step_levels();
    e->set_first_step(l.first_step);
    e->set_level(l.level);
    e->set_overflow(l.overflow);
    e->set_stats(static_cast<uint32_t>(l.stats));
    e->set_mode(static_cast<uint32_t>(l.mode));
  }
  r.set_steps_begun(steps_begun);
  if (step) {
    r.set_has_step(true);
    r.set_step(*step);
  }
  {
    std::lock_guard<std::mutex> lock(exception_mu);
    for (const std::string& d : exception_dumps) r.add_exception_dumps(d);
  }
  {
    std::lock_guard<std::mutex> lock(device_mu);
    r.set_host_gone(host_gone);
  }
  if (r.host_gone() && region != nullptr) {
    uint64_t dropped = 0;
    for (uint32_t t = 0; t < region->num_threads(); ++t) {
      dropped += region->thread_state(t)
                     .dropped_by_cause[static_cast<uint32_t>(abi::DropCause::kHostGone)]
                     .load(std::memory_order_acquire);
    }
    Print(DumpLog::kError,
          absl::StrCat("the device stopped without its host: ", r.tasks_completed(), " of ",
                       r.tasks_submitted(), " tasks completed; ", dropped,
                       " records dropped (host gone)"));
  }
  return r.SerializeAsString();
}

DeviceProgress SimSession::Impl::SampleDevice() const {
  DeviceProgress p;
  const abi::FlightHeader& h = flight->header();
  p.heartbeat = h.heartbeat.load(std::memory_order_relaxed);
  p.tasks_submitted = h.tasks_submitted.load(std::memory_order_relaxed);
  p.tasks_completed = h.tasks_completed.load(std::memory_order_relaxed);
  if (region != nullptr && collecting) {
    for (uint32_t t = 0; t < region->num_threads(); ++t) {
      const abi::ThreadState& st = region->thread_state(t);
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
  }
  return p;
}

absl::Status SimSession::Impl::RunIsolated(
    const std::function<absl::Status(SimSession&)>& orchestration, SimSession& session) {
  host_pid = ::getpid();  // the child's getppid() is a reaper's once the host is gone
  auto started = DeviceProcess::Start(
      flight.get(), [this, &orchestration, &session] { return RunInDevice(orchestration, session); },
      [this] { OnHostGone(); });
  if (!started.ok()) {
    device_error = started.status();  // RunDevice may be tried again
    return started.status();
  }
  device_ran = true;
  device_error = absl::OkStatus();
  device = std::move(started).value();
  if (capture) {
    if (absl::Status st = StartCollecting(); !st.ok()) {
      // Nothing collects what the device records: stop it, and say why.
      device->Kill();
      device->Wait();
      capture = false;
      dump_status = st;
      return st;
    }
  }
  if (wiring.device_started) wiring.device_started();
  // The host's own bound: the stream-sync budget, past the device's own.
  std::vector<std::string> ignored;  // the runtime prints them
  const std::chrono::microseconds budget =
      (sim.timeouts ? *sim.timeouts : TimeoutsFromEnvironment(&ignored)).stream_sync;
  DeviceWatch watch(budget, std::chrono::steady_clock::now());
  const DeviceExit exit = device->Wait(
      [&]() -> std::optional<std::string> {
        std::optional<std::string> why =
            watch.Observe(SampleDevice(), std::chrono::steady_clock::now());
        if (why && device->State() != 0) {
          absl::StrAppend(&*why, "; its state: ", std::string(1, device->State()));
        }
        return why;
      },
      std::clamp<std::chrono::milliseconds>(
          std::chrono::duration_cast<std::chrono::milliseconds>(budget / 10),
          std::chrono::milliseconds(1), std::chrono::milliseconds(100)));
  if (exit.no_watch) {
    device_error = absl::ResourceExhaustedError(
        "the device process could not start its watch thread (the system refused a thread: "
        "an address-space limit such as ulimit -v, or a limit on threads); nothing ran");
    return device_error;
  }
  if (!exit.killed_by_host.empty()) {
    // A hang the device could not report: what it was running, from the
    // flight table; their outputs are recorded as the device's own hang
    // path records them (in-flight snapshots), at Finish.
    crash = AnalyzeDeviceCrash(exit, *flight, *memory, kernels);
    std::string running;
    for (const auto& t : crash->in_flight) {
      absl::StrAppend(&running, running.empty() ? "" : ", ", TaskIdHex(t->task.task_id));
    }
    hang = absl::StrCat("host watch: ", exit.killed_by_host,
                        "; the host killed it (SIGKILL); running tasks: ",
                        running.empty() ? "none" : running);
    Print(DumpLog::kError, *hang);
    return absl::AbortedError(*hang);
  }
  if (exit.reported) {
    v1::DeviceReport r;
    if (r.ParseFromString(exit.report)) {
      device_report = std::move(r);
      return StatusOf(device_report->orchestration());
    }
  }
  crash = AnalyzeDeviceCrash(exit, *flight, *memory, kernels);
  Print(DumpLog::kError, crash->crash.description());
  return absl::AbortedError(crash->crash.description());
}

SimSession::SimSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->owner = this;
}

absl::Status SimSession::RunDevice(
    const std::function<absl::Status(SimSession&)>& orchestration) {
  Impl& s = *impl_;
  if (s.finished) return absl::FailedPreconditionError("RunDevice: the session is finished");
  if (s.in_device) {
    return absl::FailedPreconditionError("RunDevice: called on the device (inside RunDevice)");
  }
  if (!s.isolated) {
    if (s.wiring.device_started && !s.device_ran) s.wiring.device_started();
    s.device_ran = true;
    return CallOrchestration(orchestration, *this, "in this process");
  }
  if (s.device_ran) {
    return absl::FailedPreconditionError(
        "RunDevice: the device process of this session ran already (one per session)");
  }
  return s.RunIsolated(orchestration, *this);  // sets device_ran once it forked
}

SimSession::~SimSession() {
  // On the device (a session destroyed in the forked child: exit() there
  // runs static destructors) the host finishes the session, not this copy.
  if (impl_ != nullptr && !impl_->finished && !impl_->in_device) impl_->Finish().IgnoreError();
}

namespace {

// Alloc, Submit and the rest need the runtime: with device_process it
// exists only on the device (inside RunDevice).
absl::Status NoRuntime(const char* call) {
  return absl::FailedPreconditionError(absl::StrCat(
      call, ": the device runs in its own process (SessionOptions::device_process): call it "
            "inside RunDevice's function"));
}

}  // namespace

absl::StatusOr<Tensor> SimSession::Alloc(DataType dtype, const std::vector<uint32_t>& shape) {
  if (impl_->finished) return absl::FailedPreconditionError("Alloc: the session is finished");
  if (impl_->runtime == nullptr) return NoRuntime("Alloc");
  return impl_->runtime->Alloc(dtype, shape);
}

absl::StatusOr<uint64_t> SimSession::Submit(uint16_t func_id, CoreTaskArgs args) {
  return Submit(std::vector<uint16_t>{func_id}, std::move(args));
}

absl::StatusOr<uint64_t> SimSession::Submit(const std::vector<uint16_t>& func_ids,
                                            CoreTaskArgs args) {
  if (impl_->finished) return absl::FailedPreconditionError("Submit: the session is finished");
  if (impl_->runtime == nullptr) return NoRuntime("Submit");
  return impl_->runtime->Submit(func_ids, std::move(args));
}

absl::Status SimSession::BeginStep(uint32_t step) {
  Impl& s = *impl_;
  if (s.finished) return absl::FailedPreconditionError("BeginStep: the session is finished");
  if (s.runtime == nullptr) return NoRuntime("BeginStep");
  const bool step0_used = !s.step && s.runtime->tasks_submitted() > 0;
  if ((s.step && step <= *s.step) || (step0_used && step == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BeginStep(", step, "): step ", s.step ? *s.step : 0,
        " has begun already; steps only go forward"));
  }
  if (absl::Status st = s.runtime->WaitIdle(); !st.ok()) return st;
  if (step0_used) ++s.steps_begun;  // step 0 ran without a BeginStep
  if (s.watcher != nullptr && (s.step || step0_used)) {
    std::vector<DumpLog> logs;
    std::optional<DumpConfig> next = s.watcher->Poll(&logs);
    for (const DumpLog& l : logs) Print(l.severity, l.text);
    if (next) {
      s.config = *next;
      s.runtime->SetDumpConfig(s.config);
    }
  }
  s.runtime->BeginStep(step);
  s.step = step;
  ++s.steps_begun;
  return absl::OkStatus();
}

void SimSession::SetDumpConfig(const DumpConfigEntry& api) {
  Impl& s = *impl_;
  if (s.runtime == nullptr) {
    Print(DumpLog::kWarning, NoRuntime("SetDumpConfig").ToString());
    return;
  }
  std::vector<DumpLog> logs;
  const DumpConfigEntry checked = CheckApiEntry(api, &logs);
  if (s.wiring.resolved) {
    // The caller resolved the configuration: `api` is all of it.
    s.config = ResolveDumpConfig({{"API", "API", checked}}, &logs);
  } else {
    for (DumpConfigSource& source : s.above_file) {
      if (source.short_name == "API") source.entry = checked;
    }
    if (s.watcher != nullptr) {
      s.watcher = std::make_unique<DumpConfigWatcher>(s.above_file, s.config_file);
    }
    s.Resolve(&logs);
  }
  for (const DumpLog& l : logs) Print(l.severity, l.text);
  s.runtime->SetDumpConfig(s.config);
}

absl::Status SimSession::Synchronize() {
  if (impl_->finished) return absl::FailedPreconditionError("Synchronize: the session is finished");
  if (impl_->runtime == nullptr) return NoRuntime("Synchronize");
  return impl_->runtime->WaitIdle();
}

absl::StatusOr<SessionResult> SimSession::Finish() {
  if (impl_->finished) return absl::FailedPreconditionError("Finish: the session is finished");
  if (impl_->in_device) {
    return absl::FailedPreconditionError(
        "Finish: called on the device (inside RunDevice); the host finishes the session");
  }
  return impl_->Finish();
}

// The dump's end: the collector stopped and reconciled, the labels and
// levels known only now amended, the capture exported, the buffers freed.
void SimSession::Impl::FinishCapture(SessionResult* result) {
  SessionResult& r = *result;
  if (!collecting) {
    // The device never ran (its process could not be started): nothing
    // was recorded, and the capture is empty (a store with no record
    // writes no files).
    if (absl::Status st = sink->Finish(v1::CaptureCounters()); !st.ok() && dump_status.ok()) {
      dump_status = st;
    }
    collector->Finalize();
    r.wrote_capture = false;
    return;
  }
  absl::Status collected = collector->Stop();
  absl::Status reconciled = collector->Reconcile();
  // A dead device: the outputs of what it was running, from its memory.
  if (crash) {
    if (absl::Status st = RecordCrash(); !st.ok() && reconciled.ok()) reconciled = st;
  }
  // The sink is this thread's now (the collector's threads are joined):
  // labels known only at the end go in before the manifest is written.
  v1::CaptureInfo end;
  if (wiring.test_labels && !Env("TEST_TARGET").empty()) {
    SetLabel(&labels, "steps", absl::StrCat(steps_begun));
    (*end.mutable_labels())["steps"] = absl::StrCat(steps_begun);
  }
  if (report.step_levels.size() > 1) {
    for (const StepLevel& l : report.step_levels) {
      v1::StepLevel* e = end.add_step_levels();
      e->set_first_step(l.first_step);
      e->set_level(l.level);
      e->set_overflow(l.overflow);
      e->set_stats(StatsModeName(l.stats));
      e->set_mode(DumpModeName(l.mode));
    }
  }
  if (crash && !hang) *end.mutable_device_crash() = crash->crash;
  if (absl::Status st = sink->Amend(end); !st.ok() && dump_status.ok()) dump_status = st;
  absl::Status exported = collector->Export();
  report.collected = collector->stats();
  report.losses = collector->losses();
  if (remote_sink != nullptr) {
    report.sent_records = remote_sink->sent_records();
    report.acked_records = remote_sink->durable_records();
    if (remote_sink->kept_locally()) {
      // Not the dump's failure: nothing unacknowledged was lost. Said as a
      // WARNING with where the records are.
      report.kept_locally_dir = dump_dir;
      report.kept_locally_records = remote_sink->kept_locally_records();
      report.kept_locally_message = absl::StrCat(
          "capture service ", remote_server, " no longer has capture '", remote_name,
          "' (", remote_sink->lost_capture().message(), "): ", report.acked_records,
          " records it had acknowledged went with it; the ", report.kept_locally_records,
          " records it had not acknowledged are kept locally in ", CapturePlace(dump_dir),
          " (", report.acked_records + report.kept_locally_records, " records in all)");
      Warn(report.kept_locally_message);
    }
  }
  collector->Finalize();
  if (refused_records != nullptr) {
    for (const std::string& d : refused_records->folders()) r.exception_dumps.push_back(d);
  }
  report.dump_log.push_back("dump buffers freed");
  Print(DumpLog::kInfo, "dump buffers freed");
  for (const absl::Status* st : {&exported, &collected, &reconciled}) {
    if (!st->ok() && dump_status.ok()) dump_status = *st;
  }
  r.wrote_capture = local_sink != nullptr ? local_sink->store().created()
                                          : report.collected.records > 0;
  if (remote_sink != nullptr && remote_sink->kept_locally()) {
    r.wrote_capture = report.kept_locally_records > 0;
  }
}

absl::Status SimSession::Impl::RecordCrash() {
  std::vector<SnapshotTask> tasks;
  for (const auto& t : crash->in_flight) {
    // A task whose snapshot the device recorded itself (it declared the
    // hang before it stopped) is not recorded twice.
    if (t->dumped && t->dump_after && !t->snapshot_taken) {
      tasks.push_back({t->scheduler, &t->task});
    }
  }
  return collector->RecordSnapshots(tasks);
}

void SimSession::Impl::WriteCrashDumps(SessionResult* result) {
  if (!options.exception_dump) return;
  const std::string workload = wiring.workload.empty() ? name : wiring.workload;
  const bool remote = local_sink == nullptr && sink != nullptr;
  const std::string where = remote ? absl::StrCat(remote_server, "/", remote_name)
                            : result->wrote_capture ? dump_dir
                                                    : std::string();
  for (int i : crash->dumps) {
    const v1::CrashedTask& e = crash->crash.executing(i);
    // Its inputs as captured before dispatch, read back from the capture.
    absl::StatusOr<std::vector<TaskRecord>> before = std::vector<TaskRecord>();
    if (remote) {
      before = ReadRemoteTaskRecords(remote_server, remote_name, remote_token, e.task_id(),
                                     v1::STAGE_BEFORE_DISPATCH);
    } else if (result->wrote_capture) {
      before = ReadLocalTaskRecords(dump_dir, e.task_id(), v1::STAGE_BEFORE_DISPATCH);
    }
    if (!before.ok()) {
      Print(DumpLog::kError, absl::StrCat("the exception dump of task ", TaskIdHex(e.task_id()),
                                          " has no before-dispatch records: ",
                                          before.status().message()));
      before = std::vector<TaskRecord>();
    }
    auto dir = WriteCrashDump(prefix, workload, *crash, e, *before, where);
    if (dir.ok()) {
      result->exception_dumps.push_back(*dir);
      Print(DumpLog::kError,
            absl::StrCat("exception dump of the crash: ", CapturePlace(*dir), " (task ",
                         TaskIdHex(e.task_id()),
                         ": ", before->size(), " record(s) as captured before dispatch",
                         config.snapshot_inputs ? " and its inputs as the device copied them "
                                                  "before dispatch" : "",
                         ", its "
                         "tensors as the crash left them, context.json)"));
    } else {
      Print(DumpLog::kError, absl::StrCat("the exception dump of task ", TaskIdHex(e.task_id()),
                                          " failed: ", dir.status().message()));
    }
  }
}

namespace {

// An exception dump's capture on the service: <the run's capture>.<scenario>.<task>,
// where the folder is <scenario>_..._<task id> (ExceptionDumpName,
// CrashDumpName); at most 128 characters, the run's name cut and a hash of
// it put in when it is too long.
std::string ExceptionCaptureName(const std::string& run_capture, const std::string& folder,
                                 std::string* scenario, std::string* task) {
  *scenario = folder.substr(0, folder.find('_'));
  *task = folder.substr(folder.find_last_of('_') + 1);
  const std::string suffix =
      absl::StrCat(".", *scenario, ".", absl::StartsWith(*task, "0x") ? task->substr(2) : *task);
  std::string name = run_capture + suffix;
  if (name.size() > 128) {
    name = absl::StrCat(run_capture.substr(0, 128 - suffix.size() - 17), ".",
                        absl::Hex(std::hash<std::string>()(run_capture), absl::kZeroPad16),
                        suffix);
  }
  return name;
}

}  // namespace

void SimSession::Impl::UploadExceptionDumps(SessionResult* result) {
  if (remote_sink == nullptr || remote_sink->kept_locally()) return;
  for (const std::string& dir : result->exception_dumps) {
    const std::string folder = dir.substr(dir.find_last_of('/') + 1);
    std::string scenario, task;
    GrpcSinkOptions g;
    g.target = remote_server;
    g.capture = ExceptionCaptureName(remote_name, folder, &scenario, &task);
    g.auth_token = remote_token;
    g.payload_dedup = config.dedup;
    g.connect_timeout = options.connect_timeout;
    g.retry_deadline = options.capture_retry_deadline;
    g.info.set_platform(PlatformName(wiring.platform));
    for (const auto& [k, v] : labels) (*g.info.mutable_labels())[k] = v;
    (*g.info.mutable_labels())["exception_dump"] = folder;
    (*g.info.mutable_labels())["scenario"] = scenario;
    (*g.info.mutable_labels())["task_id"] = task;
    (*g.info.mutable_labels())["run_capture"] = remote_name;
    const std::string name = g.capture;
    const bool crashed = scenario == "crash" && crash && !hang;
    absl::Status sent = UploadExceptionDump(dir, std::move(g), crashed ? &crash->crash : nullptr);
    if (sent.ok()) {
      result->exception_dump_captures.push_back(absl::StrCat(remote_server, "/", name));
      Print(DumpLog::kInfo, absl::StrCat("exception dump of task ", task, " streamed to capture "
                                         "service ", remote_server, " as capture '", name,
                                         "' (and kept in ", CapturePlace(dir), ")"));
    } else {
      Warn(absl::StrCat("exception dump of task ", task, " could not be streamed to capture "
                        "service ", remote_server, " (", sent.message(), "); it is kept in ",
                        CapturePlace(dir)));
    }
  }
}

// What the collector counted, into the result.
void SimSession::Impl::CopyCounts(SessionResult* result) const {
  SessionResult& r = *result;
  const CollectorStats& c = report.collected;
  const v1::CaptureCounters& l = report.losses;
  r.records = c.records;
  r.recovered_records = c.recovered_records;
  r.payload_bytes = c.payload_bytes;
  r.overwritten = c.overwritten;
  r.invalid_records = c.invalid_records;
  r.dropped_records = l.dropped_records();
  r.dropped_ready_queue_full = l.dropped_ready_queue_full();
  r.dropped_free_queue_empty = l.dropped_free_queue_empty();
  r.dropped_arena_ack_timeout = l.dropped_arena_ack_timeout();
  r.dropped_flush_timeout = l.dropped_flush_timeout();
  r.dropped_host_gone = l.dropped_host_gone();
}

// What the device process reported (or, when it died, what the flight
// table says), into the result: the isolated Finish's first step.
void SimSession::Impl::FromDevice(SessionResult* result) {
  SessionResult& r = *result;
  if (wiring.device_finished) wiring.device_finished();
  if (capture) LogFlush();
  if (device_report) {
    const v1::DeviceReport& d = *device_report;
    r.run_status = StatusOf(d.run_status());
    steps_begun = d.steps_begun();
    step = d.has_step() ? std::optional<uint32_t>(d.step()) : std::nullopt;
    r.tasks = d.tasks_submitted();
    r.tasks_completed = d.tasks_completed();
    r.dump_skipped_tasks = d.dump_skipped_tasks();
    r.overflow_tasks = d.overflow_tasks();
    if (d.has_first_overflow_task()) r.first_overflow_task = d.first_overflow_task();
    for (const std::string& line : d.dump_log()) report.dump_log.push_back(line);
    for (const std::string& w : d.warnings()) {
      if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
    }
    for (const auto& l : d.step_levels()) {
      report.step_levels.push_back({l.first_step(), l.level(), l.overflow(),
                                    l.stats() <= 2 ? static_cast<StatsMode>(l.stats()) : StatsMode::kOff,
                                    l.mode() <= 2 ? static_cast<DumpMode>(l.mode()) : DumpMode::kAll});
    }
    r.exception_dumps.assign(d.exception_dumps().begin(), d.exception_dumps().end());
  } else if (hang) {
    r.run_status = absl::DeadlineExceededError(*hang);
    r.tasks = crash->tasks_submitted;
    r.tasks_completed = crash->tasks_completed;
    if (r.tasks > 0 && steps_begun == 0) steps_begun = 1;
    report.step_levels.push_back(StartLevel());
  } else if (crash) {
    r.run_status = absl::AbortedError(crash->crash.description());
    r.tasks = crash->tasks_submitted;
    r.tasks_completed = crash->tasks_completed;
    r.device_crashed = true;
    r.device_crash = crash->crash.description();
    // The step the device was in when it died: the highest of its tasks.
    uint32_t last = 0;
    for (const auto& t : crash->in_flight) last = std::max(last, t->task.step);
    if (r.tasks > 0 && !step) ++steps_begun;
    steps_begun = std::max(steps_begun, last + (r.tasks > 0 ? 1 : 0));
    report.step_levels.push_back(StartLevel());
  } else {
    r.run_status = !device_error.ok()
                       ? device_error
                       : absl::FailedPreconditionError("the device process did not run");
  }
  if (device_report && !step && r.tasks > 0 && steps_begun == 0) ++steps_begun;
}

absl::StatusOr<SessionResult> SimSession::Impl::Finish() {
  finished = true;
  SessionResult r;
  r.name = name;
  if (isolated) {
    if (!device_ran) {  // a session with no device work: an empty run
      RunIsolated([](SimSession&) { return absl::OkStatus(); }, *owner).IgnoreError();
    }
    FromDevice(&r);
  } else {
    r.run_status = runtime->Synchronize();
    if (wiring.device_finished) wiring.device_finished();
    if (capture) LogFlush();
    if (!step && runtime->tasks_submitted() > 0) ++steps_begun;  // step 0, implicitly
    report.step_levels = runtime->step_levels();
    r.tasks = runtime->tasks_submitted();
    r.tasks_completed = runtime->tasks_completed();
    r.dump_skipped_tasks = runtime->dump_skipped_tasks();
    r.overflow_tasks = runtime->overflow_tasks();
    r.first_overflow_task = runtime->first_overflow_task();
    for (std::string& line : runtime->dump_log()) report.dump_log.push_back(std::move(line));
    for (const std::string& w : runtime->warnings()) warnings.push_back(w);
    std::lock_guard<std::mutex> lock(exception_mu);
    r.exception_dumps = exception_dumps;
  }
  r.dump = config;
  r.steps = steps_begun;
  for (size_t f = 0; f < kernels.size(); ++f) {
    if (const KernelInfo* k = kernels.Find(static_cast<uint16_t>(f))) r.kernels[k->func_id] = k->name;
  }
  if (capture) FinishCapture(&r);
  if (crash && !hang) WriteCrashDumps(&r);
  UploadExceptionDumps(&r);
  if (prefix_claimed) ::rmdir(prefix.c_str());  // only if nothing went in
  r.dump_status = dump_status;
  r.labels = {labels.begin(), labels.end()};
  const bool kept_locally = !report.kept_locally_dir.empty();
  if ((local_sink != nullptr || kept_locally) && r.wrote_capture) r.capture_dir = dump_dir;
  if (local_sink == nullptr && sink != nullptr && !kept_locally) {
    r.capture_name = remote_name;
    r.capture_server = remote_server;
    r.capture = absl::StrCat(remote_server, "/", remote_name);
  }
  CopyCounts(&r);
  r.warnings = warnings;
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!dump_status.ok()) {
    // A dead device is the run's answer (its result says what the capture
    // kept); only a run that otherwise worked fails on the dump.
    if (wiring.strict && !r.device_crashed) {
      if (remote_sink == nullptr) return dump_status;
      return absl::Status(dump_status.code(),
                          absl::StrCat(dump_status.message(), " (", report.sent_records,
                                       " records sent, ", report.acked_records,
                                       " acknowledged as durable: the capture holds those)"));
    }
    Print(DumpLog::kWarning, absl::StrCat("session ", name, ": the capture is incomplete: ",
                                          dump_status.message()));
  }
  if (wiring.print_summary && capture) {
    Print(DumpLog::kInfo,
          absl::StrCat("session ", name, ": ", r.records, " records of ", r.tasks, " tasks in ",
                       r.steps, " step(s); capture: ",
                       !r.capture.empty()      ? r.capture + " on the capture service"
                       : r.wrote_capture       ? CapturePlace(r.capture_dir)
                                               : "none (nothing was selected)"));
  }
  return r;
}

std::string CapturePlace(const std::string& path) {
  std::string dir = Env("TEST_UNDECLARED_OUTPUTS_DIR");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty() || path.size() <= dir.size() + 1 || path.compare(0, dir.size(), dir) != 0 ||
      path[dir.size()] != '/') {
    return path;
  }
  std::string inner = path.substr(dir.size() + 1);
  while (!inner.empty() && inner.back() == '/') inner.pop_back();
  std::string zip = Env("TEST_UNDECLARED_OUTPUTS_ZIP");
  if (zip.empty()) zip = dir + "/outputs.zip";
  // Outside the sandbox: <output base>/sandbox/<strategy>/<n>/execroot/...
  // is <output base>/execroot/...
  const size_t sandbox = zip.find("/sandbox/");
  const size_t execroot = zip.find("/execroot/", sandbox == std::string::npos ? 0 : sandbox);
  if (sandbox != std::string::npos && execroot != std::string::npos) {
    zip.erase(sandbox, execroot - sandbox);
  }
  // From the workspace: <execroot>/bazel-out/<config>/testlogs/... is
  // bazel-testlogs/...
  const size_t out = zip.find("/bazel-out/");
  const size_t logs = out == std::string::npos ? out : zip.find("/testlogs/", out + 1);
  if (logs == std::string::npos) return absl::StrCat(zip, "/", inner);
  return absl::StrCat("bazel-testlogs/", zip.substr(logs + 10), "/", inner, " (the zip: ", zip,
                      ")");
}

const std::string& SimSession::name() const { return impl_->name; }
const DumpConfig& SimSession::dump_config() const { return impl_->config; }

std::string SimSession::capture_location() const {
  if (!impl_->remote_name.empty()) return absl::StrCat(impl_->remote_server, "/", impl_->remote_name);
  return impl_->dump_dir;
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
  } else if (s.flight != nullptr) {
    p.tasks_submitted = s.flight->header().tasks_submitted.load(std::memory_order_relaxed);
    p.tasks_completed = s.flight->header().tasks_completed.load(std::memory_order_relaxed);
  }
  if (s.collector != nullptr) {
    const CollectorStats c = s.collector->stats_snapshot();
    p.records = c.records;
    p.payload_bytes = c.payload_bytes;
  }
  return p;
}

}  // namespace argsdump
