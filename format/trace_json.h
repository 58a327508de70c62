// A capture's or a job's timeline in the JSON trace format that Perfetto's UI
// and chrome://tracing open: {"traceEvents": [...], "displayTimeUnit": "ns"}.
// A process per rank, a track (tid) per device thread, one complete ("X")
// slice per task named by its kernels, the task's records as its arguments.
// Times are placed on one job-wide base through each rank's CaptureClock, so
// ranks line up; every string (kernel names are user data) is escaped.
#ifndef ARGSDUMP_FORMAT_TRACE_JSON_H_
#define ARGSDUMP_FORMAT_TRACE_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "format/kernel_table.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

// One rank's capture: what the trace needs of it.
struct TraceRank {
  // The process's name: "rank 3 (train_r3)", or the capture's name.
  std::string label;
  v1::CaptureClock clock;
  KernelTable kernels;
  std::vector<v1::ArgRecord> records;
};

// What TraceJson wrote.
struct TraceCounts {
  uint64_t slices = 0;
  // Tasks with no completion time (a hang, a crash): a slice to the rank's
  // last known time, with "incomplete": true among its arguments.
  uint64_t incomplete = 0;
  // Tasks whose records carry no time at all (captures made before records
  // carried times): left out.
  uint64_t untimed = 0;
};

// The trace of `ranks` (rank i is process i + 1). A rank's base on the
// job's clock is its clock's base_unix_ns, plus server_offset_ns when
// has_server_offset; the earliest rank's base is the trace's 0. A task is
// placed from its earliest dispatch_ns to its latest complete_ns, in
// microseconds (fractional).
std::string TraceJson(const std::vector<TraceRank>& ranks, TraceCounts* counts = nullptr);

// `text` as a JSON string, quotes included; control characters and
// anything that is not UTF-8 are escaped (\u00XX per byte of the latter).
void AppendTraceJsonString(const std::string& text, std::string* out);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_TRACE_JSON_H_
