#include "viewer/viewer_options.h"

#include <cmath>
#include <mutex>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/utf8.h"
#include "format/dtype.h"
#include "format/kernel_table.h"
#include "format/names.h"
#include "tools/cli_flags.h"

// Filters.
ABSL_FLAG(std::string, task, "",
          "the task id in hex, with or without 0x and leading zeros (0x0000000100000003 or "
          "100000003); 1 to 8 digits name the task by its number in the run, the id's low "
          "word (3 is 0x0000000100000003)");
ABSL_FLAG(std::string, stage, "", "before (before_dispatch) or after (after_completion)");
ABSL_FLAG(std::string, role, "", "input, output or inout");
ABSL_FLAG(std::string, arg, "", "the arg index (0, 1, ...)");
ABSL_FLAG(std::string, func, "",
          "the task's kernel: its name in the capture's kernel table (exact), or its func id "
          "(-1: args whose kernel is not known)");
ABSL_FLAG(std::string, func_type, "",
          "the type of the task's kernel in the capture's kernel table (elementwise, matmul, ...)");
ABSL_FLAG(std::string, kind, "", "tensor or scalar");
ABSL_FLAG(std::string, dtype, "", "the element type, as the listing spells it (FLOAT32, INT8, ...)");
ABSL_FLAG(std::string, step, "", "the step (0, 1, ...)");
ABSL_FLAG(std::string, index, "",
          "the manifest index (the listing's first column): that one entry");
ABSL_FLAG(bool, overflow, false, "only the records the overflow check captured");
ABSL_FLAG(bool, nonfinite, false,
          "only records whose captured elements hold a NaN or an Inf (every payload is looked "
          "at when captured; stats not needed)");
// Commands.
ABSL_FLAG(bool, export, false,
          "write each selected arg as <out>/txt/task_<id>_<before|after>_<in|out|inout><n>.txt");
ABSL_FLAG(bool, npy, false, "write each selected tensor as <out>/npy/<same name>.npy");
ABSL_FLAG(bool, stats, false,
          "add min, max, mean, abs-max and the NaN, +Inf, -Inf and zero counts of each selected "
          "tensor");
ABSL_FLAG(bool, first_nonfinite, false,
          "name the first task (task order) whose selected output holds a NaN or an Inf, with "
          "its inputs");
ABSL_FLAG(std::string, compare, "",
          "GOLDEN: compare the selected args with another capture directory, capture:NAME on "
          "the same --server, or (one selected tensor) an .npy or raw little-endian file");
ABSL_FLAG(std::string, atol, "", "with --compare: the absolute tolerance (default 1e-08)");
ABSL_FLAG(std::string, rtol, "", "with --compare: the relative tolerance (default 1e-05)");
ABSL_FLAG(std::string, out, "",
          "where --export and --npy write txt/ and npy/ (default: the capture directory; "
          "a zip: <the zip's folder>/<its capture folder>; remote: ./<NAME>)");
ABSL_FLAG(bool, progress, false,
          "draw a progress line on stderr during long exports and compares (default: when "
          "stderr is a terminal; --noprogress: never)");
// A capture service.
ABSL_FLAG(std::string, server, "",
          "host:port of a capture service: read --capture NAME there (or list --captures)");
ABSL_FLAG(std::string, capture, "", "the capture's name on --server");
ABSL_FLAG(std::string, auth_token_file, "", "file holding the service's bearer token");
ABSL_FLAG(bool, geometry, false,
          "the listing shows each tensor's view: strides and start offset (in elements of its "
          "base) and whether it is contiguous");
ABSL_FLAG(bool, captures, false, "list the captures of --server (with --label: those so labelled)");
ABSL_FLAG(std::vector<std::string>, label, {},
          "with --captures: key=value labels a capture must carry (comma separated or repeated)");

