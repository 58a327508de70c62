#include "format/trace_json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "format/names.h"

namespace argsdump {
namespace {

// One task of one rank, gathered from its records.
struct TraceTask {
  uint64_t dispatch_ns = 0;  // earliest known; 0: none
  uint64_t complete_ns = 0;  // latest known; 0: never completed
  uint32_t thread = 0;
  uint32_t step = 0;
  std::vector<const v1::ArgRecord*> records;
};

// A slice, ready to write: its place (pid, tid, ts) orders the output.
struct Slice {
  int pid = 0;
  uint32_t tid = 0;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  bool incomplete = false;
  std::string json;  // the whole event
};

// Microseconds with the nanoseconds as three decimals: exact, and what the
// format's "ts" and "dur" hold.
std::string Micros(int64_t ns) {
  const bool negative = ns < 0;
  const uint64_t abs_ns = negative ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  std::string frac = std::to_string(abs_ns % 1000);
  frac.insert(0, 3 - frac.size(), '0');
  return absl::StrCat(negative ? "-" : "", abs_ns / 1000, ".", frac);
}

void AppendDouble(double v, std::string* out) {
  if (std::isfinite(v)) {
    absl::StrAppend(out, v);
  } else {
    AppendTraceJsonString(std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity"), out);
  }
}

// The rank's base on the job's clock (wall clock, ns).
int64_t RankBase(const TraceRank& rank) {
  return rank.clock.base_unix_ns() +
         (rank.clock.has_server_offset() ? rank.clock.server_offset_ns() : 0);
}

void AppendRecord(const v1::ArgRecord& r, std::string* out) {
  out->append("{\"role\": ");
  AppendTraceJsonString(RoleName(r.role()), out);
  out->append(", \"stage\": ");
  AppendTraceJsonString(StageName(r.stage()), out);
  absl::StrAppend(out, ", \"arg_index\": ", r.arg_index(), ", \"dtype\": ");
  AppendTraceJsonString(DTypeName(r.dtype()), out);
  out->append(", \"shape\": [");
  for (int d = 0; d < r.shape_size(); ++d) absl::StrAppend(out, d > 0 ? ", " : "", r.shape(d));
  out->append("]");
  if (r.has_stats()) {
    const v1::TensorStats& s = r.stats();
    absl::StrAppend(out, ", \"stats\": {\"count\": ", s.count(), ", \"min\": ");
    AppendDouble(s.min(), out);
    out->append(", \"max\": ");
    AppendDouble(s.max(), out);
    out->append(", \"mean\": ");
    AppendDouble(s.mean(), out);
    absl::StrAppend(out, ", \"nan\": ", s.nan(), ", \"pos_inf\": ", s.pos_inf(),
                    ", \"neg_inf\": ", s.neg_inf(), "}");
  }
  if (r.nonfinite()) out->append(", \"nonfinite\": true");
  // The record, as the viewer's and the service's task filter name it.
  out->append(", \"record\": ");
  AppendTraceJsonString(absl::StrCat("task=", TaskIdHex(r.task_id()), "&arg_index=",
                                     r.arg_index(), "&stage=", StageName(r.stage())),
                        out);
  out->append("}");
}

// The tasks of one rank, by task id (records in their order).
std::map<uint64_t, TraceTask> GatherTasks(const TraceRank& rank, uint64_t* last_known_ns) {
  std::map<uint64_t, TraceTask> tasks;
  for (const v1::ArgRecord& r : rank.records) {
    TraceTask& t = tasks[r.task_id()];
    if (t.records.empty()) {
      t.thread = r.device_thread();
      t.step = r.step();
    }
    t.records.push_back(&r);
    if (r.dispatch_ns() != 0 && (t.dispatch_ns == 0 || r.dispatch_ns() < t.dispatch_ns)) {
      t.dispatch_ns = r.dispatch_ns();
    }
    t.complete_ns = std::max<uint64_t>(t.complete_ns, r.complete_ns());
    *last_known_ns = std::max<uint64_t>({*last_known_ns, r.dispatch_ns(), r.complete_ns()});
  }
  return tasks;
}

Slice TaskSlice(const TraceRank& rank, int pid, int64_t base_ns, uint64_t task_id,
                const TraceTask& t, uint64_t last_known_ns) {
  const bool complete = t.complete_ns >= t.dispatch_ns && t.complete_ns != 0;
  const uint64_t end = complete ? t.complete_ns : std::max(last_known_ns, t.dispatch_ns);
  Slice s;
  s.pid = pid;
  s.tid = t.thread;
  s.ts_ns = base_ns + static_cast<int64_t>(t.dispatch_ns);
  s.dur_ns = static_cast<int64_t>(end - t.dispatch_ns);
  s.incomplete = !complete;
  const v1::ArgRecord& first = *t.records.front();
  std::string name = KernelNames(rank.kernels, first.func_ids().begin(), first.func_ids().end());
  if (name.empty()) name = "task";
  std::string& out = s.json;
  out.append("{\"ph\": \"X\", \"name\": ");
  AppendTraceJsonString(name, &out);
  absl::StrAppend(&out, ", \"pid\": ", pid, ", \"tid\": ", t.thread, ", \"ts\": ",
                  Micros(s.ts_ns), ", \"dur\": ", Micros(s.dur_ns), ", \"args\": {\"task\": ");
  AppendTraceJsonString(TaskIdHex(task_id), &out);
  absl::StrAppend(&out, ", \"step\": ", t.step);
  if (!complete) out.append(", \"incomplete\": true");
  out.append(", \"records\": [");
  for (size_t i = 0; i < t.records.size(); ++i) {
    if (i > 0) out.append(", ");
    AppendRecord(*t.records[i], &out);
  }
  out.append("]}}");
  return s;
}

void AppendMetadata(const char* what, int pid, const uint32_t* tid, const std::string& name,
                    std::string* out) {
  absl::StrAppend(out, "{\"ph\": \"M\", \"name\": \"", what, "\", \"pid\": ", pid);
  if (tid != nullptr) absl::StrAppend(out, ", \"tid\": ", *tid);
  out->append(", \"args\": {\"name\": ");
  AppendTraceJsonString(name, out);
  out->append("}}");
}

}  // namespace

void AppendTraceJsonString(const std::string& text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto escape_byte = [&](unsigned char c) {
    out->append("\\u00");
    out->push_back(kHex[c >> 4]);
    out->push_back(kHex[c & 15]);
  };
  out->push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++p;
      continue;
    }
    if (c < 0x20 || c == 0x7f) {
      escape_byte(c);
      ++p;
      continue;
    }
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++p;
      continue;
    }
    // A whole UTF-8 sequence is kept; a broken one is escaped byte by byte.
    const int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool whole = len > 0 && end - p >= len && !(c == 0xC0 || c == 0xC1 || c > 0xF4);
    for (int i = 1; whole && i < len; ++i) whole = (p[i] & 0xC0) == 0x80;
    if (!whole) {
      escape_byte(c);
      ++p;
      continue;
    }
    out->append(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    p += len;
  }
  out->push_back('"');
}

