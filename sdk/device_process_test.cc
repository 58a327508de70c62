// SessionOptions::device_process through the real pipeline: the device
// forked over shared memory, kernels of the test's own that crash it in
// every way (SIGSEGV, abort, std::terminate, _exit, a SIGKILL from
// outside), at levels 1-3 on both platforms, into the local store. What
// was recorded before the crash is in the capture byte for byte (compared
// with a run of the tasks before the crashing one), the crashing task's
// inputs and context are in its exception dump, and misuse is a status.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <map>
#include <sstream>
#include <stdexcept>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/argsdump.h"
#include "sdk/device_process.h"
#include "sdk/testing.h"
#include "sdk/wiring.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using testing::ArgQuery;
using testing::Capture;
using testing::CapturedArg;

// out[i] = i * k
absl::Status Fill(KernelContext& ctx) {
  auto out = ctx.tensor(0);
  auto k = ctx.scalar<float>(0);
  if (!out.ok() || !k.ok()) return absl::InvalidArgumentError("fill: args");
  for (uint64_t i = 0; i < out->numel(); ++i) out->Set<float>(i, static_cast<float>(i) * *k);
  return absl::OkStatus();
}

// c = a + b
absl::Status Add(KernelContext& ctx) {
  auto a = ctx.tensor(0), b = ctx.tensor(1), c = ctx.tensor(2);
  if (!a.ok() || !b.ok() || !c.ok()) return absl::InvalidArgumentError("add: args");
  for (uint64_t i = 0; i < c->numel(); ++i) c->Set<float>(i, a->Get<float>(i) + b->Get<float>(i));
  return absl::OkStatus();
}

// Where the waiting kernel says it runs (a pipe the test made before the fork).
int g_running_fd = -1;

enum class Death { kNone, kSegv, kAbort, kTerminate, kExit, kKill };

const char* DeathName(Death d) {
  switch (d) {
    case Death::kNone: return "none";
    case Death::kSegv: return "segv";
    case Death::kAbort: return "abort";
    case Death::kTerminate: return "terminate";
    case Death::kExit: return "exit";
    case Death::kKill: return "kill";
  }
  return "?";
}

// A store to address 0, past UBSan's null check (it would report and exit
// before the fault).
__attribute__((no_sanitize("undefined"), noinline)) void StoreToNull() {
  static volatile uintptr_t zero = 0;
  *reinterpret_cast<volatile int*>(zero) = 1;
}

// c = a + b for half of c, then the death (its partial output is what an
// in-flight snapshot shows).
template <Death kDeath>
absl::Status AddThenDie(KernelContext& ctx) {
  auto a = ctx.tensor(0), b = ctx.tensor(1), c = ctx.tensor(2);
  if (!a.ok() || !b.ok() || !c.ok()) return absl::InvalidArgumentError("die: args");
  for (uint64_t i = 0; i < c->numel() / 2; ++i) {
    c->Set<float>(i, a->Get<float>(i) + b->Get<float>(i));
  }
  ctx.Drain();
  switch (kDeath) {
    case Death::kSegv:
      StoreToNull();
      break;
    case Death::kAbort:
      std::abort();
    case Death::kTerminate:
      std::terminate();
    case Death::kExit:
      ::_exit(3);
    case Death::kKill: {
      const pid_t self = ::getpid();
      if (::write(g_running_fd, &self, sizeof(self)) != sizeof(self)) std::abort();
      ctx.WaitUntilCancelled();  // the test SIGKILLs the process first
      break;
    }
    case Death::kNone:
      break;
  }
  for (uint64_t i = c->numel() / 2; i < c->numel(); ++i) {
    c->Set<float>(i, a->Get<float>(i) + b->Get<float>(i));
  }
  return absl::OkStatus();
}

struct Kernels {
  KernelRegistry registry;
  uint16_t fill, add, die;
};

