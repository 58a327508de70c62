#include "device/dump_config.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/files.h"
#include "format/names.h"
#include "google/protobuf/struct.pb.h"
#include "proto/argsdump/v1/dump_config.pb.h"
#include "google/protobuf/util/json_util.h"

extern char** environ;

namespace argsdump {
namespace {

std::string LabelsText(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, ",");
}

}  // namespace

const char* StatsModeName(StatsMode mode) {
  switch (mode) {
    case StatsMode::kOn: return "on";
    case StatsMode::kOnly: return "only";
    case StatsMode::kOff: break;
  }
  return "off";
}

const char* DumpModeName(DumpMode mode) {
  switch (mode) {
    case DumpMode::kInput: return "input";
    case DumpMode::kOutput: return "output";
    case DumpMode::kAll: break;
  }
  return "all";
}

absl::StatusOr<StepSet> StepSet::Parse(const std::string& text) {
  StepSet set;
  set.text_ = std::string(absl::StripAsciiWhitespace(text));
  if (set.text_.empty()) return absl::InvalidArgumentError("an empty step list");
  for (absl::string_view part : absl::StrSplit(set.text_, '|')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t dash = part.find('-');
    uint64_t lo, hi;
    const bool ok = dash == absl::string_view::npos
                        ? absl::SimpleAtoi(part, &lo) && (hi = lo, true)
                        : absl::SimpleAtoi(part.substr(0, dash), &lo) &&
                              absl::SimpleAtoi(part.substr(dash + 1), &hi);
    if (part.empty() || !ok || part[0] == '-' || part[0] == '+') {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' is not a step or a range such as 10-20"));
    }
    if (hi < lo) {
      return absl::InvalidArgumentError(absl::StrCat("range '", part, "' ends before it starts"));
    }
    set.ranges_.emplace_back(lo, hi);
  }
  std::sort(set.ranges_.begin(), set.ranges_.end());
  return set;
}

bool StepSet::Contains(uint64_t step) const {
  if (ranges_.empty()) return true;
  for (const auto& [lo, hi] : ranges_) {
    if (step >= lo && step <= hi) return true;
  }
  return false;
}

bool DumpConfig::FuncSelected(const std::string& name, const std::string& type) const {
  auto listed = [&](const std::vector<std::string>& list) {
    return std::any_of(list.begin(), list.end(), [&](const std::string& f) {
      return f == name || (!type.empty() && f == type);
    });
  };
  if (listed(block_funcs)) return false;
  return funcs.empty() || listed(funcs);
}

std::string DumpConfig::Describe() const {
  return absl::StrCat("level=", level, " path=", path.empty() ? "(default)" : path,
                      " mode=", DumpModeName(mode), " funcs=[", absl::StrJoin(funcs, ","),
                      "] block_funcs=[", absl::StrJoin(block_funcs, ","), "] steps=",
                      steps.all() ? "all" : steps.text(), " stats=", StatsModeName(stats),
                      " overflow=", overflow ? "on" : "off",
                      capture_server.empty() ? "" : absl::StrCat(" capture_server=", capture_server),
                      auth_token_file.empty() ? "" : absl::StrCat(" auth_token_file=", auth_token_file),
                      labels.empty() ? "" : absl::StrCat(" labels=", LabelsText(labels)),
                      dedup ? "" : " dedup=off", verbose ? " verbose=on" : "",
                      snapshot_inputs ? " snapshot_inputs=on" : "");
}

std::string DumpConfig::DescribeScope() const {
  static constexpr const char* kLevels[] = {"off", "marked args", "everything",
                                            "metadata + marked payloads"};
  const std::string extras = DescribeExtras();
  return absl::StrCat("level ", level, " (", level >= 0 && level <= 3 ? kLevels[level] : "?",
                      ")", extras.empty() ? "" : " ", extras);
}

