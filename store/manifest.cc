#include "store/manifest.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/thread.h"
#include "base/utf8.h"
#include "store/capture_store.h"
#include "store/journal.h"
#include "format/kernel_table.h"
#include "format/device_crash.h"
#include "format/manifest_fields.h"
#include "format/names.h"
#include "format/record.h"

namespace argsdump {
namespace {

// A growable text buffer. Entries are formatted through a Cursor into room
// reserved for a whole entry: the manifest of a 10 M-record capture is a few
// GB of text, so every entry is built from literals and std::to_chars
// straight into the buffer, with the write position in a register (stores
// through a char* into a member would make the compiler reload the member
// after every store).
class TextBuffer {
 public:
  void Clear() { size_ = 0; }
  // Room for `n` more bytes at end().
  char* Reserve(size_t n) {
    if (size_ + n > data_.size()) data_.resize(std::max(2 * data_.size(), size_ + n));
    return &data_[size_];
  }
  void CommitTo(const char* end) { size_ = static_cast<size_t>(end - data_.data()); }
  const char* data() const { return data_.data(); }
  size_t size() const { return size_; }

 private:
  std::string data_;
  size_t size_ = 0;
};

// The longest entry: fixed text, 5-dim shape and strides, a scalar value.
constexpr size_t kMaxEntryBytes = 1024;

struct Cursor {
  char* p;
  template <size_t N>
  void Lit(const char (&text)[N]) {
    std::memcpy(p, text, N - 1);
    p += N - 1;
  }
  void Str(absl::string_view text) {
    std::memcpy(p, text.data(), text.size());
    p += text.size();
  }
  void Push(char c) { *p++ = c; }
  void Uint(uint64_t v) { p = std::to_chars(p, p + 20, v).ptr; }
  void Bool(bool v) {
    if (v) {
      Lit("true");
    } else {
      Lit("false");
    }
  }
  template <typename T>
  void UintArray(const T* v, uint32_t n) {
    Push('[');
    for (uint32_t i = 0; i < n; ++i) {
      if (i > 0) Lit(", ");
      Uint(v[i]);
    }
    Push(']');
  }
  void TaskId(uint64_t id) {
    static constexpr char kHex[] = "0123456789abcdef";
    p[0] = '0';
    p[1] = 'x';
    for (int i = 0; i < 16; ++i) p[2 + i] = kHex[(id >> (60 - 4 * i)) & 0xF];
    p += 18;
  }
};

// A double as JSON: the shortest text that reads back the same (stats are
// finite: NaN and infinities are counted, not averaged).
std::string JsonDouble(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return FormatScalarJson(v1::DTYPE_FLOAT64, bits);
}

}  // namespace

void ManifestContents::SetInfo(const v1::CaptureInfo& info) {
  level = info.level();
  reported_level = ReportedLevel(info);
  scope.reset();
  if (info.has_scope()) scope = info.scope();
  labels = SortedLabels(info);
  step_levels.assign(info.step_levels().begin(), info.step_levels().end());
  device_crash.reset();
  if (info.has_device_crash()) device_crash = info.device_crash();
  kernels = info.kernels();
  job.reset();
  if (info.has_job()) job = info.job();
  clock.reset();
  if (info.has_clock()) clock = info.clock();
}

std::vector<std::pair<std::string, std::string>> SortedLabels(const v1::CaptureInfo& info) {
  std::vector<std::pair<std::string, std::string>> labels(info.labels().begin(),
                                                          info.labels().end());
  std::sort(labels.begin(), labels.end());
  return labels;
}

void AppendJsonString(absl::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++p;
    } else if (c < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xF]);
      ++p;
    } else if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++p;
    } else {
      const size_t n = Utf8SequenceLength(
          absl::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(end - p)));
      if (n > 0) {
        out->append(reinterpret_cast<const char*>(p), n);
        p += n;
      } else {
        out->append("\\ufffd");
        ++p;
      }
    }
  }
  out->push_back('"');
}