// c = a + b for half of c, then says where it runs and spins for good,
// never looking at its cancellation: a livelock no deadline of the device
// ends.
absl::Status AddThenSpin(KernelContext& ctx) {
  auto a = ctx.tensor(0), b = ctx.tensor(1), c = ctx.tensor(2);
  if (!a.ok() || !b.ok() || !c.ok()) return absl::InvalidArgumentError("spin: args");
  for (uint64_t i = 0; i < c->numel() / 2; ++i) {
    c->Set<float>(i, a->Get<float>(i) + b->Get<float>(i));
  }
  ctx.Drain();
  const pid_t self = ::getpid();
  if (::write(g_running_fd, &self, sizeof(self)) != sizeof(self)) std::abort();
  for (volatile uint64_t spins = 0;; spins = spins + 1) {
  }
}

Kernels MakeKernels(Death death, KernelFn die_fn = nullptr) {
  Kernels k;
  k.fill = *k.registry.Register("fill", {ArgDirection::kOut, ArgDirection::kScalar}, &Fill,
                                "elementwise");
  k.add = *k.registry.Register("add", {ArgDirection::kIn, ArgDirection::kIn, ArgDirection::kOut},
                               &Add, "elementwise");
  KernelFn die = nullptr;
  switch (death) {
    case Death::kNone: die = &AddThenDie<Death::kNone>; break;
    case Death::kSegv: die = &AddThenDie<Death::kSegv>; break;
    case Death::kAbort: die = &AddThenDie<Death::kAbort>; break;
    case Death::kTerminate: die = &AddThenDie<Death::kTerminate>; break;
    case Death::kExit: die = &AddThenDie<Death::kExit>; break;
    case Death::kKill: die = &AddThenDie<Death::kKill>; break;
  }
  if (die_fn != nullptr) die = die_fn;
  k.die = *k.registry.Register("die", {ArgDirection::kIn, ArgDirection::kIn, ArgDirection::kOut},
                               die, "crashing");
  return k;
}

// The workload: x and y filled, s = x + y, then the task that dies reads s
// and x (everything before it is its ancestor, so all of it completed
// before it ran), then two tasks after it. `upto_die`: stop before it.
absl::Status Workload(SimSession& s, const Kernels& k, bool upto_die) {
  auto x = s.Alloc(DataType::kFloat32, {4, 16});
  auto y = s.Alloc(DataType::kFloat32, {4, 16});
  auto sum = s.Alloc(DataType::kFloat32, {4, 16});
  auto out = s.Alloc(DataType::kFloat32, {4, 16});
  auto after = s.Alloc(DataType::kFloat32, {4, 16});
  if (!x.ok() || !y.ok() || !sum.ok() || !out.ok() || !after.ok()) {
    return absl::InternalError("alloc");
  }
  float one = 1.0f, two = 2.0f;
  for (auto [t, scale] : {std::pair<const Tensor*, float*>{&*x, &one}, {&*y, &two}}) {
    CoreTaskArgs a;
    a.add_output(*t).IgnoreError();
    a.add_scalar(*scale).IgnoreError();
    a.dump(*t).IgnoreError();
    if (auto id = s.Submit(k.fill, std::move(a)); !id.ok()) return id.status();
  }
  {
    CoreTaskArgs a;
    a.add_input(*x).IgnoreError();
    a.add_input(*y).IgnoreError();
    a.add_output(*sum).IgnoreError();
    a.dump(*sum).IgnoreError();
    if (auto id = s.Submit(k.add, std::move(a)); !id.ok()) return id.status();
  }
  if (upto_die) return s.Synchronize();
  {
    CoreTaskArgs a;
    a.add_input(*sum).IgnoreError();
    a.add_input(*x).IgnoreError();
    a.add_output(*out).IgnoreError();
    a.dump(*sum, *out).IgnoreError();  // level 1 keeps its first input and output
    if (auto id = s.Submit(k.die, std::move(a)); !id.ok()) return id.status();
  }
  for (int i = 0; i < 2; ++i) {
    CoreTaskArgs a;
    a.add_input(*out).IgnoreError();
    a.add_input(*x).IgnoreError();
    a.add_output(*after).IgnoreError();
    if (auto id = s.Submit(k.add, std::move(a)); !id.ok()) return id.status();
  }
  return s.Synchronize();
}

