// What to dump, resolved from three entry points: an API call (SetDumpConfig,
// and the tools' own flags such as --dump-args N), environment variables
// (ARGSDUMP_*), and a JSON config file (--dump-config FILE). Priority API >
// environment > file, with non-empty override: an entry overrides only the
// items it sets.
// Two entries setting one item to different values is an ERROR naming both;
// the higher one wins. A value that does not parse (an unknown mode, a bad
// step list, a path that cannot be written, a token file that is not one)
// is a WARNING naming the entry, the value and why, and that item falls
// back to the next entry or the default:
// configuration mistakes never abort a run.
//
//   item         environment            file key       values
//   level        ARGSDUMP_LEVEL         "level"        0..3
//   path         ARGSDUMP_PATH          "path"         output prefix (<path>/args_dump/)
//   mode         ARGSDUMP_MODE          "mode"         input | output | all
//   funcs        ARGSDUMP_FUNCS         "funcs"        allow list: kernel names or types
//   block_funcs  ARGSDUMP_BLOCK_FUNCS   "block_funcs"  block list: kernel names or types
//   steps        ARGSDUMP_STEPS         "steps"        "0|5|10-20"
//   stats        ARGSDUMP_STATS         "stats"        on | off | only (true/false, 1/0 too)
//   overflow     ARGSDUMP_OVERFLOW      "overflow"     true/false
//   capture_server   ARGSDUMP_CAPTURE_SERVER   "capture_server"   host:port of a
//                                         capture service to stream to
//   auth_token_file  ARGSDUMP_AUTH_TOKEN_FILE  "auth_token_file"  the service's
//                                         bearer token, in a file ReadTokenFile
//                                         takes (base/files.h: its grammar)
//   labels       ARGSDUMP_LABELS        "labels"       key=value,... for the capture
//   dedup        ARGSDUMP_DEDUP         "dedup"        true/false: equal payloads of
//                                         a capture stored once (default true)
//   verbose      ARGSDUMP_VERBOSE       "verbose"      true/false: an INFO line per
//                                         dumped task (default false)
//   snapshot_inputs  ARGSDUMP_SNAPSHOT_INPUTS  "snapshot_inputs"  true/false: with
//                                         exception dumps armed, every task's input
//                                         and inout tensors are copied before
//                                         dispatch, so that its exception dump holds
//                                         them as received, at any level (default
//                                         false)
// Lists in the environment are comma-separated; in the file, a JSON array
// of strings or the same comma-separated string.
//
// Tools may have more entries than these three (the SDK puts a test's own
// command line above the API): ResolveDumpConfig takes any number, highest
// first.
#ifndef ARGSDUMP_DEVICE_DUMP_CONFIG_H_
#define ARGSDUMP_DEVICE_DUMP_CONFIG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace argsdump {

// Which stages are captured: inputs (before dispatch), outputs (after
// completion), or both. Inout args belong to both stages.
enum class DumpMode : uint8_t { kAll, kInput, kOutput };
const char* DumpModeName(DumpMode mode);

// Statistics per captured tensor (min, max, mean, L2 norm, NaN/+Inf/-Inf/
// zero counts), computed on the host from the payload and stored with the
// record: off, on (with the payload), or only (the payload is not kept).
enum class StatsMode : uint8_t { kOff, kOn, kOnly };
const char* StatsModeName(StatsMode mode);

// A set of steps: "0|5|10-20" (single steps and inclusive ranges joined by
// '|'). Empty: every step.
class StepSet {
 public:
  // InvalidArgument naming the bad part ("10-x", "5-2", "").
  static absl::StatusOr<StepSet> Parse(const std::string& text);
  bool all() const { return ranges_.empty(); }
  bool Contains(uint64_t step) const;
  const std::string& text() const { return text_; }
  bool operator==(const StepSet& o) const { return ranges_ == o.ranges_; }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // sorted, inclusive
  std::string text_;
};

