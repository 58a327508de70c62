#include "device/dump_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/struct.pb.h"
#include "proto/argsdump/v1/dump_config.pb.h"
#include "google/protobuf/util/json_util.h"

extern char** environ;

namespace argsdump {

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
                      " overflow=", overflow ? "on" : "off");
}

std::string FormatDumpLog(const DumpLog& log) {
  const char* severity = log.severity == DumpLog::kInfo      ? "INFO"
                         : log.severity == DumpLog::kWarning ? "WARNING"
                                                             : "ERROR";
  return absl::StrCat("[argsdump dumper] ", severity, ": ", log.text);
}

bool PathWritable(const std::string& path) {
  if (path.empty()) return false;
  std::string p = path;
  for (;;) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0) {
      return S_ISDIR(st.st_mode) && ::access(p.c_str(), W_OK | X_OK) == 0;
    }
    if (errno != ENOENT) return false;
    const size_t slash = p.find_last_of('/');
    if (slash == std::string::npos) {
      p = ".";
    } else if (slash == 0) {
      p = "/";
    } else {
      p = p.substr(0, slash);
    }
  }
}

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
  Log(logs, DumpLog::kWarning,
      absl::StrCat(source, ": ", shown, " is not valid (expected ", item.expected, "); ",
                   item.name, " falls back to the next entry or its default"));
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
  std::ifstream in(path);
  if (!in) {
    Log(logs, DumpLog::kWarning,
        absl::StrCat(source, ": cannot read it; no setting is taken from it (pass a readable "
                             "JSON file such as {\"level\": 2, \"mode\": \"output\"})"));
    return entry;
  }
  std::stringstream text;
  text << in.rdbuf();
  v1::DumpConfigFile root;
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;
  auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &root, lenient);
  if (!parsed.ok()) {
    Log(logs, DumpLog::kWarning,
        absl::StrCat(source, ": not a JSON object (", std::string(parsed.message()),
                     "); no setting is taken from it"));
    return entry;
  }
  // Unknown keys: the strict parse names the first one.
  v1::DumpConfigFile strict_root;
  auto strict = google::protobuf::util::JsonStringToMessage(text.str(), &strict_root);
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
  if (api.level && (*api.level < 0 || *api.level > 3)) {
    Log(logs, DumpLog::kWarning,
        absl::StrCat("API: level=", *api.level, " is not valid (expected 0, 1, 2 or 3); "
                     "level falls back to the next entry or its default"));
    api.level.reset();
  }
  if (api.path && !PathWritable(*api.path)) {
    Log(logs, DumpLog::kWarning,
        absl::StrCat("API: path='", *api.path, "' is not valid (expected ", kItems[1].expected,
                     "); path falls back to the next entry or its default"));
    api.path.reset();
  }
  if (api.funcs && api.funcs->empty()) api.funcs.reset();
  if (api.block_funcs && api.block_funcs->empty()) api.block_funcs.reset();
  LogEntry("API", api, logs);
  return api;
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

// The highest-priority value of one item, with an ERROR for every lower
// entry that sets it differently.
template <typename T>
void Pick(const char* name, const std::optional<T>* const values[3], const char* const sources[3],
          T* out, std::vector<DumpLog>* logs) {
  int winner = -1;
  for (int i = 0; i < 3; ++i) {
    if (values[i]->has_value()) {
      winner = i;
      break;
    }
  }
  if (winner < 0) return;
  *out = **values[winner];
  for (int i = winner + 1; i < 3; ++i) {
    if (values[i]->has_value() && !(**values[i] == **values[winner])) {
      Log(logs, DumpLog::kError,
          absl::StrCat(name, ": ", sources[winner], " sets ", Show(**values[winner]), " and ",
                       sources[i], " sets ", Show(**values[i]), "; using ", sources[winner],
                       "'s (API > environment > config file)"));
    }
  }
}

}  // namespace

DumpConfigWatcher::DumpConfigWatcher(DumpConfigEntry api, DumpConfigEntry env, std::string path)
    : api_(std::move(api)), env_(std::move(env)), path_(std::move(path)) {}

namespace {
std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

DumpConfig DumpConfigWatcher::Current(std::vector<DumpLog>* logs) {
  text_ = ReadText(path_);
  return ResolveDumpConfig(api_, env_, DumpConfigFromFile(path_, logs), logs);
}

std::optional<DumpConfig> DumpConfigWatcher::Poll(std::vector<DumpLog>* logs) {
  if (ReadText(path_) == text_) return std::nullopt;
  Log(logs, DumpLog::kInfo, absl::StrCat("config file ", path_, " changed: reading it again"));
  return Current(logs);
}

DumpConfig ResolveDumpConfig(const DumpConfigEntry& api, const DumpConfigEntry& env,
                             const DumpConfigEntry& file, std::vector<DumpLog>* logs) {
  const char* const sources[3] = {"API", "the environment", "the config file"};
  DumpConfig c;
#define ARGSDUMP_PICK(field)                                                        \
  {                                                                                 \
    const decltype(api.field)* values[3] = {&api.field, &env.field, &file.field}; \
    Pick(#field, values, sources, &c.field, logs);                                  \
  }
  ARGSDUMP_PICK(level)
  ARGSDUMP_PICK(path)
  ARGSDUMP_PICK(mode)
  ARGSDUMP_PICK(funcs)
  ARGSDUMP_PICK(block_funcs)
  ARGSDUMP_PICK(steps)
  ARGSDUMP_PICK(stats)
  ARGSDUMP_PICK(overflow)
#undef ARGSDUMP_PICK
  Log(logs, DumpLog::kInfo, absl::StrCat("dump config: ", c.Describe()));
  return c;
}

}  // namespace argsdump