// An arg as everything the capture says of it but its place in args.bin
// and the manifest, with its bytes.
std::string Fingerprint(const CapturedArg& a) {
  auto bytes = a.Bytes();
  std::ostringstream s;
  s << a.Describe() << " step " << a.step << " contiguous " << a.is_contiguous << " numel "
    << a.numel << " truncated " << a.truncated << " overwritten " << a.overwritten
    << " ambiguous " << a.ambiguous << " in_flight " << a.in_flight_snapshot << " bin_size "
    << a.bin_size << " start " << a.start_offset << " bytes "
    << (bytes.ok() ? absl::CHexEscape(*bytes) : std::string(bytes.status().message()));
  return s.str();
}

std::multiset<std::string> Fingerprints(const Capture& c) {
  std::multiset<std::string> out;
  for (const CapturedArg& a : c.args()) out.insert(Fingerprint(a));
  return out;
}

// Another thread of this process, idle until destroyed.
class IdleThread {
 public:
  IdleThread() : thread_([this] {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return release_; });
  }) {}
  ~IdleThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      release_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool release_ = false;
  std::thread thread_;
};

struct Case {
  Death death;
  int level;
  Platform platform;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrCat(DeathName(info.param.death), "_level", info.param.level, "_",
                      PlatformName(info.param.platform));
}

SessionOptions Options(const std::string& root, int level, bool device_process) {
  SessionOptions o;
  o.scheduler_threads = 2;
  o.worker_threads = 2;
  o.dump.level = level;
  o.dump.path = root;
  o.device_process = device_process;
  return o;
}

struct Run {
  SessionResult result;
  absl::Status ran;
};

// One session: `kernels` on `platform`, the workload (or its prefix).
absl::StatusOr<Run> RunSession(const Kernels& kernels, const SessionOptions& options,
                               Platform platform, bool upto_die,
                               std::function<void()> device_started = nullptr) {
  SessionWiring wiring;
  wiring.platform = platform;
  wiring.device_started = std::move(device_started);
  auto session = SimSession::Open(kernels.registry, options, wiring);
  if (!session.ok()) return session.status();
  Run run;
  run.ran = (*session)->RunDevice(
      [&](SimSession& s) { return Workload(s, kernels, upto_die); });
  auto result = (*session)->Finish();
  if (!result.ok()) return result.status();
  run.result = *result;
  return run;
}

class DeviceCrashTest : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceCrashTest, KeepsEverythingRecordedBeforeAndTheCrashingTask) {
  const Case c = GetParam();
  const std::string root = FreshTempDir(absl::StrCat(
      "device_crash_", DeathName(c.death), "_", c.level, "_", PlatformName(c.platform)));
  const std::string crash_name = absl::StrCat("crash_", DeathName(c.death));

  // The tasks before the one that dies, run whole.
  Kernels prefix_kernels = MakeKernels(Death::kNone);
  SessionOptions po = Options(root, c.level, /*device_process=*/true);
  po.name = "prefix";
  auto prefix = RunSession(prefix_kernels, po, c.platform, /*upto_die=*/true);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  ASSERT_TRUE(prefix->ran.ok()) << prefix->ran;
  ASSERT_TRUE(prefix->result.run_status.ok()) << prefix->result.run_status;
  EXPECT_FALSE(prefix->result.device_crashed);
  auto golden = Capture::Of(prefix->result);
  ASSERT_TRUE(golden.ok()) << golden.status();

