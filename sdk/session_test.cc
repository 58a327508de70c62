// The SDK's session through the real pipeline (device, region, collector,
// local store), run by argsdump_sim_test's own main (//sdk:gtest_main):
// the dump flags, where the configuration comes from, where captures go,
// their labels, steps, and misuse.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/base/config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "device/sim/kernels.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"
#include "sdk/wiring.h"
#include "viewer/manifest_reader.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using testing::ArgQuery;
using testing::Capture;
using testing::Role;
using testing::Stage;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The dump flags as a test's command line gives them.
absl::Status SetCommandLine(std::vector<std::string> args) {
  args.insert(args.begin(), "session_test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  return ConsumeDumpFlags(&argc, argv.data());
}

class CommandLineScope {
 public:
  ~CommandLineScope() { ResetCommandLineDumpForTest(); }
};

// y = a * x + b (x, y float32 of equal size; a, b float32 scalars).
absl::Status Saxpy(KernelContext& ctx) {
  auto x = ctx.tensor(0);
  auto y = ctx.tensor(1);
  auto a = ctx.scalar<float>(0);
  auto b = ctx.scalar<float>(1);
  if (!x.ok() || !y.ok() || !a.ok() || !b.ok()) return absl::InvalidArgumentError("saxpy: args");
  for (uint64_t i = 0; i < x->numel(); ++i) y->Set<float>(i, *a * x->Get<float>(i) + *b);
  return absl::OkStatus();
}

absl::Status Broken(KernelContext&) { return absl::InternalError("broken kernel"); }

KernelRegistry Kernels(uint16_t* saxpy, uint16_t* broken = nullptr) {
  KernelRegistry k;
  *saxpy = *k.Register("saxpy",
                       {ArgDirection::kIn, ArgDirection::kOut, ArgDirection::kScalar,
                        ArgDirection::kScalar},
                       &Saxpy, "elementwise");
  const uint16_t b = *k.Register("broken", {ArgDirection::kIn, ArgDirection::kOut}, &Broken);
  if (broken != nullptr) *broken = b;
  return k;
}

SessionOptions Small() {
  SessionOptions o;
  o.scheduler_threads = 2;
  o.worker_threads = 2;
  o.arena_bytes = 1 << 20;
  return o;
}

// One saxpy task per step over x (0..n-1); returns the task ids.
std::vector<uint64_t> RunSteps(SimSession& s, uint16_t saxpy, uint32_t steps, uint32_t n = 16) {
  auto x = s.Alloc(DataType::kFloat32, {n});
  auto y = s.Alloc(DataType::kFloat32, {n});
  EXPECT_TRUE(x.ok() && y.ok());
  std::vector<float> values(n);
  for (uint32_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);
  EXPECT_TRUE(x->Write(values).ok());
  std::vector<uint64_t> ids;
  for (uint32_t step = 0; step < steps; ++step) {
    EXPECT_TRUE(s.BeginStep(step).ok());
    CoreTaskArgs args;
    float a = 2.0f + static_cast<float>(step), b = 1.0f;
    EXPECT_TRUE(args.add_input(*x).ok());
    EXPECT_TRUE(args.add_output(*y).ok());
    EXPECT_TRUE(args.add_scalar(a).ok());
    EXPECT_TRUE(args.add_scalar(b).ok());
    auto id = s.Submit(saxpy, std::move(args));
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(id.ok() ? *id : 0);
  }
  return ids;
}

// ---- the command line ------------------------------------------------------------

TEST(DumpFlagsTest, EveryFormIsRecognisedAndRemoved) {
  struct Case {
    std::vector<std::string> args;
    std::optional<int> level;
    std::vector<std::string> rest;
  };
  const std::vector<Case> cases = {
      {{"--dump-args"}, 1, {}},
      {{"--dump-args", "2"}, 2, {}},
      {{"--dump-args=3"}, 3, {}},
      {{"--dump_args=0"}, 0, {}},
      {{"--dump-args", "--gtest_filter=A.*"}, 1, {"--gtest_filter=A.*"}},
      {{"--gtest_repeat=2", "--dump-args", "2", "x"}, 2, {"--gtest_repeat=2", "x"}},
      {{"--dump-args=1", "--dump-args=2"}, 2, {}},  // the last one wins
      {{"--other", "--", "--dump-args=2"}, std::nullopt, {"--other", "--", "--dump-args=2"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> rest;
    const CommandLineDump d = ParseDumpFlags(c.args, &rest);
    EXPECT_TRUE(d.warnings.empty()) << c.args[0];
    EXPECT_EQ(d.entry.level, c.level) << c.args[0];
    EXPECT_EQ(rest, c.rest) << c.args[0];
  }
  std::vector<std::string> rest;
  auto d = ParseDumpFlags({"--dump-config", "/x.json", "--output-prefix=/o", "--capture-server",
                           "127.0.0.1:9", "--dump-args-default=2", "--keep"},
                          &rest);
  EXPECT_TRUE(d.warnings.empty());
  EXPECT_EQ(d.config_file, "/x.json");
  EXPECT_EQ(d.entry.path, "/o");
  EXPECT_EQ(d.entry.capture_server, "127.0.0.1:9");
  EXPECT_EQ(d.default_level, 2);
  EXPECT_EQ(rest, std::vector<std::string>{"--keep"});

  // ConsumeDumpFlags edits argv in place and keeps the rest in order.
  std::vector<std::string> args = {"t", "--gtest_filter=X", "--dump-args", "2", "--dump-config=f",
                                   "--v"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  CommandLineScope scope;
  ASSERT_TRUE(ConsumeDumpFlags(&argc, argv.data()).ok());
  ASSERT_EQ(argc, 3);
  EXPECT_STREQ(argv[1], "--gtest_filter=X");
  EXPECT_STREQ(argv[2], "--v");
  EXPECT_EQ(CommandLineDumpFlags().entry.level, 2);
  EXPECT_EQ(CommandLineDumpFlags().config_file, "f");
}

// --dump-verbose is the verbose item of the command line entry: bare is on;
// a value that is no bool is a WARNING and sets nothing.
TEST(DumpFlagsTest, DumpVerboseSetsTheVerboseItem) {
  std::vector<std::string> rest;
  CommandLineDump on = ParseDumpFlags({"--dump-verbose", "--keep"}, &rest);
  EXPECT_EQ(on.entry.verbose, true);
  EXPECT_EQ(rest, std::vector<std::string>{"--keep"});
  CommandLineDump off = ParseDumpFlags({"--dump_verbose=false"}, &rest);
  EXPECT_EQ(off.entry.verbose, false);
  EXPECT_TRUE(rest.empty());
  CommandLineDump unset = ParseDumpFlags({"--dump-args=2"}, &rest);
  EXPECT_FALSE(unset.entry.verbose.has_value());
  CommandLineDump bad = ParseDumpFlags({"--dump-verbose=loud"}, &rest);
  EXPECT_FALSE(bad.entry.verbose.has_value());
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("--dump-verbose: 'loud' is not true or false"),
            std::string::npos)
      << bad.warnings[0];
}

// --dump-snapshot-inputs is the snapshot_inputs item of the command line
// entry, a switch as --dump-verbose is.
TEST(DumpFlagsTest, DumpSnapshotInputsSetsTheSnapshotItem) {
  std::vector<std::string> rest;
  CommandLineDump on = ParseDumpFlags({"--dump-snapshot-inputs", "x"}, &rest);
  EXPECT_EQ(on.entry.snapshot_inputs, true);
  EXPECT_EQ(rest, std::vector<std::string>{"x"});
  CommandLineDump off = ParseDumpFlags({"--dump_snapshot_inputs=false"}, &rest);
  EXPECT_EQ(off.entry.snapshot_inputs, false);
  EXPECT_FALSE(ParseDumpFlags({"--dump-args=2"}, &rest).entry.snapshot_inputs.has_value());
  CommandLineDump bad = ParseDumpFlags({"--dump-snapshot-inputs=sometimes"}, &rest);
  EXPECT_FALSE(bad.entry.snapshot_inputs.has_value());
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("--dump-snapshot-inputs: 'sometimes' is not true or false; "
                                 "the inputs' snapshot for exception dumps stays as the next "
                                 "entry (ARGSDUMP_SNAPSHOT_INPUTS"),
            std::string::npos)
      << bad.warnings[0];
}

// A bad dump flag is a WARNING naming the flag, the value and the
// fallback, never an error; the flag sets nothing and the rest is kept.
TEST(DumpFlagsTest, BadValuesAreWarningsNamingTheFlagAndTheFallback) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--dump-args=x"}, "--dump-args: 'x' is not a dump level"},
      {{"--dump-args", "7"}, "--dump-args: '7' is not a dump level"},
      {{"--dump-args="}, "--dump-args: '' is not a dump level"},
      {{"--dump-args-default=9"}, "--dump-args-default: '9' is not a dump level"},
      {{"--dump-args-default"}, "--dump-args-default needs a value"},
      {{"--dump-config"}, "--dump-config needs a value"},
      {{"--dump-config", "--gtest_repeat=2"}, "--dump-config needs a value"},
      {{"--output-prefix="}, "--output-prefix needs a value"},
      {{"--capture-server", "nohost"}, "--capture-server: 'nohost' is not host:port"},
      {{"--capture-server=h:99999"}, "is not host:port"},
  };
  const std::map<std::string, std::string> fallbacks = {
      {"--dump-args:", "the level falls back to the next entry"},
      {"--dump-args-default", "no default level is set"},
      {"--dump-config", "no config file is read from the command line"},
      {"--output-prefix", "the path falls back to the next entry"},
      {"--capture-server", "the capture stays local"},
  };
  for (const auto& [args, says] : cases) {
    std::vector<std::string> rest;
    std::vector<std::string> with_more = args;
    with_more.push_back("--gtest_filter=A.*");
    const CommandLineDump d = ParseDumpFlags(with_more, &rest);
    ASSERT_EQ(d.warnings.size(), 1u) << args[0];
    EXPECT_THAT(d.warnings[0], HasSubstr(says));
    bool named_fallback = false;
    for (const auto& [flag, fallback] : fallbacks) {
      if (absl::StartsWith(d.warnings[0], "the command line: " + flag)) {
        EXPECT_THAT(d.warnings[0], HasSubstr(fallback)) << says;
        named_fallback = true;
      }
    }
    EXPECT_TRUE(named_fallback) << d.warnings[0];
    EXPECT_FALSE(d.entry.level.has_value()) << args[0];
    EXPECT_FALSE(d.entry.capture_server.has_value()) << args[0];
    EXPECT_FALSE(d.default_level.has_value()) << args[0];
    EXPECT_EQ(rest.back(), "--gtest_filter=A.*");
  }
  // ConsumeDumpFlags takes a bad flag off argv all the same, and succeeds.
  CommandLineScope scope;
  EXPECT_TRUE(SetCommandLine({"--dump-args=7"}).ok());
  EXPECT_EQ(CommandLineDumpFlags().warnings.size(), 1u);
}

