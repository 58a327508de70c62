#include "sdk/session_capture.h"

#include <unistd.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "format/dtype.h"
#include "format/kernel_table.h"
#include "format/names.h"
#include "sdk/session_log.h"
#include "sdk/session_result.h"

namespace argsdump {
namespace {

v1::ArgDirection ToProtoDirection(ArgDirection d) {
  switch (d) {
    case ArgDirection::kIn: return v1::ARG_DIRECTION_IN;
    case ArgDirection::kOut: return v1::ARG_DIRECTION_OUT;
    case ArgDirection::kInOut: return v1::ARG_DIRECTION_INOUT;
    case ArgDirection::kScalar: return v1::ARG_DIRECTION_SCALAR;
  }
  return v1::ARG_DIRECTION_UNSPECIFIED;
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

// The capture's time base: the region's (CLOCK_MONOTONIC when it was made)
// and the wall clock at that moment, from a pair of readings taken now.
void FillClock(const DumpRegion& region, v1::CaptureClock* clock) {
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  const int64_t mono_now =
      duration_cast<nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const int64_t unix_now =
      duration_cast<nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto base = static_cast<int64_t>(region.time_base_ns());
  clock->set_base_monotonic_ns(base);
  clock->set_base_unix_ns(unix_now - (mono_now - base));
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) clock->set_host(host);
}

}  // namespace

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

absl::Status SessionCapture::Start(SessionReport* report) {
  const SessionOptions& options = *c_.options;
  const SessionWiring& wiring = *c_.wiring;
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
  const int region_level = c_.config->level > 0 ? c_.config->level : wiring.dynamic_level;
  rc.level = static_cast<abi::DumpLevel>(region_level);
  rc.num_threads = wiring.sim ? wiring.sim->scheduler_threads : options.scheduler_threads;
  // Records the collector refuses are corrupt data: saved like an exception.
  if (options.exception_dump) {
    refused_records_ =
        std::make_unique<RefusedRecordDump>(RefusedRecordDumpOptions{c_.place.prefix});
  }
  collector_ = std::make_unique<Collector>(CollectorOptions{
      wiring.platform, options.drain_threads, options.collector_shards, refused_records_.get()});
  auto region = collector_->Initialize(rc);
  if (!region.ok()) {
    region_failed_ = region.status().code() == absl::StatusCode::kResourceExhausted;
    return region.status();
  }
  region_ = *region;
  Describe(region_level);
  if (!c_.isolated || c_.config->capture_server.empty()) {
    if (absl::Status st = MakeSink(); !st.ok()) return st;
  }
  recorder_ = std::make_unique<DumpRecorder>(**region);
  report->dump_log.push_back(absl::StrCat(
      "dump buffers created: ", rc.num_threads, " recording threads x (", rc.buffers_per_thread,
      " buffers of ", rc.records_per_buffer, " records + a ", rc.arena_bytes,
      "-byte payload arena) for recording at level ", region_level, "; the dump runs at ",
      c_.config->DescribeScope()));
  PrintDumpLog(DumpLog::kInfo, report->dump_log.back());
  if (c_.isolated) return absl::OkStatus();  // StartCollecting, after the fork
  return StartCollecting();
}

void SessionCapture::Describe(int level) {
  const SessionWiring& wiring = *c_.wiring;
  info_.Clear();
  info_.set_name(wiring.workload.empty() ? c_.place.name : wiring.workload);
  info_.set_level(static_cast<v1::DumpLevel>(level));
  *info_.mutable_scope() = DumpScopeOf(*c_.config);
  info_.set_platform(PlatformName(wiring.platform));
  for (const auto& [k, v] : c_.labels) (*info_.mutable_labels())[k] = v;
  if (c_.job) *info_.mutable_job() = *c_.job;
  FillKernelTable(*c_.kernels, &info_, c_.warn);
  if (region_ != nullptr) FillClock(*region_, info_.mutable_clock());
}

absl::Status SessionCapture::MakeSink() {
  SinkRequest request;
  request.config = c_.config;
  request.options = c_.options;
  request.wiring = c_.wiring;
  request.session_name = c_.place.name;
  request.prefix = c_.place.prefix;
  request.dump_dir = c_.place.dump_dir;
  request.info = info_;
  auto chosen = ChooseSink(request, c_.warn);
  if (!chosen.ok()) return chosen.status();
  sink_ = std::move(chosen).value();
  return absl::OkStatus();
}

absl::Status SessionCapture::StartCollecting() {
  if (sink_.sink == nullptr) {
    if (absl::Status st = MakeSink(); !st.ok()) return st;
  }
  absl::Status started = collector_->Start(sink_.sink.get());
  collecting_ = started.ok();
  return started;
}

void SessionCapture::FinishUncollected(SessionResult* result, absl::Status* dump_status) {
  // The device never ran (its process could not be started): nothing was
  // recorded, and the capture is empty (a store with no record writes no
  // files).
  if (sink_.sink != nullptr) {
    absl::Status st = sink_.sink->Finish(v1::CaptureCounters());
    if (!st.ok() && dump_status->ok()) *dump_status = st;
  }
  collector_->Finalize();
  result->wrote_capture = false;
}

absl::Status SessionCapture::Amend(const Ending& ending, CaptureLabels* labels,
                                   const SessionReport& report) {
  v1::CaptureInfo end;
  if (c_.wiring->test_labels && !EnvOrEmpty("TEST_TARGET").empty()) {
    SetLabel(labels, "steps", absl::StrCat(ending.steps_begun));
    (*end.mutable_labels())["steps"] = absl::StrCat(ending.steps_begun);
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
  if (ending.crash != nullptr && !ending.hang) *end.mutable_device_crash() = ending.crash->crash;
  return sink_.sink->Amend(end);
}

void SessionCapture::AccountKeptLocally(SessionReport* report) {
  GrpcSink* remote = sink_.remote;
  report->sent_records = remote->sent_records();
  report->acked_records = remote->durable_records();
  if (!remote->kept_locally()) return;
  // Not the dump's failure: nothing unacknowledged was lost. Said as a
  // WARNING with where the records are.
  report->kept_locally_dir = c_.place.dump_dir;
  report->kept_locally_records = remote->kept_locally_records();
  report->kept_locally_message = absl::StrCat(
      "capture service ", sink_.remote_server, " no longer has capture '", sink_.remote_name,
      "' (", remote->lost_capture().message(), "): ", report->acked_records,
      " records it had acknowledged went with it; the ", report->kept_locally_records,
      " records it had not acknowledged are kept locally in ", CapturePlace(c_.place.dump_dir),
      " (", report->acked_records + report->kept_locally_records, " records in all)");
  c_.warn(report->kept_locally_message);
}

void SessionCapture::Finish(const Ending& ending, CaptureLabels* labels, SessionReport* report,
                            SessionResult* result, absl::Status* dump_status) {
  if (!collecting_) return FinishUncollected(result, dump_status);
  absl::Status collected = collector_->Stop();
  absl::Status reconciled = collector_->Reconcile();
  // A dead device: the outputs of what it was running, from its memory. A
  // task whose snapshot the device recorded itself (it declared the hang
  // before it stopped) is not recorded twice.
  if (ending.crash != nullptr) {
    std::vector<SnapshotTask> tasks;
    for (const auto& t : ending.crash->in_flight) {
      if (t->dumped && t->dump_after && !t->snapshot_taken) {
        tasks.push_back({t->scheduler, &t->task});
      }
    }
    if (absl::Status st = collector_->RecordSnapshots(tasks); !st.ok() && reconciled.ok()) {
      reconciled = st;
    }
  }
  // The sink is this thread's now (the collector's threads are joined):
  // labels known only at the end go in before the manifest is written.
  if (absl::Status st = Amend(ending, labels, *report); !st.ok() && dump_status->ok()) {
    *dump_status = st;
  }
  absl::Status exported = collector_->Export();
  report->collected = collector_->stats();
  report->losses = collector_->losses();
  if (sink_.remote != nullptr) AccountKeptLocally(report);
  collector_->Finalize();
  if (refused_records_ != nullptr) {
    for (const std::string& d : refused_records_->folders()) result->exception_dumps.push_back(d);
  }
  report->dump_log.push_back("dump buffers freed");
  PrintDumpLog(DumpLog::kInfo, "dump buffers freed");
  for (const absl::Status* st : {&exported, &collected, &reconciled}) {
    if (!st->ok() && dump_status->ok()) *dump_status = *st;
  }
  result->wrote_capture = sink_.local != nullptr ? sink_.local->store().created()
                                                 : report->collected.records > 0;
  if (sink_.remote != nullptr && sink_.remote->kept_locally()) {
    result->wrote_capture = report->kept_locally_records > 0;
  }
}

CaptureReadback SessionCapture::Readback(bool wrote_capture) const {
  CaptureReadback c;
  if (sink_.local == nullptr && sink_.sink != nullptr) {
    c.kind = CaptureReadback::Kind::kRemote;
    c.server = sink_.remote_server;
    c.name = sink_.remote_name;
    c.auth_token = sink_.remote_token;
  } else if (wrote_capture) {
    c.kind = CaptureReadback::Kind::kLocal;
    c.dump_dir = c_.place.dump_dir;
  }
  return c;
}

void SessionCapture::Locate(const SessionReport& report, SessionResult* result) const {
  const bool local = sink_.local != nullptr;
  const bool kept_locally = !report.kept_locally_dir.empty();
  if ((local || kept_locally) && result->wrote_capture) result->capture_dir = c_.place.dump_dir;
  if (!local && sink_.sink != nullptr && !kept_locally) {
    result->capture_name = sink_.remote_name;
    result->capture_server = sink_.remote_server;
    result->capture = absl::StrCat(sink_.remote_server, "/", sink_.remote_name);
  }
}

void SessionCapture::UploadExceptionDumps(const CaptureLabels& labels,
                                          const v1::DeviceCrash* crash, SessionResult* result) {
  if (sink_.remote == nullptr || sink_.remote->kept_locally()) return;
  for (const std::string& dir : result->exception_dumps) {
    const std::string folder = dir.substr(dir.find_last_of('/') + 1);
    std::string scenario, task;
    GrpcSinkOptions g;
    g.target = sink_.remote_server;
    g.capture = ExceptionCaptureName(sink_.remote_name, folder, &scenario, &task);
    g.auth_token = sink_.remote_token;
    g.payload_dedup = c_.config->dedup;
    g.connect_timeout = c_.options->connect_timeout;
    g.retry_deadline = c_.options->capture_retry_deadline;
    g.info.set_platform(PlatformName(c_.wiring->platform));
    for (const auto& [k, v] : labels) (*g.info.mutable_labels())[k] = v;
    (*g.info.mutable_labels())["exception_dump"] = folder;
    (*g.info.mutable_labels())["scenario"] = scenario;
    (*g.info.mutable_labels())["task_id"] = task;
    (*g.info.mutable_labels())["run_capture"] = sink_.remote_name;
    const std::string name = g.capture;
    const bool crashed = scenario == "crash" && crash != nullptr;
    absl::Status sent = UploadExceptionDump(dir, std::move(g), crashed ? crash : nullptr);
    if (sent.ok()) {
      result->exception_dump_captures.push_back(absl::StrCat(sink_.remote_server, "/", name));
      PrintDumpLog(DumpLog::kInfo,
                   absl::StrCat("exception dump of task ", task, " streamed to capture service ",
                                sink_.remote_server, " as capture '", name, "' (and kept in ",
                                CapturePlace(dir), ")"));
    } else {
      c_.warn(absl::StrCat("exception dump of task ", task, " could not be streamed to capture "
                           "service ", sink_.remote_server, " (", sent.message(),
                           "); it is kept in ", CapturePlace(dir)));
    }
  }
}

}  // namespace argsdump