  // The same workload, through the task that kills the device process.
  Kernels kernels = MakeKernels(c.death);
  SessionOptions o = Options(root, c.level, /*device_process=*/true);
  o.name = crash_name;
  int running[2] = {-1, -1};
  std::thread killer;
  std::function<void()> started;
  if (c.death == Death::kKill) {
    ASSERT_EQ(::pipe2(running, O_CLOEXEC), 0);
    g_running_fd = running[1];
    // Started after the fork (no thread may exist before it): waits for the
    // kernel to say it runs, then kills its process from outside.
    started = [&] {
      killer = std::thread([fd = running[0]] {
        pid_t pid = 0;
        if (::read(fd, &pid, sizeof(pid)) == sizeof(pid)) ::kill(pid, SIGKILL);
      });
    };
  }
  auto crashed = RunSession(kernels, o, c.platform, /*upto_die=*/false, started);
  if (killer.joinable()) killer.join();
  for (int fd : running) {
    if (fd >= 0) ::close(fd);
  }
  ASSERT_TRUE(crashed.ok()) << crashed.status();
  const SessionResult& r = crashed->result;
  EXPECT_EQ(crashed->ran.code(), absl::StatusCode::kAborted) << crashed->ran;
  EXPECT_EQ(r.run_status.code(), absl::StatusCode::kAborted) << r.run_status;
  ASSERT_TRUE(r.device_crashed);
  const std::string how = c.death == Death::kSegv ? "killed by SIGSEGV (fault address 0x0)"
                          : c.death == Death::kExit ? "exited with status 3"
                          : c.death == Death::kKill ? "killed by SIGKILL"
                                                    : "killed by SIGABRT";
  EXPECT_THAT(r.device_crash, HasSubstr(how));
  EXPECT_THAT(r.device_crash, HasSubstr("kernel 'die'"));
  // The orchestration may still have been submitting when the device died.
  EXPECT_GE(r.tasks, 4u);
  EXPECT_LE(r.tasks, 6u);
  EXPECT_EQ(r.tasks_completed, 3u);