// ---- where the configuration comes from -------------------------------------------

// Every combination of the four entries setting the level: the highest that
// sets it wins, and each lower one that disagrees is an ERROR line naming
// both (the config file's level is 1, the environment's 2, the API's 3,
// the command line's 0; the default, 2, only when none sets it).
TEST(SessionConfigTest, CommandLineOverApiOverEnvironmentOverFile) {
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  const std::string dir = FreshTempDir("priority");
  const std::string file = dir + "/dump.json";
  std::ofstream(file) << "{\"level\": 1, \"mode\": \"output\"}";
  for (int mask = 0; mask < 16; ++mask) {
    const bool cli = mask & 8, api = mask & 4, env = mask & 2, has_file = mask & 1;
    SCOPED_TRACE(absl::StrCat("cli ", cli, " api ", api, " env ", env, " file ", has_file));
    CommandLineScope scope;
    std::vector<std::string> args = {"--dump-args-default=2", "--output-prefix=" + dir};
    if (cli) args.push_back("--dump-args=0");
    if (has_file) args.push_back("--dump-config=" + file);
    ASSERT_TRUE(SetCommandLine(args).ok());
    ScopedEnv level("ARGSDUMP_LEVEL", env ? "2" : nullptr);
    SessionOptions o = Small();
    if (api) o.dump.level = 3;
    ::testing::internal::CaptureStderr();
    auto s = SimSession::Open(kernels, o);
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(s.ok()) << s.status();
    const int want = cli ? 0 : api ? 3 : env ? 2 : has_file ? 1 : 2;
    EXPECT_EQ((*s)->dump_config().level, want) << log;
    // The file's mode is taken whatever wins the level (non-empty override).
    EXPECT_EQ((*s)->dump_config().mode, has_file ? DumpMode::kOutput : DumpMode::kAll);
    int errors = 0;
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      errors += absl::StrContains(line, "[argsdump dumper] ERROR: level:");
    }
    const int setters = cli + api + env + has_file;
    EXPECT_EQ(errors, setters > 0 ? setters - 1 : 0) << log;
    if (cli && api) {
      EXPECT_THAT(log, HasSubstr("level: the command line sets 0 and API sets 3; using the "
                                 "command line's (command line > API > environment > config "
                                 "file)"));
    }
    if (setters == 0) {
      EXPECT_THAT(log, HasSubstr("level=2 from --dump-args-default"));
    }
    EXPECT_THAT(log, HasSubstr("[argsdump dumper] INFO: dump config: level=" +
                               std::to_string(cli ? 0 : api ? 3 : env ? 2 : has_file ? 1 : 0)));
  }
}