namespace {

// What one entry's field writers see. `steps`: the capture spans more than
// step 0, so every entry says its step.
struct EntryToWrite {
  const ManifestRow& r;
  bool steps;
  const StatsRow* stats;
};

const absl::string_view kRoles[] = {RoleName(v1::ROLE_UNSPECIFIED), RoleName(v1::ROLE_INPUT),
                                    RoleName(v1::ROLE_OUTPUT), RoleName(v1::ROLE_INOUT)};
const absl::string_view kStages[] = {StageName(v1::STAGE_UNSPECIFIED),
                                     StageName(v1::STAGE_BEFORE_DISPATCH),
                                     StageName(v1::STAGE_AFTER_COMPLETION)};
const absl::string_view kKinds[] = {KindName(v1::KIND_UNSPECIFIED), KindName(v1::KIND_TENSOR),
                                    KindName(v1::KIND_SCALAR)};

// `, "key": ` (the first field opens the entry instead).
template <ManifestField F>
void Key(Cursor& c) {
  if (F == ManifestField::kTaskId) {
    c.Lit("    {\"");
  } else {
    c.Lit(", \"");
  }
  c.Str(InfoOf(F).key);
  c.Lit("\": ");
}

// One writer per field of format/manifest_fields.h; a field without one
// does not build. A field written only sometimes says when.
template <ManifestField F>
void Put(Cursor& c, const EntryToWrite& e) = delete;

template <>
void Put<ManifestField::kTaskId>(Cursor& c, const EntryToWrite& e) {
  Key<ManifestField::kTaskId>(c);
  c.Push('"');
  c.TaskId(e.r.task_id);
  c.Push('"');
}
template <>
void Put<ManifestField::kStep>(Cursor& c, const EntryToWrite& e) {
  if (!e.steps) return;
  Key<ManifestField::kStep>(c);
  c.Uint(e.r.step);
}
template <>
void Put<ManifestField::kFuncId>(Cursor& c, const EntryToWrite& e) {
  Key<ManifestField::kFuncId>(c);
  if (e.r.func_count == 0) {
    c.Lit("[-1]");
  } else {
    c.UintArray(e.r.func_ids, e.r.func_count);
  }
}
// A name, quoted.
template <ManifestField F>
void PutName(Cursor& c, absl::string_view name) {
  Key<F>(c);
  c.Push('"');
  c.Str(name);
  c.Push('"');
}
template <>
void Put<ManifestField::kRole>(Cursor& c, const EntryToWrite& e) {
  PutName<ManifestField::kRole>(
      c, e.r.role < 4 ? kRoles[e.r.role] : RoleName(static_cast<v1::Role>(e.r.role)));
}
template <>
void Put<ManifestField::kStage>(Cursor& c, const EntryToWrite& e) {
  PutName<ManifestField::kStage>(
      c, e.r.stage < 3 ? kStages[e.r.stage] : StageName(static_cast<v1::Stage>(e.r.stage)));
}
template <>
void Put<ManifestField::kKind>(Cursor& c, const EntryToWrite& e) {
  PutName<ManifestField::kKind>(
      c, e.r.kind < 3 ? kKinds[e.r.kind] : KindName(static_cast<v1::Kind>(e.r.kind)));
}
template <>
void Put<ManifestField::kDtype>(Cursor& c, const EntryToWrite& e) {
  const std::optional<DataType> d = FromProtoDType(e.r.dtype);
  if (d) {
    const std::string_view name = DataTypeName(*d);
    PutName<ManifestField::kDtype>(c, absl::string_view(name.data(), name.size()));
  } else {
    PutName<ManifestField::kDtype>(c, DTypeName(e.r.dtype));
  }
}
template <>
void Put<ManifestField::kValue>(Cursor& c, const EntryToWrite& e) {
  if (e.r.kind != v1::KIND_SCALAR) return;
  Key<ManifestField::kValue>(c);
  c.Str(FormatScalarJson(e.r.dtype, e.r.scalar_bits));
}
template <>
void Put<ManifestField::kShape>(Cursor& c, const EntryToWrite& e) {
  Key<ManifestField::kShape>(c);
  c.UintArray(e.r.shape, e.r.ndims);
}
template <>
void Put<ManifestField::kStrides>(Cursor& c, const EntryToWrite& e) {
  Key<ManifestField::kStrides>(c);
  c.UintArray(e.r.strides, e.r.ndims);
}
// The simple fields (format/manifest_fields.h), from the row's member of
// the same name.
template <ManifestField F, FieldStyle S, typename T>
void PutSimple(Cursor& c, T value) {
  if constexpr (S == FieldStyle::kTrueFlag) {
    if (!value) return;
    Key<F>(c);
    c.Lit("true");
  } else if constexpr (S == FieldStyle::kNonZero) {
    if (value == 0) return;
    Key<F>(c);
    c.Uint(value);
  } else if constexpr (S == FieldStyle::kBool) {
    Key<F>(c);
    c.Bool(value);
  } else {
    Key<F>(c);
    c.Uint(value);
  }
}
#define ARGSDUMP_PUT_SIMPLE(id, style, member)                                 \
  template <>                                                                  \
  void Put<ManifestField::k##id>(Cursor & c, const EntryToWrite& e) {          \
    PutSimple<ManifestField::k##id, FieldStyle::style>(c, e.r.member);         \
  }
ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_PUT_SIMPLE)
#undef ARGSDUMP_PUT_SIMPLE

