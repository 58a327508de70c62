#include "device/dump_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

std::string File(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

// Logs of a severity that contain `text`.
int Count(const std::vector<DumpLog>& logs, DumpLog::Severity s, const std::string& text) {
  int n = 0;
  for (const DumpLog& l : logs) n += l.severity == s && l.text.find(text) != std::string::npos;
  return n;
}

std::string All(const std::vector<DumpLog>& logs) {
  std::string out;
  for (const DumpLog& l : logs) out += FormatDumpLog(l) + "\n";
  return out;
}

TEST(StepSetTest, ParsesStepsAndRanges) {
  const StepSet s = StepSet::Parse("0|5|10-20").value();
  for (uint64_t step : {0, 5, 10, 15, 20}) EXPECT_TRUE(s.Contains(step)) << step;
  for (uint64_t step : {1, 4, 6, 9, 21}) EXPECT_FALSE(s.Contains(step)) << step;
  EXPECT_TRUE(StepSet().Contains(12345));  // empty: every step
  EXPECT_TRUE(StepSet::Parse(" 3 | 1-2 ").value().Contains(2));
  for (const char* bad : {"", "a", "1|", "5-2", "1-", "-3", "1-2-3", "1,2", "+4"}) {
    EXPECT_FALSE(StepSet::Parse(bad).ok()) << bad;
  }
  EXPECT_NE(StepSet::Parse("5-2").status().message().find("'5-2' ends before it starts"),
            std::string::npos);
}

TEST(DumpConfigTest, EachEntryAloneSetsWhatItSays) {
  std::vector<DumpLog> logs;
  const DumpConfigEntry env = DumpConfigFromEnvironment(
      {{"ARGSDUMP_LEVEL", "2"},
       {"ARGSDUMP_PATH", TempPath("env_out")},
       {"ARGSDUMP_MODE", "OUTPUT"},
       {"ARGSDUMP_FUNCS", "add, matmul"},
       {"ARGSDUMP_BLOCK_FUNCS", "relu"},
       {"ARGSDUMP_STEPS", "0|2-3"},
       {"ARGSDUMP_STATS", "on"},
       {"ARGSDUMP_OVERFLOW", "1"}},
      &logs);
  const DumpConfig c = ResolveDumpConfig({}, env, {}, &logs);
  EXPECT_EQ(c.level, 2);
  EXPECT_EQ(c.path, TempPath("env_out"));
  EXPECT_EQ(c.mode, DumpMode::kOutput);
  EXPECT_EQ(c.funcs, (std::vector<std::string>{"add", "matmul"}));
  EXPECT_EQ(c.block_funcs, (std::vector<std::string>{"relu"}));
  EXPECT_TRUE(c.steps.Contains(3));
  EXPECT_FALSE(c.steps.Contains(1));
  EXPECT_EQ(c.stats, StatsMode::kOn);
  EXPECT_TRUE(c.overflow);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, ""), 0) << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kError, ""), 0) << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kInfo, "environment: level=2"), 1) << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kInfo, "dump config: level=2"), 1) << All(logs);

  logs.clear();
  const std::string f = File("all.json", R"({"level": 3, "mode": "input",
      "funcs": ["softmax"], "block_funcs": "a,b", "steps": "7", "stats": false,
      "overflow": true, "path": null})");
  const DumpConfig fc = ResolveDumpConfig({}, {}, DumpConfigFromFile(f, &logs), &logs);
  EXPECT_EQ(fc.level, 3);
  EXPECT_EQ(fc.mode, DumpMode::kInput);
  EXPECT_EQ(fc.funcs, (std::vector<std::string>{"softmax"}));
  EXPECT_EQ(fc.block_funcs, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(fc.steps.Contains(7));
  EXPECT_FALSE(fc.steps.Contains(6));
  EXPECT_EQ(fc.stats, StatsMode::kOff);
  EXPECT_TRUE(fc.overflow);
  EXPECT_EQ(fc.path, "");  // null: unset
  EXPECT_EQ(Count(logs, DumpLog::kWarning, ""), 0) << All(logs);

  logs.clear();
  DumpConfigEntry api;
  api.level = 1;
  api.mode = DumpMode::kOutput;
  const DumpConfig ac = ResolveDumpConfig(CheckApiEntry(api, &logs), {}, {}, &logs);
  EXPECT_EQ(ac.level, 1);
  EXPECT_EQ(ac.mode, DumpMode::kOutput);
  EXPECT_EQ(Count(logs, DumpLog::kInfo, "API: level=1 mode=output"), 1) << All(logs);
  // Nothing anywhere: the defaults.
  logs.clear();
  const DumpConfig none = ResolveDumpConfig({}, {}, {}, &logs);
  EXPECT_EQ(none.level, 0);
  EXPECT_EQ(none.mode, DumpMode::kAll);
  EXPECT_TRUE(none.steps.all());
  EXPECT_EQ(none.stats, StatsMode::kOff);
  EXPECT_FALSE(none.overflow);
}