namespace argsdump {
namespace {

CommandLineSpec ViewerSpec() {
  CommandLineSpec spec;
  spec.program = "dump_viewer";
  spec.synopsis =
      "dump_viewer: lists, filters, exports and compares argsdump captures.\n"
      "  dump_viewer [DIR | --server HOST:PORT --capture NAME] [filters] [--export] [--npy]\n"
      "              [--stats] [--first-nonfinite] [--compare GOLDEN [--atol A] [--rtol R]]\n"
      "  dump_viewer --server HOST:PORT --captures [--label k=v]\n"
      "DIR is a capture directory (.../args_dump), a folder holding one, or an outputs.zip;\n"
      "without it, the newest outputs/*/args_dump here. Exit status: 0; 1 when nothing\n"
      "matched or --compare found a difference; 2 for bad flags, unreadable captures or\n"
      "files, or a service that refuses.";
  spec.flags_file = __FILE__;
  spec.short_names = {{'t', "task"}, {'s', "stage"}, {'r', "role"},
                      {'a', "arg"},  {'i', "index"}, {'e', "export"}};
  return spec;
}

// "<flag as typed> '<value>': expected <what>".
absl::Status Bad(const CommandLine& line, absl::string_view flag, absl::string_view value,
                 absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(line.Spelling(flag), " '", value, "': expected ", what));
}

// A number flag given on the command line into `out`.
template <typename T>
absl::Status ReadNumber(const CommandLine& line, absl::string_view flag, const std::string& value,
                        absl::string_view what, std::optional<T>* out) {
  if (!line.Given(flag)) return absl::OkStatus();
  T v;
  if (!absl::SimpleAtoi(value, &v)) return Bad(line, flag, value, what);
  *out = v;
  return absl::OkStatus();
}

absl::Status ReadTask(const CommandLine& line, ArgFilter* f) {
  if (!line.Given("task")) return absl::OkStatus();
  const std::string value = absl::GetFlag(FLAGS_task);
  const std::optional<uint64_t> v = ParseTaskIdHex(value);
  if (!v) return Bad(line, "task", value, "a hex task id such as 0x0000000100000003 or 100000003");
  // A task id is the run id (high word) and the task's number in the run,
  // from 0 in submission order (low word). Every run argsdump's runtime
  // makes has run id 1 (SimConfig::run_id), so no task has a high word of
  // 0: 1 to 8 digits are the low word, the number people read off a
  // listing or count in their code.
  constexpr uint64_t kRunId = 1;
  const size_t digits =
      value.size() - (absl::StartsWith(value, "0x") || absl::StartsWith(value, "0X") ? 2 : 0);
  f->task_id = digits <= 8 ? (kRunId << 32) | *v : *v;
  return absl::OkStatus();
}

// The enum filters: stage, role, kind, dtype (the manifest's spellings).
absl::Status ReadNames(const CommandLine& line, ArgFilter* f) {
  if (line.Given("stage")) {
    const std::string v = absl::GetFlag(FLAGS_stage);
    if (v == "before" || v == "before_dispatch") {
      f->stage = v1::STAGE_BEFORE_DISPATCH;
    } else if (v == "after" || v == "after_completion") {
      f->stage = v1::STAGE_AFTER_COMPLETION;
    } else {
      return Bad(line, "stage", v, "before or after");
    }
  }
  if (line.Given("role")) {
    const std::string v = absl::GetFlag(FLAGS_role);
    const std::optional<v1::Role> role = RoleFromName(v);
    if (!role) return Bad(line, "role", v, "input, output or inout");
    f->role = *role;
  }
  if (line.Given("kind")) {
    const std::string v = absl::GetFlag(FLAGS_kind);
    const std::optional<v1::Kind> kind = KindFromName(v);
    if (!kind) return Bad(line, "kind", v, "tensor or scalar");
    f->kind = *kind;
  }
  if (line.Given("dtype")) {
    const std::string v = absl::GetFlag(FLAGS_dtype);
    const std::optional<DataType> dtype = DataTypeFromName(v);
    if (!dtype) return Bad(line, "dtype", v, "a dtype such as FLOAT32, BFLOAT16 or INT8");
    f->dtype = ToProtoDType(*dtype);
  }
  return absl::OkStatus();
}

// --func NAME|N: a kernel's name, a func id, or -1 for args whose kernel
// is not known; --func-type TYPE. Names are resolved against the capture's
// kernel table once it is open (the viewer: an unknown one is exit 2).
absl::Status ReadFunc(const CommandLine& line, ViewerOptions* o) {
  ArgFilter* f = &o->selection.args;
  if (line.Given("func_type")) {
    const std::string value = absl::GetFlag(FLAGS_func_type);
    if (value.empty() || value.size() > kMaxKernelTypeBytes || !IsValidUtf8(value)) {
      return Bad(line, "func_type", value,
                 absl::StrCat("a kernel type (1 to ", kMaxKernelTypeBytes, " bytes of UTF-8)"));
    }
    f->func_type = value;
    o->func_type_flag = line.Spelling("func_type");
  }
  if (!line.Given("func")) return absl::OkStatus();
  const std::string value = absl::GetFlag(FLAGS_func);
  int64_t v;
  if (absl::SimpleAtoi(value, &v)) {
    if (v < -1 || v > int64_t{0xFFFFFFFF}) {
      return Bad(line, "func", value,
                 "a kernel name, or a func id (0, 1, ..., or -1 for args whose kernel is not "
                 "known)");
    }
    if (v == -1) {
      f->func_unknown = true;
    } else {
      f->func_id = static_cast<uint32_t>(v);
    }
    return absl::OkStatus();
  }
  if (value.empty() || value.size() > kMaxKernelNameBytes || !IsValidUtf8(value)) {
    return Bad(line, "func", value,
               absl::StrCat("a kernel name (1 to ", kMaxKernelNameBytes,
                            " bytes of UTF-8) or a func id (0, 1, ..., or -1)"));
  }
  f->func_name = value;
  o->func_flag = line.Spelling("func");
  return absl::OkStatus();
}

absl::Status ReadFilters(const CommandLine& line, ViewerOptions* o) {
  Selection* f = &o->selection;
  ArgFilter& args = f->args;
  for (absl::Status s :
       {ReadTask(line, &args), ReadNames(line, &args), ReadFunc(line, o),
        ReadNumber(line, "arg", absl::GetFlag(FLAGS_arg), "an arg index (0, 1, ...)",
                   &args.arg_index),
        ReadNumber(line, "step", absl::GetFlag(FLAGS_step), "a step (0, 1, ...)", &args.step),
        ReadNumber(line, "index", absl::GetFlag(FLAGS_index), "a manifest index (0, 1, ...)",
                   &f->index)}) {
    if (!s.ok()) return s;
  }
  if (absl::GetFlag(FLAGS_overflow)) args.overflow = true;
  if (absl::GetFlag(FLAGS_nonfinite)) args.has_nonfinite = true;
  return absl::OkStatus();
}

absl::Status ReadTolerance(const CommandLine& line, absl::string_view flag,
                           const std::string& value, ViewerOptions* o, double* out) {
  if (!line.Given(flag)) return absl::OkStatus();
  double v;
  if (!absl::SimpleAtod(value, &v) || !(v >= 0) || v == INFINITY) {
    return Bad(line, flag, value, "a tolerance >= 0 such as 1e-3");
  }
  *out = v;
  o->tolerance_set = true;
  return absl::OkStatus();
}

absl::Status ReadCommands(const CommandLine& line, ViewerOptions* o) {
  o->export_text = absl::GetFlag(FLAGS_export);
  o->npy = absl::GetFlag(FLAGS_npy);
  o->stats = absl::GetFlag(FLAGS_stats);
  o->first_nonfinite = absl::GetFlag(FLAGS_first_nonfinite);
  o->compare = absl::GetFlag(FLAGS_compare);
  if (line.Given("compare") && o->compare.empty()) {
    return Bad(line, "compare", "", "a capture directory, a raw or .npy file, or capture:NAME");
  }
  if (absl::Status s =
          ReadTolerance(line, "atol", absl::GetFlag(FLAGS_atol), o, &o->tolerance.atol);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ReadTolerance(line, "rtol", absl::GetFlag(FLAGS_rtol), o, &o->tolerance.rtol);
      !s.ok()) {
    return s;
  }
  o->out_dir = absl::GetFlag(FLAGS_out);
  if (line.Given("out") && o->out_dir.empty()) return Bad(line, "out", "", "a folder");
  o->progress = ProgressModeFromFlag(line.Given("progress"), absl::GetFlag(FLAGS_progress));
  return absl::OkStatus();
}

absl::Status ReadService(const CommandLine& line, ViewerOptions* o) {
  const std::string server = absl::GetFlag(FLAGS_server);
  if (line.Given("server") && (server.empty() || server.find(':') == std::string::npos)) {
    return Bad(line, "server", server, "host:port");
  }
  o->remote.target = server;
  o->remote.capture = absl::GetFlag(FLAGS_capture);
  if (line.Given("capture") && o->remote.capture.empty()) {
    return Bad(line, "capture", "", "a capture name");
  }
  o->list_captures = absl::GetFlag(FLAGS_captures);
  o->geometry = absl::GetFlag(FLAGS_geometry);
  for (const std::string& label : absl::GetFlag(FLAGS_label)) {
    const size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) return Bad(line, "label", label, "key=value");
    o->labels[label.substr(0, eq)] = label.substr(eq + 1);
  }
  return absl::OkStatus();
}

