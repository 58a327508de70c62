// Every duration, byte-size and count flag of every binary, run as a real
// process at 0, its maximum, one past it, inf, a negative and garbage: a
// value in range is taken (the binary goes on to its next step, which the
// test makes fail on purpose, elsewhere), anything else exits 2 naming the
// flag as typed and the range. The table must list every such flag --help
// shows, so a new one cannot go untested.
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

constexpr int64_t kDay = int64_t{86400} * 1000;
constexpr int64_t kCentury = 36500 * kDay;

struct NumericFlag {
  const char* binary;  // under the workspace: server/capture_server
  const char* name;    // as absl knows it: retain_for
  const char* range;   // what --help and every error state
  int64_t min;         // in the base unit: ms, bytes, items
  int64_t max;
  bool unit_needed;    // a bare number other than 0 is refused
};

const NumericFlag kFlags[] = {
    {"server/capture_server", "max_capture_bytes", "0..1PiB; 0: no limit", 0, int64_t{1} << 50,
     false},
    {"server/capture_server", "max_total_bytes", "0..1PiB; 0: no limit", 0, int64_t{1} << 50,
     false},
    {"server/capture_server", "retain_for", "0..36500d (3153600000000ms); 0: keep them", 0,
     kCentury, true},
    {"server/capture_server", "live_idle_timeout_ms", "0..36500d (3153600000000ms); 0: never", 0,
     kCentury, false},
    {"server/capture_server", "shutdown_grace_ms", "0..1h; 0: cancel at once", 0, 3600000, false},
    {"server/capture_server", "http_max_connections", "1..65536", 1, 65536, false},
    {"server/capture_server", "http_max_tensor_elements", "1..16777216", 1, 16777216, false},
    {"server/capture_server", "http_request_timeout", "100ms..1h", 100, 3600000, true},
    {"server/capture_server", "http_write_stall_timeout", "100ms..1h", 100, 3600000, true},
    {"server/capture_server", "http_evict_after", "0..1h; 0: at once", 0, 3600000, true},
    {"server/capture_server", "http_inflight_budget_bytes", "1MiB..1TiB", 1 << 20,
     int64_t{1} << 40, false},
    {"server/capture_server", "http_budget_wait", "0..1m; 0: not at all", 0, 60000, true},
    {"server/capture_server", "http_send_buffer_bytes", "0..64MiB; 0: the kernel's sizing", 0,
     64 << 20, false},
    {"server/capture_server", "cache_bytes", "1MiB..1PiB", 1 << 20, int64_t{1} << 50, false},
    {"server/capture_server", "s3_retry_deadline", "100ms..1h", 100, 3600000, true},
    {"server/capture_server", "group_commit_ms", "0..10s; 0: as soon as the last commit ended", 0,
     10000, false},
    {"server/capture_server", "group_commit_bytes", "4KiB..256MiB", 4 << 10, 256 << 20, false},
    {"server/capture_server", "gc_every", "0..36500d (3153600000000ms); 0: only at startup", 0,
     kCentury, true},
    {"server/capture_server", "gc_min_age", "1m..36500d (3153600000000ms)", 60000, kCentury,
     true},
    {"apps/sim_run/sim_run", "schedulers", "1..64", 1, 64, false},
    {"apps/sim_run/sim_run", "workers", "1..256", 1, 256, false},
    {"apps/sim_run/sim_run", "records_per_buffer", "1..1048576", 1, 1 << 20, false},
    {"apps/sim_run/sim_run", "buffers_per_thread", "1..65536", 1, 1 << 16, false},
    {"apps/sim_run/sim_run", "ready_queue_depth", "1..65536", 1, 1 << 16, false},
    {"apps/sim_run/sim_run", "arena_bytes", "64B..1TiB", 64, int64_t{1} << 40, false},
    {"apps/sim_run/sim_run", "wait_bound_ms", "1ms..7d (604800000ms)", 1, 7 * kDay, false},
    {"apps/sim_run/sim_run", "drain_threads", "1..64", 1, 64, false},
    {"apps/sim_run/sim_run", "collector_shards", "1..64", 1, 64, false},
    {"apps/sim_run/sim_run", "steps", "1..1000000", 1, 1000000, false},
    {"apps/sim_run/sim_run", "ranks", "0..4096; 0: no job launch (one run)", 0, 4096, false},
    {"apps/sim_run/sim_run", "capture_connect_timeout_ms", "1ms..1d (86400000ms)", 1, kDay, false},
    {"apps/sim_run/sim_run", "capture_retry_deadline_ms", "0..1d (86400000ms); 0: no retry", 0, kDay,
     false},
};

