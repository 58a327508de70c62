#include "viewer/viewer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "base/confined_path.h"
#include "base/files.h"
#include "format/device_crash.h"
#include "format/kernel_table.h"
#include "format/dtype.h"
#include "viewer/arg_source.h"
#include "viewer/capture_compare.h"
#include "viewer/job_view.h"
#include "viewer/trace_export.h"
#include "viewer/capture_location.h"
#include "format/compare.h"
#include "viewer/npy.h"
#include "format/names.h"
#include "format/record.h"
#include "tools/progress.h"
#include "viewer/remote_source.h"
#include "viewer/text_export.h"
#include "viewer/viewer_options.h"

namespace argsdump {
namespace {

// Column widths of the listing and the --compare table, shared by their
// headers and their lines. Each holds its column's longest usual value: 7
// digits of index, "0x" and 16 hex digits of task id, the longest stage,
// role and kind names ("before", "output", "tensor"), 3 digits of arg
// index, the longest dtype name ("FP8E4M3FN"), a shape or value of a few
// dimensions, 10 digits of bytes. A longer value widens its line only.
constexpr int kIndexWidth = 7;
constexpr int kTaskIdWidth = 18;
constexpr int kStageWidth = 6;
constexpr int kRoleWidth = 6;
constexpr int kArgIndexWidth = 3;
constexpr int kKindWidth = 6;
constexpr int kDtypeWidth = 9;
constexpr int kShapeWidth = 16;
constexpr int kBytesWidth = 10;
// --geometry's columns: the strides (as wide as a shape), 7 digits of
// start offset, "yes"/"no" of contiguity (as wide as its header, "contig").
constexpr int kStridesWidth = kShapeWidth;
constexpr int kStartWidth = 7;
constexpr int kContigWidth = 6;

// The longest decimal uint64 (20 digits), with the NUL FastIntToBuffer
// writes after it, rounded up.
constexpr size_t kUintBufferBytes = 24;
// Room a listing line needs besides its three columns of any length (a
// scalar's value, the shape, the strides) and the crash mark: every
// bounded column at its widest, the flags, the separators.
constexpr size_t kListingLineFixedBytes = 512;
// Room per shape or stride dimension: up to 20 digits and a comma.
constexpr size_t kListingBytesPerDim = 21;

// --compare capture:NAME names a capture on the service given by --server.
constexpr absl::string_view kCapturePrefix = "capture:";

// A golden file for a tensor holds at most its elements at the widest
// dtype's size (float64, int64) and a .npy header, far shorter than this.
constexpr uint64_t kWidestElementBytes = 8;
constexpr uint64_t kNpyHeaderRoom = 1 << 20;

// A run: the parsed command line and which of our streams are terminals.
struct Options : ViewerOptions {
  ViewerTerminals terminals;
};

// The --stats table's columns after the index: min, max, mean and abs_max
// (7 significant digits, a sign and an exponent), the nan, +inf and -inf
// counts, the zeros count.
constexpr int kStatsValueWidth = 14;
constexpr int kStatsNonfiniteWidth = 6;
constexpr int kStatsZerosWidth = 8;

// The --stats table's header line, in StatsTableRow's columns.
std::string StatsTableHeader(bool kernel_column) {
  return absl::StrFormat("%*s  %*s  %*s  %*s  %*s  %*s  %*s  %*s  %*s%s\n", kIndexWidth, "index",
                         kStatsValueWidth, "min", kStatsValueWidth, "max", kStatsValueWidth,
                         "mean", kStatsValueWidth, "abs_max", kStatsNonfiniteWidth, "nan",
                         kStatsNonfiniteWidth, "+inf", kStatsNonfiniteWidth, "-inf",
                         kStatsZerosWidth, "zeros", kernel_column ? "  (kernel)" : "");
}

// A row of the --stats table; `stored`: numbers the capture stored.
std::string StatsTableRow(uint64_t index, const ElementStats& st, bool stored,
                          const std::string& kernel) {
  const std::string note = absl::StrCat(stored ? "  stored" : "",
                                        kernel.empty() ? "" : "  ", kernel);
  std::string row = absl::StrFormat("%*d  ", kIndexWidth, index);
  if (st.finite == 0) {
    absl::StrAppendFormat(&row, "%*s  %*s  %*s  %*s  ", kStatsValueWidth, "-", kStatsValueWidth,
                          "-", kStatsValueWidth, "-", kStatsValueWidth, "-");
  } else {
    absl::StrAppendFormat(&row, "%*.7g  %*.7g  %*.7g  %*.7g  ", kStatsValueWidth, st.min,
                          kStatsValueWidth, st.max, kStatsValueWidth, st.mean(),
                          kStatsValueWidth, st.abs_max);
  }
  absl::StrAppendFormat(&row, "%*d  %*d  %*d  %*d%s\n", kStatsNonfiniteWidth, st.nan,
                        kStatsNonfiniteWidth, st.pos_inf, kStatsNonfiniteWidth, st.neg_inf,
                        kStatsZerosWidth, st.zeros, note);
  return row;
}

ElementStats FromStored(const ManifestEntry::Stats& s) {
  ElementStats st;
  st.count = s.count;
  st.nan = s.nan;
  st.pos_inf = s.pos_inf;
  st.neg_inf = s.neg_inf;
  st.zeros = s.zeros;
  st.finite = s.count - s.nan - s.pos_inf - s.neg_inf;
  st.min = s.min;
  st.max = s.max;
  st.abs_max = std::max(std::fabs(s.min), std::fabs(s.max));
  st.mean_value = s.mean;
  st.l2_value = s.l2;
  return st;
}

std::string Dims(const std::vector<uint64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

// A listing line written through a char* into room reserved for all of it
// (ListingLineBound): no size checks or reallocation per piece.
struct LineWriter {
  char* p;
  void Str(absl::string_view text) {
    std::memcpy(p, text.data(), text.size());
    p += text.size();
  }
  void Blanks(size_t n) {
    std::memset(p, ' ', n);
    p += n;
  }
  void Push(char c) { *p++ = c; }
  // FastIntToBuffer's digits (it also writes a NUL after them, in the room).
  void Uint(uint64_t v) { p = absl::numbers_internal::FastIntToBuffer(v, p); }
  // `text` in `width` columns, left- or right-aligned (longer text is kept).
  void Column(absl::string_view text, size_t width, bool right) {
    const size_t pad = text.size() < width ? width - text.size() : 0;
    if (right) Blanks(pad);
    Str(text);
    if (!right) Blanks(pad);
  }
  void RightUint(uint64_t v, size_t width) {
    char number[kUintBufferBytes];
    const char* end = absl::numbers_internal::FastIntToBuffer(v, number);
    Column(absl::string_view(number, static_cast<size_t>(end - number)), width, true);
  }
};

// The flags column.
void AppendFlags(const ManifestEntry& e, LineWriter& w) {
  const char* const start = w.p;
  auto flag = [&](absl::string_view f) {
    if (w.p > start) w.Push(',');
    w.Str(f);
  };
  if (e.truncated) flag("truncated");
  if (e.overwritten) flag("overwritten");
  if (e.arg_index_ambiguous) flag("ambiguous");
  if (e.in_flight_snapshot) flag("in-flight");
  if (e.overflow) flag("overflow");
  if (e.nonfinite || (e.stats && e.stats->has_nonfinite())) flag("nonfinite");
  if (e.step != 0) {
    flag("step=");
    w.Uint(e.step);
  }
  if (e.is_tensor() && e.bin_size == 0) flag("no-data");
}

// At least the bytes ListingLine writes for `e` and `mark`: the columns
// of bounded width (numbers of up to 20 digits, the vocabulary's names,
// the flags) and the three of any length.
size_t ListingLineBound(const ManifestEntry& e, absl::string_view mark) {
  return kListingLineFixedBytes + e.value.size() +
         kListingBytesPerDim * (e.shape.size() + e.strides.size()) + mark.size();
}

// --geometry's columns after the shape: the strides
// ("[20,2]"), the start offset and "yes"/"no" for contiguity; "-" in each
// for a scalar.
void AppendGeometry(const ManifestEntry& e, LineWriter& w) {
  if (e.is_scalar()) {
    w.Column("-", kStridesWidth, false);
    w.Str("  ");
    w.Column("-", kStartWidth, true);
    w.Str("  ");
    w.Column("-", kContigWidth, false);
    w.Str("  ");
    return;
  }
  const char* const column = w.p;
  w.Push('[');
  for (size_t i = 0; i < e.strides.size(); ++i) {
    if (i > 0) w.Push(',');
    w.Uint(e.strides[i]);
  }
  w.Push(']');
  const size_t width = static_cast<size_t>(w.p - column);
  if (width < kStridesWidth) w.Blanks(kStridesWidth - width);
  w.Str("  ");
  w.RightUint(e.start_offset, kStartWidth);
  w.Str("  ");
  w.Column(e.is_contiguous ? "yes" : "no", kContigWidth, false);
  w.Str("  ");
}

// The listing's header line, in ListingLine's columns.
std::string ListingHeader(bool geometry) {
  std::string header = absl::StrFormat(
      "%*s  %-*s  %-*s  %-*s  %*s  %-*s  %-*s  %-*s  ", kIndexWidth, "index", kTaskIdWidth,
      "task_id", kStageWidth, "stage", kRoleWidth, "role", kArgIndexWidth, "arg", kKindWidth,
      "kind", kDtypeWidth, "dtype", kShapeWidth, "shape");
  if (geometry) {
    absl::StrAppendFormat(&header, "%-*s  %*s  %-*s  ", kStridesWidth, "strides", kStartWidth,
                          "start", kContigWidth, "contig");
  }
  absl::StrAppendFormat(&header, "%*s  %s\n", kBytesWidth, "bytes", "flags");
  return header;
}

// One listing line written at `out` (a 10 M-entry listing prints 10 M of
// these: built by hand, not through a format string), its end returned:
// index, task id, stage, role, arg index, kind, dtype, shape or value,
// bytes and flags in the columns above, two blanks apart, trailing blanks
// trimmed, '\n'; with `geometry`, AppendGeometry's columns after the
// shape. `mark` (a crashed capture's) follows the flags. `out` has room
// for ListingLineBound(e, mark) bytes.
char* ListingLine(const ManifestEntry& e, char* out, absl::string_view mark = "",
                  bool geometry = false) {
  LineWriter w{out};
  w.RightUint(e.index, kIndexWidth);
  w.Str("  0x");
  static constexpr char kHex[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) w.Push(kHex[(e.task_id >> shift) & 0xF]);
  w.Str("  ");
  w.Column(StageShortName(e.stage), kStageWidth, false);
  w.Str("  ");
  w.Column(RoleName(e.role), kRoleWidth, false);
  w.Str("  ");
  w.RightUint(e.arg_index, kArgIndexWidth);
  w.Str("  ");
  w.Column(KindName(e.kind), kKindWidth, false);
  w.Str("  ");
  const std::string_view dtype = DataTypeName(e.dtype);
  w.Column(absl::string_view(dtype.data(), dtype.size()), kDtypeWidth, false);
  w.Str("  ");
  // The shape or value column, written in place and padded.
  const char* const column = w.p;
  if (e.is_scalar()) {
    w.Push('=');
    w.Str(e.value);
  } else {
    w.Push('[');
    for (size_t i = 0; i < e.shape.size(); ++i) {
      if (i > 0) w.Push(',');
      w.Uint(e.shape[i]);
    }
    w.Push(']');
  }
  const size_t width = static_cast<size_t>(w.p - column);
  if (width < kShapeWidth) w.Blanks(kShapeWidth - width);
  w.Str("  ");
  if (geometry) AppendGeometry(e, w);
  w.RightUint(e.bin_size, kBytesWidth);
  w.Str("  ");
  const char* const flags = w.p;
  AppendFlags(e, w);
  if (!mark.empty()) {
    if (w.p > flags) w.Push(' ');
    w.Str(mark);
  }
  while (w.p > out && w.p[-1] == ' ') --w.p;
  w.Push('\n');
  return w.p;
}

std::string StatsLine(const ManifestEntry& e, const ElementStats& st) {
  return absl::StrFormat("index %d  task %s  %s %s arg %d  %s %s: %d NaN, %d +Inf, %d -Inf of %d",
                         e.index, TaskIdHex(e.task_id), StageName(e.stage), RoleName(e.role),
                         e.arg_index, DataTypeName(e.dtype).data(),
                         Dims(e.shape), st.nan, st.pos_inf, st.neg_inf, st.count);
}

int Fail(std::ostream& err, const absl::Status& s) {
  err << "dump_viewer: " << s.message() << "\n";
  return 2;
}

// The names of an entry's kernels in the capture's kernel table ("add",
// "mix_sum+mix_prod"); "" when the capture has no table or the kernel is
// not known.
std::string KernelLabel(const KernelTable& kernels, const ManifestEntry& e) {
  if (kernels.empty() || (e.func_ids.size() == 1 && e.func_ids[0] == -1)) return "";
  return KernelNames(kernels, e.func_ids.begin(), e.func_ids.end());
}

// The kernels of the listed args, after the listing (captures with a
// kernel table): "kernels: 0 add (elementwise) [in FLOAT32, ...]".
std::string KernelsSeen(const KernelTable& kernels, const std::set<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    const v1::Kernel* k = id < 0 ? nullptr : FindKernel(kernels, static_cast<uint32_t>(id));
    if (k == nullptr) continue;
    absl::StrAppend(&s, s.empty() ? "kernels:\n" : "", absl::StrFormat("  %5d  ", id),
                    DescribeKernel(*k), "\n");
  }
  return s;
}

// An open that failed on a kernel name or type the capture's table does not
// have names the flag (exit 2); any other failure as Fail.
int FailOpen(const ViewerOptions& o, std::ostream& err, const absl::Status& s) {
  if (!IsUnknownKernel(s)) return Fail(err, s);
  const bool name = o.selection.args.func_name && absl::StrContains(s.message(), "named");
  err << "dump_viewer: " << (name ? o.func_flag : o.func_type_flag) << " '"
      << (name ? *o.selection.args.func_name : o.selection.args.func_type.value_or(""))
      << "': " << s.message() << "\n";
  return 2;
}

// Progress on stderr for a long command (tools/progress.h): by default on
// a terminal once it outlasts a moment; --progress / --noprogress force it.
std::unique_ptr<ProgressMeter> MakeProgress(const Options& o, std::ostream& err,
                                            const std::string& label,
                                            std::vector<ProgressCounter> counters) {
  std::optional<ProgressOptions> options = ProgressOptionsFor(o.progress, o.terminals.err);
  if (!options) return std::make_unique<ProgressMeter>();
  options->label = label;
  return std::make_unique<ProgressMeter>(&err, *std::move(options), std::move(counters));
}

// A line of stdout while `progress` may be drawn: on one terminal with it,
// the progress line is erased first (it comes back when next due).
void Say(const Options& o, ProgressMeter& progress, std::ostream& out, const std::string& line) {
  if (!o.terminals.out) {
    out << line;
    return;
  }
  progress.Clear();
  out << line << std::flush;
}

// "nothing matched", with values that exist.
int NoMatch(ArgSource& source, std::ostream& err) {
  absl::StatusOr<SomeValues> some = source.Suggestions();
  if (!some.ok()) return Fail(err, some.status());
  std::vector<std::string> tasks;
  for (uint64_t t : some->tasks) tasks.push_back(TaskIdHex(t));
  // Func ids with their kernels' names ("0=add"), when the capture has a table.
  const KernelTable kernels = source.Kernels();
  std::vector<std::string> funcs;
  for (int64_t f : some->funcs) {
    const v1::Kernel* k = f < 0 ? nullptr : FindKernel(kernels, static_cast<uint32_t>(f));
    funcs.push_back(k != nullptr ? absl::StrCat(f, "=", k->name()) : absl::StrCat(f));
  }
  std::vector<std::string> stages, roles, kinds;
  for (v1::Stage s : some->stages) stages.push_back(StageShortName(s));
  for (v1::Role r : some->roles) roles.push_back(RoleName(r));
  for (v1::Kind k : some->kinds) kinds.push_back(KindName(k));
  err << "dump_viewer: no arg matches the filters. Some values in this capture: tasks "
      << absl::StrJoin(tasks, " ") << "; args " << absl::StrJoin(some->args, " ") << "; funcs "
      << absl::StrJoin(funcs, " ") << "; stages " << absl::StrJoin(stages, ", ")
      << "; roles " << absl::StrJoin(roles, ", ") << "; kinds " << absl::StrJoin(kinds, ", ")
      << "; steps " << absl::StrJoin(some->steps, " ") << "\n";
  return 1;
}

// Why --nonfinite can find nothing where a NaN was written: what it looks at.
const char* NonfiniteNoMatchNote() {
  return "dump_viewer: --nonfinite looks at each record's nonfinite flag (the collector "
         "sets it on every payload it captures, whatever ARGSDUMP_STATS says) and at stored "
         "stats; a record kept without payload or stats (level 3's unmarked tensors, a "
         "payload the device overwrote) and a capture written before argsdump set the flag "
         "are never matched. --first-nonfinite reads the payloads themselves.\n";
}

// The first task, in manifest (task) order, with an output holding a NaN or
// an Inf (among the selected outputs), and every input captured for it:
// before dispatch (inputs, inouts and scalars as the kernel received them)
// and at completion (the inputs an overflow dump or an in-flight snapshot
// recorded as they were then). `source` selects whole tasks; `selection`
// the outputs. A task's entries are read whole before it is looked at: its
// inputs recorded at completion sort after its first outputs. An
// overwritten payload (the device reused its arena before the host read
// it) holds none of the tensor's values and is not looked at, as the
// collector does not flag it either. An output kept without payload (the
// stats-only mode) is judged by its stored stats.
int FirstNonFinite(ArgSource& source, const Selection& selection, std::ostream& out,
                   std::ostream& err) {
  std::vector<ManifestEntry> task;  // the current task's entries, in manifest order
  // 1: `task` has no such output; 0: printed; 2: failed.
  auto look = [&]() -> int {
    for (const ManifestEntry& e : task) {
      if (e.stage == v1::STAGE_BEFORE_DISPATCH || !e.is_tensor() || e.role == v1::ROLE_INPUT ||
          e.overwritten || (e.bin_size == 0 && !e.stats) || !selection.Matches(e)) {
        continue;
      }
      ElementStats st;
      if (e.bin_size == 0) {
        st = FromStored(*e.stats);
      } else {
        std::string bytes;
        if (absl::Status s = source.ReadPayload(e, &bytes); !s.ok()) return Fail(err, s);
        st = ComputeStats(e, bytes);
      }
      if (!st.has_nonfinite()) continue;
      out << "first non-finite output: " << StatsLine(e, st) << "\n";
      if (const std::string k = KernelLabel(source.Kernels(), e); !k.empty()) {
        out << "kernel of task " << TaskIdHex(e.task_id) << ": " << k << "\n";
      }
      out << "inputs of task " << TaskIdHex(e.task_id) << ":\n";
      for (const ManifestEntry& in : task) {
        if (in.stage != v1::STAGE_BEFORE_DISPATCH && in.role != v1::ROLE_INPUT) continue;
        if (in.is_scalar()) {
          out << absl::StrFormat("  index %d  %s arg %d  scalar %s = %s\n", in.index,
                                 RoleName(in.role), in.arg_index, DataTypeName(in.dtype).data(),
                                 in.value);
          continue;
        }
        if (in.bin_size == 0) {
          out << "  " << StatsLine(in, in.stats ? FromStored(*in.stats) : ElementStats())
              << (in.stats ? "  (stored stats)" : "  (no payload)") << "\n";
          continue;
        }
        std::string in_bytes;
        if (absl::Status s = source.ReadPayload(in, &in_bytes); !s.ok()) return Fail(err, s);
        out << "  " << StatsLine(in, ComputeStats(in, in_bytes)) << "\n";
      }
      return 0;
    }
    return 1;
  };
  ManifestEntry e;
  for (;;) {
    absl::StatusOr<bool> got = source.Next(&e);
    if (!got.ok()) return Fail(err, got.status());
    if (!*got || (!task.empty() && e.task_id != task.front().task_id)) {
      if (const int r = look(); r != 1) return r;
      task.clear();
    }
    if (!*got) break;
    task.push_back(e);
  }
  out << "no output holds a NaN or an Inf\n";
  return 0;
}

// ---- --compare ---------------------------------------------------------------

std::string Num(double v) { return absl::StrFormat("%.6g", v); }

// The --compare table's own columns after dtype: numel, max_abs and
// max_rel (6 significant digits and an exponent), cosine ("%.6f"),
// mismatches. kCompareHeader below is spelled out at these widths.
constexpr int kNumelWidth = 9;
constexpr int kDiffWidth = 12;
constexpr int kCosineWidth = 9;
constexpr int kMismatchesWidth = 10;

// A row of the --compare table.
std::string Row(const ManifestEntry& a, uint64_t numel, const ElementDiff* d,
                const std::string& status) {
  std::string line = absl::StrFormat(
      "%*d  %-*s  %-*s  %-*s  %*d  %-*s  %*d  ", kIndexWidth, a.index, kTaskIdWidth,
      TaskIdHex(a.task_id), kStageWidth, StageShortName(a.stage), kRoleWidth, RoleName(a.role),
      kArgIndexWidth, a.arg_index, kDtypeWidth, DataTypeName(a.dtype).data(), kNumelWidth, numel);
  if (d == nullptr) {
    absl::StrAppendFormat(&line, "%*s  %*s  %*s  %*s  %s", kDiffWidth, "-", kDiffWidth, "-",
                          kCosineWidth, "-", kMismatchesWidth, "-", status);
  } else {
    absl::StrAppendFormat(&line, "%*s  %*s  %*s  %*d  %s", kDiffWidth, Num(d->max_abs),
                          kDiffWidth, Num(d->max_rel), kCosineWidth,
                          absl::StrFormat("%.6f", d->cosine), kMismatchesWidth, d->mismatches,
                          status);
  }
  line.erase(line.find_last_not_of(' ') + 1);
  return line + "\n";
}

std::string RowOf(const ManifestEntry& a, const ArgVerdict& v) {
  return Row(a, v.numel, v.diff ? &*v.diff : nullptr, v.status);
}

constexpr char kCompareHeader[] =
    "  index  task_id             stage   role    arg  dtype          numel       max_abs"
    "       max_rel     cosine  mismatches  status\n";

struct Tally {
  uint64_t compared = 0, differ = 0, only_here = 0, only_golden = 0;
  std::string first;  // the first divergence, in task order
  void Note(const std::string& what) {
    if (first.empty()) first = what;
  }
};

int Summarize(const Tally& t, const Tolerance& tol, std::ostream& out) {
  out << absl::StrFormat("compared %d args (atol %g, rtol %g): %d match, %d differ", t.compared,
                         tol.atol, tol.rtol, t.compared - t.differ, t.differ);
  if (t.only_here + t.only_golden > 0) {
    out << absl::StrFormat("; %d only in this capture, %d only in the golden", t.only_here,
                           t.only_golden);
  }
  out << "\n";
  if (t.first.empty()) return 0;
  out << "first divergence: " << t.first << "\n";
  return 1;
}

// Against another capture: both in manifest order, joined on the key.
int CompareCaptures(ArgSource& here, ArgSource& golden, const Options& o, std::ostream& out,
                    std::ostream& err) {
  const Selection& selection = o.selection;
  const Tolerance& tol = o.tolerance;
  out << kCompareHeader;
  // How many args the join meets is known only at its end.
  std::unique_ptr<ProgressMeter> progress =
      MakeProgress(o, err, "compare", {{"args", ProgressUnit::kCount, std::nullopt},
                                       {"", ProgressUnit::kBytes, std::nullopt}});
  Tally t;
  const KernelTable kernels = here.Kernels();
  // With --index the golden side is selected by key only: its other
  // entries are not "missing" here.
  const bool count_golden_only = !selection.index.has_value();
  absl::Status joined =
      JoinCaptures(here, golden, [&](const ManifestEntry* a, const ManifestEntry* g) {
        if (g == nullptr) {
          ++t.only_here;
          Say(o, *progress, out, Row(*a, a->numel, nullptr, "ONLY HERE (not in the golden)"));
          progress->Add(0, 1);
          t.Note(absl::StrCat(WhereIs(*a), ": not in the golden"));
          return absl::OkStatus();
        }
        if (a == nullptr) {
          if (count_golden_only) {
            ++t.only_golden;
            Say(o, *progress, out,
                absl::StrFormat("%7s  %s  ONLY IN THE GOLDEN (golden index %d)\n", "-",
                                WhereIs(*g), g->index));
            progress->Add(0, 1);
            t.Note(absl::StrCat(WhereIs(*g), ": only in the golden"));
          }
          return absl::OkStatus();
        }
        std::string pa, pg;
        if (absl::Status s = here.ReadPayload(*a, &pa); !s.ok()) return s;
        if (absl::Status s = golden.ReadPayload(*g, &pg); !s.ok()) return s;
        const ArgVerdict v = CompareArg(*a, pa, *g, pg, tol);
        ++t.compared;
        t.differ += v.differs;
        Say(o, *progress, out, RowOf(*a, v));
        if (v.differs) {
          const std::string k = KernelLabel(kernels, *a);
          t.Note(k.empty() ? v.detail : absl::StrCat(v.detail, " (kernel ", k, ")"));
        }
        progress->Add({1, pa.size() + pg.size()});
        return absl::OkStatus();
      });
  progress->Finish();
  if (!joined.ok()) return Fail(err, joined);
  if (t.compared + t.only_here + t.only_golden == 0) return NoMatch(here, err);
  return Summarize(t, tol, out);
}

// Against a raw file (the arg's dtype, logical contiguous) or an .npy file.
int CompareFile(ArgSource& here, const std::string& path, const Tolerance& tol,
                std::ostream& out, std::ostream& err) {
  ManifestEntry a, extra;
  absl::StatusOr<bool> got = here.Next(&a);
  if (!got.ok()) return Fail(err, got.status());
  if (!*got) return NoMatch(here, err);
  uint64_t selected = 1;
  for (;;) {
    absl::StatusOr<bool> more = here.Next(&extra);
    if (!more.ok()) return Fail(err, more.status());
    if (!*more) break;
    ++selected;
  }
  if (selected > 1) {
    err << "dump_viewer: --compare " << path << " compares one arg; the filters select "
        << selected << " (narrow them with -t/-s/-r/-a, or pick one with -i)\n";
    return 2;
  }
  if (!a.is_tensor()) {
    err << "dump_viewer: --compare " << path << ": index " << a.index
        << " is a scalar; a golden file compares a tensor\n";
    return 2;
  }
  // As many elements as the arg at the widest dtype, and a .npy header:
  // a larger file cannot be its golden.
  uint64_t numel = 1;
  for (uint64_t d : a.shape) numel = d != 0 && numel > UINT64_MAX / d ? UINT64_MAX : numel * d;
  const uint64_t most = numel > (UINT64_MAX - kNpyHeaderRoom) / kWidestElementBytes
                            ? UINT64_MAX : numel * kWidestElementBytes + kNpyHeaderRoom;
  absl::StatusOr<std::string> read = ReadFileToString(path, std::max(most, kDefaultMaxFileBytes));
  if (!read.ok()) {
    err << "dump_viewer: --compare " << read.status().message() << "\n";
    return 2;
  }
  std::string file = *std::move(read);
  ManifestEntry g = a;
  g.truncated = g.overwritten = false;
  std::string golden_bytes;
  if (absl::StartsWith(file, "\x93NUMPY")) {
    absl::StatusOr<NpyArray> npy = ParseNpy(file);
    if (!npy.ok()) {
      err << "dump_viewer: --compare " << path << ": " << npy.status().message() << "\n";
      return 2;
    }
    const std::optional<DataType> dtype =
        DataTypeFromName(DtypeOfNpyDescr(npy->descr));  // "" is no dtype
    if (!dtype || npy->fortran_order) {
      err << "dump_viewer: --compare " << path << ": dtype '" << npy->descr
          << (npy->fortran_order ? "' in Fortran order" : "'")
          << " is not read (little-endian ints, floats and bool, C order)\n";
      return 2;
    }
    g.dtype = *dtype;
    g.shape = npy->shape;
    golden_bytes = file.substr(npy->data_offset);
  } else {
    const DataType dtype = a.dtype;
    uint64_t numel = 1;
    for (uint64_t d : a.shape) numel *= d;
    const uint64_t need = PayloadBytes(dtype, numel);
    if (file.size() != need) {
      err << "dump_viewer: --compare " << path << ": " << file.size() << " bytes; index "
          << a.index << " (" << DataTypeName(a.dtype) << " " << Dims(a.shape) << ") needs "
          << need << " (raw little-endian " << DataTypeName(a.dtype) << ", row-major)\n";
      return 2;
    }
    golden_bytes = std::move(file);
  }
  g.bin_size = golden_bytes.size();
  std::string pa;
  if (absl::Status s = here.ReadPayload(a, &pa); !s.ok()) return Fail(err, s);
  out << kCompareHeader;
  const ArgVerdict v = CompareArg(a, pa, g, golden_bytes, tol);
  out << RowOf(a, v);
  Tally t;
  t.compared = 1;
  t.differ = v.differs;
  if (v.differs) t.Note(v.detail);
  return Summarize(t, tol, out);
}

// --- listing, --export, --npy, --stats -----------------------------------------

// Where --export and --npy write: a folder the user named, and below it
// (when not empty) a name that comes from data.
struct ExportRoot {
  std::string trusted;
  std::string from_data;
  std::string Shown() const {
    if (from_data.empty()) return trusted;
    return trusted == "." ? from_data : absl::StrCat(trusted, "/", from_data);
  }
};

// --export, --npy and --stats over the selected args, in one pass: each
// payload is read once, for the text file, the .npy file and the stats
// line alike. `export_text`: --export, or --index (which always exports).
int WriteSelected(ArgSource& source, const Options& o, bool export_text,
                  const std::vector<ManifestEntry>& selected, const ExportRoot& export_root,
                  std::ostream& out, std::ostream& err) {
  // txt/ and npy/ below the root; every file name (made of manifest
  // fields) resolved through them, so none can leave.
  std::optional<ConfinedDir> txt, npy;
  if (!selected.empty() && (export_text || o.npy)) {
    absl::StatusOr<ConfinedDir> root = ConfinedDir::Open(export_root.trusted,
                                                         ConfinedDir::Missing::kCreate);
    if (root.ok() && !export_root.from_data.empty()) {
      root = root->Subdir(export_root.from_data, ConfinedDir::Missing::kCreate);
    }
    if (!root.ok()) return Fail(err, root.status());
    for (auto [on, name, dir] : {std::make_tuple(export_text, "txt", &txt),
                                 std::make_tuple(o.npy, "npy", &npy)}) {
      if (!on) continue;
      absl::StatusOr<ConfinedDir> made = root->Subdir(name, ConfinedDir::Missing::kCreate);
      if (!made.ok()) return Fail(err, made.status());
      dir->emplace(*std::move(made));
    }
  }
  const KernelTable kernels = source.Kernels();
  uint64_t total_bytes = 0;
  for (const ManifestEntry& s : selected) total_bytes += s.bin_size;
  std::unique_ptr<ProgressMeter> progress =
      MakeProgress(o, err, export_text || o.npy ? "export" : "stats",
                   {{"args", ProgressUnit::kCount, selected.size()},
                    {"", ProgressUnit::kBytes, total_bytes}});
  std::string stats_table, npy_notes;
  uint64_t npy_files = 0;
  auto write = [&](const ConfinedDir& dir, const std::string& name, const std::string& bytes) {
    absl::Status written = dir.WriteFile(name, bytes);
    if (!written.ok()) Fail(err, written);
    return written.ok();
  };
  for (const ManifestEntry& s : selected) {
    std::string bytes;
    if (absl::Status st = source.ReadPayload(s, &bytes); !st.ok()) return Fail(err, st);
    if (export_text) {
      const std::string name = TextFileName(s);
      if (!write(*txt, name, FormatArgText(s, bytes))) return 2;
      Say(o, *progress, out, absl::StrCat("Saved: ", txt->PathOf(name), "\n"));
    }
    if (o.npy && s.is_tensor()) {
      absl::StatusOr<std::string> file = EncodeNpy(s, bytes);
      if (!file.ok()) {
        absl::StrAppend(&npy_notes, "  index ", s.index, " not exported: ",
                        file.status().message(), "\n");
      } else if (!write(*npy, NpyFileName(s), *file)) {
        return 2;
      } else {
        ++npy_files;
      }
    }
    if (o.stats && s.is_tensor()) {
      // Without a payload, the statistics the capture stored (stats mode).
      const bool stored = s.bin_size == 0 && s.stats;
      stats_table += StatsTableRow(s.index, stored ? FromStored(*s.stats) : ComputeStats(s, bytes),
                                   stored, KernelLabel(kernels, s));
    }
    progress->Add({1, bytes.size()});
  }
  progress->Finish();
  // The reference's closing line (its path as pathlib prints it: no "/").
  if (export_text && !selected.empty()) {
    out << "\nExported " << selected.size() << " arg(s) to " << txt->path() << "\n";
  }
  if (o.npy) {
    out << "wrote " << npy_files << " .npy files to "
        << (npy ? npy->path() : export_root.Shown() + "/npy") << "/\n"
        << npy_notes;
  }
  if (o.stats) {
    out << StatsTableHeader(/*kernel_column=*/!kernels.empty()) << stats_table;
  }
  return 0;
}

// A capture whose device process died: its summary lines, and
// the mark of each listing line.
class CrashMarks {
 public:
  explicit CrashMarks(const v1::DeviceCrash& crash) {
    if (const v1::CrashedTask* t = CrashingTask(crash)) crashing_ = t->task_id();
    for (const v1::CrashedTask& t : crash.executing()) executing_.insert(t.task_id());
  }
  static std::string Summary(const v1::DeviceCrash& crash) {
    std::string s = absl::StrCat("device crash: ", DescribeDeviceCrash(crash), "\n");
    if (!crash.description().empty()) absl::StrAppend(&s, "  ", crash.description(), "\n");
    return s;
  }
  // "[crashed task]" for the crashing task's entries; "[in-flight]" for
  // the other tasks that were running and for in-flight snapshots.
  absl::string_view Mark(const ManifestEntry& e) const {
    if (crashing_ && e.task_id == *crashing_) return "[crashed task]";
    if (e.in_flight_snapshot || executing_.count(e.task_id) > 0) return "[in-flight]";
    return "";
  }