// The flags that go together, and those that do not.
absl::Status CheckCombinations(const ViewerOptions& o) {
  auto conflict = [](absl::string_view what) { return absl::InvalidArgumentError(what); };
  if (o.list_captures && o.remote.target.empty()) {
    return conflict("--captures lists the captures of a service: add --server host:port");
  }
  if (!o.labels.empty() && !o.list_captures) return conflict("--label goes with --captures");
  if (o.list_captures && !o.remote.capture.empty()) {
    return conflict("--captures lists every capture; leave --capture out");
  }
  if (!o.remote.target.empty() && o.remote.capture.empty() && !o.list_captures) {
    return conflict("--server needs --capture NAME (the capture to read), or --captures");
  }
  if (o.remote.target.empty() && !o.remote.capture.empty()) {
    return conflict("--capture needs --server host:port");
  }
  if (!o.remote.target.empty() && !o.dir.empty()) {
    return conflict(absl::StrCat("a capture directory ('", o.dir,
                                 "') or --server/--capture, not both"));
  }
  if (o.tolerance_set && o.compare.empty()) return conflict("--atol/--rtol need --compare");
  if (!o.compare.empty() && (o.export_text || o.npy || o.stats || o.first_nonfinite)) {
    return conflict("--compare runs alone (not with --export, --npy, --stats, --first-nonfinite)");
  }
  return absl::OkStatus();
}