std::string BinaryPath(const std::string& binary) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/argsdump/", binary);
}

struct Exit {
  int code = -1;
  std::string stderr_text;
};

Exit RunBinary(const std::string& binary, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BinaryPath(binary)};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = ChildProcess::Start(argv, TempPath("flag_limits_stdout"));
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return {};
  const std::optional<int> status = (*child)->Wait(std::chrono::seconds(60));
  EXPECT_TRUE(status.has_value()) << binary << " did not end";
  Exit e;
  if (status && WIFEXITED(*status)) e.code = WEXITSTATUS(*status);
  e.stderr_text = (*child)->stderr_text();
  return e;
}

// What each binary is given besides the flag: something that fails after
// every flag was taken, so an accepted value shows as that failure.
struct LaterFailure {
  std::vector<std::string> args;
  std::string says;
};

LaterFailure After(const std::string& binary) {
  if (binary == "server/capture_server") {
    // A root under a regular file cannot be created.
    const std::string file = TempPath("flag_limits_a_file");
    EXPECT_EQ(std::system(("touch " + file).c_str()), 0);
    return {{"--listen=127.0.0.1:0", "--root=" + file + "/root"}, file + "/root"};
  }
  return {{"--workload=" + TempPath("no_such_workload.json")}, "no_such_workload.json"};
}

// capture_server's flags typed with underscores, sim_run's with dashes:
// messages name the flag as typed either way.
std::string Typed(const NumericFlag& f) {
  const std::string name = absl::StrContains(f.binary, "sim_run")
                               ? absl::StrReplaceAll(f.name, {{"_", "-"}})
                               : f.name;
  return "--" + name;
}

enum class Value { kZero, kMax, kMaxPlusOne, kInf, kNegative, kGarbage };

std::string Text(const NumericFlag& f, Value v) {
  const std::string unit = f.unit_needed ? "ms" : "";
  switch (v) {
    case Value::kZero:
      return "0";
    case Value::kMax:
      return absl::StrCat(f.max, unit);
    case Value::kMaxPlusOne:
      return absl::StrCat(f.max + 1, unit);
    case Value::kInf:
      return "inf";
    case Value::kNegative:
      return absl::StrCat("-1", unit);
    case Value::kGarbage:
      return "12parsecs";
  }
  return "";
}

class FlagLimitsTest : public ::testing::TestWithParam<std::tuple<NumericFlag, Value>> {};