TEST(SessionConfigTest, BadValuesWarnAndFallBack) {
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  CommandLineScope scope;
  ASSERT_TRUE(SetCommandLine({"--output-prefix=" + FreshTempDir("badvalues")}).ok());
  ScopedEnv level("ARGSDUMP_LEVEL", "9");
  ScopedEnv mode("ARGSDUMP_MODE", "sideways");
  ScopedEnv server("ARGSDUMP_CAPTURE_SERVER", "not-a-host-port");
  ScopedEnv typo("ARGSDUMP_LEVLE", "2");
  SessionOptions o = Small();
  const std::string file = FreshTempDir("badvalues_file") + "/a_file";
  std::ofstream(file) << "x";
  o.dump.path = file + "/below";  // a folder under a file cannot be made
  ::testing::internal::CaptureStderr();
  auto s = SimSession::Open(kernels, o);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->dump_config().level, 0);
  EXPECT_THAT(log, HasSubstr("WARNING: environment: ARGSDUMP_LEVEL='9' is not valid"));
  EXPECT_THAT(log, HasSubstr("WARNING: environment: ARGSDUMP_MODE='sideways' is not valid"));
  EXPECT_THAT(log, HasSubstr("ARGSDUMP_CAPTURE_SERVER='not-a-host-port' is not valid"));
  EXPECT_THAT(log, HasSubstr("ARGSDUMP_LEVLE is not a dump setting"));
  EXPECT_THAT(log, HasSubstr("WARNING: API: path='" + file + "/below' is not valid"));
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->run_status.ok());
  EXPECT_GE(r->warnings.size(), 5u);
}