template <>
void Put<ManifestField::kStats>(Cursor& c, const EntryToWrite& e) {
  if (e.stats == nullptr) return;
  const StatsRow& s = *e.stats;
  Key<ManifestField::kStats>(c);
  c.Lit("{\"count\": ");
  c.Uint(s.count);
  c.Lit(", \"min\": ");
  c.Str(JsonDouble(s.min));
  c.Lit(", \"max\": ");
  c.Str(JsonDouble(s.max));
  c.Lit(", \"mean\": ");
  c.Str(JsonDouble(s.mean));
  c.Lit(", \"l2\": ");
  c.Str(JsonDouble(s.l2));
  c.Lit(", \"nan\": ");
  c.Uint(s.nan);
  c.Lit(", \"pos_inf\": ");
  c.Uint(s.pos_inf);
  c.Lit(", \"neg_inf\": ");
  c.Uint(s.neg_inf);
  c.Lit(", \"zeros\": ");
  c.Uint(s.zeros);
  c.Push('}');
}

void AppendEntry(TextBuffer* out, const ManifestRow& row, bool steps, const StatsRow* stats) {
  const ManifestRow r = row;  // a local copy: stores into the text cannot alias it
  const EntryToWrite e{r, steps, stats};
  Cursor c{out->Reserve(kMaxEntryBytes)};
#define ARGSDUMP_PUT_FIELD(id, key, presence) Put<ManifestField::k##id>(c, e);
  ARGSDUMP_MANIFEST_FIELDS(ARGSDUMP_PUT_FIELD)
#undef ARGSDUMP_PUT_FIELD
  c.Push('}');
  out->CommitTo(c.p);
}

// Formats entries [begin, end) of the manifest order, each preceded by the
// separator that follows the entry before it.
void FormatEntries(const ManifestContents& m, size_t begin, size_t end, TextBuffer* out) {
  out->Clear();
  for (size_t i = begin; i < end; ++i) {
    char* p = out->Reserve(2);
    if (i > 0) *p++ = ',';
    *p++ = '\n';
    out->CommitTo(p);
    const uint32_t id = (*m.order)[i];
    AppendEntry(out, (*m.records)[id], m.has_steps.value_or(false),
                m.stats != nullptr ? m.stats->Get(id) : nullptr);
  }
}

}  // namespace