std::string DumpConfig::DescribeExtras() const {
  std::vector<std::string> also;
  if (overflow) {
    also.push_back("the overflow check (a task whose output holds a NaN or an Inf is dumped "
                   "in full)");
  }
  if (stats == StatsMode::kOn) also.push_back("stats");
  if (stats == StatsMode::kOnly) also.push_back("stats only (no payload is kept)");
  if (mode == DumpMode::kInput) also.push_back("inputs only (before dispatch)");
  if (mode == DumpMode::kOutput) also.push_back("outputs only (after completion)");
  return also.empty() ? "" : absl::StrCat("with ", absl::StrJoin(also, ", "));
}

std::string FormatDumpLog(const DumpLog& log) {
  const char* severity = log.severity == DumpLog::kInfo      ? "INFO"
                         : log.severity == DumpLog::kWarning ? "WARNING"
                                                             : "ERROR";
  return absl::StrCat("[argsdump dumper] ", severity, ": ", log.text);
}

std::string PathProblem(const std::string& path) {
  if (path.empty()) return "it is empty";
  std::string p = path;
  for (;;) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return absl::StrCat(p, " is not a folder");
      break;
    }
    if (errno != ENOENT) return absl::StrCat(p, ": ", std::strerror(errno));
    const size_t slash = p.find_last_of('/');
    if (slash == std::string::npos) {
      p = ".";
    } else if (slash == 0) {
      p = "/";
    } else {
      p = p.substr(0, slash);
    }
  }
  // Asked, not tried (nothing is created while a configuration is read):
  // permission bits for this user, then what they do not tell root - a
  // read-only mount, or a kernel file system such as /proc or /sys.
  if (::access(p.c_str(), W_OK | X_OK) != 0) {
    return absl::StrCat(p, " is not writable (", std::strerror(errno), ")");
  }
  struct statvfs vfs;
  if (::statvfs(p.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0) {
    return absl::StrCat(p, " is on a read-only file system");
  }
  struct statfs fs;
  if (::statfs(p.c_str(), &fs) == 0) {
    switch (fs.f_type) {
      case PROC_SUPER_MAGIC:
      case SYSFS_MAGIC:
      case DEBUGFS_MAGIC:
      case CGROUP_SUPER_MAGIC:
      case CGROUP2_SUPER_MAGIC:
        return absl::StrCat(p, " is a kernel file system (like /proc or /sys): no folder can be "
                               "created in it");
      default:
        break;
    }
  }
  return "";
}

bool PathWritable(const std::string& path) { return PathProblem(path).empty(); }

