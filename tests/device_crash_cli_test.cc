// sim_run with the device in its own process (its default), as a user runs
// it: the built-in crash_example workloads (task 3 of 8 dies: SIGSEGV,
// SIGABRT, std::terminate, SIGFPE, _exit(3), or a SIGKILL from outside) at
// levels 1-3 on both platforms, into the local store and through a capture
// service. sim_run exits 3; every record of the tasks before the crash
// (tasks 0-2, the crashing task's ancestors) is in the capture byte for
// byte (compared with crash_example_none, the same workload without the
// crash), and so are the crashing task's inputs, in the capture and its
// exception dump; the manifest and GetCapture report device_crash. Then
// the host killed mid-run: the device process ends by itself within its
// bound and counts what it dropped as "host gone".
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "sdk/testing.h"
#include "tests/testing/child_process.h"
#include "tests/process_fixtures.h"
#include "tests/testing/crash_status.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using testing::ArgQuery;
using testing::Capture;
using testing::CapturedArg;

constexpr auto kBound = std::chrono::seconds(120);  // a hang guard only

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/argsdump/", path);
}

uint64_t Task(uint32_t n) { return (uint64_t{1} << 32) | n; }

// An arg as everything the capture says of it but its place and its
// kernel's name, with its bytes. The name is left out: a crashing workload
// and the golden run it is held against give the same func id other names.
std::string Fingerprint(const CapturedArg& a) {
  auto bytes = a.Bytes();
  std::string described = a.Describe();
  if (const size_t open = described.find(" ("); open != std::string::npos) {
    if (const size_t close = described.find(") ", open); close != std::string::npos) {
      described.erase(open, close + 1 - open);
    }
  }
  return absl::StrCat(described, " step ", a.step, " numel ", a.numel, " truncated ",
                      a.truncated, " overwritten ", a.overwritten, " in_flight ",
                      a.in_flight_snapshot, " size ", a.bin_size, " bytes ",
                      bytes.ok() ? absl::CHexEscape(*bytes) : std::string(bytes.status().message()));
}

std::multiset<std::string> TaskPrints(const Capture& c, uint64_t task,
                                      std::optional<testing::Stage> stage = std::nullopt) {
  std::multiset<std::string> out;
  ArgQuery q = ArgQuery().Task(task);
  if (stage) q.Stage(*stage);
  for (const CapturedArg& a : c.Find(q)) out.insert(Fingerprint(a));
  return out;
}

struct SimRun {
  std::unique_ptr<ChildProcess> process;
  std::string stdout_path;
  std::string stdout_text;
  int status = -1;
};

std::vector<std::string> SimArgs(const std::string& workload, int level,
                                 const std::string& platform, const std::string& prefix,
                                 const std::string& server, const std::string& name) {
  std::vector<std::string> args = {Runfile("apps/sim_run/sim_run"),
                                   "--workload", workload,
                                   absl::StrCat("--dump-args=", level),
                                   "--platform", platform,
                                   "--output-prefix", prefix,
                                   "--schedulers=2",
                                   "--workers=2"};
  if (!server.empty()) {
    args.push_back("--capture-server=" + server);
    args.push_back("--capture-name=" + name);
  }
  return args;
}

absl::StatusOr<SimRun> StartSim(const std::vector<std::string>& args, const std::string& out) {
  SimRun r;
  r.stdout_path = out;
  auto p = ChildProcess::Start(args, out);
  if (!p.ok()) return p.status();
  r.process = std::move(p).value();
  return r;
}

absl::Status Finish(SimRun* r) {
  auto status = r->process->Wait(kBound);
  if (!status) return absl::DeadlineExceededError("sim_run did not end");
  r->status = *status;
  r->stdout_text = ReadFileOrEmpty(r->stdout_path);
  return absl::OkStatus();
}

// The pid crash_wait's line names ("crash_wait: waiting to be killed (pid N)").
bool DevicePid(const std::string& line, pid_t* pid) {
  const size_t at = line.find("(pid ");
  if (at == std::string::npos) return false;
  const size_t from = at + 5;
  return absl::SimpleAtoi(line.substr(from, line.find(')', from) - from), pid);
}

int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }

struct Case {
  std::string death;  // segv, abort, terminate, fpe, exit, kill
  int level;
  std::string platform;
  bool remote;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrCat(info.param.death, "_level", info.param.level, "_", info.param.platform,
                      info.param.remote ? "_grpc" : "_local");
}

