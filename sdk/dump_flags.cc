// The dump flags of a test's command line (sdk/argsdump.h: ConsumeDumpFlags)
// and the process-wide test context.
#include <cctype>
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "sdk/argsdump.h"
#include "sdk/wiring.h"

namespace argsdump {
namespace {

struct ProcessState {
  std::mutex mu;
  std::optional<CommandLineDump> flags;  // what ConsumeDumpFlags took
  std::string test_case;
};

ProcessState& State() {
  static ProcessState* state = new ProcessState;
  return *state;
}

// Under `bazel run`, relative paths mean the user's directory.
std::string FromUserDir(const std::string& path) {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || dir == nullptr || *dir == '\0') return path;
  return absl::StrCat(dir, "/", path);
}

// "--dump-config" and "--dump_config" are one flag.
std::string Canonical(absl::string_view flag) {
  std::string name(flag);
  for (size_t k = 2; k < name.size(); ++k) {
    if (name[k] == '_') name[k] = '-';
  }
  return name;
}

bool IsLevelText(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// What each flag falls back to when its value cannot be taken.
constexpr char kLevelFallback[] =
    "the level falls back to the next entry (ARGSDUMP_LEVEL, the config file, "
    "--dump-args-default) or 0, off";
constexpr char kDefaultFallback[] =
    "no default level is set: 0, off, unless an entry sets the level";
constexpr char kConfigFallback[] =
    "no config file is read from the command line (SessionOptions::config_file is, if set)";
constexpr char kPrefixFallback[] =
    "the path falls back to the next entry (ARGSDUMP_PATH, the config file) or the default";
constexpr char kServerFallback[] =
    "the capture stays local unless ARGSDUMP_CAPTURE_SERVER or the config file names a "
    "capture service";

constexpr char kJobFallback[] =
    "the job identity falls back to SessionOptions, ARGSDUMP_JOB / ARGSDUMP_RANK / "
    "ARGSDUMP_WORLD_SIZE or a launcher's variables";

// The level in `value`, or a WARNING naming `flag` and the fallback.
std::optional<int> Level(const std::string& flag, const std::string& value,
                         const char* fallback, std::vector<std::string>* warnings) {
  int level;
  if (IsLevelText(value) && absl::SimpleAtoi(value, &level) && level >= 0 && level <= 3) {
    return level;
  }
  warnings->push_back(absl::StrCat(
      "the command line: ", flag, ": '", value, "' is not a dump level (0 off, 1 marked args, "
      "2 everything, 3 metadata + marked payloads); ", fallback));
  return std::nullopt;
}

// One flag on the command line, at args[i]: its canonical name and an
// inline value ("--f=v"); reading a value from the next entry moves i on.
// What cannot be read is a WARNING in `warnings`.
struct FlagAt {
  const std::vector<std::string>& args;
  size_t& i;
  std::string flag;
  bool has_eq;
  std::string inline_value;
  std::vector<std::string>* warnings;

  // The value of a flag that takes one: "--f=v" or "--f v"; without one,
  // a WARNING naming the flag and what it falls back to.
  std::optional<std::string> Value(const char* fallback) {
    std::string out;
    if (has_eq) {
      out = inline_value;
    } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
      out = args[++i];
    }
    if (out.empty()) {
      warnings->push_back(absl::StrCat("the command line: ", flag, " needs a value; ", fallback));
      return std::nullopt;
    }
    return out;
  }

  // A switch: bare means true, "=false" turns it off; another value is a
  // WARNING and the next entry (the variable, the config file) decides.
  void Switch(std::optional<bool>* out, const char* what, const char* variable) {
    bool on = true;
    if (has_eq && !absl::SimpleAtob(inline_value, &on)) {
      warnings->push_back(absl::StrCat("the command line: ", flag, ": '", inline_value,
                                       "' is not true or false; ", what,
                                       " stays as the next entry (", variable,
                                       ", the config file) sets it, or off"));
      out->reset();
    } else {
      *out = on;
    }
  }
};

// The dump flag `f` into `d`; false when `f` is not a dump flag.
bool ApplyDumpFlag(FlagAt& f, CommandLineDump& d) {
  const std::string& flag = f.flag;
  if (flag == "--dump-args") {
    // A bare --dump-args means level 1; "--dump-args N"
    // takes N only when it is all digits.
    std::string v = "1";
    if (f.has_eq) {
      v = f.inline_value;
    } else if (f.i + 1 < f.args.size() && IsLevelText(f.args[f.i + 1])) {
      v = f.args[++f.i];
    }
    // A later flag replaces an earlier one, a bad one included.
    d.entry.level = Level(flag, v, kLevelFallback, &d.warnings);
  } else if (flag == "--dump-args-default") {
    d.default_level.reset();
    if (std::optional<std::string> v = f.Value(kDefaultFallback)) {
      d.default_level = Level(flag, *v, kDefaultFallback, &d.warnings);
    }
  } else if (flag == "--dump-verbose") {
    f.Switch(&d.entry.verbose, "the verbose log", "ARGSDUMP_VERBOSE");
  } else if (flag == "--dump-snapshot-inputs") {
    f.Switch(&d.entry.snapshot_inputs, "the inputs' snapshot for exception dumps",
             "ARGSDUMP_SNAPSHOT_INPUTS");
  } else if (flag == "--dump-config") {
    d.config_file.clear();
    if (std::optional<std::string> v = f.Value(kConfigFallback)) d.config_file = FromUserDir(*v);
  } else if (flag == "--job") {
    d.job.job.clear();
    if (std::optional<std::string> v = f.Value(kJobFallback)) {
      if (absl::Status st = ValidateJobName(*v); st.ok()) {
        d.job.job = *v;
      } else {
        d.warnings.push_back(
            absl::StrCat("the command line: ", flag, ": ", st.message(), "; ", kJobFallback));
      }
    }
  } else if (flag == "--rank" || flag == "--world-size") {
    std::optional<uint32_t>& out = flag == "--rank" ? d.job.rank : d.job.world_size;
    out.reset();
    if (std::optional<std::string> v = f.Value(kJobFallback)) {
      absl::StatusOr<uint32_t> n = flag == "--rank" ? ParseRank(*v) : ParseWorldSize(*v);
      if (n.ok()) {
        out = *n;
      } else {
        d.warnings.push_back(absl::StrCat("the command line: ", flag, ": ",
                                          n.status().message(), "; ", kJobFallback));
      }
    }
  } else if (flag == "--output-prefix") {
    d.entry.path.reset();
    if (std::optional<std::string> v = f.Value(kPrefixFallback)) d.entry.path = FromUserDir(*v);
  } else if (flag == "--capture-server") {
    d.entry.capture_server.reset();
    std::optional<std::string> v = f.Value(kServerFallback);
    if (v && !IsHostPort(*v)) {
      d.warnings.push_back(absl::StrCat("the command line: ", flag, ": '", *v,
                                        "' is not host:port (such as 127.0.0.1:50051); ",
                                        kServerFallback));
    } else if (v) {
      d.entry.capture_server = *v;
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace

CommandLineDump ParseDumpFlags(const std::vector<std::string>& args,
                               std::vector<std::string>* rest) {
  CommandLineDump d;
  d.job.source = "flag";
  rest->clear();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {  // the end of flags: everything after is left alone
      rest->insert(rest->end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    const size_t eq = arg.find('=');
    const bool has_eq = eq != std::string::npos;
    FlagAt f{args,   i, Canonical(absl::string_view(arg).substr(0, eq)),
             has_eq, has_eq ? arg.substr(eq + 1) : "", &d.warnings};
    if (!ApplyDumpFlag(f, d)) rest->push_back(arg);
  }
  return d;
}

absl::Status ConsumeDumpFlags(int* argc, char** argv) {
  if (argc == nullptr || argv == nullptr || *argc < 1) return absl::OkStatus();
  std::vector<std::string> args(argv + 1, argv + *argc);
  std::vector<std::string> rest;
  CommandLineDump flags = ParseDumpFlags(args, &rest);
  // Keep argv's own strings (and their order) for what stays.
  int kept = 1;
  size_t r = 0;
  for (int i = 1; i < *argc && r < rest.size(); ++i) {
    if (rest[r] == argv[i]) {
      argv[kept++] = argv[i];
      ++r;
    }
  }
  for (int i = kept; i < *argc; ++i) argv[i] = nullptr;
  *argc = kept;
  std::lock_guard<std::mutex> lock(State().mu);
  State().flags = std::move(flags);
  return absl::OkStatus();
}

CommandLineDump CommandLineDumpFlags() {
  {
    std::lock_guard<std::mutex> lock(State().mu);
    if (State().flags) return *State().flags;
  }
  // Never consumed (a test with its own main, or gtest_main): the flags
  // are still on the command line the process was started with.
  std::vector<std::string> args;
  std::string all = ReadFileToString("/proc/self/cmdline").value_or(""), arg;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(arg);
      arg.clear();
    } else {
      arg.push_back(c);
    }
  }
  if (!args.empty()) args.erase(args.begin());
  std::vector<std::string> rest;
  return ParseDumpFlags(args, &rest);
}

void ResetCommandLineDumpForTest() {
  std::lock_guard<std::mutex> lock(State().mu);
  State().flags.reset();
}

void SetRunningTestCase(const std::string& name) {
  std::lock_guard<std::mutex> lock(State().mu);
  State().test_case = name;
}

std::string RunningTestCase() {
  std::lock_guard<std::mutex> lock(State().mu);
  return State().test_case;
}

}  // namespace argsdump