// dedup (sharing equal payloads): on unless an entry says false; a value
// that is not a yes/no is a WARNING naming it, and the default stays.
TEST(DumpConfigTest, DedupIsOnUnlessAnEntrySaysFalse) {
  std::vector<DumpLog> logs;
  EXPECT_TRUE(ResolveDumpConfig({}, {}, {}, &logs).dedup);
  EXPECT_EQ(ResolveDumpConfig({}, {}, {}, &logs).Describe().find("dedup"), std::string::npos);
  logs.clear();
  const DumpConfigEntry env = DumpConfigFromEnvironment({{"ARGSDUMP_DEDUP", "false"}}, &logs);
  const DumpConfig from_env = ResolveDumpConfig({}, env, {}, &logs);
  EXPECT_FALSE(from_env.dedup);
  EXPECT_NE(from_env.Describe().find("dedup=off"), std::string::npos);
  EXPECT_EQ(Count(logs, DumpLog::kInfo, "environment: dedup=false"), 1) << All(logs);
  logs.clear();
  const std::string f = File("dedup.json", R"({"dedup": false})");
  EXPECT_FALSE(ResolveDumpConfig({}, {}, DumpConfigFromFile(f, &logs), &logs).dedup);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, ""), 0) << All(logs);
  logs.clear();
  const DumpConfigEntry bad = DumpConfigFromEnvironment({{"ARGSDUMP_DEDUP", "maybe"}}, &logs);
  EXPECT_TRUE(ResolveDumpConfig({}, bad, {}, &logs).dedup);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "ARGSDUMP_DEDUP"), 1) << All(logs);
  logs.clear();
  DumpConfigEntry api;
  api.dedup = true;
  EXPECT_TRUE(ResolveDumpConfig(CheckApiEntry(api, &logs), env, {}, &logs).dedup);
}

// verbose (a line per dumped task): off unless an entry says true; each
// entry point sets it, and a value that is not a yes/no is a WARNING naming
// it while the default stays.
TEST(DumpConfigTest, VerboseIsOffUnlessAnEntrySaysTrue) {
  std::vector<DumpLog> logs;
  EXPECT_FALSE(ResolveDumpConfig({}, {}, {}, &logs).verbose);
  EXPECT_EQ(ResolveDumpConfig({}, {}, {}, &logs).Describe().find("verbose"), std::string::npos);
  logs.clear();
  const DumpConfigEntry env = DumpConfigFromEnvironment({{"ARGSDUMP_VERBOSE", "true"}}, &logs);
  const DumpConfig from_env = ResolveDumpConfig({}, env, {}, &logs);
  EXPECT_TRUE(from_env.verbose);
  EXPECT_NE(from_env.Describe().find("verbose=on"), std::string::npos);
  EXPECT_EQ(Count(logs, DumpLog::kInfo, "environment: verbose=true"), 1) << All(logs);
  logs.clear();
  const std::string f = File("verbose.json", R"({"verbose": true})");
  EXPECT_TRUE(ResolveDumpConfig({}, {}, DumpConfigFromFile(f, &logs), &logs).verbose);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, ""), 0) << All(logs);
  logs.clear();
  const DumpConfigEntry bad = DumpConfigFromEnvironment({{"ARGSDUMP_VERBOSE", "loud"}}, &logs);
  EXPECT_FALSE(ResolveDumpConfig({}, bad, {}, &logs).verbose);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "ARGSDUMP_VERBOSE"), 1) << All(logs);
  logs.clear();
  DumpConfigEntry api;
  api.verbose = false;
  EXPECT_FALSE(ResolveDumpConfig(CheckApiEntry(api, &logs), env, {}, &logs).verbose);
}