// ---- where captures go ------------------------------------------------------------

TEST(SessionPlacementTest, TestOutputsFolderNamedAfterTheCase) {
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  ASSERT_NE(outputs, nullptr) << "bazel test sets TEST_UNDECLARED_OUTPUTS_DIR";
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  ScopedEnv shard("TEST_SHARD_INDEX", "3");
  SessionOptions o = Small();
  o.dump.level = 2;
  o.labels["owner"] = "kernels-team";
  ScopedEnv env_labels("ARGSDUMP_LABELS", "ci_run=77,owner=ci");
  std::string first_dir;
  for (int session = 0; session < 2; ++session) {
    auto s = SimSession::Open(kernels, o);
    ASSERT_TRUE(s.ok()) << s.status();
    const std::string name = "SessionPlacementTest.TestOutputsFolderNamedAfterTheCase";
    EXPECT_EQ((*s)->name(), session == 0 ? name : name + "_2");
    RunSteps(**s, saxpy, 3);
    auto r = (*s)->Finish();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->wrote_capture);
    EXPECT_EQ(r->capture_dir, absl::StrCat(outputs, "/", (*s)->name(), "/args_dump"));
    EXPECT_TRUE(Exists(r->capture_dir + "/args_dump.json"));
    EXPECT_EQ(r->steps, 3u);
    EXPECT_EQ(r->records, 3u * 4);  // x before, two scalars, y after
    // The test's identity, the environment's labels, the code's (which win).
    const std::map<std::string, std::string> want = {
        {"target", std::getenv("TEST_TARGET")},
        {"test_case", name},
        {"shard", "3"},
        {"steps", "3"},
        {"ci_run", "77"},
        {"owner", "kernels-team"}};
    EXPECT_EQ(r->labels, want);
    EXPECT_TRUE(testing::CheckCaptureFiles(r->capture_dir).ok())
        << testing::CheckCaptureFiles(r->capture_dir);
    auto c = Capture::Open(r->capture_dir);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->labels(), want);
    if (session == 0) first_dir = r->capture_dir;
  }
  EXPECT_TRUE(Exists(first_dir + "/args_dump.json"));  // not replaced by the second
}