std::string TraceJson(const std::vector<TraceRank>& ranks, TraceCounts* counts) {
  TraceCounts local;
  TraceCounts& n = counts != nullptr ? *counts : local;
  n = TraceCounts();
  int64_t job_base = std::numeric_limits<int64_t>::max();
  for (const TraceRank& rank : ranks) job_base = std::min(job_base, RankBase(rank));
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  bool first_event = true;
  auto begin_event = [&] {
    if (!first_event) out.append(",\n");
    first_event = false;
  };
  std::vector<Slice> slices;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const TraceRank& rank = ranks[i];
    const int pid = static_cast<int>(i) + 1;
    begin_event();
    AppendMetadata("process_name", pid, nullptr, rank.label, &out);
    uint64_t last_known_ns = 0;
    const std::map<uint64_t, TraceTask> tasks = GatherTasks(rank, &last_known_ns);
    std::map<uint32_t, bool> threads;
    for (const auto& [id, t] : tasks) {
      if (t.dispatch_ns == 0) {
        ++n.untimed;
        continue;
      }
      slices.push_back(TaskSlice(rank, pid, RankBase(rank) - job_base, id, t, last_known_ns));
      if (slices.back().incomplete) ++n.incomplete;
      threads[t.thread] = true;
    }
    for (const auto& [thread, unused] : threads) {
      begin_event();
      AppendMetadata("thread_name", pid, &thread, absl::StrCat("device thread ", thread), &out);
    }
  }
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return std::tie(a.pid, a.tid, a.ts_ns, a.dur_ns) < std::tie(b.pid, b.tid, b.ts_ns, b.dur_ns);
  });
  for (const Slice& s : slices) {
    begin_event();
    out.append(s.json);
  }
  n.slices = slices.size();
  out.append("\n]}\n");
  return out;
}

}  // namespace argsdump