namespace {

void Log(std::vector<DumpLog>* logs, DumpLog::Severity s, std::string text) {
  logs->push_back(DumpLog{s, std::move(text)});
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

// One configurable item: its names and how a text value sets it.
struct Item {
  const char* name;
  const char* env;
  const char* expected;  // what a valid value looks like (for warnings)
  // Sets the item in `entry` from `value`; false when the value is bad.
  bool (*set)(DumpConfigEntry* entry, const std::string& value);
};

bool SetLevel(DumpConfigEntry* e, const std::string& v) {
  int level;
  if (!absl::SimpleAtoi(v, &level) || level < 0 || level > 3) return false;
  e->level = level;
  return true;
}
bool SetPath(DumpConfigEntry* e, const std::string& v) {
  if (!PathWritable(v)) return false;
  e->path = v;
  return true;
}
bool SetMode(DumpConfigEntry* e, const std::string& v) {
  const std::string m = absl::AsciiStrToLower(v);
  if (m == "all") {
    e->mode = DumpMode::kAll;
  } else if (m == "input") {
    e->mode = DumpMode::kInput;
  } else if (m == "output") {
    e->mode = DumpMode::kOutput;
  } else {
    return false;
  }
  return true;
}
bool SetFuncs(DumpConfigEntry* e, const std::string& v) {
  e->funcs = SplitList(v);
  return !e->funcs->empty() || (e->funcs.reset(), false);
}
bool SetBlockFuncs(DumpConfigEntry* e, const std::string& v) {
  e->block_funcs = SplitList(v);
  return !e->block_funcs->empty() || (e->block_funcs.reset(), false);
}
bool SetSteps(DumpConfigEntry* e, const std::string& v) {
  absl::StatusOr<StepSet> s = StepSet::Parse(v);
  if (!s.ok()) return false;
  e->steps = *s;
  return true;
}
bool ParseBool(const std::string& v, bool* out) {
  const std::string b = absl::AsciiStrToLower(v);
  if (b == "1" || b == "true" || b == "on" || b == "yes") {
    *out = true;
  } else if (b == "0" || b == "false" || b == "off" || b == "no") {
    *out = false;
  } else {
    return false;
  }
  return true;
}
bool SetStats(DumpConfigEntry* e, const std::string& v) {
  bool b;
  if (absl::AsciiStrToLower(v) == "only") {
    e->stats = StatsMode::kOnly;
  } else if (ParseBool(v, &b)) {
    e->stats = b ? StatsMode::kOn : StatsMode::kOff;
  } else {
    return false;
  }
  return true;
}
bool SetOverflow(DumpConfigEntry* e, const std::string& v) {
  bool b;
  if (!ParseBool(v, &b)) return false;
  e->overflow = b;
  return true;
}

bool SetDedup(DumpConfigEntry* e, const std::string& v) {
  bool b;
  if (!ParseBool(v, &b)) return false;
  e->dedup = b;
  return true;
}

bool SetVerbose(DumpConfigEntry* e, const std::string& v) {
  bool b;
  if (!ParseBool(v, &b)) return false;
  e->verbose = b;
  return true;
}

bool SetSnapshotInputs(DumpConfigEntry* e, const std::string& v) {
  bool b;
  if (!ParseBool(v, &b)) return false;
  e->snapshot_inputs = b;
  return true;
}

bool SetCaptureServer(DumpConfigEntry* e, const std::string& v) {
  if (!IsHostPort(v)) return false;
  e->capture_server = v;
  return true;
}
bool SetAuthTokenFile(DumpConfigEntry* e, const std::string& v) {
  if (!ReadTokenFile(v).ok()) return false;
  e->auth_token_file = v;
  return true;
}
bool SetLabels(DumpConfigEntry* e, const std::string& v) {
  auto labels = ParseLabels(v);
  if (!labels.ok() || labels->empty()) return false;
  e->labels = *std::move(labels);
  return true;
}

constexpr Item kItems[] = {
    {"level", "ARGSDUMP_LEVEL", "0, 1, 2 or 3", SetLevel},
    {"path", "ARGSDUMP_PATH", "a folder that exists and is writable, or can be created",
     SetPath},
    {"mode", "ARGSDUMP_MODE", "input, output or all", SetMode},
    {"funcs", "ARGSDUMP_FUNCS", "kernel names or types, comma-separated", SetFuncs},
    {"block_funcs", "ARGSDUMP_BLOCK_FUNCS", "kernel names or types, comma-separated",
     SetBlockFuncs},
    {"steps", "ARGSDUMP_STEPS", "steps and ranges joined by '|', such as 0|5|10-20", SetSteps},
    {"stats", "ARGSDUMP_STATS", "on, off or only", SetStats},
    {"overflow", "ARGSDUMP_OVERFLOW", "true or false", SetOverflow},
    {"capture_server", "ARGSDUMP_CAPTURE_SERVER", "host:port of a capture service",
     SetCaptureServer},
    {"auth_token_file", "ARGSDUMP_AUTH_TOKEN_FILE",
     "a regular file whose first line is the bearer token (printable ASCII, no spaces)",
     SetAuthTokenFile},
    {"labels", "ARGSDUMP_LABELS", "key=value pairs, comma-separated", SetLabels},
    {"dedup", "ARGSDUMP_DEDUP", "true or false", SetDedup},
    {"verbose", "ARGSDUMP_VERBOSE", "true or false", SetVerbose},
    {"snapshot_inputs", "ARGSDUMP_SNAPSHOT_INPUTS", "true or false", SetSnapshotInputs},
};


// The items an entry sets, as "name=value" for logs.
std::vector<std::string> Describe(const DumpConfigEntry& e) {
  std::vector<std::string> out;
  if (e.level) out.push_back(absl::StrCat("level=", *e.level));
  if (e.path) out.push_back(absl::StrCat("path=", *e.path));
  if (e.mode) out.push_back(absl::StrCat("mode=", DumpModeName(*e.mode)));
  if (e.funcs) out.push_back(absl::StrCat("funcs=", absl::StrJoin(*e.funcs, ",")));
  if (e.block_funcs) {
    out.push_back(absl::StrCat("block_funcs=", absl::StrJoin(*e.block_funcs, ",")));
  }
  if (e.steps) out.push_back(absl::StrCat("steps=", e.steps->text()));
  if (e.stats) out.push_back(absl::StrCat("stats=", StatsModeName(*e.stats)));
  if (e.overflow) out.push_back(absl::StrCat("overflow=", *e.overflow ? "true" : "false"));
  if (e.capture_server) out.push_back(absl::StrCat("capture_server=", *e.capture_server));
  if (e.auth_token_file) out.push_back(absl::StrCat("auth_token_file=", *e.auth_token_file));
  if (e.labels) out.push_back(absl::StrCat("labels=", LabelsText(*e.labels)));
  if (e.dedup) out.push_back(absl::StrCat("dedup=", *e.dedup ? "true" : "false"));
  if (e.verbose) out.push_back(absl::StrCat("verbose=", *e.verbose ? "true" : "false"));
  if (e.snapshot_inputs) {
    out.push_back(absl::StrCat("snapshot_inputs=", *e.snapshot_inputs ? "true" : "false"));
  }
  return out;
}

void LogEntry(const std::string& source, const DumpConfigEntry& e, std::vector<DumpLog>* logs) {
  const std::vector<std::string> set = Describe(e);
  Log(logs, DumpLog::kInfo,
      absl::StrCat(source, ": ", set.empty() ? "sets nothing" : absl::StrJoin(set, " ")));
}

// `value` for item `item` from entry `source`, shown as `shown` (the
// variable or key and its value).
void Take(const Item& item, const std::string& source, const std::string& shown,
          const std::string& value, DumpConfigEntry* entry, std::vector<DumpLog>* logs) {
  if (item.set(entry, value)) return;
  std::string why;  // for the items whose checks can say more
  if (item.set == SetPath) why = PathProblem(value);
  if (item.set == SetAuthTokenFile) why = std::string(ReadTokenFile(value).status().message());
  Log(logs, DumpLog::kWarning,
      absl::StrCat(source, ": ", shown, " is not valid", why.empty() ? "" : ": ", why,
                   " (expected ", item.expected, "); ", item.name,
                   " falls back to the next entry or its default"));
}

std::string ValueText(const google::protobuf::Value& v, bool* ok) {
  *ok = true;
  switch (v.kind_case()) {
    case google::protobuf::Value::kStringValue: return v.string_value();
    case google::protobuf::Value::kBoolValue: return v.bool_value() ? "true" : "false";
    case google::protobuf::Value::kNumberValue: {
      const double d = v.number_value();
      if (d == std::floor(d) && std::fabs(d) < 1e15) return absl::StrCat(static_cast<int64_t>(d));
      return absl::StrCat(d);
    }
    case google::protobuf::Value::kListValue: {
      std::vector<std::string> parts;
      for (const auto& e : v.list_value().values()) {
        if (e.kind_case() != google::protobuf::Value::kStringValue) *ok = false;
        parts.push_back(e.string_value());
      }
      return absl::StrJoin(parts, ",");
    }
    default:
      *ok = false;
      return "";
  }
}

}  // namespace

std::map<std::string, std::string> DumpEnvironment() {
  // Every ARGSDUMP_* variable: the known ones, and misspelled ones, which
  // are a configuration mistake worth a word.
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const absl::string_view kv = *e;
    if (!absl::StartsWith(kv, "ARGSDUMP_")) continue;
    const size_t eq = kv.find('=');
    env.emplace(std::string(kv.substr(0, eq)),
                std::string(eq == absl::string_view::npos ? absl::string_view() : kv.substr(eq + 1)));
  }
  return env;
}

