#include "viewer/viewer_options.h"

#include <cmath>
#include <mutex>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "format/arg_filter_params.h"
#include "format/job.h"
#include "format/names.h"
#include "tools/cli_flags.h"

// Filters: one flag per field of format/arg_filter_fields.h that has one
// (its name, help and kind come from there), and --index.
#define ARGSDUMP_VIEWER_FLAG_TYPE_kTaskId std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kUint32 std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kUint64 std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kStage std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kRole std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kKind std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kDType std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kText std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kFuncRef std::string
#define ARGSDUMP_VIEWER_FLAG_TYPE_kBool bool
#define ARGSDUMP_VIEWER_FLAG_TYPE_kFlag bool
// What the command line's dialect adds to a field's help.
#define ARGSDUMP_VIEWER_FLAG_HELP_kTaskId                                                    \
  " in hex, with or without 0x and leading zeros (0x0000000100000003 or 100000003); 1 to 8 " \
  "digits name the task by its number in the run, the id's low word (3 is "                 \
  "0x0000000100000003)"
#define ARGSDUMP_VIEWER_FLAG_HELP_kUint32 ""
#define ARGSDUMP_VIEWER_FLAG_HELP_kUint64 ""
#define ARGSDUMP_VIEWER_FLAG_HELP_kStage ""
#define ARGSDUMP_VIEWER_FLAG_HELP_kRole ""
#define ARGSDUMP_VIEWER_FLAG_HELP_kKind ""
#define ARGSDUMP_VIEWER_FLAG_HELP_kDType ""
#define ARGSDUMP_VIEWER_FLAG_HELP_kText ""
#define ARGSDUMP_VIEWER_FLAG_HELP_kFuncRef " (-1: args whose kernel is not known)"
#define ARGSDUMP_VIEWER_FLAG_HELP_kBool ""
#define ARGSDUMP_VIEWER_FLAG_HELP_kFlag ""
#define ARGSDUMP_VIEWER_FILTER_FLAG_NoFlag(kind, flag, help)
#define ARGSDUMP_VIEWER_FILTER_FLAG_Flag(kind, flag, help)                        \
  ABSL_FLAG(ARGSDUMP_VIEWER_FLAG_TYPE_##kind, flag, ARGSDUMP_VIEWER_FLAG_TYPE_##kind(), \
            help ARGSDUMP_VIEWER_FLAG_HELP_##kind);
#define ARGSDUMP_VIEWER_FILTER_FLAG(member, kind, subject, test, param, viewer, flag, label, \
                                    expected, help)                                         \
  ARGSDUMP_VIEWER_FILTER_FLAG_##viewer(kind, flag, help)
ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_VIEWER_FILTER_FLAG)
#undef ARGSDUMP_VIEWER_FILTER_FLAG
ABSL_FLAG(std::string, index, "",
          "the manifest index (the listing's first column): that one entry");
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
// Jobs of many ranks.
ABSL_FLAG(std::string, job, "",
          "a job of many ranks: a folder of rank captures (<folder>/rank<k>/args_dump), or "
          "with --server a job's name there; alone: its ranks; with --first-nonfinite, "
          "--compare-job or --compare-ranks: those questions across its ranks");
ABSL_FLAG(std::string, compare_job, "",
          "with --job: another job (a folder, or a name on the same --server), compared rank "
          "by rank; the first divergent rank, step, task, arg and element");
ABSL_FLAG(std::string, compare_ranks, "",
          "with --job: the reference rank the others (or --ranks) should agree with");
ABSL_FLAG(std::vector<std::string>, ranks, {},
          "with --job: only these ranks (comma separated or repeated)");
ABSL_FLAG(std::string, trace, "",
          "FILE: write the selected tasks' timeline as a JSON trace (Perfetto, "
          "chrome://tracing): one process per capture, or per rank with --job");
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
      "  dump_viewer --job FOLDER|NAME [--server HOST:PORT] [--first-nonfinite |\n"
      "              --compare-job FOLDER|NAME | --compare-ranks R] [--ranks LIST] [filters]\n"
      "  dump_viewer [DIR | --server HOST:PORT --capture NAME | --job FOLDER|NAME]\n"
      "              --trace FILE [filters]\n"
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

// One filter flag, of table field `field`: a bool flag sets its field when
// true; a text flag, when given, is parsed as the table's kind says.
absl::Status ReadFilterFlag(const CommandLine& line, size_t field, absl::string_view flag,
                            bool value, ArgFilter* f) {
  if (!value) return absl::OkStatus();
  return ArgFilterFields()[field].parse(FilterDialect::kCommandLine, "true", f);
}
absl::Status ReadFilterFlag(const CommandLine& line, size_t field, absl::string_view flag,
                            const std::string& value, ArgFilter* f) {
  if (!line.Given(flag)) return absl::OkStatus();
  absl::Status s = ArgFilterFields()[field].parse(FilterDialect::kCommandLine, value, f);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(
      absl::StrCat(line.Spelling(flag), " '", value, "': ", s.message()));
}