TEST(SessionPlacementTest, OutputPrefixAndOutsideBazelTest) {
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  const std::string prefix = FreshTempDir("prefix_root");
  {
    CommandLineScope scope;
    ASSERT_TRUE(SetCommandLine({"--output-prefix", prefix, "--dump-args", "2"}).ok());
    SessionOptions o = Small();
    o.name = "my run/1";  // not a folder name as it is
    auto s = SimSession::Open(kernels, o);
    ASSERT_TRUE(s.ok());
    RunSteps(**s, saxpy, 1);
    auto r = (*s)->Finish();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->capture_dir, prefix + "/my_run_1/args_dump");
    EXPECT_TRUE(Exists(r->capture_dir + "/args_dump.json"));
  }
  {
    // A folder that already holds a capture is never written over.
    CommandLineScope scope;
    ASSERT_TRUE(SetCommandLine({"--output-prefix=" + prefix, "--dump-args=2"}).ok());
    SessionOptions o = Small();
    o.name = "my run/1";
    auto s = SimSession::Open(kernels, o);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)->name(), "my_run_1_2");
  }
  // Neither a prefix nor test outputs: ./outputs/<name>_<stamp> where bazel
  // run was started (BUILD_WORKING_DIRECTORY).
  const std::string cwd = FreshTempDir("user_cwd");
  ScopedEnv outputs("TEST_UNDECLARED_OUTPUTS_DIR", nullptr);
  ScopedEnv user("BUILD_WORKING_DIRECTORY", cwd.c_str());
  SessionOptions o = Small();
  o.dump.level = 2;
  o.name = "outside";
  auto s = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok());
  RunSteps(**s, saxpy, 1);
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->capture_dir, ::testing::StartsWith(cwd + "/outputs/outside_"));
  EXPECT_TRUE(Exists(r->capture_dir + "/args_dump.json"));
}

// A capture name the service would refuse ("../x": it would leave the
// service's root) is checked before any wait for the service: a WARNING and
// a name the service takes (a streamed session only warns; the dump never
// fails a test). Nothing listens on port 1: the capture is then kept locally.
TEST(SessionTest, ACaptureNameTheServiceWouldRefuseWarnsAndIsReplaced) {
#ifdef ABSL_HAVE_THREAD_SANITIZER
  // It opens a gRPC channel; Debian's gRPC is not instrumented, and TSan
  // reports its own hand-offs as races (see //tests:capture_service_test).
  GTEST_SKIP() << "a gRPC channel under ThreadSanitizer";
#endif
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  SessionOptions o = Small();
  o.dump.level = 2;
  o.dump.path = FreshTempDir("bad_capture_name");
  o.dump.capture_server = "127.0.0.1:1";
  o.connect_timeout = std::chrono::milliseconds(300);
  SessionWiring wiring;
  wiring.capture_name = "../x";
  ::testing::internal::CaptureStderr();
  auto s = SimSession::Open(kernels, o, wiring);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(log, HasSubstr("WARNING: capture name '../x' cannot be used on the capture service "
                             "(capture name may only hold [A-Za-z0-9._-]; character 47"));
  EXPECT_THAT(log, HasSubstr("the capture is named '"));
  EXPECT_THAT(log, HasSubstr("cannot be reached"));
  RunSteps(**s, saxpy, 1);
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->run_status.ok());
  EXPECT_TRUE(r->wrote_capture);
  EXPECT_THAT(r->warnings, ::testing::Contains(HasSubstr("capture name '../x'")));
  // Strict (sim_run's wiring): the name is the error, before any wait.
  wiring.strict = true;
  auto strict = SimSession::Open(kernels, o, wiring);
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument) << strict.status();
  EXPECT_THAT(std::string(strict.status().message()), HasSubstr("capture name '../x'"));
}

TEST(SessionTest, LevelZeroAllocatesAndWritesNothing) {
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  const std::string prefix = FreshTempDir("level0");
  SessionOptions o = Small();
  o.dump.path = prefix;
  auto s = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->dump_config().level, 0);
  RunSteps(**s, saxpy, 2);
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->run_status.ok());
  EXPECT_FALSE(r->wrote_capture);
  EXPECT_EQ(r->records, 0u);
  EXPECT_EQ(r->tasks_completed, 2u);
  EXPECT_FALSE(Exists(prefix + "/" + r->name));
  auto c = Capture::Of(*r);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("the dump is off"));
}

// ---- steps, data-dependent orchestration, the switch -------------------------------