DumpConfigEntry DumpConfigFromEnvironment(const std::map<std::string, std::string>& env,
                                          std::vector<DumpLog>* logs) {
  DumpConfigEntry entry;
  for (const auto& [name, value] : env) {
    const Item* item = nullptr;
    for (const Item& i : kItems) {
      if (name == i.env) item = &i;
    }
    if (item == nullptr) {
      std::vector<std::string> known;
      for (const Item& i : kItems) known.push_back(i.env);
      Log(logs, DumpLog::kWarning,
          absl::StrCat("environment: ", name, " is not a dump setting (known: ",
                       absl::StrJoin(known, ", "), "); ignored"));
      continue;
    }
    if (value.empty()) continue;  // set but empty: sets nothing
    Take(*item, "environment", absl::StrCat(name, "='", value, "'"), value, &entry, logs);
  }
  LogEntry("environment", entry, logs);
  return entry;
}

DumpConfigEntry DumpConfigFromFile(const std::string& path, std::vector<DumpLog>* logs) {
  DumpConfigEntry entry;
  const std::string source = absl::StrCat("config file ", path);
  // A directory, FIFO or device is refused by type (never read or waited
  // on), and a file over the reader's bound by size.
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    Log(logs, DumpLog::kWarning,
        absl::StrCat(source, ": cannot read it (",
                     absl::StripPrefix(text.status().message(), path + ": "),
                     "); no setting is taken from it (pass a readable JSON file such as "
                     "{\"level\": 2, \"mode\": \"output\"})"));
    return entry;
  }
  return DumpConfigFromText(*text, source, logs);
}