class DeviceCrashCliTest : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    auto server = testing::CaptureServerProcess::Start(TempPath("crash_cli_server"),
                                                       Runfile("server/capture_server"));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static testing::CaptureServerProcess* server_;
};
testing::CaptureServerProcess* DeviceCrashCliTest::server_ = nullptr;

absl::StatusOr<Capture> OpenCapture(const Case& c, const std::string& prefix,
                                    const std::string& name,
                                    testing::CaptureServerProcess* server) {
  if (c.remote) return Capture::OpenRemote(server->address(), name);
  return Capture::Open(prefix + "/args_dump");
}

TEST_P(DeviceCrashCliTest, ExitsThreeAndKeepsWhatWasRecorded) {
  const Case c = GetParam();
  const std::string tag = CaseName({c, 0});
  const std::string root = FreshTempDir("crash_cli/" + tag);
  const std::string server = c.remote ? server_->address() : "";

  // The same workload without the crash.
  auto golden_run = StartSim(SimArgs("crash_example_none", c.level, c.platform, root + "/none",
                                     server, tag + ".none"),
                             root + "/none.out");
  ASSERT_TRUE(golden_run.ok()) << golden_run.status();
  ASSERT_TRUE(Finish(&*golden_run).ok());
  ASSERT_EQ(ExitCode(golden_run->status), 0) << golden_run->process->stderr_text();
  auto golden = OpenCapture(c, root + "/none", tag + ".none", server_);
  ASSERT_TRUE(golden.ok()) << golden.status();

  const std::string workload =
      c.death == "segv" ? "crash_example"
                        : absl::StrCat("crash_example_", c.death == "kill" ? "wait" : c.death);
  auto run = StartSim(SimArgs(workload, c.level, c.platform, root + "/crash", server, tag),
                      root + "/crash.out");
  ASSERT_TRUE(run.ok()) << run.status();
  if (c.death == "kill") {
    // crash_wait says where it runs; that process is killed from outside.
    std::string line;
    ASSERT_TRUE(run->process->WaitForLine("crash_wait: waiting to be killed (pid ", kBound, &line))
        << run->process->stderr_text();
    pid_t device = 0;
    ASSERT_TRUE(DevicePid(line, &device)) << line;
    EXPECT_NE(device, run->process->pid()) << "the kernel ran in sim_run's own process";
    ASSERT_EQ(::kill(device, SIGKILL), 0);
  }
  ASSERT_TRUE(Finish(&*run).ok());
  const std::string err = run->process->stderr_text();
  EXPECT_EQ(ExitCode(run->status), 3) << err << run->stdout_text;
  EXPECT_THAT(run->stdout_text, HasSubstr("device crash: the device process "));
  const std::string how = c.death == "segv"   ? "killed by SIGSEGV (fault address 0x0)"
                          : c.death == "fpe"  ? "killed by SIGFPE"
                          : c.death == "exit" ? "exited with status 3"
                          : c.death == "kill" ? "killed by SIGKILL"
                                              : "killed by SIGABRT";
  EXPECT_THAT(run->stdout_text, HasSubstr(how));
  EXPECT_THAT(run->stdout_text, HasSubstr("task 0x0000000100000003 ran kernel 'crash_"));

  auto capture = OpenCapture(c, root + "/crash", tag, server_);
  ASSERT_TRUE(capture.ok()) << capture.status();
  // Tasks 0-2 completed before task 3 ran: all of their records, byte for byte.
  for (uint32_t t = 0; t < 3; ++t) {
    EXPECT_EQ(TaskPrints(*capture, Task(t)), TaskPrints(*golden, Task(t))) << "task " << t;
  }
  // Task 3's inputs as captured before dispatch (the same as without the
  // crash), and its output as the crash left it, flagged in-flight.
  EXPECT_EQ(TaskPrints(*capture, Task(3), testing::Stage::kBeforeDispatch),
            TaskPrints(*golden, Task(3), testing::Stage::kBeforeDispatch));
  EXPECT_FALSE(capture->Find(ArgQuery().Task(Task(3)).Stage(testing::Stage::kBeforeDispatch))
                   .empty());
  for (const CapturedArg& a :
       capture->Find(ArgQuery().Task(Task(3)).Stage(testing::Stage::kAfterCompletion))) {
    EXPECT_TRUE(a.in_flight_snapshot) << a;
  }
  // Task 4 reads task 3's output: it never ran.
  EXPECT_TRUE(capture->Find(ArgQuery().Task(Task(4))).empty());

  // The manifest (local) says how; the exception dump has the inputs.
  if (!c.remote) {
    const std::string manifest = ReadFileOrEmpty(root + "/crash/args_dump/args_dump.json");
    EXPECT_THAT(manifest, HasSubstr("\"device_crash\": {"));
  }
  const std::string prefix = root + "/crash/exception_dump/";
  EXPECT_THAT(run->stdout_text, HasSubstr("exception dump: " + prefix + "crash_crash_example"));
  // One dump per task the device was running when it died. A fault handler
  // names the task whose kernel faulted, and only that one is dumped; an
  // exit() or a SIGKILL from outside names none, so every task in flight
  // (task 3 and, at times, an unrelated one on the other worker) has one.
  std::vector<std::string> dirs;
  for (size_t at = run->stdout_text.find("exception dump: " + prefix); at != std::string::npos;
       at = run->stdout_text.find("exception dump: " + prefix, at + 1)) {
    const size_t start = at + std::string("exception dump: ").size();
    dirs.push_back(run->stdout_text.substr(start, run->stdout_text.find(' ', start) - start));
  }
  ASSERT_FALSE(dirs.empty());
  const bool faulted = c.death != "exit" && c.death != "kill";
  if (faulted) {
    EXPECT_EQ(dirs.size(), 1u) << run->stdout_text;
  }
  std::string dir;
  for (const std::string& d : dirs) {
    if (absl::EndsWith(d, "_0x0000000100000003")) {
      EXPECT_TRUE(dir.empty()) << "task 3 dumped twice: " << run->stdout_text;
      dir = d;
    } else {
      EXPECT_THAT(ReadFileOrEmpty(d + "/context.json"), HasSubstr("\"crashing\": false")) << d;
    }
  }
  ASSERT_FALSE(dir.empty()) << "no dump of task 3: " << run->stdout_text;
  EXPECT_THAT(dir, HasSubstr("_test_0_"));  // func type "test", step 0
  EXPECT_THAT(ReadFileOrEmpty(dir + "/context.json"),
              HasSubstr(faulted ? "\"crashing\": true" : "\"crashing\": false"));
  const std::string context = ReadFileOrEmpty(dir + "/context.json");
  EXPECT_THAT(context, HasSubstr("\"scenario\": \"crash\""));
  EXPECT_THAT(context, HasSubstr("\"task_id\": \"0x0000000100000003\""));
  struct stat st;
  EXPECT_NE(::stat((dir + "/args.journal").c_str(), &st), 0) << "a finished dump keeps no journal";
  if (!c.remote) {
    EXPECT_NE(::stat((root + "/crash/args_dump/args.journal").c_str(), &st), 0);
  }
  auto dumped = Capture::Open(dir);
  ASSERT_TRUE(dumped.ok()) << dumped.status();
  EXPECT_EQ(TaskPrints(*dumped, Task(3), testing::Stage::kBeforeDispatch),
            TaskPrints(*golden, Task(3), testing::Stage::kBeforeDispatch));
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const char* death : {"segv", "abort", "exit", "kill"}) {
    for (int level : {1, 2, 3}) {
      for (const char* platform : {"a2a3sim", "a5sim"}) {
        for (bool remote : {false, true}) out.push_back({death, level, platform, remote});
      }
    }
  }
  for (const char* death : {"terminate", "fpe"}) {
    out.push_back({death, 2, "a2a3sim", false});
    out.push_back({death, 2, "a5sim", true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Deaths, DeviceCrashCliTest, ::testing::ValuesIn(Cases()), CaseName);

// --in-process keeps everything in one process: the crash takes sim_run
// with it (the behaviour the device process exists to avoid).
TEST(DeviceCrashCliTest2, InProcessDiesWithTheKernel) {
  const std::string root = FreshTempDir("crash_cli_in_process");
  auto run = StartSim({Runfile("apps/sim_run/sim_run"), "--workload", "crash_example_abort",
                       "--dump-args=2", "--in-process", "--output-prefix", root + "/run"},
                      root + "/run.out");
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(Finish(&*run).ok());
  EXPECT_TRUE(WIFSIGNALED(run->status) && WTERMSIG(run->status) == SIGABRT) << run->status;
}

// Level 0: no capture, and the crashing task's exception dump has its
// tensors only as the crash left them, unless --snapshot-inputs (or
// ARGSDUMP_SNAPSHOT_INPUTS) had the device copy its inputs before dispatch:
// then its input is there as it was given (what tasks 0-2 computed, the
// same bytes a level-2 capture records before dispatch).
TEST(DeviceCrashCliTest2, SnapshotInputsKeepsTheCrashingTasksInputsAtLevelZero) {
  const std::string root = FreshTempDir("crash_cli_snapshot_inputs");
  // The reference: task 3's before_dispatch records at level 2.
  auto golden_run = StartSim(SimArgs("crash_example", 2, "a2a3sim", root + "/golden", "", ""),
                             root + "/golden.out");
  ASSERT_TRUE(golden_run.ok()) << golden_run.status();
  ASSERT_TRUE(Finish(&*golden_run).ok());
  ASSERT_EQ(ExitCode(golden_run->status), 3) << golden_run->stdout_text;
  auto golden = Capture::Open(root + "/golden/args_dump");
  ASSERT_TRUE(golden.ok()) << golden.status();
  std::multiset<std::string> want;
  for (const CapturedArg& a :
       golden->Find(ArgQuery().Task(Task(3)).Stage(testing::Stage::kBeforeDispatch))) {
    if (a.kind == testing::Kind::kTensor) want.insert(Fingerprint(a));
  }
  ASSERT_FALSE(want.empty());
  struct Way {
    std::string name;
    std::vector<std::string> extra;  // flags
    std::string env;                 // ARGSDUMP_SNAPSHOT_INPUTS
    bool snapshot;
  };
  for (const Way& w : {Way{"plain", {}, "", false}, Way{"flag", {"--snapshot-inputs"}, "", true},
                       Way{"env", {}, "true", true}}) {
    SCOPED_TRACE(w.name);
    std::optional<ScopedEnv> env;
    if (!w.env.empty()) env.emplace("ARGSDUMP_SNAPSHOT_INPUTS", w.env);
    std::vector<std::string> args = SimArgs("crash_example", 0, "a2a3sim", root + "/" + w.name, "", "");
    args.insert(args.end(), w.extra.begin(), w.extra.end());
    auto run = StartSim(args, root + "/" + w.name + ".out");
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE(Finish(&*run).ok());
    EXPECT_EQ(ExitCode(run->status), 3) << run->stdout_text;
    struct stat st;
    EXPECT_NE(::stat((root + "/" + w.name + "/args_dump").c_str(), &st), 0)
        << "level 0 writes no capture";
    std::vector<std::string> dumps;
    for (const auto& entry :
         std::filesystem::directory_iterator(root + "/" + w.name + "/exception_dump")) {
      dumps.push_back(entry.path().string());
    }
    ASSERT_EQ(dumps.size(), 1u) << run->stdout_text;
    EXPECT_THAT(dumps[0], HasSubstr("/crash_crash_example_crash_segv_"));
    auto dumped = Capture::Open(dumps[0]);
    ASSERT_TRUE(dumped.ok()) << dumped.status();
    std::multiset<std::string> got;
    for (const CapturedArg& a : dumped->Find(ArgQuery().Stage(testing::Stage::kBeforeDispatch))) {
      if (a.kind == testing::Kind::kTensor) got.insert(Fingerprint(a));
    }
    // Its tensors as the crash left them are there either way.
    EXPECT_FALSE(dumped->Find(ArgQuery().Stage(testing::Stage::kAfterCompletion)).empty());
    if (!w.snapshot) {
      EXPECT_TRUE(got.empty());
      continue;
    }
    EXPECT_EQ(got, want);
  }
}

// A device process stopped (SIGSTOP) when the host dies still ends: the
// host's death continues it (before, it stayed stopped, an orphan, for good).
TEST(DeviceCrashCliTest2, AStoppedDeviceEndsWhenTheHostDies) {
  const std::string root = FreshTempDir("crash_cli_stopped");
  auto run = StartSim(SimArgs("crash_example_wait", 2, "a2a3sim", root + "/run", "", ""),
                      root + "/run.out");
  ASSERT_TRUE(run.ok()) << run.status();
  std::string line;
  ASSERT_TRUE(run->process->WaitForLine("crash_wait: waiting to be killed (pid ", kBound, &line))
      << run->process->stderr_text();
  pid_t device = 0;
  ASSERT_TRUE(DevicePid(line, &device)) << line;
  ASSERT_EQ(::kill(device, SIGSTOP), 0);
  run->process->Signal(SIGKILL);
  ASSERT_TRUE(run->process->WaitForLine("the device stopped without its host", kBound, &line))
      << run->process->stderr_text();
  EXPECT_TRUE(WaitForProcessEnd(device, kBound));
  EXPECT_THAT(run->process->stderr_text(),
              HasSubstr(absl::StrCat("the host process (pid ", run->process->pid(), ") is gone")));
}

// Under an address-space limit the crash path still ends in exit 3 with
// its summary (the host's snapshot region is sized to what it holds).
// Not under a sanitizer: its shadow memory does not fit under ulimit -v.
TEST(DeviceCrashCliTest2, ACrashUnderAMemoryLimitIsStillReported) {
  if (kSanitizerBuild) GTEST_SKIP() << "ulimit -v and sanitizer shadow memory";
  const std::string root = FreshTempDir("crash_cli_ulimit");
  auto run = StartSim({"/bin/bash", "-c",
                       "ulimit -v 1500000 && exec \"$0\" --workload crash_example --dump-args 2 "
                       "--output-prefix \"$1\"",
                       Runfile("apps/sim_run/sim_run"), root + "/run"},
                      root + "/run.out");
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(Finish(&*run).ok());
  EXPECT_EQ(ExitCode(run->status), 3) << run->process->stderr_text() << run->stdout_text;
  EXPECT_THAT(run->stdout_text, HasSubstr("device crash: the device process was killed by SIGSEGV"));
  // The crashing task's output, and those of any other task running then
  // (with 4 schedulers one more is often in flight).
  EXPECT_THAT(run->stdout_text, ::testing::ContainsRegex(" [1-9][0-9]* in-flight snapshots"));
}

// A device process stopped (SIGSTOP) while its kernel runs is a hang within
// the hang budget (the stream-sync budget, small here): sim_run's watch
// kills it, records the running task's output as an in-flight snapshot and
// exits 1, as for a hang the device declares itself (before, it waited for
// good). Locally and through the service.
TEST(DeviceCrashCliTest2, AStoppedDeviceIsAHangAndExitsOne) {
  ScopedEnv scheduler("SIMPLER_SCHEDULER_TIMEOUT_MS", "1000");
  ScopedEnv op("SIMPLER_OP_EXECUTE_TIMEOUT_US", "1500000");
  ScopedEnv sync("SIMPLER_STREAM_SYNC_TIMEOUT_MS", "2000");
  const std::string root = FreshTempDir("crash_cli_sigstop");
  auto server = testing::CaptureServerProcess::Start(root + "/server",
                                                     Runfile("server/capture_server"));
  ASSERT_TRUE(server.ok()) << server.status();
  for (bool remote : {false, true}) {
    SCOPED_TRACE(remote ? "grpc" : "local");
    const std::string tag = remote ? "stopped_grpc" : "stopped_local";
    auto run = StartSim(SimArgs("crash_example_wait", 2, "a2a3sim", root + "/" + tag,
                                remote ? (*server)->address() : "", tag),
                        root + "/" + tag + ".out");
    ASSERT_TRUE(run.ok()) << run.status();
    std::string line;
    ASSERT_TRUE(run->process->WaitForLine("crash_wait: waiting to be killed (pid ", kBound, &line))
        << run->process->stderr_text();
    pid_t device = 0;
    ASSERT_TRUE(DevicePid(line, &device)) << line;
    ASSERT_EQ(::kill(device, SIGSTOP), 0);
    ASSERT_TRUE(Finish(&*run).ok());
    EXPECT_EQ(ExitCode(run->status), 1) << run->process->stderr_text() << run->stdout_text;
    EXPECT_THAT(run->stdout_text,
                HasSubstr("run status: DEADLINE_EXCEEDED: host watch: the device process did "
                          "not run for 2000 ms"));
    // One in-flight snapshot per task running when it stopped (a worker may
    // have dispatched the next ready task itself: one or more).
    const size_t running_at = run->stdout_text.find("running tasks: ");
    ASSERT_NE(running_at, std::string::npos) << run->stdout_text;
    const std::string running =
        run->stdout_text.substr(running_at, run->stdout_text.find('\n', running_at) - running_at);
    const size_t tasks = static_cast<size_t>(std::count(running.begin(), running.end(), ',')) + 1;
    EXPECT_THAT(run->stdout_text,
                HasSubstr(absl::StrCat(tasks, " in-flight snapshots the host took")));
    EXPECT_THAT(run->stdout_text, ::testing::Not(HasSubstr("device crash:")));
    EXPECT_TRUE(WaitForProcessEnd(device, kBound));
    auto capture = remote ? Capture::OpenRemote((*server)->address(), tag)
                          : Capture::Open(root + "/" + tag + "/args_dump");
    ASSERT_TRUE(capture.ok()) << capture.status();
    const auto out =
        capture->Find(ArgQuery().Task(Task(3)).Stage(testing::Stage::kAfterCompletion));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].in_flight_snapshot);
    EXPECT_FALSE(capture->Find(ArgQuery().Task(Task(3)).Stage(testing::Stage::kBeforeDispatch))
                     .empty());
  }
}