  // Every record of the tasks before, byte for byte.
  auto capture = Capture::Of(r);
  ASSERT_TRUE(capture.ok()) << capture.status();
  const std::multiset<std::string> got = Fingerprints(*capture);
  for (const std::string& f : Fingerprints(*golden)) {
    EXPECT_EQ(got.count(f), 1u) << "missing from the crashed run's capture: " << f;
  }
  // The crashing task (the fourth submitted): its inputs as captured before
  // dispatch, as the level selects them.
  const uint64_t die_task = (uint64_t{1} << 32) | 3;
  const auto before = capture->Find(ArgQuery().Task(die_task).Stage(testing::Stage::kBeforeDispatch));
  ASSERT_EQ(before.size(), c.level == 1 ? 1u : 2u);
  EXPECT_EQ(before[0].arg_index, 0u);
  auto sum_values = before[0].Values();
  if (c.level != 3) {  // level 3 keeps payload only for marked args: arg 0 is
    ASSERT_TRUE(sum_values.ok()) << sum_values.status();
    EXPECT_EQ((*sum_values)[5], 15.0);  // 5 * 1 + 5 * 2
  }
  // Its output as the crash left it: half written, flagged in-flight.
  const auto out = capture->Find(ArgQuery().Task(die_task).Stage(testing::Stage::kAfterCompletion));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].in_flight_snapshot);
  if (out[0].bin_size > 0) {
    auto v = out[0].Values();
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ((*v)[1], 3.0 + 1.0);  // sum[1] + x[1]: written before the death
    EXPECT_EQ((*v)[63], 0.0);        // never written
  }
  // Nothing after it ran.
  for (uint64_t t : {die_task + 1, die_task + 2}) {
    EXPECT_TRUE(capture->Find(ArgQuery().Task(t)).empty()) << t;
  }
  // The manifest says how the device died, and is a valid capture.
  EXPECT_TRUE(testing::CheckCaptureFiles(r.capture_dir).ok())
      << testing::CheckCaptureFiles(r.capture_dir);
  const std::string manifest = ReadFileOrEmpty(r.capture_dir + "/args_dump.json");
  EXPECT_THAT(manifest, HasSubstr("\"device_crash\""));

  // The exception dump: the task's inputs as captured before dispatch, its
  // tensors as the crash left them, and its context.
  ASSERT_EQ(r.exception_dumps.size(), 1u);
  const std::string dir = r.exception_dumps[0];
  EXPECT_THAT(dir, HasSubstr(absl::StrCat("/exception_dump/crash_", r.name,
                                          "_die_crashing_0_")));
  const std::string context = ReadFileOrEmpty(dir + "/context.json");
  EXPECT_THAT(context, HasSubstr("\"scenario\": \"crash\""));
  EXPECT_THAT(context, HasSubstr("\"task_id\": \"0x0000000100000003\""));
  EXPECT_THAT(context, HasSubstr("\"func\": \"die\""));
  if (c.death == Death::kSegv) {
    EXPECT_THAT(context, HasSubstr("\"signal_name\": \"SIGSEGV\""));
    EXPECT_THAT(context, HasSubstr("\"fault_address\": \"0x0\""));
    EXPECT_THAT(context, HasSubstr("\"crashing\": true"));
  }
  if (c.death == Death::kExit) {
    EXPECT_THAT(context, HasSubstr("\"exit_status\": 3"));
  }
  EXPECT_TRUE(testing::CheckCaptureFiles(dir).ok()) << testing::CheckCaptureFiles(dir);
  auto dumped = Capture::Open(dir);
  ASSERT_TRUE(dumped.ok()) << dumped.status();
  const auto dumped_before =
      dumped->Find(ArgQuery().Stage(testing::Stage::kBeforeDispatch));
  ASSERT_EQ(dumped_before.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(dumped_before[i].Bytes().value_or("?"), before[i].Bytes().value_or("!"));
  }
  // And every tensor of the task as it is now (3 tensors).
  EXPECT_EQ(dumped->Find(ArgQuery().Stage(testing::Stage::kAfterCompletion)).size(), 3u);
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (Death d : {Death::kSegv, Death::kAbort, Death::kTerminate, Death::kExit, Death::kKill}) {
    for (int level : {1, 2, 3}) {
      for (Platform p : {Platform::kA2a3Sim, Platform::kA5Sim}) out.push_back({d, level, p});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Deaths, DeviceCrashTest, ::testing::ValuesIn(Cases()), CaseName);

// Without a crash, the device in its own process captures what it
// captures in this one (the same records and bytes), on both platforms.
TEST(DeviceProcessTest, CapturesTheSameAsInProcess) {
  for (Platform p : {Platform::kA2a3Sim, Platform::kA5Sim}) {
    const std::string root = FreshTempDir(absl::StrCat("device_same_", PlatformName(p)));
    Kernels k = MakeKernels(Death::kNone);
    SessionOptions in = Options(root, 2, false), out = Options(root, 2, true);
    in.name = "in";
    out.name = "out";
    auto a = RunSession(k, in, p, false);
    auto b = RunSession(k, out, p, false);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(b->ran.ok()) << b->ran;
    EXPECT_TRUE(b->result.run_status.ok()) << b->result.run_status;
    EXPECT_FALSE(b->result.device_crashed);
    EXPECT_EQ(a->result.tasks, b->result.tasks);
    EXPECT_EQ(a->result.tasks_completed, b->result.tasks_completed);
    EXPECT_EQ(a->result.records, b->result.records);
    EXPECT_EQ(b->result.steps, 1u);
    auto ca = Capture::Of(a->result), cb = Capture::Of(b->result);
    ASSERT_TRUE(ca.ok() && cb.ok());
    EXPECT_EQ(Fingerprints(*ca), Fingerprints(*cb));
  }
}

// Misuse: a status each, never a crash.
TEST(DeviceProcessTest, MisuseIsAStatus) {
  const std::string root = FreshTempDir("device_misuse");
  Kernels k = MakeKernels(Death::kNone);
  auto session = SimSession::Open(k.registry, Options(root, 2, true));
  ASSERT_TRUE(session.ok()) << session.status();
  SimSession& s = **session;
  // The runtime is the device process's.
  EXPECT_EQ(s.Alloc(DataType::kFloat32, {4}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.Submit(k.fill, CoreTaskArgs()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.BeginStep(1).code(), absl::StatusCode::kFailedPrecondition);
  // Inside: Finish and a nested RunDevice are refused there (reported back
  // as the function's status).
  absl::Status inner = s.RunDevice([&](SimSession& d) -> absl::Status {
    if (d.Finish().status().code() != absl::StatusCode::kFailedPrecondition) {
      return absl::InternalError("Finish on the device was not refused");
    }
    absl::Status nested = d.RunDevice([](SimSession&) { return absl::OkStatus(); });
    if (nested.code() != absl::StatusCode::kFailedPrecondition) {
      return absl::InternalError(absl::StrCat("nested RunDevice: ", nested.ToString()));
    }
    return absl::NotFoundError("the function's own status");
  });
  EXPECT_EQ(inner.code(), absl::StatusCode::kNotFound) << inner;
  EXPECT_EQ(s.RunDevice([](SimSession&) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kFailedPrecondition);
  auto r = s.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->device_crashed);
}

// A process with another thread is not forked.
TEST(DeviceProcessTest, RefusesToForkAProcessWithThreads) {
  const std::string root = FreshTempDir("device_threads");
  Kernels k = MakeKernels(Death::kNone);
  auto session = SimSession::Open(k.registry, Options(root, 2, true));
  ASSERT_TRUE(session.ok()) << session.status();
  auto other = std::make_unique<IdleThread>();
  absl::Status st = (*session)->RunDevice([](SimSession&) { return absl::OkStatus(); });
  other.reset();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("runs 1 other thread(s)"));
  auto r = (*session)->Finish();
  EXPECT_TRUE(r.ok()) << r.status();
}

// A session whose function never ran still finishes (an empty device run).
TEST(DeviceProcessTest, FinishWithoutRunDevice) {
  const std::string root = FreshTempDir("device_empty");
  Kernels k = MakeKernels(Death::kNone);
  auto session = SimSession::Open(k.registry, Options(root, 2, true));
  ASSERT_TRUE(session.ok()) << session.status();
  auto r = (*session)->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->run_status.ok()) << r->run_status;
  EXPECT_EQ(r->tasks, 0u);
  EXPECT_FALSE(r->device_crashed);
}

// An exception out of RunDevice's function ends in the device process: it
// is the function's status, and the test's code after RunDevice runs once,
// in this process (unwinding past the fork would run the rest of the test
// suite in the device process as well).
TEST(DeviceProcessTest, AnExceptionOutOfTheFunctionIsItsStatus) {
  for (bool device_process : {true, false}) {  // the same in either process
  SCOPED_TRACE(device_process ? "device process" : "in process");
  const std::string root = FreshTempDir(absl::StrCat("device_throws_", device_process));
  Kernels k = MakeKernels(Death::kNone);
  const pid_t test_pid = ::getpid();
  auto session = SimSession::Open(k.registry, Options(root, 2, device_process));
  ASSERT_TRUE(session.ok()) << session.status();
  absl::Status st;
  try {
    st = (*session)->RunDevice([&](SimSession& s) -> absl::Status {
      if (absl::Status w = Workload(s, k, true); !w.ok()) return w;
      throw std::runtime_error("an orchestration bug");
    });
  } catch (...) {
    if (::getpid() != test_pid) ::_exit(77);  // the device process, out of the fork
    ADD_FAILURE() << "RunDevice threw in the host";
  }
  if (::getpid() != test_pid) ::_exit(78);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnknown) << st;
  EXPECT_THAT(st.message(), HasSubstr("an orchestration bug"));
  auto r = (*session)->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->device_crashed) << r->device_crash;
  EXPECT_EQ(r->tasks_completed, 3u);
  EXPECT_GT(r->records, 0u);
  }
}