DumpConfigEntry DumpConfigFromText(const std::string& text, const std::string& source,
                                   std::vector<DumpLog>* logs) {
  DumpConfigEntry entry;
  v1::DumpConfigFile root;
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;
  auto parsed = google::protobuf::util::JsonStringToMessage(text, &root, lenient);
  if (!parsed.ok()) {
    Log(logs, DumpLog::kWarning,
        absl::StrCat(source, ": not a JSON object (", std::string(parsed.message()),
                     "); no setting is taken from it"));
    return entry;
  }
  // Unknown keys: the strict parse names the first one.
  v1::DumpConfigFile strict_root;
  auto strict = google::protobuf::util::JsonStringToMessage(text, &strict_root);
  if (!strict.ok()) {
    std::vector<std::string> known;
    for (const Item& i : kItems) known.push_back(i.name);
    Log(logs, DumpLog::kWarning,
        absl::StrCat(source, ": ", std::string(strict.message()),
                     ": not a dump setting (known: ", absl::StrJoin(known, ", "),
                     "); ignored"));
  }
  const google::protobuf::Value* values[] = {
      root.has_level() ? &root.level() : nullptr,
      root.has_path() ? &root.path() : nullptr,
      root.has_mode() ? &root.mode() : nullptr,
      root.has_funcs() ? &root.funcs() : nullptr,
      root.has_block_funcs() ? &root.block_funcs() : nullptr,
      root.has_steps() ? &root.steps() : nullptr,
      root.has_stats() ? &root.stats() : nullptr,
      root.has_overflow() ? &root.overflow() : nullptr,
      root.has_capture_server() ? &root.capture_server() : nullptr,
      root.has_auth_token_file() ? &root.auth_token_file() : nullptr,
      root.has_labels() ? &root.labels() : nullptr,
      root.has_dedup() ? &root.dedup() : nullptr,
      root.has_verbose() ? &root.verbose() : nullptr,
      root.has_snapshot_inputs() ? &root.snapshot_inputs() : nullptr,
  };
  static_assert(sizeof(values) / sizeof(values[0]) == sizeof(kItems) / sizeof(kItems[0]));
  for (size_t k = 0; k < sizeof(kItems) / sizeof(kItems[0]); ++k) {
    const google::protobuf::Value* value = values[k];
    const Item& item = kItems[k];
    if (value == nullptr || value->kind_case() == google::protobuf::Value::kNullValue) continue;
    bool ok;
    const std::string v = ValueText(*value, &ok);
    std::string shown;
    google::protobuf::util::MessageToJsonString(*value, &shown);
    const std::string key = item.name;
    if (!ok) {
      Log(logs, DumpLog::kWarning,
          absl::StrCat(source, ": \"", key, "\": ", shown, " is not valid (expected ",
                       item.expected, "); ", item.name,
                       " falls back to the next entry or its default"));
      continue;
    }
    Take(item, source, absl::StrCat("\"", key, "\": ", shown), v, &entry, logs);
  }
  LogEntry(source, entry, logs);
  return entry;
}