// snapshot_inputs: off unless an entry says true, from each entry point; a
// value that is not a yes/no is a WARNING naming it, and the default stays.
TEST(DumpConfigTest, SnapshotInputsIsOffUnlessAnEntrySaysTrue) {
  std::vector<DumpLog> logs;
  EXPECT_FALSE(ResolveDumpConfig({}, {}, {}, &logs).snapshot_inputs);
  EXPECT_EQ(ResolveDumpConfig({}, {}, {}, &logs).Describe().find("snapshot_inputs"),
            std::string::npos);
  logs.clear();
  const DumpConfigEntry env =
      DumpConfigFromEnvironment({{"ARGSDUMP_SNAPSHOT_INPUTS", "1"}}, &logs);
  const DumpConfig from_env = ResolveDumpConfig({}, env, {}, &logs);
  EXPECT_TRUE(from_env.snapshot_inputs);
  EXPECT_NE(from_env.Describe().find("snapshot_inputs=on"), std::string::npos);
  EXPECT_EQ(Count(logs, DumpLog::kInfo, "environment: snapshot_inputs=true"), 1) << All(logs);
  logs.clear();
  const std::string f = File("snapshot_inputs.json", R"({"snapshot_inputs": true})");
  EXPECT_TRUE(ResolveDumpConfig({}, {}, DumpConfigFromFile(f, &logs), &logs).snapshot_inputs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, ""), 0) << All(logs);
  logs.clear();
  const DumpConfigEntry bad =
      DumpConfigFromEnvironment({{"ARGSDUMP_SNAPSHOT_INPUTS", "sometimes"}}, &logs);
  EXPECT_FALSE(ResolveDumpConfig({}, bad, {}, &logs).snapshot_inputs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "ARGSDUMP_SNAPSHOT_INPUTS"), 1) << All(logs);
  logs.clear();
  DumpConfigEntry api;
  api.snapshot_inputs = false;
  EXPECT_FALSE(ResolveDumpConfig(CheckApiEntry(api, &logs), env, {}, &logs).snapshot_inputs);
  EXPECT_EQ(Count(logs, DumpLog::kError, "snapshot_inputs"), 1) << All(logs);
}

// Every combination of the three entries setting the level: the highest
// one present wins; every lower one that differs is an ERROR naming both.
TEST(DumpConfigTest, PriorityIsApiThenEnvironmentThenFileForEveryCombination) {
  for (int mask = 0; mask < 8; ++mask) {
    for (bool same : {false, true}) {
      SCOPED_TRACE(testing::Message() << "mask " << mask << (same ? " same" : " different"));
      DumpConfigEntry api, env, file;
      if (mask & 1) api.level = 1;
      if (mask & 2) env.level = same ? 1 : 2;
      if (mask & 4) file.level = same ? 1 : 3;
      std::vector<DumpLog> logs;
      const DumpConfig c = ResolveDumpConfig(api, env, file, &logs);
      const int want = (mask & 1) ? 1 : (mask & 2) ? (same ? 1 : 2) : (mask & 4) ? (same ? 1 : 3) : 0;
      EXPECT_EQ(c.level, want);
      int conflicts = 0;
      if (!same) {
        if ((mask & 1) && (mask & 2)) ++conflicts;
        if ((mask & 1) && (mask & 4)) ++conflicts;
        if (!(mask & 1) && (mask & 2) && (mask & 4)) ++conflicts;
      }
      EXPECT_EQ(Count(logs, DumpLog::kError, "level: "), conflicts) << All(logs);
    }
  }
  // The ERROR names both entries and both values, and which one is used.
  DumpConfigEntry env, file;
  env.mode = DumpMode::kInput;
  file.mode = DumpMode::kOutput;
  std::vector<DumpLog> logs;
  EXPECT_EQ(ResolveDumpConfig({}, env, file, &logs).mode, DumpMode::kInput);
  EXPECT_EQ(Count(logs, DumpLog::kError,
                  "mode: the environment sets input and the config file sets output; using "
                  "the environment's"),
            1)
      << All(logs);
}

