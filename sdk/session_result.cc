#include "sdk/session_result.h"

#include <algorithm>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sdk/isolated_device.h"
#include "sdk/session_log.h"

namespace argsdump {

void ApplyDeviceReport(const v1::DeviceReport& d, SessionResult* result, SessionReport* report,
                       std::vector<std::string>* warnings, StepCount* steps) {
  SessionResult& r = *result;
  r.run_status = DeviceStatusOf(d.run_status());
  steps->begun = d.steps_begun();
  steps->step = d.has_step() ? std::optional<uint32_t>(d.step()) : std::nullopt;
  r.tasks = d.tasks_submitted();
  r.tasks_completed = d.tasks_completed();
  r.dump_skipped_tasks = d.dump_skipped_tasks();
  r.overflow_tasks = d.overflow_tasks();
  if (d.has_first_overflow_task()) r.first_overflow_task = d.first_overflow_task();
  for (const std::string& line : d.dump_log()) report->dump_log.push_back(line);
  for (const std::string& w : d.warnings()) {
    if (std::find(warnings->begin(), warnings->end(), w) == warnings->end()) {
      warnings->push_back(w);
    }
  }
  for (const auto& l : d.step_levels()) {
    report->step_levels.push_back(
        {l.first_step(), l.level(), l.overflow(),
         l.stats() <= 2 ? static_cast<StatsMode>(l.stats()) : StatsMode::kOff,
         l.mode() <= 2 ? static_cast<DumpMode>(l.mode()) : DumpMode::kAll});
  }
  r.exception_dumps.assign(d.exception_dumps().begin(), d.exception_dumps().end());
  if (!steps->step && r.tasks > 0 && steps->begun == 0) ++steps->begun;
}

void ApplyRuntime(const SimRuntime& runtime, SessionResult* result, SessionReport* report,
                  std::vector<std::string>* warnings, StepCount* steps) {
  SessionResult& r = *result;
  if (!steps->step && runtime.tasks_submitted() > 0) ++steps->begun;  // step 0, implicitly
  report->step_levels = runtime.step_levels();
  r.tasks = runtime.tasks_submitted();
  r.tasks_completed = runtime.tasks_completed();
  r.dump_skipped_tasks = runtime.dump_skipped_tasks();
  r.overflow_tasks = runtime.overflow_tasks();
  r.first_overflow_task = runtime.first_overflow_task();
  for (std::string& line : runtime.dump_log()) report->dump_log.push_back(std::move(line));
  for (const std::string& w : runtime.warnings()) warnings->push_back(w);
}

StepLevel StartLevel(const DumpConfig& config, const DumpRegion* region, bool dynamic_switch) {
  const bool overflow_only = config.level == 0 && config.overflow && !dynamic_switch;
  const int level = region == nullptr || overflow_only ? 0 : static_cast<int>(region->level());
  return {0, static_cast<uint32_t>(level), region != nullptr && config.overflow, config.stats,
          config.mode};
}

void ApplyDeviceLoss(const DeviceCrashAnalysis& crash, const std::optional<std::string>& hang,
                     const StepLevel& start_level, SessionResult* result,
                     SessionReport* report, StepCount* steps) {
  SessionResult& r = *result;
  r.tasks = crash.tasks_submitted;
  r.tasks_completed = crash.tasks_completed;
  if (hang) {
    r.run_status = absl::DeadlineExceededError(*hang);
    if (r.tasks > 0 && steps->begun == 0) steps->begun = 1;
  } else {
    r.run_status = absl::AbortedError(crash.crash.description());
    r.device_crashed = true;
    r.device_crash = crash.crash.description();
    // The step the device was in when it died: the highest of its tasks.
    uint32_t last = 0;
    for (const auto& t : crash.in_flight) last = std::max(last, t->task.step);
    if (r.tasks > 0 && !steps->step) ++steps->begun;
    steps->begun = std::max(steps->begun, last + (r.tasks > 0 ? 1 : 0));
  }
  report->step_levels.push_back(start_level);
}

void CopyCounts(const SessionReport& report, SessionResult* result) {
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

std::map<uint16_t, std::string> KernelNames(const KernelRegistry& kernels) {
  std::map<uint16_t, std::string> names;
  for (size_t f = 0; f < kernels.size(); ++f) {
    if (const KernelInfo* k = kernels.Find(static_cast<uint16_t>(f))) names[k->func_id] = k->name;
  }
  return names;
}

namespace {

// Each drop cause, and what to raise against it.
constexpr const char* kCauses[][2] = {
    {"ready queue full", "ready_queue_depth (--ready-queue-depth)"},
    {"free queue empty", "buffers_per_thread (--buffers-per-thread)"},
    {"arena ack timeout", "arena_bytes (--arena-bytes)"},
    {"flush timeout", "ready_queue_depth (--ready-queue-depth)"},
    {"host gone", "nothing (the host process ended)"}};
static_assert(sizeof(kCauses) / sizeof(kCauses[0]) == abi::kDropCauseCount);

// The ERROR line of a thread that lost records.
std::string DropLine(uint32_t t, const abi::ThreadState& st, uint64_t written, uint64_t dropped) {
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
  return absl::StrCat(
      "dump flush: thread ", t, " wrote ", written, " records and lost ", dropped, " (",
      absl::StrJoin(causes, ", "), "): the host did not take them within the wait bound; "
      "they are counted in dropped_records. Raise ", absl::StrJoin(raise, " or "));
}

}  // namespace

void LogFlush(const DumpRegion& region, SessionReport* report,
              std::vector<std::string>* warnings) {
  uint64_t written = 0, dropped = 0, truncated = 0;
  for (uint32_t t = 0; t < region.num_threads(); ++t) {
    const abi::ThreadState& st = region.thread_state(t);
    const uint64_t w = st.records_written.load(std::memory_order_acquire);
    const uint64_t d = st.dropped_records.load(std::memory_order_acquire);
    const uint64_t c = st.truncated_records.load(std::memory_order_acquire);
    written += w;
    dropped += d;
    truncated += c;
    if (d > 0) {
      const std::string text = DropLine(t, st, w, d);
      PrintDumpLog(DumpLog::kError, text);
      warnings->push_back(text);
    }
    if (c > 0) {
      const std::string text = absl::StrCat(
          "dump flush: thread ", t, " cut ", c, " tensors larger than the arena to arena/2 "
          "bytes (flagged truncated); raise arena_bytes (sim_run: --arena-bytes) to keep them "
          "whole");
      PrintDumpLog(DumpLog::kWarning, text);
      warnings->push_back(text);
    }
  }
  report->dump_log.push_back(absl::StrCat(
      "dump flush: ", region.num_threads(), " recording threads wrote ", written, " records",
      dropped + truncated == 0 ? "; none dropped or truncated"
                               : absl::StrCat("; dropped ", dropped, ", truncated ", truncated)));
  PrintDumpLog(DumpLog::kInfo, report->dump_log.back());
}

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

std::string SessionSummary(const std::string& name, const SessionResult& r) {
  return absl::StrCat("session ", name, ": ", r.records, " records of ", r.tasks, " tasks in ",
                      r.steps, " step(s); capture: ",
                      !r.capture.empty()  ? r.capture + " on the capture service"
                      : r.wrote_capture   ? CapturePlace(r.capture_dir)
                                          : "none (nothing was selected)");
}

}  // namespace argsdump