DumpConfigEntry CheckApiEntry(DumpConfigEntry api, std::vector<DumpLog>* logs) {
  return CheckEntry("API", std::move(api), logs);
}

DumpConfigEntry CheckEntry(const std::string& source, DumpConfigEntry api,
                           std::vector<DumpLog>* logs) {
  if (api.level && (*api.level < 0 || *api.level > 3)) {
    Log(logs, DumpLog::kWarning,
        absl::StrCat(source, ": level=", *api.level, " is not valid (expected 0, 1, 2 or 3); "
                     "level falls back to the next entry or its default"));
    api.level.reset();
  }
  if (api.path && !PathWritable(*api.path)) {
    Log(logs, DumpLog::kWarning,
        absl::StrCat(source, ": path='", *api.path, "' is not valid: ",
                     PathProblem(*api.path), " (expected ", kItems[1].expected,
                     "); path falls back to the next entry or its default"));
    api.path.reset();
  }
  if (api.funcs && api.funcs->empty()) api.funcs.reset();
  if (api.block_funcs && api.block_funcs->empty()) api.block_funcs.reset();
  if (api.labels && api.labels->empty()) api.labels.reset();
  auto check = [&](std::optional<std::string>& value, const Item& item) {
    DumpConfigEntry scratch;
    if (value && !item.set(&scratch, *value)) {
      // A token file says what is wrong with it (the byte, the kind of
      // file), never the token.
      std::string why;
      if (std::string(item.name) == "auth_token_file") {
        why = absl::StrCat(": ", ReadTokenFile(*value).status().message());
      }
      Log(logs, DumpLog::kWarning,
          absl::StrCat(source, ": ", item.name, "='", *value, "' is not valid", why,
                       " (expected ", item.expected, "); ", item.name,
                       " falls back to the next entry or its default"));
      value.reset();
    }
  };
  for (const Item& item : kItems) {
    if (absl::string_view(item.name) == "capture_server") check(api.capture_server, item);
    if (absl::string_view(item.name) == "auth_token_file") check(api.auth_token_file, item);
  }
  LogEntry(source, api, logs);
  return api;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseLabels(
    const std::string& text) {
  std::vector<std::pair<std::string, std::string>> labels;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", part, "' is not key=value"));
    }
    std::string key(absl::StripAsciiWhitespace(part.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(part.substr(eq + 1)));
    if (absl::Status s = ValidateCaptureLabel(key, value); !s.ok()) return s;
    auto same = std::find_if(labels.begin(), labels.end(),
                             [&](const auto& l) { return l.first == key; });
    if (same != labels.end()) {
      same->second = std::move(value);
    } else {
      labels.emplace_back(std::move(key), std::move(value));
    }
  }
  if (labels.size() > static_cast<size_t>(kMaxCaptureLabels)) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxCaptureLabels,
                                                   " labels, got ", labels.size()));
  }
  return labels;
}

