// DumpConfig::snapshot_inputs through the real session: a kernel that
// changes its inout tensor (x *= 10) and then crashes the device process
// (SIGSEGV) or fails (returns an error). At level 0 the exception dump has
// the inout only as the kernel left it; with snapshot_inputs it also has
// it as the kernel received it (before_dispatch), whether the device runs
// in its own process or in this one. At level 2 the capture's own
// before_dispatch record is used and not written twice.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using testing::ArgQuery;
using testing::Capture;
using testing::CapturedArg;

constexpr uint64_t kElements = 64;

// out[i] = i
absl::Status Iota(KernelContext& ctx) {
  auto out = ctx.tensor(0);
  if (!out.ok()) return absl::InvalidArgumentError("iota: args");
  for (uint64_t i = 0; i < out->numel(); ++i) out->Set<float>(i, static_cast<float>(i));
  return absl::OkStatus();
}

// A store to address 0, past UBSan's null check (it would report and exit
// before the fault).
__attribute__((no_sanitize("undefined"), noinline)) void StoreToNull() {
  static volatile uintptr_t zero = 0;
  *reinterpret_cast<volatile int*>(zero) = 1;
}

// x *= 10 in place, then the death (`crash`) or an error.
template <bool crash>
absl::Status ScaleThenDie(KernelContext& ctx) {
  auto x = ctx.tensor(0);
  if (!x.ok()) return absl::InvalidArgumentError("scale: args");
  for (uint64_t i = 0; i < x->numel(); ++i) x->Set<float>(i, x->Get<float>(i) * 10);
  ctx.Drain();
  if (crash) StoreToNull();
  return absl::InternalError("scale_then_fail: injected failure after changing x");
}

struct SessionRun {
  SessionResult result;
  absl::Status ran;
};

// x = iota, then the dying task on x (inout). `crash`: a SIGSEGV (the
// device in its own process), else a failing kernel.
SessionRun RunOnce(const std::string& name, int level, bool snapshot_inputs, bool crash,
            bool device_process) {
  KernelRegistry kernels;
  const uint16_t iota = *kernels.Register("iota", {ArgDirection::kOut}, &Iota, "elementwise");
  const uint16_t die =
      *kernels.Register(crash ? "scale_then_crash" : "scale_then_fail", {ArgDirection::kInOut},
                        crash ? &ScaleThenDie<true> : &ScaleThenDie<false>, "test");
  SessionOptions o;
  o.name = name;
  o.scheduler_threads = 1;
  o.worker_threads = 1;
  o.dump.level = level;
  o.dump.path = FreshTempDir(name);
  o.dump.snapshot_inputs = snapshot_inputs;
  o.device_process = device_process;
  auto session = SimSession::Open(kernels, o);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto workload = [&](SimSession& s) -> absl::Status {
    auto x = s.Alloc(DataType::kFloat32, {4, kElements / 4});
    if (!x.ok()) return x.status();
    {
      CoreTaskArgs a;
      if (auto st = a.add_output(*x); !st.ok()) return st;
      if (auto id = s.Submit(iota, std::move(a)); !id.ok()) return id.status();
    }
    CoreTaskArgs a;
    if (auto st = a.add_inout(*x); !st.ok()) return st;
    if (auto id = s.Submit(die, std::move(a)); !id.ok()) return id.status();
    return s.Synchronize();
  };
  SessionRun run;
  run.ran = device_process ? (*session)->RunDevice(workload) : workload(**session);
  auto result = (*session)->Finish();
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) run.result = *result;
  return run;
}

// The dump's records of arg 0 at `stage`, and their values.
std::vector<std::vector<double>> ArgValues(const Capture& c, testing::Stage stage) {
  std::vector<std::vector<double>> out;
  for (const CapturedArg& a : c.Find(ArgQuery().Arg(0).Stage(stage))) {
    EXPECT_EQ(a.role, testing::Role::kInOut);
    auto v = a.Values();
    EXPECT_TRUE(v.ok()) << v.status();
    out.push_back(v.ok() ? *v : std::vector<double>());
  }
  return out;
}

std::vector<double> Iota(double scale) {
  std::vector<double> v(kElements);
  for (uint64_t i = 0; i < kElements; ++i) v[i] = static_cast<double>(i) * scale;
  return v;
}

struct Case {
  bool crash;
  bool device_process;
};

class SnapshotInputsTest : public ::testing::TestWithParam<Case> {};

TEST_P(SnapshotInputsTest, TheExceptionDumpKeepsTheInoutAsReceivedAtLevelZero) {
  const Case c = GetParam();
  for (bool snapshot : {false, true}) {
    SCOPED_TRACE(snapshot ? "snapshot_inputs on" : "snapshot_inputs off");
    const std::string name =
        absl::StrCat(c.crash ? "crash" : "fail", c.device_process ? "_process" : "_inproc",
                     snapshot ? "_snapshot" : "_plain");
    const SessionRun run = RunOnce(name, /*level=*/0, snapshot, c.crash, c.device_process);
    const SessionResult& r = run.result;
    EXPECT_FALSE(run.ran.ok());
    EXPECT_EQ(r.device_crashed, c.crash);
    EXPECT_FALSE(r.wrote_capture);  // level 0: no capture, only the exception dump
    ASSERT_EQ(r.exception_dumps.size(), 1u);
    const std::string dir = r.exception_dumps[0];
    EXPECT_THAT(dir, HasSubstr(c.crash ? "/exception_dump/crash_" : "/exception_dump/exception_"));
    auto dumped = Capture::Open(dir);
    ASSERT_TRUE(dumped.ok()) << dumped.status();
    // As the kernel left it: scaled by 10.
    const auto after = ArgValues(*dumped, testing::Stage::kAfterCompletion);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0], Iota(10));
    // As the kernel received it: only with the snapshot.
    const auto before = ArgValues(*dumped, testing::Stage::kBeforeDispatch);
    ASSERT_EQ(before.size(), snapshot ? 1u : 0u);
    if (snapshot) {
      EXPECT_EQ(before[0], Iota(1));
    }
    EXPECT_THAT(ReadFileOrEmpty(dir + "/context.json"),
                HasSubstr(absl::StrCat("\"records_before_dispatch\": ", snapshot ? 1 : 0)));
  }
}

INSTANTIATE_TEST_SUITE_P(Ways, SnapshotInputsTest,
                         ::testing::Values(Case{true, true}, Case{false, false},
                                           Case{false, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrCat(info.param.crash ? "Crash" : "Failure",
                                               info.param.device_process ? "InDeviceProcess"
                                                                         : "InProcess");
                         });

// At level 2 the capture holds the inout's before_dispatch record: the
// crash dump takes it from there, once, with the snapshot on.
TEST(SnapshotInputsLevelTwoTest, TheCapturesRecordIsNotWrittenTwice) {
  const SessionRun run = RunOnce("crash_level2_snapshot", /*level=*/2, /*snapshot_inputs=*/true,
                          /*crash=*/true, /*device_process=*/true);
  const SessionResult& r = run.result;
  ASSERT_TRUE(r.device_crashed);
  ASSERT_EQ(r.exception_dumps.size(), 1u);
  auto dumped = Capture::Open(r.exception_dumps[0]);
  ASSERT_TRUE(dumped.ok()) << dumped.status();
  const auto before = ArgValues(*dumped, testing::Stage::kBeforeDispatch);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0], Iota(1));
  EXPECT_EQ(ArgValues(*dumped, testing::Stage::kAfterCompletion).at(0), Iota(10));
}

}  // namespace
}  // namespace argsdump