// Non-empty override: each entry overrides only what it sets.
TEST(DumpConfigTest, AnEntryOverridesOnlyWhatItSets) {
  std::vector<DumpLog> logs;
  const std::string f = File("partial.json", R"({"level": 2, "mode": "output", "steps": "1-4"})");
  const DumpConfigEntry file = DumpConfigFromFile(f, &logs);
  const DumpConfigEntry env =
      DumpConfigFromEnvironment({{"ARGSDUMP_MODE", "input"}, {"ARGSDUMP_FUNCS", ""}}, &logs);
  DumpConfigEntry api;
  api.funcs = std::vector<std::string>{"add"};
  const DumpConfig c = ResolveDumpConfig(CheckApiEntry(api, &logs), env, file, &logs);
  EXPECT_EQ(c.level, 2);                      // file only
  EXPECT_EQ(c.mode, DumpMode::kInput);        // env over file (an ERROR: they differ)
  EXPECT_TRUE(c.steps.Contains(4));           // file only
  EXPECT_EQ(c.funcs, (std::vector<std::string>{"add"}));  // API; the empty env value set nothing
  EXPECT_EQ(Count(logs, DumpLog::kError, ""), 1) << All(logs);
}

// Every invalid value: a WARNING naming the entry and the value, and the
// item falls back (to a lower entry here, or the default).
TEST(DumpConfigTest, InvalidValuesWarnAndFallBack) {
  const std::string unwritable = File("a_file", "x") + "/sub";  // under a regular file
  struct Case {
    std::string var, value, says;
  };
  const std::vector<Case> cases = {
      {"ARGSDUMP_LEVEL", "7", "ARGSDUMP_LEVEL='7' is not valid (expected 0, 1, 2 or 3)"},
      {"ARGSDUMP_LEVEL", "two", "ARGSDUMP_LEVEL='two'"},
      {"ARGSDUMP_MODE", "both", "ARGSDUMP_MODE='both' is not valid (expected input, output or all)"},
      {"ARGSDUMP_STEPS", "1|x", "ARGSDUMP_STEPS='1|x' is not valid (expected steps and ranges"},
      {"ARGSDUMP_STEPS", "9-3", "ARGSDUMP_STEPS='9-3'"},
      {"ARGSDUMP_PATH", unwritable, "ARGSDUMP_PATH='" + unwritable + "' is not valid"},
      {"ARGSDUMP_STATS", "maybe", "ARGSDUMP_STATS='maybe' is not valid (expected on, off or only)"},
      {"ARGSDUMP_OVERFLOW", "2", "ARGSDUMP_OVERFLOW='2'"},
      {"ARGSDUMP_FUNCS", " , ", "ARGSDUMP_FUNCS=' , '"},
      {"ARGSDUMP_LEVLE", "2", "ARGSDUMP_LEVLE is not a dump setting"},
  };
  // A valid file underneath each: the bad environment value falls back to it.
  const std::string f = File("fallback.json", R"({"level": 1, "mode": "output", "steps": "4",
      "stats": true, "overflow": true, "funcs": "add", "path": ")" + TempPath("") + R"("})");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.var + "=" + c.value);
    std::vector<DumpLog> logs;
    const DumpConfigEntry file = DumpConfigFromFile(f, &logs);
    const DumpConfig got =
        ResolveDumpConfig({}, DumpConfigFromEnvironment({{c.var, c.value}}, &logs), file, &logs);
    EXPECT_EQ(Count(logs, DumpLog::kWarning, "environment: " + c.says), 1) << All(logs);
    EXPECT_EQ(Count(logs, DumpLog::kError, ""), 0) << All(logs);
    EXPECT_EQ(got.level, 1);
    EXPECT_EQ(got.mode, DumpMode::kOutput);
    EXPECT_TRUE(got.steps.Contains(4) && !got.steps.Contains(5));
    EXPECT_TRUE(got.stats == StatsMode::kOn && got.overflow);
    EXPECT_EQ(got.funcs, (std::vector<std::string>{"add"}));
    EXPECT_EQ(got.path, TempPath(""));
  }
  // In the file: bad values, wrong types, unknown keys; the rest is taken.
  std::vector<DumpLog> logs;
  const std::string bad = File("bad.json", R"({"level": "x", "mode": 3, "funcs": [1, 2],
      "steps": "", "colour": "red", "stats": "yes"})");
  const DumpConfig c = ResolveDumpConfig({}, {}, DumpConfigFromFile(bad, &logs), &logs);
  EXPECT_EQ(c.level, 0);
  EXPECT_EQ(c.stats, StatsMode::kOn);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "config file " + bad + ": \"level\": \"x\" is not valid"), 1)
      << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "\"mode\": 3 is not valid"), 1) << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "\"funcs\": [1,2] is not valid"), 1) << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "\"steps\": \"\" is not valid"), 1) << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "colour"), 1) << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "not a dump setting (known: level, path"), 1)
      << All(logs);
  // A file that is missing or not JSON: one WARNING, nothing taken.
  logs.clear();
  DumpConfigFromFile(TempPath("missing.json"), &logs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "missing.json: cannot read it"), 1) << All(logs);
  logs.clear();
  const DumpConfigEntry broken = DumpConfigFromFile(File("broken.json", "{\"level\": 2"), &logs);
  EXPECT_FALSE(broken.level.has_value());
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "broken.json: not a JSON object"), 1) << All(logs);
  // The API's values are checked too.
  logs.clear();
  DumpConfigEntry api;
  api.level = 9;
  api.path = unwritable;
  const DumpConfigEntry checked = CheckApiEntry(api, &logs);
  EXPECT_FALSE(checked.level || checked.path);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "API: level=9 is not valid"), 1) << All(logs);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "API: path='" + unwritable), 1) << All(logs);
}