TEST_P(FlagLimitsTest, InRangeIsTakenOutOfRangeExitsTwoNamingTheFlagAndTheRange) {
  const auto& [flag, v] = GetParam();
  const std::string value = Text(flag, v);
  const LaterFailure later = After(flag.binary);
  std::vector<std::string> args = later.args;
  args.push_back(Typed(flag) + "=" + value);
  const Exit e = RunBinary(flag.binary, args);
  const bool in_range = v == Value::kMax || (v == Value::kZero && flag.min == 0);
  if (in_range) {
    // Taken: the run failed later, at what the test broke on purpose.
    EXPECT_EQ(e.code, 2) << e.stderr_text;
    EXPECT_NE(e.stderr_text.find(later.says), std::string::npos) << e.stderr_text;
    EXPECT_EQ(e.stderr_text.find(Typed(flag)), std::string::npos) << e.stderr_text;
    return;
  }
  EXPECT_EQ(e.code, 2) << e.stderr_text;
  std::string why;
  switch (v) {
    case Value::kZero:
      why = "is under the minimum of ";
      break;
    case Value::kMaxPlusOne:
      why = "is over the maximum of ";
      break;
    case Value::kInf:
      why = "is not a number: give the maximum, ";
      break;
    case Value::kNegative:
      why = "is negative";
      break;
    default:
      why = "is not a";
  }
  const std::string head = absl::StrCat(Typed(flag), ": '", value, "' ", why);
  EXPECT_NE(e.stderr_text.find(head), std::string::npos) << head << "\n" << e.stderr_text;
  EXPECT_NE(e.stderr_text.find(absl::StrCat("it takes ", flag.range)), std::string::npos)
      << e.stderr_text;
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<NumericFlag, Value>>& info) {
  const NumericFlag& f = std::get<0>(info.param);
  static const char* const kNames[] = {"Zero", "Max", "MaxPlusOne", "Inf", "Negative", "Garbage"};
  const std::string binary = absl::StrContains(f.binary, "sim_run") ? "SimRun" : "CaptureServer";
  return absl::StrCat(binary, "_", f.name, "_", kNames[static_cast<int>(std::get<1>(info.param))]);
}

INSTANTIATE_TEST_SUITE_P(EveryNumericFlag, FlagLimitsTest,
                         ::testing::Combine(::testing::ValuesIn(kFlags),
                                            ::testing::Values(Value::kZero, Value::kMax,
                                                              Value::kMaxPlusOne, Value::kInf,
                                                              Value::kNegative, Value::kGarbage)),
                         CaseName);

// --help states each flag's range, and the table above holds every numeric
// flag --help lists (a DURATION, BYTES or COUNT value).
TEST(FlagLimitsHelpTest, TheTableCoversEveryNumericFlagAndHelpStatesItsRange) {
  for (const std::string binary : {"server/capture_server", "apps/sim_run/sim_run"}) {
    const std::string stdout_path = TempPath("flag_limits_help");
    auto child = ChildProcess::Start({BinaryPath(binary), "--help"}, stdout_path);
    ASSERT_TRUE(child.ok()) << child.status();
    const std::optional<int> status = (*child)->Wait(std::chrono::seconds(60));
    ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << binary;
    absl::StatusOr<std::string> read = ReadFileToString(stdout_path);
    ASSERT_TRUE(read.ok()) << read.status();
    const std::string help = *std::move(read);
    // One line per flag entry: the wrapped help joined with single spaces.
    std::string flat;
    for (absl::string_view word : absl::StrSplit(help, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      absl::StrAppend(&flat, flat.empty() ? "" : " ", word);
    }
    std::set<std::string> listed;
    for (const char* placeholder : {"=DURATION", "=BYTES", "=COUNT"}) {
      for (size_t at = flat.find(placeholder); at != std::string::npos;
           at = flat.find(placeholder, at + 1)) {
        const size_t start = flat.rfind("--", at);
        listed.insert(absl::StrReplaceAll(flat.substr(start + 2, at - start - 2), {{"-", "_"}}));
      }
    }
    std::set<std::string> table;
    for (const NumericFlag& flag : kFlags) {
      if (flag.binary != binary) continue;
      table.insert(flag.name);
      const std::string entry = "--" + absl::StrReplaceAll(flag.name, {{"_", "-"}}) + "=";
      const size_t at = flat.find(entry);
      ASSERT_NE(at, std::string::npos) << binary << " --help has no " << entry;
      // The entry's range: the first after its head (help text may name
      // other flags, so the entry is not cut at the next "--").
      const size_t range = flat.find("[range ", at);
      ASSERT_NE(range, std::string::npos) << entry;
      EXPECT_EQ(flat.substr(range, flat.find(']', range) + 1 - range),
                absl::StrCat("[range ", flag.range, "]"))
          << entry;
    }
    EXPECT_EQ(listed, table) << binary;
  }
}

}  // namespace
}  // namespace argsdump