bool IsHostPort(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == target.size()) return false;
  const std::string host = target.substr(0, colon);
  if (host.front() == '[' ? host.back() != ']' || host.size() < 3
                          : host.find(':') != std::string::npos) {
    return false;
  }
  for (char c : host) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/') return false;
  }
  uint32_t port;
  return absl::SimpleAtoi(target.substr(colon + 1), &port) && port >= 1 && port <= 65535 &&
         std::isdigit(static_cast<unsigned char>(target[colon + 1]));
}

namespace {

template <typename T>
std::string Show(const T& v) {
  return absl::StrCat(v);
}
std::string Show(const std::string& v) { return absl::StrCat("'", v, "'"); }
std::string Show(bool v) { return v ? "true" : "false"; }
std::string Show(DumpMode v) { return DumpModeName(v); }
std::string Show(StatsMode v) { return StatsModeName(v); }
std::string Show(const std::vector<std::string>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}
std::string Show(const StepSet& v) { return absl::StrCat("'", v.text(), "'"); }
std::string Show(const std::vector<std::pair<std::string, std::string>>& v) {
  return absl::StrCat("'", LabelsText(v), "'");
}

// The highest-priority value of one item (the entries' `field`), with an
// ERROR for every lower entry that sets it differently.
template <typename T>
void Pick(const char* name, const std::vector<DumpConfigSource>& sources,
          std::optional<T> DumpConfigEntry::*field, const std::string& order, T* out,
          std::vector<DumpLog>* logs) {
  size_t winner = sources.size();
  for (size_t i = 0; i < sources.size(); ++i) {
    if ((sources[i].entry.*field).has_value()) {
      winner = i;
      break;
    }
  }
  if (winner == sources.size()) return;
  const T& value = *(sources[winner].entry.*field);
  *out = value;
  for (size_t i = winner + 1; i < sources.size(); ++i) {
    const std::optional<T>& other = sources[i].entry.*field;
    if (other.has_value() && !(*other == value)) {
      Log(logs, DumpLog::kError,
          absl::StrCat(name, ": ", sources[winner].name, " sets ", Show(value), " and ",
                       sources[i].name, " sets ", Show(*other), "; using ",
                       sources[winner].name, "'s (", order, ")"));
    }
  }
}

}  // namespace

DumpConfigWatcher::DumpConfigWatcher(DumpConfigEntry api, DumpConfigEntry env, std::string path)
    : DumpConfigWatcher({{"API", "API", std::move(api)},
                         {"the environment", "environment", std::move(env)}},
                        std::move(path)) {}

DumpConfigWatcher::DumpConfigWatcher(std::vector<DumpConfigSource> above, std::string path)
    : above_(std::move(above)), path_(std::move(path)) {}

namespace {
std::optional<std::string> ReadText(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return std::nullopt;
  return *std::move(text);
}
}  // namespace

DumpConfig DumpConfigWatcher::Current(std::vector<DumpLog>* logs) {
  text_ = ReadText(path_);
  std::vector<DumpConfigSource> sources = above_;
  file_ = DumpConfigFromFile(path_, logs);
  sources.push_back(ConfigFileSource(file_));
  return ResolveDumpConfig(sources, logs);
}

std::optional<DumpConfig> DumpConfigWatcher::Poll(std::vector<DumpLog>* logs) {
  if (ReadText(path_) == text_) return std::nullopt;
  Log(logs, DumpLog::kInfo, absl::StrCat("config file ", path_, " changed: reading it again"));
  return Current(logs);
}

DumpConfigSource ConfigFileSource(DumpConfigEntry file) {
  return {"the config file", "config file", std::move(file)};
}