// The capture deleted while the server was down: the restarted server
// refuses sim_run's resume (NOT_FOUND). The records it had not acknowledged
// are kept in a local capture (<prefix>/args_dump), a WARNING and the
// summary say where and how many, and sim_run exits 4 (before: exit 2, the
// bad-flag code, claiming the service held what it had acknowledged, and
// the rest dropped). The device is stopped while the server is restarted, so
// the records it makes afterwards (its hang path's: the scheduler budget is
// small) reach the host only then.
TEST(DeviceCrashCliTest2, ACaptureTheServiceLostIsKeptLocallyAndExitsFour) {
  ScopedEnv scheduler("SIMPLER_SCHEDULER_TIMEOUT_MS", "3000");
  ScopedEnv op("SIMPLER_OP_EXECUTE_TIMEOUT_US", "3500000");
  ScopedEnv sync("SIMPLER_STREAM_SYNC_TIMEOUT_MS", "4000");
  const std::string root = FreshTempDir("crash_cli_lost");
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root + "/server"));
  const std::string target = server.target();
  std::vector<std::string> args =
      SimArgs("crash_example_wait", 2, "a2a3sim", root + "/run", target, "lost");
  args.push_back("--records-per-buffer=1");  // each record to the host as it is made
  auto run = StartSim(args, root + "/run.out");
  ASSERT_TRUE(run.ok()) << run.status();
  std::string line;
  ASSERT_TRUE(run->process->WaitForLine("crash_wait: waiting to be killed (pid ", kBound, &line))
      << run->process->stderr_text();
  pid_t device = 0;
  ASSERT_TRUE(DevicePid(line, &device)) << line;
  // Until the service made some of the run's records durable.
  {
    auto stub = v1::CaptureService::NewStub(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kBound);
    v1::WatchCaptureRequest watch;
    watch.set_capture("lost");
    auto reader = stub->WatchCapture(&ctx, watch);
    v1::WatchCaptureResponse page;
    uint64_t durable = 0;
    while (durable == 0 && reader->Read(&page)) durable += page.args_size();
    ctx.TryCancel();
    reader->Finish().IgnoreError();
    ASSERT_GT(durable, 0u);
  }
  ASSERT_EQ(::kill(device, SIGSTOP), 0);
  server.Signal(SIGKILL);
  server.Wait();
  std::filesystem::remove_all(root + "/server/lost");
  ServerProcess again;
  ASSERT_NO_FATAL_FAILURE(again.Start(root + "/server", target));
  ASSERT_EQ(::kill(device, SIGCONT), 0);
  ASSERT_TRUE(Finish(&*run).ok());
  const std::string err = run->process->stderr_text();
  EXPECT_EQ(ExitCode(run->status), 4) << err << run->stdout_text;
  const std::string dir = root + "/run/args_dump";
  const std::string prefix = "capture: lost by the capture service (its resume was refused: the "
                             "capture is gone); ";
  const size_t at = run->stdout_text.find(prefix);
  ASSERT_NE(at, std::string::npos) << run->stdout_text;
  uint64_t acked = 0, kept = 0, total = 0;
  ASSERT_EQ(std::sscanf(run->stdout_text.c_str() + at + prefix.size(),
                        "%lu records it had acknowledged went with it, %lu records", &acked, &kept),
            2)
      << run->stdout_text;
  EXPECT_THAT(run->stdout_text, HasSubstr("acknowledged are kept locally in " + dir));
  const size_t records = run->stdout_text.find("records: ");
  ASSERT_NE(records, std::string::npos);
  ASSERT_EQ(std::sscanf(run->stdout_text.c_str() + records, "records: %lu", &total), 1);
  EXPECT_GT(acked, 0u);
  EXPECT_GT(kept, 0u);  // at least the stopped task's in-flight snapshot
  EXPECT_EQ(acked + kept, total) << run->stdout_text;
  EXPECT_THAT(err, HasSubstr(absl::StrCat("WARNING: capture service ", target,
                                          " no longer has capture 'lost'")));
  auto local = Capture::Open(dir);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->args().size(), kept);
  // The service did not get it back half-empty.
  auto remote = Capture::OpenRemote(target, "lost");
  EXPECT_FALSE(remote.ok());
}

