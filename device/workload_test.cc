#include "device/workload.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>

#include "device/sim/kernels.h"
#include "device/sim/sim_runtime.h"
#include "gtest/gtest.h"
#include "tests/testing/crash_status.h"

namespace argsdump {
namespace {

const char* const kCrashVariants[][2] = {
    {"crash_example", "crash_segv"},        {"crash_example_abort", "crash_abort"},
    {"crash_example_terminate", "crash_terminate"}, {"crash_example_exit", "crash_exit"},
    {"crash_example_fpe", "crash_fpe"},     {"crash_example_wait", "crash_wait"},
    {"crash_example_none", "copy"},
};

TEST(BuiltinWorkloadTest, EveryListedWorkloadLoadsAndValidates) {
  const std::vector<std::string> names = BuiltinWorkloadNames();
  for (const auto& v : kCrashVariants) {
    EXPECT_NE(std::find(names.begin(), names.end(), v[0]), names.end()) << v[0];
  }
  for (const std::string& name : names) {
    auto w = BuiltinWorkload(name);
    ASSERT_TRUE(w.ok()) << name << ": " << w.status();
    EXPECT_EQ(w->name(), name);
    EXPECT_TRUE(ValidateWorkload(*w, BuiltinKernels()).ok()) << name;
  }
  EXPECT_EQ(BuiltinWorkload("crash_example_nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(BuiltinWorkloadTest, CrashVariantsDifferOnlyInTheKernelOfTaskThree) {
  const v1::WorkloadSpec segv = *BuiltinWorkload("crash_example");
  ASSERT_EQ(segv.tasks_size(), 8);
  for (const auto& v : kCrashVariants) {
    v1::WorkloadSpec w = *BuiltinWorkload(v[0]);
    EXPECT_EQ(w.tasks(3).func(), v[1]) << v[0];
    EXPECT_TRUE(w.tasks(3).dump()) << v[0];  // level 1 records its inputs
    w.set_name(segv.name());
    w.mutable_tasks(3)->set_func(segv.tasks(3).func());
    EXPECT_EQ(w.SerializeAsString(), segv.SerializeAsString()) << v[0];
  }
}

SimConfig Config() {
  SimConfig c;
  c.scheduler_threads = 2;
  c.worker_threads = 2;
  return c;
}

TEST(BuiltinWorkloadTest, CrashExampleNoneRunsToTheEnd) {
  SimRuntime rt(Config(), BuiltinKernels(), nullptr);
  auto tensors = SubmitWorkload(*BuiltinWorkload("crash_example_none"), BuiltinKernels(), &rt);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_TRUE(rt.Start().ok());
  ASSERT_TRUE(rt.Synchronize().ok());
  EXPECT_EQ(rt.tasks_completed(), 8u);
  const Tensor& out = tensors->at("out");
  for (uint64_t i = 0; i < out.numel(); i += 97) {
    const float c = 1.5f + (-4.0f + 0.0078125f * static_cast<float>(i));
    EXPECT_FLOAT_EQ(out.Get<float>(i), c * (c * 0.5f) + 4.0f) << i;
  }
}

// The whole workload, run in a death test's child: task 3's kernel ends
// the process.
void RunToTheCrash(const char* workload) {
  SimRuntime rt(Config(), BuiltinKernels(), nullptr);
  if (!SubmitWorkload(*BuiltinWorkload(workload), BuiltinKernels(), &rt).ok()) return;
  if (!rt.Start().ok()) return;
  (void)rt.Synchronize();
  std::exit(0);  // the run ended without the crash: the death test fails
}

TEST(BuiltinWorkloadDeathTest, CrashExamplesEndTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunToTheCrash("crash_example"), [](int st) { return DiedOfFault(SIGSEGV, st); },
              "");
  EXPECT_EXIT(RunToTheCrash("crash_example_fpe"),
              [](int st) { return DiedOfFault(SIGFPE, st); }, "");
  EXPECT_EXIT(RunToTheCrash("crash_example_abort"), testing::KilledBySignal(SIGABRT), "");
  EXPECT_EXIT(RunToTheCrash("crash_example_terminate"), testing::KilledBySignal(SIGABRT),
              "crash_terminate");
  EXPECT_EXIT(RunToTheCrash("crash_example_exit"), testing::ExitedWithCode(3), "");
}

}  // namespace
}  // namespace argsdump