DumpConfig ResolveDumpConfig(const DumpConfigEntry& api, const DumpConfigEntry& env,
                             const DumpConfigEntry& file, std::vector<DumpLog>* logs) {
  return ResolveDumpConfig({{"API", "API", api},
                            {"the environment", "environment", env},
                            ConfigFileSource(file)},
                           logs);
}

DumpResolution ResolveDumpEntryPoints(const DumpEntryPoints& points,
                                      std::vector<DumpLog>* logs) {
  DumpResolution r;
  for (const std::string& w : points.command_line_warnings) logs->push_back({DumpLog::kWarning, w});
  const DumpConfigEntry& cli = points.command_line;
  const bool cli_sets = cli.level || cli.path || cli.mode || cli.funcs || cli.block_funcs ||
                        cli.steps || cli.stats || cli.overflow || cli.capture_server ||
                        cli.auth_token_file || cli.labels || cli.dedup;
  if (cli_sets) {
    r.above_file.push_back(
        {"the command line", "command line", CheckEntry("the command line", cli, logs)});
  }
  if (points.api) r.above_file.push_back({"API", "API", CheckApiEntry(*points.api, logs)});
  r.above_file.push_back({"the environment", "environment",
                          DumpConfigFromEnvironment(points.environment, logs)});
  r.config_file = points.config_file;
  r.default_level = points.default_level;
  if (!r.config_file.empty()) {
    r.watcher = std::make_unique<DumpConfigWatcher>(r.above_file, r.config_file);
  }
  r.config = ResolveDumpSources(r.above_file, r.watcher.get(), r.default_level, logs);
  return r;
}

DumpConfig ResolveDumpSources(const std::vector<DumpConfigSource>& above_file,
                              DumpConfigWatcher* watcher, std::optional<int> default_level,
                              std::vector<DumpLog>* logs) {
  DumpConfig config;
  if (watcher != nullptr) {
    config = watcher->Current(logs);
  } else {
    std::vector<DumpConfigSource> sources = above_file;
    sources.push_back(ConfigFileSource({}));  // none: named in the order all the same
    config = ResolveDumpConfig(sources, logs);
  }
  const bool level_set = std::any_of(above_file.begin(), above_file.end(),
                                     [](const DumpConfigSource& s) { return s.entry.level; }) ||
                         (watcher != nullptr && watcher->file_entry().level);
  if (!level_set && default_level && config.level != *default_level) {
    config.level = *default_level;
    logs->push_back({DumpLog::kInfo,
                     absl::StrCat("level=", *default_level,
                                  " from --dump-args-default (argsdump_sim_test's dump_args): "
                                  "no entry sets the level")});
  }
  return config;
}

DumpConfig ResolveDumpConfig(const std::vector<DumpConfigSource>& sources,
                             std::vector<DumpLog>* logs) {
  std::vector<std::string> names;
  for (const DumpConfigSource& s : sources) names.push_back(s.short_name);
  const std::string order = absl::StrJoin(names, " > ");
  DumpConfig c;
#define ARGSDUMP_PICK(field) Pick(#field, sources, &DumpConfigEntry::field, order, &c.field, logs);
  ARGSDUMP_PICK(level)
  ARGSDUMP_PICK(path)
  ARGSDUMP_PICK(mode)
  ARGSDUMP_PICK(funcs)
  ARGSDUMP_PICK(block_funcs)
  ARGSDUMP_PICK(steps)
  ARGSDUMP_PICK(stats)
  ARGSDUMP_PICK(overflow)
  ARGSDUMP_PICK(capture_server)
  ARGSDUMP_PICK(auth_token_file)
  ARGSDUMP_PICK(labels)
  ARGSDUMP_PICK(dedup)
  ARGSDUMP_PICK(verbose)
  ARGSDUMP_PICK(snapshot_inputs)
#undef ARGSDUMP_PICK
  Log(logs, DumpLog::kInfo, absl::StrCat("dump config: ", c.Describe()));
  return c;
}

}  // namespace argsdump