// sim_run under `ulimit -v 4 GiB` (bash's setrlimit(RLIMIT_AS) before
// exec), streaming and local: the run works (the device memory reserves a
// quarter of the limit and leaves the rest to the region and the threads).
// With 3 GiB thread stacks (`ulimit -s`) no thread fits under the limit:
// the run ends with a message naming the thread that could not start
// (exit 1), never an uncaught std::system_error (it was SIGABRT). That case
// runs without a service: gRPC's own threads cannot be refused cleanly.
TEST(DeviceCrashCliTest2, AnAddressSpaceLimitIsWorkedWithinOrReported) {
  if (kSanitizerBuild) GTEST_SKIP() << "ulimit -v and sanitizer shadow memory";
  const std::string root = FreshTempDir("crash_cli_ulimit_stream");
  auto server = testing::CaptureServerProcess::Start(root + "/server",
                                                     Runfile("server/capture_server"));
  ASSERT_TRUE(server.ok()) << server.status();
  struct Limit {
    const char* ulimit;
    bool remote;
    bool in_process;
    bool fits;
  };
  const char* kFour = "ulimit -v 4194304";
  const char* kNoThread = "ulimit -s 3000000 && ulimit -v 4194304";
  for (const Limit& l : {Limit{kFour, true, false, true}, Limit{kFour, false, false, true},
                         Limit{kFour, true, true, true}, Limit{kNoThread, false, false, false},
                         Limit{kNoThread, false, true, false}}) {
    const std::string tag = absl::StrCat(l.fits ? "fits" : "no_thread", l.remote ? "_grpc" : "",
                                         l.in_process ? "_in_process" : "");
    SCOPED_TRACE(tag);
    std::vector<std::string> args = {"/bin/bash", "-c", absl::StrCat(l.ulimit, " && exec \"$@\""),
                                     "sim_run"};
    for (const std::string& a : SimArgs("mixed_example", 2, "a2a3sim", root + "/" + tag,
                                        l.remote ? (*server)->address() : "", tag)) {
      args.push_back(a);
    }
    args.push_back("--schedulers=4");  // sim_run's defaults: four of each
    args.push_back("--workers=4");
    if (l.in_process) args.push_back("--in-process");
    auto run = StartSim(args, root + "/" + tag + ".out");
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE(Finish(&*run).ok());
    const std::string err = run->process->stderr_text();
    ASSERT_TRUE(WIFEXITED(run->status)) << "killed by signal " << WTERMSIG(run->status) << err;
    EXPECT_THAT(err, ::testing::Not(HasSubstr("terminate called")));
    if (l.fits) {
      EXPECT_EQ(ExitCode(run->status), 0) << err << run->stdout_text;
      EXPECT_THAT(run->stdout_text, l.remote ? HasSubstr("20 records sent, 20 acknowledged")
                                             : HasSubstr("records: 20 "));
    } else {
      EXPECT_EQ(ExitCode(run->status), 1) << err << run->stdout_text;
      EXPECT_THAT(err, HasSubstr("sim_run: RESOURCE_EXHAUSTED: cannot start "));
      EXPECT_THAT(err, HasSubstr("ulimit -v"));
    }
  }
}