// What one entry point sets (unset = leaves it to the next entry).
struct DumpConfigEntry {
  std::optional<int> level;
  std::optional<std::string> path;
  std::optional<DumpMode> mode;
  std::optional<std::vector<std::string>> funcs;
  std::optional<std::vector<std::string>> block_funcs;
  std::optional<StepSet> steps;
  std::optional<StatsMode> stats;
  std::optional<bool> overflow;
  std::optional<std::string> capture_server;
  std::optional<std::string> auth_token_file;
  std::optional<std::vector<std::pair<std::string, std::string>>> labels;
  std::optional<bool> dedup;
  std::optional<bool> verbose;
  std::optional<bool> snapshot_inputs;
};

// The resolved configuration (defaults: level 0, mode all, every func,
// every step, no stats, no overflow check).
struct DumpConfig {
  int level = 0;
  std::string path;  // empty: the tool's default
  DumpMode mode = DumpMode::kAll;
  std::vector<std::string> funcs;  // empty: every kernel
  std::vector<std::string> block_funcs;
  StepSet steps;
  StatsMode stats = StatsMode::kOff;
  bool overflow = false;
  std::string capture_server;   // empty: the capture stays local
  std::string auth_token_file;  // empty: no token is sent
  std::vector<std::pair<std::string, std::string>> labels;  // in the order given
  // Equal payloads within the capture are stored once: entries share the
  // bytes in args.bin. Off: every payload is written.
  bool dedup = true;
  // The verbose log level: an INFO line per dumped task as it is dispatched
  // (its kernels, task id, step, and each arg with its device address).
  bool verbose = false;
  // With exception dumps armed, each task's input and inout tensors are
  // copied before dispatch and kept until it completes: a task whose kernel
  // fails or crashes the device has them in its exception dump as it
  // received them (an inout it changed before it died included), at any
  // level, level 0 too. Costs a copy of every input (docs/benchmarks.md).
  bool snapshot_inputs = false;

  // Whether a kernel (by name and type) is selected by the lists: not
  // blocked by name or type, and allowed when there is an allow list.
  bool FuncSelected(const std::string& name, const std::string& type) const;
  // Whether the stage's records are captured under the mode.
  bool CapturesBefore() const { return mode != DumpMode::kOutput; }
  bool CapturesAfter() const { return mode != DumpMode::kInput; }
  // One line: "level=2 mode=all path=... funcs=[...] ...".
  std::string Describe() const;
  // What the dump does, for people: the level in effect and what else is
  // on ("level 0 (off) with the overflow check: a task whose output holds
  // a NaN or an Inf is dumped in full", "level 2, stats only: no payload
  // is kept", "level 2, inputs only").
  std::string DescribeScope() const;
  // The part after the level: "with the overflow check (...), stats", or
  // "" when nothing else is on.
  std::string DescribeExtras() const;
};

// A log line of the dump configuration ("dumper" lines, graded by severity).
struct DumpLog {
  enum Severity { kInfo, kWarning, kError } severity;
  std::string text;
};
std::string FormatDumpLog(const DumpLog& log);  // "[argsdump dumper] WARNING: ..."

// The entry points. Each logs INFO with what it set, WARNING per item it
// could not take. `source` names the entry in logs.
DumpConfigEntry DumpConfigFromEnvironment(const std::map<std::string, std::string>& env,
                                          std::vector<DumpLog>* logs);
// The process environment's ARGSDUMP_* variables.
std::map<std::string, std::string> DumpEnvironment();
// A missing or unparsable file is a WARNING and an empty entry.
DumpConfigEntry DumpConfigFromFile(const std::string& path, std::vector<DumpLog>* logs);
// The same for a file's text; `source` ("config file <path>") starts every log.
DumpConfigEntry DumpConfigFromText(const std::string& text, const std::string& source,
                                   std::vector<DumpLog>* logs);
// The API entry: the values are checked like the others (a bad path is a
// WARNING and falls back).
DumpConfigEntry CheckApiEntry(DumpConfigEntry api, std::vector<DumpLog>* logs);
// The same for an entry named `source` in the logs ("the command line").
DumpConfigEntry CheckEntry(const std::string& source, DumpConfigEntry entry,
                           std::vector<DumpLog>* logs);

// API > environment > file, non-empty override, ERROR on conflicts.
DumpConfig ResolveDumpConfig(const DumpConfigEntry& api, const DumpConfigEntry& env,
                             const DumpConfigEntry& file, std::vector<DumpLog>* logs);