// The flags are the process's: one command line at a time.
std::mutex& FlagsMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

absl::StatusOr<ViewerOptions> FromFlags(const CommandLine& line) {
  ViewerOptions o;
  o.help = line.help;
  if (line.positional.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("one capture directory at a time (got '", line.positional[0], "' and '",
                     line.positional[1], "')"));
  }
  if (!line.positional.empty()) o.dir = line.positional[0];
  for (absl::Status s : {ReadFilters(line, &o), ReadCommands(line, &o),
                         ReadService(line, &o)}) {
    if (!s.ok()) return s;
  }
  if (o.help) return o;
  if (absl::Status s = CheckCombinations(o); !s.ok()) return s;
  const std::string token_file = absl::GetFlag(FLAGS_auth_token_file);
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(token_file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(line.Spelling("auth_token_file"), ": ", token.status().message()));
    }
    o.remote.auth_token = *std::move(token);
  }
  return o;
}

}  // namespace

absl::StatusOr<ViewerOptions> ParseViewerCommandLine(const std::vector<std::string>& args) {
  std::lock_guard<std::mutex> lock(FlagsMutex());
  const CommandLineSpec spec = ViewerSpec();
  ResetCommandLineFlags(spec);
  absl::StatusOr<CommandLine> line = ParseCommandLineFlags(spec, args);
  if (!line.ok()) return line.status();
  return FromFlags(*line);
}

std::string ViewerHelp() {
  std::lock_guard<std::mutex> lock(FlagsMutex());
  return CommandLineHelp(ViewerSpec());
}

}  // namespace argsdump