// The host (sim_run) killed while a kernel runs: the device process sees
// it go, stops by itself (nothing more dispatched, the waiting kernel
// cancelled) and says what it dropped, counted as host gone.
TEST(DeviceCrashCliTest2, DeviceStopsWhenTheHostDies) {
  for (bool remote : {false, true}) {
    SCOPED_TRACE(remote ? "grpc" : "local");
    const std::string root = FreshTempDir(absl::StrCat("crash_cli_host_", remote));
    std::unique_ptr<testing::CaptureServerProcess> server;
    if (remote) {
      auto s = testing::CaptureServerProcess::Start(root + "/server",
                                                    Runfile("server/capture_server"));
      ASSERT_TRUE(s.ok()) << s.status();
      server = std::move(s).value();
    }
    // One record per buffer: each goes to the host as it is made.
    std::vector<std::string> args = SimArgs("crash_example_wait", 2, "a2a3sim", root + "/run",
                                            remote ? server->address() : "", "host_gone");
    args.push_back("--records-per-buffer=1");
    auto run = StartSim(args, root + "/run.out");
    ASSERT_TRUE(run.ok()) << run.status();
    std::string line;
    ASSERT_TRUE(run->process->WaitForLine("crash_wait: waiting to be killed (pid ", kBound, &line))
        << run->process->stderr_text();
    pid_t device = 0;
    ASSERT_TRUE(DevicePid(line, &device)) << line;
    uint64_t durable = 0;
    if (remote) {
      // Until the service made some of the run's records durable (a live
      // watch says so): those must stay when the host dies.
      ASSERT_TRUE(run->process->WaitForLine("' opened; streaming to it", kBound))
          << run->process->stderr_text();
      auto stub = v1::CaptureService::NewStub(
          grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + kBound);
      v1::WatchCaptureRequest watch;
      watch.set_capture("host_gone");
      auto reader = stub->WatchCapture(&ctx, watch);
      v1::WatchCaptureResponse page;
      while (durable == 0 && reader->Read(&page)) durable += page.args_size();
      ctx.TryCancel();
      reader->Finish().IgnoreError();
      ASSERT_GT(durable, 0u);
    }
    // The host goes; the device (no longer anyone's child here) must end.
    run->process->Signal(SIGKILL);
    ASSERT_TRUE(run->process->WaitForLine("the device stopped without its host", kBound, &line))
        << run->process->stderr_text();
    EXPECT_THAT(line, HasSubstr("records dropped (host gone)"));
    uint64_t dropped = 0;
    const size_t n = line.find("tasks completed; ") + 17;
    ASSERT_TRUE(absl::SimpleAtoi(line.substr(n, line.find(' ', n) - n), &dropped)) << line;
    EXPECT_GT(dropped, 0u) << line;  // at least the in-flight snapshot and the open buffer
    EXPECT_TRUE(WaitForProcessEnd(device, kBound));
    EXPECT_THAT(run->process->stderr_text(), HasSubstr("is gone: the device stops"));
    if (remote) {
      // What the service acknowledged stays there: the capture is still live
      // and readable, its records those of the run.
      auto kept = Capture::OpenRemote(server->address(), "host_gone");
      ASSERT_TRUE(kept.ok()) << kept.status();
      // Every record kept is the run's, intact (the same bytes as the
      // workload without the crash; tasks 0-2 and task 3's inputs only).
      auto golden_run = StartSim(SimArgs("crash_example_none", 2, "a2a3sim", root + "/none",
                                         "", ""),
                                 root + "/none.out");
      ASSERT_TRUE(golden_run.ok()) << golden_run.status();
      ASSERT_TRUE(Finish(&*golden_run).ok());
      auto golden = Capture::Open(root + "/none/args_dump");
      ASSERT_TRUE(golden.ok()) << golden.status();
      std::multiset<std::string> all;
      for (const CapturedArg& a : golden->args()) all.insert(Fingerprint(a));
      EXPECT_GE(kept->args().size(), durable);
      for (const CapturedArg& a : kept->args()) {
        EXPECT_EQ(all.count(Fingerprint(a)), 1u) << a;
      }
    }
  }
}

}  // namespace
}  // namespace argsdump