TEST(SessionTest, StepsAreRecordedAndOnlyGoForward) {
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  SessionOptions o = Small();
  o.dump.level = 2;
  o.dump.path = FreshTempDir("steps");
  auto s = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok());
  auto x = (*s)->Alloc(DataType::kFloat32, {8});
  ASSERT_TRUE(x->Write(std::vector<float>(8, 1.0f)).ok());
  // Data-dependent control: keep doubling until the value passes 100.
  uint32_t step = 0;
  for (;; ++step) {
    ASSERT_TRUE((*s)->BeginStep(step).ok());
    CoreTaskArgs args;
    float a = 2.0f, b = 0.0f;
    EXPECT_TRUE(args.add_input(*x).ok());
    EXPECT_TRUE(args.add_output(*x).ok());  // in place: a new view would be the same buffer
    EXPECT_TRUE(args.add_scalar(a).ok());
    EXPECT_TRUE(args.add_scalar(b).ok());
    ASSERT_TRUE((*s)->Submit(saxpy, std::move(args)).ok());
    ASSERT_TRUE((*s)->Synchronize().ok());
    if (x->Get<float>(0) > 100) break;
  }
  EXPECT_EQ(step, 6u);  // 2^7 = 128
  EXPECT_EQ((*s)->BeginStep(3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->BeginStep(step).code(), absl::StatusCode::kInvalidArgument);
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->steps, 7u);
  auto c = Capture::Of(*r);
  ASSERT_TRUE(c.ok()) << c.status();
  for (uint32_t k = 0; k <= step; ++k) {
    auto in = c->Get(ArgQuery().Step(k).Stage(Stage::kBeforeDispatch).Arg(0));
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_EQ(in->func, "saxpy");
    EXPECT_THAT(*in, testing::IsCloseTo(std::vector<double>(8, std::ldexp(1.0, k))));
  }
}

TEST(SessionTest, EditedConfigFileSwitchesAtTheNextStep) {
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  const std::string dir = FreshTempDir("switch");
  const std::string file = dir + "/dump.json";
  std::ofstream(file) << "{\"level\": 2, \"mode\": \"input\"}";
  SessionOptions o = Small();
  o.config_file = file;
  o.dump.path = dir;
  auto s = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok());
  auto x = (*s)->Alloc(DataType::kFloat32, {4});
  auto y = (*s)->Alloc(DataType::kFloat32, {4});
  for (uint32_t step = 0; step < 3; ++step) {
    if (step == 1) std::ofstream(file) << "{\"level\": 2, \"mode\": \"output\"}";
    if (step == 2) std::ofstream(file) << "{\"level\": 2, \"mode\": \"all\"}";
    ASSERT_TRUE((*s)->BeginStep(step).ok());
    CoreTaskArgs args;
    float a = 1, b = 0;
    EXPECT_TRUE(args.add_input(*x).ok());
    EXPECT_TRUE(args.add_output(*y).ok());
    EXPECT_TRUE(args.add_scalar(a).ok());
    EXPECT_TRUE(args.add_scalar(b).ok());
    ASSERT_TRUE((*s)->Submit(saxpy, std::move(args)).ok());
  }
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok());
  auto c = Capture::Of(*r);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Find(ArgQuery().Step(0)).size(), 3u);  // x and the scalars
  EXPECT_EQ(c->Find(ArgQuery().Step(1)).size(), 1u);  // y
  EXPECT_EQ(c->Find(ArgQuery().Step(2)).size(), 4u);
  EXPECT_EQ(c->Find(ArgQuery().Step(1).Stage(Stage::kAfterCompletion)).size(), 1u);
}

// ---- misuse is a status ----------------------------------------------------------------

