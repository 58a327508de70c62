#include "sdk/session_setup.h"

#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "device/region.h"
#include "sdk/session_log.h"

namespace argsdump {

absl::Status CheckSessionOptions(const SessionOptions& options) {
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

SessionSetup SessionSetup::Resolve(const SessionOptions& options, const SessionWiring& wiring) {
  SessionSetup s;
  std::vector<DumpLog> logs;
  if (wiring.resolved) {
    s.config_ = *wiring.resolved;
  } else {
    CommandLineDump cli = CommandLineDumpFlags();
    DumpEntryPoints points;
    points.command_line = cli.entry;
    points.command_line_warnings = cli.warnings;
    points.api = options.dump;
    points.environment = DumpEnvironment();
    points.config_file = !cli.config_file.empty() ? cli.config_file : options.config_file;
    points.default_level = cli.default_level;
    DumpResolution r = ResolveDumpEntryPoints(points, &logs);
    s.config_ = r.config;
    s.above_file_ = std::move(r.above_file);
    s.config_file_ = r.config_file;
    s.watcher_ = std::move(r.watcher);
    s.default_level_ = r.default_level;
  }
  for (const DumpLog& l : logs) {
    PrintDumpLog(l.severity, l.text);
    if (l.severity != DumpLog::kInfo) s.warnings_.push_back(l.text);
  }
  s.ResolveJob(options, wiring);
  return s;
}

void SessionSetup::ResolveJob(const SessionOptions& options, const SessionWiring& wiring) {
  if (wiring.job || wiring.resolved) {
    job_ = wiring.job;
    return;
  }
  JobRequest api;
  api.job = options.job;
  api.rank = options.rank;
  api.world_size = options.world_size;
  api.source = "options";
  absl::StatusOr<std::optional<v1::JobMember>> job =
      argsdump::ResolveJob({CommandLineDumpFlags().job, api}, [](const char* name) {
        return std::getenv(name);
      });
  if (!job.ok()) {
    const std::string text = absl::StrCat("the job identity cannot be used (",
                                          job.status().message(),
                                          "); the capture is no job's");
    PrintDumpLog(DumpLog::kWarning, text);
    warnings_.push_back(text);
    return;
  }
  job_ = *job;
  if (job_) {
    PrintDumpLog(DumpLog::kInfo,
                 absl::StrCat("job ", job_->job(), " rank ", job_->rank(),
                              job_->world_size() > 0 ? absl::StrCat(" of ", job_->world_size())
                                                     : std::string(),
                              " (from ", job_->source(), ")"));
  }
}

SimConfig SessionSetup::RuntimeConfig(const SessionOptions& options,
                                      const SessionWiring& wiring) const {
  SimConfig sim;
  if (wiring.sim) {
    sim = *wiring.sim;
  } else {
    sim.scheduler_threads = options.scheduler_threads;
    sim.worker_threads = options.worker_threads;
    sim.max_inflight_per_scheduler = options.max_inflight_per_scheduler;
  }
  sim.dump = config_;
  return sim;
}

void SessionSetup::SetApi(const DumpConfigEntry& api, bool resolved_by_caller) {
  std::vector<DumpLog> logs;
  const DumpConfigEntry checked = CheckApiEntry(api, &logs);
  if (resolved_by_caller) {
    config_ = ResolveDumpConfig({{"API", "API", checked}}, &logs);
  } else {
    for (DumpConfigSource& source : above_file_) {
      if (source.short_name == "API") source.entry = checked;
    }
    if (watcher_ != nullptr) {
      watcher_ = std::make_unique<DumpConfigWatcher>(above_file_, config_file_);
    }
    config_ = ResolveDumpSources(above_file_, watcher_.get(), default_level_, &logs);
  }
  for (const DumpLog& l : logs) PrintDumpLog(l.severity, l.text);
}

bool SessionSetup::PollFile() {
  if (watcher_ == nullptr) return false;
  std::vector<DumpLog> logs;
  std::optional<DumpConfig> next = watcher_->Poll(&logs);
  for (const DumpLog& l : logs) PrintDumpLog(l.severity, l.text);
  if (!next) return false;
  config_ = *next;
  return true;
}

void SetLabel(CaptureLabels* labels, const std::string& key, const std::string& value) {
  for (auto& [k, v] : *labels) {
    if (k == key) {
      v = value;
      return;
    }
  }
  labels->emplace_back(key, value);
}

CaptureLabels SessionLabels(const SessionOptions& options, const SessionWiring& wiring,
                            const DumpConfig& config, const std::string& test_case) {
  CaptureLabels labels;
  if (wiring.test_labels && !EnvOrEmpty("TEST_TARGET").empty()) {
    SetLabel(&labels, "target", EnvOrEmpty("TEST_TARGET"));
    if (!test_case.empty()) SetLabel(&labels, "test_case", test_case);
    if (!EnvOrEmpty("TEST_SHARD_INDEX").empty()) {
      SetLabel(&labels, "shard", EnvOrEmpty("TEST_SHARD_INDEX"));
    }
  }
  for (const auto& [k, v] : config.labels) SetLabel(&labels, k, v);
  for (const auto& [k, v] : options.labels) SetLabel(&labels, k, v);
  return labels;
}

}  // namespace argsdump