// One entry point and how logs name it: `name` in sentences ("the
// environment"), `short_name` in the priority order ("environment").
struct DumpConfigSource {
  std::string name;
  std::string short_name;
  DumpConfigEntry entry;
};
// The same over any number of entries, highest priority first; an ERROR
// names both entries of a conflict and the order ("command line > API > ...").
DumpConfig ResolveDumpConfig(const std::vector<DumpConfigSource>& sources,
                             std::vector<DumpLog>* logs);
// The config file's entry as a source.
DumpConfigSource ConfigFileSource(DumpConfigEntry file);

// "key=value,key=value" (keys not empty; a later key replaces an earlier
// one). InvalidArgument naming the bad part.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseLabels(
    const std::string& text);
// Whether `target` looks like host:port (port 1..65535; [v6]:port too).
bool IsHostPort(const std::string& target);

// The dynamic switch through the config file: the file is read again
// between steps, and when its text changed, the configuration is resolved
// anew (with the same API and environment entries) and returned.
class DumpConfigWatcher {
 public:
  DumpConfigWatcher(DumpConfigEntry api, DumpConfigEntry env, std::string path);
  // `above`: the entries above the file, highest first.
  DumpConfigWatcher(std::vector<DumpConfigSource> above, std::string path);
  // The configuration as it stands (reads the file).
  DumpConfig Current(std::vector<DumpLog>* logs);
  // A new configuration when the file's text changed since the last read.
  std::optional<DumpConfig> Poll(std::vector<DumpLog>* logs);
  // What the file set when it was last read.
  const DumpConfigEntry& file_entry() const { return file_; }

 private:
  const std::vector<DumpConfigSource> above_;
  const std::string path_;
  std::optional<std::string> text_;  // as last read (nullopt: unreadable)
  DumpConfigEntry file_;
};

// Every entry point of a run, as sim_run and the SDK both take them: one
// resolution for both, so no entry point is honoured by one and not the
// other. Priority: the command line > the API > the environment > the
// config file > the default level.
struct DumpEntryPoints {
  // The command line: sim_run's dump flags (--dump-args, --output-prefix,
  // --capture-server, --auth-token-file, --labels, --dedup), or a test's
  // (--dump-args, --output-prefix, --capture-server). Checked like every
  // entry: a value it cannot take is a WARNING and falls back.
  DumpConfigEntry command_line;
  // Flags whose value could not be taken at all (each a WARNING already
  // naming the flag and its fallback).
  std::vector<std::string> command_line_warnings;
  // SessionOptions::dump (the code's own wishes); unset: no API entry
  // (sim_run has no code of the user's).
  std::optional<DumpConfigEntry> api;
  // The ARGSDUMP_* variables (DumpEnvironment()).
  std::map<std::string, std::string> environment;
  std::string config_file;  // --dump-config or SessionOptions::config_file; empty: none
  // --dump-args-default (argsdump_sim_test's dump_args): the level when no
  // entry sets one.
  std::optional<int> default_level;
};

// The resolution and what it was made from (re-resolved after the API
// entry changes, and per step while the config file is watched).
struct DumpResolution {
  DumpConfig config;
  std::vector<DumpConfigSource> above_file;  // checked, highest first
  std::string config_file;
  std::unique_ptr<DumpConfigWatcher> watcher;  // set with a config file
  std::optional<int> default_level;
};
DumpResolution ResolveDumpEntryPoints(const DumpEntryPoints& points, std::vector<DumpLog>* logs);
// The configuration from entries already checked: `above_file`, the
// watched file's (reads it again), then the default level.
DumpConfig ResolveDumpSources(const std::vector<DumpConfigSource>& above_file,
                              DumpConfigWatcher* watcher, std::optional<int> default_level,
                              std::vector<DumpLog>* logs);

// Whether `path` can hold a capture: it exists as a directory a folder can
// be created in, or its nearest existing ancestor is one (it would be
// created): writable for this user, not on a read-only mount, not a kernel
// file system (/proc, /sys; root's permission bits say nothing there).
// Nothing is created to find out. PathProblem says why not ("" when it can).
bool PathWritable(const std::string& path);
std::string PathProblem(const std::string& path);

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_DUMP_CONFIG_H_