 private:
  std::optional<uint64_t> crashing_;
  std::set<uint64_t> executing_;
};

int List(ArgSource& source, const Options& o, const ExportRoot& export_root, std::ostream& out,
         std::ostream& err) {
  // The first entry is read before anything is printed: a crash summary
  // (known then, see ArgSource::DeviceCrashInfo) comes first.
  ManifestEntry e;
  absl::StatusOr<bool> got = source.Next(&e);
  if (!got.ok()) return Fail(err, got.status());
  std::optional<CrashMarks> crash;
  if (std::optional<v1::DeviceCrash> c = source.DeviceCrashInfo()) {
    out << CrashMarks::Summary(*c);
    crash.emplace(*c);
  }
  out << ListingHeader(o.geometry);
  // The reference's habit: --index N always exports that entry.
  const bool export_text = o.export_text || o.selection.index.has_value();
  uint64_t matched = 0;
  std::vector<ManifestEntry> selected;  // what needs payloads
  // Lines go out in blocks of about 64 KiB (one write each), not one by
  // one; on a terminal, line by line as before.
  constexpr size_t kBlock = 64 << 10;
  std::vector<char> lines(kBlock);
  size_t used = 0;
  auto flush = [&] {
    out.write(lines.data(), static_cast<std::streamsize>(used));
    used = 0;
  };
  // The func ids of the listed args, for the kernels line (with a table:
  // known once the first entry is read); a run of one task's entries
  // costs one comparison each.
  const KernelTable kernels = source.Kernels();
  std::set<int64_t> funcs;
  std::vector<int64_t> last_funcs;
  for (; got.ok() && *got; got = source.Next(&e)) {
    ++matched;
    if (!kernels.empty() && e.func_ids != last_funcs) {
      funcs.insert(e.func_ids.begin(), e.func_ids.end());
      last_funcs = e.func_ids;
    }
    if (export_text || ((o.npy || o.stats) && e.is_tensor())) selected.push_back(e);
    const absl::string_view mark = crash ? crash->Mark(e) : "";
    const size_t bound = ListingLineBound(e, mark);
    if (used + bound > lines.size()) {
      flush();
      if (bound > lines.size()) lines.resize(bound);
    }
    used = static_cast<size_t>(ListingLine(e, lines.data() + used, mark, o.geometry) -
                               lines.data());
    if (o.terminals.out) flush();
  }
  flush();
  if (!got.ok()) return Fail(err, got.status());
  if (matched == 0 && o.selection.any()) {
    const int status = NoMatch(source, err);
    if (o.selection.args.has_nonfinite.value_or(false)) err << NonfiniteNoMatchNote();
    return status;
  }
  out << matched << " args\n";
  out << KernelsSeen(kernels, funcs);
  // A manifest that says it only after args[] (not the store's layout).
  if (!crash) {
    if (std::optional<v1::DeviceCrash> c = source.DeviceCrashInfo()) out << CrashMarks::Summary(*c);
  }
  if (!export_text && !o.npy && !o.stats) return 0;
  return WriteSelected(source, o, export_text, selected, export_root, out, err);
}

}  // namespace

// --captures: the service's captures (with --label: those labelled so), a
// line each in columns as wide as their widest entry (names run to 128
// characters), then "N captures" ("1 capture").
int ListCaptures(const ViewerOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<v1::CaptureSummary>> captures = ListRemoteCaptures(o.remote, o.labels);
  if (!captures.ok()) return Fail(err, captures.status());
  struct Row {
    std::string name, state, records, bin_bytes, labels;
  };
  std::vector<Row> rows;
  rows.push_back({"capture", "state", "records", "bin_bytes", "labels"});
  for (const v1::CaptureSummary& c : *captures) {
    std::vector<std::string> labels;
    for (const auto& [k, v] : std::map<std::string, std::string>(c.labels().begin(),
                                                                 c.labels().end())) {
      labels.push_back(absl::StrCat(k, "=", v));
    }
    rows.push_back({c.capture(), c.state() == v1::CAPTURE_STATE_LIVE ? "live" : "finished",
                    absl::StrCat(c.records()), absl::StrCat(c.bin_bytes()),
                    absl::StrJoin(labels, ",")});
  }
  size_t name = 0, state = 0, records = 0, bin_bytes = 0;
  for (const Row& r : rows) {
    name = std::max(name, r.name.size());
    state = std::max(state, r.state.size());
    records = std::max(records, r.records.size());
    bin_bytes = std::max(bin_bytes, r.bin_bytes.size());
  }
  for (const Row& r : rows) {
    std::string line = absl::StrFormat("%-*s  %-*s  %*s  %*s  %s", name, r.name, state, r.state,
                                       records, r.records, bin_bytes, r.bin_bytes, r.labels);
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  }
  out << captures->size() << (captures->size() == 1 ? " capture\n" : " captures\n");
  return captures->empty() && !o.labels.empty() ? 1 : 0;
}

int RunViewer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return RunViewer(args, out, err, ViewerTerminals());
}