TEST(SessionTest, MisuseIsAStatusNeverACrash) {
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  SessionOptions bad = Small();
  bad.scheduler_threads = 0;
  EXPECT_EQ(SimSession::Open(kernels, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Small();
  bad.arena_bytes = 3;
  EXPECT_THAT(std::string(SimSession::Open(kernels, bad).status().message()),
              HasSubstr("SessionOptions.arena_bytes: 3 is outside"));

  SessionOptions o = Small();
  o.dump.level = 2;
  o.dump.path = FreshTempDir("misuse");
  auto s = SimSession::Open(kernels, o);
  auto other = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok() && other.ok());
  EXPECT_EQ((*s)->Alloc(DataType::kFloat32, {1, 1, 1, 1, 1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->Alloc(DataType::kFloat32, {1u << 31, 1u << 31, 1u << 31}).status().code(),
            absl::StatusCode::kInvalidArgument);  // strides beyond 32 bits
  EXPECT_EQ((*s)->Alloc(DataType::kFloat64, {0xFFFFFFFFu, 0xFFFFu}).status().code(),
            absl::StatusCode::kResourceExhausted);  // 2^51 bytes
  EXPECT_EQ((*s)->Alloc(static_cast<DataType>(77), {4}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto x = (*s)->Alloc(DataType::kFloat32, {4});
  auto foreign = (*other)->Alloc(DataType::kFloat32, {4});
  ASSERT_TRUE(x.ok() && foreign.ok());
  EXPECT_EQ(x->Write(std::vector<int32_t>(4)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(x->Write(std::vector<float>(3)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(x->Read<double>().status().code(), absl::StatusCode::kInvalidArgument);
  {
    CoreTaskArgs args;
    EXPECT_TRUE(args.add_input(*foreign).ok());
    EXPECT_TRUE(args.add_output(*x).ok());
    auto id = (*s)->Submit(saxpy, std::move(args));
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(id.status().message()), HasSubstr("another device (session)"));
  }
  {
    CoreTaskArgs args;
    (void)args.add_input(Tensor());  // refused by Submit below
    EXPECT_EQ((*s)->Submit(saxpy, std::move(args)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ((*s)->Submit(999, CoreTaskArgs()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->Submit(std::vector<uint16_t>{saxpy, saxpy, saxpy, saxpy}, CoreTaskArgs())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*s)->Finish().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*s)->Submit(saxpy, CoreTaskArgs()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*s)->Alloc(DataType::kFloat32, {1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*s)->BeginStep(5).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*s)->Synchronize().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SessionTest, DestroyedWithoutFinishKeepsTheCapture) {
  uint16_t saxpy;
  const KernelRegistry kernels = Kernels(&saxpy);
  SessionOptions o = Small();
  o.dump.level = 2;
  o.dump.path = FreshTempDir("destroyed");
  o.name = "early_return";
  std::string dir;
  {
    auto s = SimSession::Open(kernels, o);
    ASSERT_TRUE(s.ok());
    RunSteps(**s, saxpy, 2);
    dir = (*s)->capture_location();
  }  // as a failed ASSERT would leave it
  auto c = Capture::Open(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->args().size(), 8u);
}

TEST(SessionTest, FailingKernelIsTheRunStatusAndLeavesAnExceptionDump) {
  uint16_t saxpy, broken;
  const KernelRegistry kernels = Kernels(&saxpy, &broken);
  SessionOptions o = Small();
  o.dump.level = 2;
  o.dump.path = FreshTempDir("failing");
  o.name = "failing";
  auto s = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok());
  RunSteps(**s, saxpy, 1);
  auto x = (*s)->Alloc(DataType::kFloat32, {4});
  auto y = (*s)->Alloc(DataType::kFloat32, {4});
  CoreTaskArgs args;
  EXPECT_TRUE(args.add_input(*x).ok());
  EXPECT_TRUE(args.add_output(*y).ok());
  ASSERT_TRUE((*s)->Submit(broken, std::move(args)).ok());
  EXPECT_THAT(std::string((*s)->Synchronize().message()), HasSubstr("broken kernel"));
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(std::string(r->run_status.message()), HasSubstr("broken kernel"));
  EXPECT_TRUE(r->dump_status.ok());
  ASSERT_EQ(r->exception_dumps.size(), 1u);
  EXPECT_THAT(r->exception_dumps[0], HasSubstr(o.dump.path.value() + "/failing/exception_dump/"
                                                                     "exception_failing_broken_untyped_"));
  EXPECT_TRUE(Exists(r->exception_dumps[0] + "/context.json"));
  EXPECT_TRUE(r->wrote_capture);  // the saxpy before it is in the capture
}

TEST(SessionTest, MarkersAtLevelOneAndMixTasks) {
  KernelRegistry kernels;
  ASSERT_TRUE(RegisterBuiltinKernels(&kernels).ok());
  const uint16_t add = *kernels.IdOf("add");
  const uint16_t mix_sum = *kernels.IdOf("mix_sum"), mix_max = *kernels.IdOf("mix_max");
  SessionOptions o = Small();
  o.dump.level = 1;
  o.dump.path = FreshTempDir("markers");
  auto s = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok());
  auto a = (*s)->Alloc(DataType::kFloat32, {4});
  auto b = (*s)->Alloc(DataType::kFloat32, {4});
  auto c = (*s)->Alloc(DataType::kFloat32, {4});
  auto d = (*s)->Alloc(DataType::kFloat32, {4});
  auto e = (*s)->Alloc(DataType::kFloat32, {4});
  ASSERT_TRUE(a->Write(std::vector<float>{1, 2, 3, 4}).ok());
  ASSERT_TRUE(b->Write(std::vector<float>{10, 20, 30, 40}).ok());
  {
    CoreTaskArgs args;
    EXPECT_TRUE(args.add_input(*a).ok());
    EXPECT_TRUE(args.add_input(*b).ok());
    EXPECT_TRUE(args.add_output(*c).ok());
    EXPECT_TRUE(args.dump(*c).ok());  // only the output
    ASSERT_TRUE((*s)->Submit(add, std::move(args)).ok());
  }
  {
    CoreTaskArgs args;  // not marked: not dumped at level 1
    EXPECT_TRUE(args.add_input(*a).ok());
    EXPECT_TRUE(args.add_input(*b).ok());
    EXPECT_TRUE(args.add_output(*d).ok());
    ASSERT_TRUE((*s)->Submit(add, std::move(args)).ok());
  }
  {
    CoreTaskArgs args;  // a mix task, marked whole
    EXPECT_TRUE(args.add_input(*a).ok());
    EXPECT_TRUE(args.add_input(*b).ok());
    EXPECT_TRUE(args.add_output(*c).ok());
    EXPECT_TRUE(args.add_output(*d).ok());
    EXPECT_TRUE(args.add_output(*e).ok());
    EXPECT_TRUE(args.dump().ok());
    ASSERT_TRUE((*s)->Submit({mix_sum, mix_max}, std::move(args)).ok());
  }
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok());
  auto capture = Capture::Of(*r);
  ASSERT_TRUE(capture.ok());
  ASSERT_EQ(capture->Find(ArgQuery().Func("add")).size(), 1u);
  auto sum = capture->Get(ArgQuery().Func("add"));
  EXPECT_EQ(sum->role, Role::kOutput);
  EXPECT_THAT(*sum, testing::IsCloseTo({11, 22, 33, 44}));
  EXPECT_EQ(capture->Find(ArgQuery().Func("mix_max")).size(), 5u);
  EXPECT_EQ(capture->Find(ArgQuery().Func("mix_sum")).size(), 5u);
  EXPECT_EQ(capture->Find(ArgQuery().Func("mix_max"))[0].func, "mix_sum+mix_max");
}

// Every capture carries its kernel table: the SDK's registered kernels
// (names, types, directions, the dtypes RegisterTyped declares) and the
// built-ins; a capture opened from its folder alone names its kernels.
TEST(SessionTest, TheCaptureCarriesTheKernelTable) {
  KernelRegistry kernels;
  const uint16_t saxpy = *kernels.Register(
      "saxpy", {ArgDirection::kIn, ArgDirection::kOut, ArgDirection::kScalar,
                ArgDirection::kScalar}, &Saxpy, "elementwise");
  const uint16_t bf16 = *kernels.RegisterTyped(
      "bf16_cast", {{ArgDirection::kIn, DataType::kBfloat16}, ArgDirection::kOut}, &Broken);
  ASSERT_TRUE(RegisterBuiltinKernels(&kernels).ok());
  // Left out of the table with a WARNING (a name no reader may trust);
  // its records keep their func id.
  ASSERT_TRUE(kernels.Register(std::string("bad\nname"), {ArgDirection::kIn}, &Broken).ok());
  SessionOptions o = Small();
  o.dump.level = 2;
  o.dump.path = FreshTempDir("kernel_table");
  auto s = SimSession::Open(kernels, o);
  ASSERT_TRUE(s.ok());
  RunSteps(**s, saxpy, 1);
  auto r = (*s)->Finish();
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->wrote_capture);
  bool warned = false;
  for (const std::string& w : r->warnings) {
    warned |= w.find("is left out of the capture's kernel table (a control character (10))") !=
              std::string::npos;
  }
  EXPECT_TRUE(warned) << absl::StrJoin(r->warnings, "\n");

  auto reader = ManifestReader::Open(r->capture_dir + "/args_dump.json");
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->ReadHeader().ok());
  const KernelTable& table = (*reader)->summary().kernels;
  ASSERT_EQ(static_cast<size_t>(table.size()), kernels.size() - 1);
  EXPECT_EQ(DescribeKernel(*FindKernel(table, saxpy)),
            "saxpy (elementwise) [in, out, scalar, scalar]");
  EXPECT_EQ(DescribeKernel(*FindKernel(table, bf16)), "bf16_cast [in BFLOAT16, out]");
  EXPECT_EQ(DescribeKernel(*FindKernel(table, *kernels.IdOf("add"))),
            "add (elementwise) [in FLOAT32, in FLOAT32, out FLOAT32]");
  EXPECT_EQ(DescribeKernel(*FindKernel(table, *kernels.IdOf("copy"))), "copy (copy) [in, out]");
  EXPECT_EQ(FindKernel(table, static_cast<uint32_t>(kernels.size() - 1)), nullptr);

  // Opened from its folder (no session result): the names are there.
  auto c = Capture::Open(r->capture_dir);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->Find(ArgQuery().Func("saxpy")).size(), 4u);
  EXPECT_EQ(c->Find(ArgQuery().Func("saxpy"))[0].func, "saxpy");
}

}  // namespace
}  // namespace argsdump