TEST(DumpConfigTest, FuncListsMatchNamesAndTypes) {
  DumpConfig c;
  EXPECT_TRUE(c.FuncSelected("add", "elementwise"));
  c.funcs = {"matmul", "elementwise"};
  EXPECT_TRUE(c.FuncSelected("add", "elementwise"));  // by type
  EXPECT_TRUE(c.FuncSelected("matmul", "blas"));      // by name
  EXPECT_FALSE(c.FuncSelected("softmax", "reduce"));
  c.block_funcs = {"add"};
  EXPECT_FALSE(c.FuncSelected("add", "elementwise"));  // block wins
  EXPECT_TRUE(c.FuncSelected("relu", "elementwise"));
  c.funcs.clear();
  c.block_funcs = {"reduce"};
  EXPECT_FALSE(c.FuncSelected("softmax", "reduce"));
  EXPECT_TRUE(c.FuncSelected("softmax", ""));  // an untyped kernel matches names only
}

TEST(DumpConfigTest, PathWritableLooksAtTheNearestExistingFolder) {
  EXPECT_TRUE(PathWritable(TempPath("")));
  EXPECT_TRUE(PathWritable(TempPath("not/yet/there")));
  EXPECT_FALSE(PathWritable(File("plain", "x")));
  EXPECT_FALSE(PathWritable(File("plain2", "x") + "/below"));
  EXPECT_FALSE(PathWritable(""));
}

}  // namespace
}  // namespace argsdump

namespace argsdump {
namespace {

TEST(DumpConfigWatcherTest, AChangedFileGivesANewConfiguration) {
  const std::string path = File("watched.json", R"({"level": 2})");
  DumpConfigEntry env;
  env.mode = DumpMode::kOutput;
  DumpConfigWatcher w({}, env, path);
  std::vector<DumpLog> logs;
  EXPECT_EQ(w.Current(&logs).level, 2);
  EXPECT_FALSE(w.Poll(&logs).has_value());  // unchanged
  File("watched.json", R"({"level": 0})");
  const std::optional<DumpConfig> off = w.Poll(&logs);
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(off->level, 0);
  EXPECT_EQ(off->mode, DumpMode::kOutput);  // the environment still applies
  EXPECT_FALSE(w.Poll(&logs).has_value());
  EXPECT_EQ(Count(logs, DumpLog::kInfo, "watched.json changed: reading it again"), 1) << All(logs);
  // Removed: a WARNING, and the entry is empty (the level falls back).
  std::remove(path.c_str());
  const std::optional<DumpConfig> gone = w.Poll(&logs);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->level, 0);
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "watched.json: cannot read it"), 1) << All(logs);
}

}  // namespace
}  // namespace argsdump