absl::Status ReadFilters(const CommandLine& line, ViewerOptions* o) {
  Selection* f = &o->selection;
  ArgFilter& args = f->args;
#define ARGSDUMP_VIEWER_READ_NoFlag(member, flag)
#define ARGSDUMP_VIEWER_READ_Flag(member, flag)                                               \
  if (absl::Status s = ReadFilterFlag(line, static_cast<size_t>(ArgFilterField::k_##member), \
                                      #flag, absl::GetFlag(FLAGS_##flag), &args);            \
      !s.ok()) {                                                                              \
    return s;                                                                                 \
  }
#define ARGSDUMP_VIEWER_READ(member, kind, subject, test, param, viewer, flag, ...) \
  ARGSDUMP_VIEWER_READ_##viewer(member, flag)
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_VIEWER_READ)
#undef ARGSDUMP_VIEWER_READ
#undef ARGSDUMP_VIEWER_READ_Flag
#undef ARGSDUMP_VIEWER_READ_NoFlag
  // How the user spelled a kernel's name or type, for when the capture's
  // kernel table has none such (the viewer: exit 2).
  if (args.func_name) o->func_flag = line.Spelling("func");
  if (args.func_type) o->func_type_flag = line.Spelling("func_type");
  return ReadNumber(line, "index", absl::GetFlag(FLAGS_index), "a manifest index (0, 1, ...)",
                    &f->index);
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
  o->trace = absl::GetFlag(FLAGS_trace);
  if (line.Given("trace") && o->trace.empty()) return Bad(line, "trace", "", "a file to write");
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
  o->job = absl::GetFlag(FLAGS_job);
  if (line.Given("job") && o->job.empty()) return Bad(line, "job", "", "a job folder or name");
  o->compare_job = absl::GetFlag(FLAGS_compare_job);
  if (line.Given("compare_job") && o->compare_job.empty()) {
    return Bad(line, "compare_job", "", "a job folder or name");
  }
  if (line.Given("compare_ranks")) {
    absl::StatusOr<uint32_t> r = ParseRank(absl::GetFlag(FLAGS_compare_ranks));
    if (!r.ok()) return Bad(line, "compare_ranks", absl::GetFlag(FLAGS_compare_ranks), "a rank");
    o->compare_ranks = *r;
  }
  for (const std::string& rank : absl::GetFlag(FLAGS_ranks)) {
    absl::StatusOr<uint32_t> r = ParseRank(rank);
    if (!r.ok()) return Bad(line, "ranks", rank, "ranks (0, 1, ...)");
    o->ranks.push_back(*r);
  }
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
  const bool job = !o.job.empty();
  if (!o.trace.empty() && (o.export_text || o.npy || o.stats || o.first_nonfinite ||
                           !o.compare.empty() || !o.compare_job.empty() || o.compare_ranks ||
                           o.list_captures || o.tolerance_set || !o.out_dir.empty())) {
    return conflict("--trace goes alone, or with --job (filters allowed)");
  }
  if (!job && (!o.compare_job.empty() || o.compare_ranks || !o.ranks.empty())) {
    return conflict("--compare-job, --compare-ranks and --ranks go with --job");
  }
  if (job && (!o.dir.empty() || !o.remote.capture.empty() || o.list_captures)) {
    return conflict("--job names the job (a folder, or a name on --server): leave out a "
                    "capture directory, --capture and --captures");
  }
  if (job && (o.export_text || o.npy || o.stats || !o.compare.empty())) {
    return conflict("--job takes --first-nonfinite, --compare-job or --compare-ranks (not "
                    "--export, --npy, --stats, --compare)");
  }
  if (!o.compare_job.empty() + o.compare_ranks.has_value() + o.first_nonfinite > 1) {
    return conflict("--first-nonfinite, --compare-job and --compare-ranks: one at a time");
  }
  if (o.tolerance_set && job && o.compare_job.empty() && !o.compare_ranks) {
    return conflict("--atol/--rtol need --compare, --compare-job or --compare-ranks");
  }
  if (!o.remote.target.empty() && o.remote.capture.empty() && !o.list_captures && !job) {
    return conflict("--server needs --capture NAME (the capture to read), or --captures");
  }
  if (o.remote.target.empty() && !o.remote.capture.empty()) {
    return conflict("--capture needs --server host:port");
  }
  if (!o.remote.target.empty() && !o.dir.empty()) {
    return conflict(absl::StrCat("a capture directory ('", o.dir,
                                 "') or --server/--capture, not both"));
  }
  if (o.tolerance_set && o.compare.empty() && !job) {
    return conflict("--atol/--rtol need --compare");
  }
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