// A refused fork (another thread) may be tried again once the thread is gone.
TEST(DeviceProcessTest, ARefusedForkMayBeTriedAgain) {
  const std::string root = FreshTempDir("device_retry");
  Kernels k = MakeKernels(Death::kNone);
  auto session = SimSession::Open(k.registry, Options(root, 2, true));
  ASSERT_TRUE(session.ok()) << session.status();
  auto other = std::make_unique<IdleThread>();
  auto work = [&](SimSession& s) { return Workload(s, k, true); };
  const absl::Status refused = (*session)->RunDevice(work);
  other.reset();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  const absl::Status ran = (*session)->RunDevice(work);
  EXPECT_TRUE(ran.ok()) << ran;
  auto r = (*session)->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->run_status.ok()) << r->run_status;
  EXPECT_EQ(r->tasks_completed, 3u);
}

// A process the function forks (a helper without exec) holds the report
// pipe open; the host still returns once the device process itself ended.
TEST(DeviceProcessTest, AProcessTheFunctionForkedDoesNotHoldTheHost) {
  const std::string root = FreshTempDir("device_forks");
  Kernels k = MakeKernels(Death::kNone);
  int release[2];
  ASSERT_EQ(::pipe(release), 0);
  auto session = SimSession::Open(k.registry, Options(root, 2, true));
  ASSERT_TRUE(session.ok()) << session.status();
  absl::Status st = (*session)->RunDevice([&](SimSession& s) -> absl::Status {
    if (::fork() == 0) {
      // Lives until the test (the host) closes its end, after RunDevice.
      ::close(release[1]);
      char c;
      while (::read(release[0], &c, 1) < 0 && errno == EINTR) {
      }
      ::_exit(0);
    }
    return Workload(s, k, true);
  });
  ::close(release[1]);  // the helper ends now (a hang before the fix)
  ::close(release[0]);
  EXPECT_TRUE(st.ok()) << st;
  auto r = (*session)->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->device_crashed) << r->device_crash;
  EXPECT_EQ(r->tasks_completed, 3u);
}