void RecordTally::FillInto(v1::CaptureCounters* c) const {
  c->set_total_args(total_);
  c->set_before_dispatch(before_);
  c->set_after_completion(total_ - before_);
  c->set_input_args(input_);
  c->set_output_args(output_);
  c->set_inout_args(inout_);
  c->set_truncated_args(truncated_);
  c->set_dropped_overwrite(overwritten_);
  c->set_payload_bytes(bytes_);
  c->set_in_flight_snapshots(in_flight_);
  c->set_overflow_args(overflow_);
  if (overflow_ > 0) {
    c->set_first_overflow_task(first_overflow_);
  } else {
    c->clear_first_overflow_task();
  }
}

void CountRecords(const RecordList& records, v1::CaptureCounters* c) {
  RecordTally tally;
  for (const ManifestRow& r : records) tally.Add(r);
  tally.FillInto(c);
}

namespace {

// What the text says before args[] that needs a pass over the rows:
// whether entries carry their step, and the overflow check's result (how
// many tasks, the first in task = manifest order).
struct RowSummary {
  bool any_step = false;
  uint64_t overflow_tasks = 0;
  std::optional<uint64_t> first_overflow;
};

RowSummary SummarizeRows(const ManifestContents& m) {
  RowSummary sum;
  uint64_t last_task = 0;
  for (uint32_t i : *m.order) {
    const ManifestRow& r = (*m.records)[i];
    sum.any_step = sum.any_step || r.step != 0;
    if (!r.overflow || (sum.first_overflow && r.task_id == last_task)) continue;
    ++sum.overflow_tasks;
    last_task = r.task_id;
    if (!sum.first_overflow) sum.first_overflow = r.task_id;
  }
  return sum;
}

void AppendRecovery(const RecoveryReport& r, std::string* out) {
  absl::StrAppend(out, "  \"recovery\": {\"records_kept\": ", r.records,
                  ", \"records_without_payload\": ", r.records_without_payload,
                  ", \"records_unplaced\": ", r.records_unplaced,
                  ", \"bin_bytes\": ", r.bin_bytes, ", \"bin_missing\": ",
                  r.bin_missing ? "true" : "false", ", \"journal_bytes\": ", r.journal_bytes,
                  ", \"journal_damage\": [");
  for (size_t i = 0; i < r.damage.size(); ++i) {
    absl::StrAppend(out, i > 0 ? ", " : "", "{\"offset\": ", r.damage[i].offset,
                    ", \"bytes\": ", r.damage[i].bytes, ", \"why\": ");
    AppendJsonString(r.damage[i].why, out);
    absl::StrAppend(out, ", \"tail\": ", r.damage[i].tail ? "true" : "false", "}");
  }
  out->append("]},\n");
}

// "device_crash": how the device process died, what it was running (one
// line, then one per executing task).
void AppendDeviceCrash(const v1::DeviceCrash& d, std::string* out) {
  absl::StrAppend(out, "  \"device_crash\": {\"signal\": ", d.signal(), ", \"signal_name\": ");
  AppendJsonString(d.signal_name(), out);
  absl::StrAppend(out, ", \"exit_status\": ", d.exit_status());
  if (d.has_fault_address()) {
    absl::StrAppend(out, ", \"fault_address\": \"", FaultAddressHex(d.fault_address()), "\"");
  }
  absl::StrAppend(out, ", \"tasks_in_flight\": ", d.tasks_in_flight(), ", \"description\": ");
  AppendJsonString(d.description(), out);
  out->append(", \"executing\": [");
  for (int i = 0; i < d.executing_size(); ++i) {
    const v1::CrashedTask& t = d.executing(i);
    absl::StrAppend(out, i > 0 ? ",\n" : "\n", "    {\"task_id\": \"", TaskIdHex(t.task_id()),
                    "\", \"func_ids\": [", absl::StrJoin(t.func_ids(), ", "), "], \"func\": ");
    AppendJsonString(t.func(), out);
    out->append(", \"func_type\": ");
    AppendJsonString(t.func_type(), out);
    absl::StrAppend(out, ", \"worker\": ", t.worker(), ", \"thread\": ", t.thread(),
                    ", \"step\": ", t.step(), ", \"crashing\": ", t.crashing() ? "true" : "false",
                    "}");
  }
  out->append("]},\n");
}

// "clock": what the entries' times count from.
void AppendClock(const v1::CaptureClock& clock, std::string* out) {
  absl::StrAppend(out, "  \"clock\": {\"base_monotonic_ns\": ", clock.base_monotonic_ns(),
                  ", \"base_unix_ns\": ", clock.base_unix_ns(), ", \"host\": ");
  AppendJsonString(clock.host(), out);
  if (clock.has_server_offset()) {
    absl::StrAppend(out, ", \"has_server_offset\": true, \"server_offset_ns\": ",
                    clock.server_offset_ns());
  }
  out->append("},\n");
}

// "kernels": the kernel table, one kernel a line.
void AppendKernels(const google::protobuf::RepeatedPtrField<v1::Kernel>& kernels,
                   std::string* out) {
  out->append("  \"kernels\": [");
  for (int i = 0; i < kernels.size(); ++i) {
    const v1::Kernel& k = kernels.Get(i);
    absl::StrAppend(out, i > 0 ? ",\n" : "\n", "    {\"func_id\": ", k.func_id(), ", \"name\": ");
    AppendJsonString(k.name(), out);
    if (!k.type().empty()) {
      out->append(", \"type\": ");
      AppendJsonString(k.type(), out);
    }
    out->append(", \"signature\": [");
    for (int a = 0; a < k.signature_size(); ++a) {
      const v1::KernelArg& arg = k.signature(a);
      absl::StrAppend(out, a > 0 ? ", " : "", "{\"direction\": \"",
                      ArgDirectionName(arg.direction()), "\"");
      if (arg.dtype() != v1::DTYPE_UNSPECIFIED) {
        absl::StrAppend(out, ", \"dtype\": \"", DTypeName(arg.dtype()), "\"");
      }
      out->push_back('}');
    }
    out->append("]}");
  }
  out->append("],\n");
}

// The manifest's text up to and including "  \"args\": [".
std::string ManifestHead(const ManifestContents& m, const RowSummary& sum) {
  std::string out;
  out.reserve(1 << 20);
  const v1::CaptureCounters& c = m.counters;
  absl::StrAppend(
      &out, "{\n  \"run_dir\": \"args_dump\",\n",
      "  \"bin_format\": {\"type\": \"logical_contiguous\", \"byte_order\": \"little_endian\"},\n",
      "  \"dump_args_level\": ", m.scope ? m.reported_level : static_cast<uint32_t>(m.level),
      ",\n");
  if (m.scope) {
    out.append("  \"dump_scope\": {\"overflow\": ");
    out.append(m.scope->overflow() ? "true" : "false");
    out.append(", \"stats\": ");
    AppendJsonString(m.scope->stats().empty() ? "off" : m.scope->stats(), &out);
    out.append(", \"mode\": ");
    AppendJsonString(m.scope->mode().empty() ? "all" : m.scope->mode(), &out);
    out.append("},\n");
  }
  if (m.step_levels.size() > 1) {
    out.append("  \"dump_levels\": [");
    for (size_t i = 0; i < m.step_levels.size(); ++i) {
      const v1::StepLevel& l = m.step_levels[i];
      absl::StrAppend(&out, i > 0 ? ", " : "", "{\"first_step\": ", l.first_step(),
                      ", \"level\": ", l.level());
      if (m.scope) {
        absl::StrAppend(&out, ", \"overflow\": ", l.overflow() ? "true" : "false",
                        ", \"stats\": ");
        AppendJsonString(l.stats().empty() ? "off" : l.stats(), &out);
        out.append(", \"mode\": ");
        AppendJsonString(l.mode().empty() ? "all" : l.mode(), &out);
      }
      out.append("}");
    }
    out.append("],\n");
  }
  if (!m.labels.empty()) {
    out.append("  \"labels\": {");
    for (size_t i = 0; i < m.labels.size(); ++i) {
      if (i > 0) out.append(", ");
      AppendJsonString(m.labels[i].first, &out);
      out.append(": ");
      AppendJsonString(m.labels[i].second, &out);
    }
    out.append("},\n");
  }
  if (m.job) {
    out.append("  \"job\": {\"job\": ");
    AppendJsonString(m.job->job(), &out);
    absl::StrAppend(&out, ", \"rank\": ", m.job->rank(), ", \"world_size\": ",
                    m.job->world_size(), ", \"source\": ");
    AppendJsonString(m.job->source(), &out);
    out.append("},\n");
  }
  if (m.clock) AppendClock(*m.clock, &out);
  absl::StrAppend(
      &out, "  \"total_args\": ", c.total_args(), ",\n",
      "  \"before_dispatch\": ", c.before_dispatch(), ",\n",
      "  \"after_completion\": ", c.after_completion(), ",\n",
      "  \"input_args\": ", c.input_args(), ",\n",
      "  \"output_args\": ", c.output_args(), ",\n",
      "  \"inout_args\": ", c.inout_args(), ",\n",
      "  \"truncated_args\": ", c.truncated_args(), ",\n");
  absl::StrAppend(
      &out, "  \"dropped_records\": ", c.dropped_records(), ",\n",
      "  \"dropped_overwrite\": ", c.dropped_overwrite(), ",\n",
      "  \"dropped_by_cause\": {\"ready_queue_full\": ", c.dropped_ready_queue_full(),
      ", \"free_queue_empty\": ", c.dropped_free_queue_empty(),
      ", \"arena_ack_timeout\": ", c.dropped_arena_ack_timeout(),
      ", \"flush_timeout\": ", c.dropped_flush_timeout(),
      ", \"host_gone\": ", c.dropped_host_gone(), "},\n",
      "  \"in_flight_snapshots\": ", c.in_flight_snapshots(), ",\n",
      "  \"device_waits\": {\"arena\": ", c.arena_waits(), ", \"gate\": ", c.gate_waits(),
      "},\n",
      "  \"payload_bytes\": ", c.payload_bytes(), ",\n",
      "  \"payload_bytes_stored\": ", c.payload_bytes_stored(), ",\n",
      "  \"deduplicated_args\": ", c.deduplicated_args(), ",\n");
  if (m.recovered) out.append("  \"recovered_from_journal\": true,\n");
  if (m.recovery != nullptr) AppendRecovery(*m.recovery, &out);
  if (sum.first_overflow) {
    absl::StrAppend(&out, "  \"overflow_tasks\": ", sum.overflow_tasks, ",\n",
                    "  \"first_overflow_task\": \"", TaskIdHex(*sum.first_overflow), "\",\n");
  }
  if (m.device_crash) AppendDeviceCrash(*m.device_crash, &out);
  if (!m.kernels.empty()) AppendKernels(m.kernels, &out);
  absl::StrAppend(&out, "  \"bin_file\": ", m.has_bin_file ? "\"args.bin\"" : "null", ",\n",
                  "  \"args\": [");
  return out;
}

// The entries of args[], formatted by two threads into a ring of buffers
// and written in order by this one; `tmp` names the file in errors.
absl::Status WriteEntries(const ManifestContents& m, FILE* f, const std::string& tmp) {
  // Formatter threads fill chunks of entries into a ring of buffers (chunk c
  // by formatter c % kFormatters, into slot c % kRing) while this thread
  // writes the finished ones, in order: bounded memory, and the formatting
  // and the copy into the page cache spread over every core.
  constexpr size_t kChunk = 1024;  // ~330 KiB of text: stays in cache
  constexpr size_t kFormatters = 2;
  constexpr size_t kRing = 3 * kFormatters;
  constexpr size_t kNone = ~size_t{0};
  const size_t n = m.order->size();
  const size_t chunks = (n + kChunk - 1) / kChunk;
  TextBuffer ring[kRing];
  size_t slot_chunk[kRing];  // the chunk a slot holds, once formatted; under mu
  std::fill(slot_chunk, slot_chunk + kRing, kNone);
  std::mutex mu;
  std::condition_variable cv;
  size_t written = 0;  // chunks, under mu
  bool abandoned = false;
  std::vector<std::thread> formatters;
  // A formatter the system refuses to start (ulimit -v, a thread limit):
  // this thread formats its chunks itself, as it comes to them.
  bool started[kFormatters] = {};
  for (size_t k = 0; k < std::min(kFormatters, chunks); ++k) {
    formatters.emplace_back();
    started[k] = StartThread("a manifest formatter thread", &formatters.back(), [&, k] {
      ::pthread_setname_np(::pthread_self(), k == 0 ? "ad-format-0" : "ad-format-1");
      for (size_t c = k; c < chunks; c += kFormatters) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return abandoned || c < written + kRing; });
          if (abandoned) return;
        }
        FormatEntries(m, c * kChunk, std::min(n, (c + 1) * kChunk), &ring[c % kRing]);
        {
          std::lock_guard<std::mutex> lock(mu);
          slot_chunk[c % kRing] = c;
        }
        cv.notify_all();
      }
    }).ok();
    if (!started[k]) formatters.pop_back();
  }
  bool write_failed = false;
  for (size_t c = 0; c < chunks && !write_failed; ++c) {
    if (!started[c % kFormatters]) {
      // The slot's previous chunk (c - kRing) is written: it is free.
      FormatEntries(m, c * kChunk, std::min(n, (c + 1) * kChunk), &ring[c % kRing]);
    } else {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return slot_chunk[c % kRing] == c; });
    }
    const TextBuffer& chunk = ring[c % kRing];
    for (size_t at = 0; at < chunk.size() && !write_failed; at += kFileWriteBytes) {
      const size_t len = std::min(kFileWriteBytes, chunk.size() - at);
      write_failed = std::fwrite(chunk.data() + at, 1, len, f) != len;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      written = c + 1;
      abandoned = write_failed;
    }
    cv.notify_all();
  }
  for (std::thread& t : formatters) t.join();
  if (write_failed) return absl::DataLossError(absl::StrCat("manifest ", tmp, ": write failed"));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteManifest(const std::string& path, const ManifestContents& contents,
                           const std::function<absl::Status()>& before_rename) {
  ManifestContents m = contents;
  const RowSummary sum = SummarizeRows(m);
  if (!m.has_steps) m.has_steps = sum.any_step;
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("manifest ", tmp, ": cannot create: ", std::strerror(errno)));
  }
  std::string out = ManifestHead(m, sum);
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) {
    return absl::DataLossError(absl::StrCat("manifest ", tmp, ": write failed"));
  }
  if (absl::Status s = WriteEntries(m, f.get(), tmp); !s.ok()) return s;
  out = m.order->empty() ? "]\n}\n" : "\n  ]\n}\n";
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size() ||
      std::fflush(f.get()) != 0) {
    return absl::DataLossError(absl::StrCat("manifest ", tmp, ": write failed"));
  }
  f.reset();
  if (before_rename) {
    if (absl::Status s = before_rename(); !s.ok()) {
      std::remove(tmp.c_str());
      return s;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat("manifest ", path, ": rename failed: ",
                                            std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace argsdump