int RunViewer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
              ViewerTerminals terminals) {
  absl::StatusOr<ViewerOptions> parsed = ParseViewerCommandLine(args);
  if (!parsed.ok()) return Fail(err, parsed.status());
  if (parsed->help) {
    out << ViewerHelp();
    return 0;
  }
  Options o;
  static_cast<ViewerOptions&>(o) = *std::move(parsed);
  o.terminals = terminals;
  if (o.list_captures) return ListCaptures(o, out, err);
  if (!o.job.empty()) return RunJobView(o, out, err);
  const bool remote = !o.remote.target.empty();
  // Where the capture is: a folder, an outputs.zip (or a folder in one), or
  // the newest under outputs/ and bazel-testlogs/.
  std::string zip_name;  // the capture's folder in a zip: exports go to <zip's folder>/<it>
  std::string zip_dir;
  if (!remote) {
    absl::StatusOr<LocatedCapture> at =
        o.dir.empty() ? LocateNewestCapture() : LocateCapture(o.dir);
    if (!at.ok()) return Fail(err, at.status());
    if (!at->note.empty() || at->from_zip) {
      out << "capture: " << at->name << " (" << at->note
          << (at->from_zip ? absl::StrCat(at->note.empty() ? "" : "; ", "extracted to ", at->dir)
                           : "")
          << ")\n";
    }
    if (at->from_zip) {
      zip_name = at->zip_capture_name;
      const size_t slash = at->zip.find_last_of('/');
      zip_dir = slash == std::string::npos ? "." : slash == 0 ? "/" : at->zip.substr(0, slash);
    }
    o.dir = at->dir;
  }
  if (!o.trace.empty()) {
    const std::string label = remote ? o.remote.capture : o.dir;
    return WriteTrace(o, {{label, remote ? "" : o.dir, o.remote.capture}}, out, err);
  }
  // --first-nonfinite reads whole tasks (their inputs too); the selection
  // then picks the outputs it checks.
  Selection read = o.selection;
  if (o.first_nonfinite) {
    read = Selection();
    read.args.task_id = o.selection.args.task_id;
    read.args.func_id = o.selection.args.func_id;
    read.args.func_unknown = o.selection.args.func_unknown;
    read.args.func_name = o.selection.args.func_name;
    read.args.func_type = o.selection.args.func_type;
    read.args.step = o.selection.args.step;
  }
  auto open = [&](const std::string& dir, const std::string& capture,
                  const Selection& s) -> absl::StatusOr<std::unique_ptr<ArgSource>> {
    if (capture.empty()) {
      std::string note;
      auto local = OpenLocalCapture(dir, s, &note);
      if (!note.empty()) err << "dump_viewer: " << note << "; reading the manifest instead\n";
      return local;
    }
    RemoteCapture r = o.remote;
    r.capture = capture;
    return OpenRemoteCapture(r, s);
  };
  auto source = open(o.dir, o.remote.capture, read);
  if (!source.ok()) return FailOpen(o, err, source.status());
  if (o.first_nonfinite) return FirstNonFinite(**source, o.selection, out, err);
  if (!o.compare.empty()) {
    const std::string& golden = o.compare;
    if (absl::StartsWith(golden, kCapturePrefix)) {
      if (!remote) {
        err << "dump_viewer: --compare " << golden << " names a capture on a service; add "
            << "--server host:port\n";
        return 2;
      }
      Selection by_key = o.selection;
      by_key.index.reset();
      auto g = open("", golden.substr(kCapturePrefix.size()), by_key);
      if (!g.ok()) return FailOpen(o, err, g.status());
      return CompareCaptures(**source, **g, o, out, err);
    }
    if (IsFile(golden) && !absl::EndsWith(golden, ".zip")) {
      return CompareFile(**source, golden, o.tolerance, out, err);
    }
    // A capture: a folder, an outputs.zip, or a folder in one.
    absl::StatusOr<LocatedCapture> at = LocateCapture(golden);
    if (!at.ok()) {
      if (!IsDir(golden) && !IsFile(golden) && absl::IsNotFound(at.status())) {
        err << "dump_viewer: --compare '" << golden << "': no such capture directory or file "
            << "(or capture:NAME with --server)\n";
        return 2;
      }
      return Fail(err, at.status());
    }
    Selection by_key = o.selection;
    by_key.index.reset();
    auto g = OpenLocalCapture(at->dir, by_key);
    if (!g.ok()) return FailOpen(o, err, g.status());
    return CompareCaptures(**source, **g, o, out, err);
  }
  // --out, a capture's own folder and a zip's were named by the user; a
  // service's capture name and a zip's capture folder come from data, and
  // become a folder that cannot leave the working folder (a service's) or
  // the zip's folder (beside the zip, as a capture's txt/ is beside its
  // manifest: bazel-testlogs/<pkg>/<target>/test.outputs/<Suite.Case>/).
  ExportRoot root;
  if (!o.out_dir.empty()) {
    root.trusted = o.out_dir;
  } else if (remote) {
    root.trusted = ".";
    root.from_data = o.remote.capture;
  } else if (!zip_name.empty()) {
    root.trusted = zip_dir;
    root.from_data = zip_name;
  } else {
    root.trusted = CaptureDirOf(o.dir);
  }
  return List(**source, o, root, out, err);
}

}  // namespace argsdump