namespace argsdump {
namespace {

// A config file or a token file that is a FIFO (no writer), a device or a
// folder: one WARNING saying what it is, nothing taken, never a wait or an
// endless read; the same through the watcher, at start and between steps.
TEST(DumpConfigTest, SpecialFilesAreWarningsNotHangs) {
  const std::string fifo = TempPath("config_fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::pair<std::string, std::string> cases[] = {
      {fifo, "is a FIFO, not a regular file"},
      {"/dev/zero", "is a character device, not a regular file"},
      {TempPath(""), "is a directory, not a regular file"},
  };
  for (const auto& [path, what] : cases) {
    SCOPED_TRACE(path);
    std::vector<DumpLog> logs;
    const DumpConfigEntry file = DumpConfigFromFile(path, &logs);
    EXPECT_FALSE(file.level.has_value());
    EXPECT_EQ(Count(logs, DumpLog::kWarning,
                    "config file " + path + ": cannot read it (" + what + ")"),
              1)
        << All(logs);
    logs.clear();
    DumpConfigWatcher w({}, {}, path);
    EXPECT_EQ(w.Current(&logs).level, 0);
    EXPECT_FALSE(w.Poll(&logs).has_value());
    logs.clear();
    const DumpConfigEntry env =
        DumpConfigFromEnvironment({{"ARGSDUMP_AUTH_TOKEN_FILE", path}}, &logs);
    EXPECT_FALSE(env.auth_token_file.has_value());
    EXPECT_EQ(Count(logs, DumpLog::kWarning,
                    "environment: ARGSDUMP_AUTH_TOKEN_FILE='" + path +
                        "' is not valid: cannot read a token from " + path + ": " + what),
              1)
        << All(logs);
  }
}

// A token file whose token could not pass as a header: the WARNING names the
// byte, and the item falls back (the next entry's token file is used).
TEST(DumpConfigTest, ATokenFileIsCheckedByteByByte) {
  const std::string bad = File("cr_token", "abc\rdef\n");
  const std::string good = File("good_token", "s3cret\n");
  std::vector<DumpLog> logs;
  const DumpConfigEntry env = DumpConfigFromEnvironment({{"ARGSDUMP_AUTH_TOKEN_FILE", bad}}, &logs);
  const DumpConfigEntry file = DumpConfigFromText(
      "{\"auth_token_file\": \"" + good + "\"}", "config file c.json", &logs);
  EXPECT_EQ(ResolveDumpConfig({}, env, file, &logs).auth_token_file, good);
  EXPECT_EQ(Count(logs, DumpLog::kWarning,
                  "ARGSDUMP_AUTH_TOKEN_FILE='" + bad + "' is not valid: cannot read a token from " +
                      bad + ": byte 3 is 0x0d (a carriage return)"),
            1)
      << All(logs);
  logs.clear();
  const DumpConfigEntry bad_in_file = DumpConfigFromText(
      "{\"auth_token_file\": \"" + File("nul_token", std::string("ab\0", 3)) + "\"}",
      "config file c.json", &logs);
  EXPECT_FALSE(bad_in_file.auth_token_file.has_value());
  EXPECT_EQ(Count(logs, DumpLog::kWarning, "byte 2 is 0x00 (NUL)"), 1) << All(logs);
}

}  // namespace
}  // namespace argsdump

namespace argsdump {
namespace {

// Labels a capture service would refuse are refused where they are given,
// so the entry falls back (with a warning) instead of the service refusing
// the capture.
TEST(ParseLabelsTest, LabelsTheServiceWouldRefuseAreRefusedHere) {
  EXPECT_TRUE(ParseLabels("team=kernels, run = 7").ok());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {std::string(129, 'k') + "=v", "a label key must be 1-128 bytes, got 129"},
      {"k=" + std::string(4097, 'v'), "a value is at most 4096 bytes, got 4097"},
      {"k=a\x01" "b", "holds control character 1"},
      {"k=\xff", "is not UTF-8"},
  };
  for (const auto& [text, says] : bad) {
    const auto labels = ParseLabels(text);
    ASSERT_FALSE(labels.ok()) << text.substr(0, 40);
    EXPECT_NE(labels.status().message().find(says), std::string::npos) << labels.status();
  }
  std::string many;
  for (int i = 0; i < 65; ++i) absl::StrAppend(&many, "k", i, "=v,");
  const auto labels = ParseLabels(many);
  ASSERT_FALSE(labels.ok());
  EXPECT_NE(labels.status().message().find("at most 64 labels, got 65"), std::string::npos);
}

}  // namespace
}  // namespace argsdump