// A SIGSEGV sent from outside (kill, raise) has no fault address: si_addr
// holds the sender's pid then, which must not be reported as one.
TEST(DeviceProcessTest, ASignalSentFromOutsideHasNoFaultAddress) {
  const std::string root = FreshTempDir("device_raise");
  Kernels k = MakeKernels(Death::kNone);
  auto session = SimSession::Open(k.registry, Options(root, 2, true));
  ASSERT_TRUE(session.ok()) << session.status();
  absl::Status st = (*session)->RunDevice([&](SimSession& s) -> absl::Status {
    if (absl::Status w = Workload(s, k, true); !w.ok()) return w;
    ::raise(SIGSEGV);
    return absl::OkStatus();
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  auto r = (*session)->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->device_crashed);
  EXPECT_THAT(r->device_crash, HasSubstr("SIGSEGV"));
  EXPECT_THAT(r->device_crash, ::testing::Not(HasSubstr("fault address")));
}

// The host's own bound: a device process that stops making progress is a
// hang within the hang budget (the stream-sync budget, set small here): the
// host kills it, records the running task's output as an in-flight
// snapshot, and the run's status is DEADLINE_EXCEEDED (no device_crash, no
// exception dump). Stopped: the kernel says where it runs and the test
// SIGSTOPs that process (before, Finish waited for good). Livelock: a kernel
// that spins and ignores cancellation; the device's scheduler declares its
// own hang first and records the snapshot, which the host then does not
// record again.
enum class Stall { kStopped, kLivelock };

void ExpectAHang(Stall stall) {
  const bool stopped = stall == Stall::kStopped;
  ScopedEnv scheduler("SIMPLER_SCHEDULER_TIMEOUT_MS", stopped ? "1000" : "300");
  ScopedEnv op("SIMPLER_OP_EXECUTE_TIMEOUT_US", stopped ? "1500000" : "400000");
  ScopedEnv sync("SIMPLER_STREAM_SYNC_TIMEOUT_MS", stopped ? "2000" : "1000");
  const std::string root = FreshTempDir(stopped ? "device_stopped" : "device_livelock");
  Kernels k = stopped ? MakeKernels(Death::kKill) : MakeKernels(Death::kNone, &AddThenSpin);
  SessionOptions o = Options(root, 2, /*device_process=*/true);
  o.name = stopped ? "stopped" : "livelock";
  int running[2] = {-1, -1};
  ASSERT_EQ(::pipe2(running, O_CLOEXEC), 0);
  g_running_fd = running[1];
  pid_t device = 0;
  std::thread stopper;
  // After the fork: waits for the kernel to say it runs (the gate), then
  // stops its process.
  auto started = [&] {
    stopper = std::thread([&, fd = running[0]] {
      pid_t pid = 0;
      if (::read(fd, &pid, sizeof(pid)) != sizeof(pid)) return;
      device = pid;
      if (stopped) ::kill(pid, SIGSTOP);
    });
  };
  auto run = RunSession(k, o, Platform::kA2a3Sim, /*upto_die=*/false, started);
  if (stopper.joinable()) stopper.join();
  for (int fd : running) ::close(fd);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_GT(device, 0) << "the kernel never ran";
  // Reaped by the host: gone.
  EXPECT_EQ(::kill(device, 0), -1);
  const SessionResult& r = run->result;
  EXPECT_EQ(run->ran.code(), absl::StatusCode::kAborted) << run->ran;
  EXPECT_EQ(r.run_status.code(), absl::StatusCode::kDeadlineExceeded) << r.run_status;
  EXPECT_THAT(r.run_status.message(),
              HasSubstr(stopped ? "host watch: the device process did not run for "
                                : "host watch: the device made no progress for 1000 ms"));
  if (stopped) {
    EXPECT_THAT(r.run_status.message(), HasSubstr("(its heartbeat stood still"));
    EXPECT_THAT(r.run_status.message(), HasSubstr("its state: T"));
  }
  EXPECT_THAT(r.run_status.message(), HasSubstr("running tasks: 0x0000000100000003"));
  EXPECT_FALSE(r.device_crashed);
  EXPECT_TRUE(r.exception_dumps.empty());
  EXPECT_EQ(r.tasks_completed, 3u);
  auto capture = Capture::Of(r);
  ASSERT_TRUE(capture.ok()) << capture.status();
  const uint64_t stuck = (uint64_t{1} << 32) | 3;
  EXPECT_EQ(capture->Find(ArgQuery().Task(stuck).Stage(testing::Stage::kBeforeDispatch)).size(),
            2u);
  // Its output as the hang left it, once, flagged in-flight.
  const auto out =
      capture->Find(ArgQuery().Task(stuck).Stage(testing::Stage::kAfterCompletion));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].in_flight_snapshot);
  auto v = out[0].Values();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[1], 3.0 + 1.0);  // written before it stalled
  EXPECT_EQ((*v)[63], 0.0);        // never written
  EXPECT_TRUE(testing::CheckCaptureFiles(r.capture_dir).ok());
  EXPECT_THAT(ReadFileOrEmpty(r.capture_dir + "/args_dump.json"),
              ::testing::Not(HasSubstr("\"device_crash\"")));
}

TEST(DeviceHangTest, AStoppedDeviceIsAHangWithinTheBudget) { ExpectAHang(Stall::kStopped); }

TEST(DeviceHangTest, ALivelockedKernelIsAHangWithinTheBudget) { ExpectAHang(Stall::kLivelock); }

}  // namespace
}  // namespace argsdump
