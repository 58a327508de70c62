// Fault test: a kernel that never finishes. The scheduler timeout comes from
// the environment (set low here); the run must return an error instead of
// hanging, and the capture must hold the inputs of the stuck task and the
// partial output it had drained, flagged as an in-flight snapshot, besides
// everything that completed before.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device/recorder.h"
#include "device/region.h"
#include "device/sim/kernels.h"
#include "device/sim/sim_runtime.h"
#include "device/testing/test_host.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

TEST(HangTest, StuckKernelTripsTheSchedulerTimeoutAndKeepsItsPartialOutput) {
  ASSERT_EQ(setenv("SIMPLER_SCHEDULER_TIMEOUT_MS", "300", 1), 0);
  DumpRegionConfig rc;
  rc.level = abi::DumpLevel::kFull;
  rc.num_threads = 2;
  rc.arena_bytes = 1 << 20;
  auto region = std::move(DumpRegion::Create(rc)).value();
  DumpRecorder recorder(*region);
  TestHost host(*region);
  host.Start();

  SimConfig sc;
  sc.scheduler_threads = 2;
  sc.worker_threads = 2;  // timeouts: from the environment
  SimRuntime rt(sc, BuiltinKernels(), &recorder);
  EXPECT_EQ(rt.timeouts().scheduler, std::chrono::milliseconds(300));
  const uint16_t add = *BuiltinKernels().IdOf("add");
  const uint16_t hang = *BuiltinKernels().IdOf("hang");
  const uint16_t relu = *BuiltinKernels().IdOf("relu");

  Tensor a = *rt.Alloc(DataType::kFloat32, {32});
  Tensor b = *rt.Alloc(DataType::kFloat32, {32});
  Tensor c = *rt.Alloc(DataType::kFloat32, {32});
  Tensor d = *rt.Alloc(DataType::kFloat32, {32});
  Tensor e = *rt.Alloc(DataType::kFloat32, {32});
  for (uint64_t i = 0; i < 32; ++i) {
    a.Set<float>(i, 1.0f + i);
    b.Set<float>(i, 2.0f);
  }
  ASSERT_TRUE(rt.Start().ok());
  CoreTaskArgs first;
  ASSERT_TRUE(first.add_input(a).ok());
  ASSERT_TRUE(first.add_input(b).ok());
  ASSERT_TRUE(first.add_output(c).ok());
  const uint64_t add_id = *rt.Submit({add}, std::move(first));
  CoreTaskArgs stuck;
  ASSERT_TRUE(stuck.add_input(c).ok());
  ASSERT_TRUE(stuck.add_output(d).ok());
  const uint64_t hang_id = *rt.Submit({hang}, std::move(stuck));
  CoreTaskArgs after;  // depends on the stuck task: never dispatched
  ASSERT_TRUE(after.add_input(d).ok());
  ASSERT_TRUE(after.add_output(e).ok());
  const uint64_t never_id = *rt.Submit({relu}, std::move(after));

  absl::Status s = rt.Synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("scheduler timeout"), std::string::npos) << s;
  EXPECT_EQ(rt.tasks_completed(), 1u);
  ASSERT_TRUE(host.Stop().ok());

  std::vector<float> c_expected(32), d_partial(32, 0.0f);
  for (int i = 0; i < 32; ++i) c_expected[i] = 3.0f + i;
  for (int i = 0; i < 16; ++i) d_partial[i] = c_expected[i];
  bool saw_hang_input = false, saw_partial = false, saw_add_output = false;
  for (const CapturedArg& r : host.TakeRecords()) {
    EXPECT_NE(r.record.task_id, never_id);
    std::vector<float> v(r.payload.size() / 4);
    std::memcpy(v.data(), r.payload.data(), r.payload.size());
    if (r.record.task_id == add_id && r.record.stage == 1) {
      saw_add_output = true;
      EXPECT_EQ(v, c_expected);
      EXPECT_EQ(r.record.flags & abi::kFlagInFlightSnapshot, 0);
    }
    if (r.record.task_id == hang_id && r.record.stage == 0) {
      saw_hang_input = true;
      EXPECT_EQ(v, c_expected);
    }
    if (r.record.task_id == hang_id && r.record.stage == 1) {
      saw_partial = true;
      EXPECT_EQ(r.record.flags & abi::kFlagInFlightSnapshot, abi::kFlagInFlightSnapshot);
      EXPECT_EQ(v, d_partial);
    }
  }
  EXPECT_TRUE(saw_add_output);
  EXPECT_TRUE(saw_hang_input);
  EXPECT_TRUE(saw_partial);
  for (uint32_t t = 0; t < 2; ++t) EXPECT_EQ(region->thread_state(t).flushed.load(), 1u);
  unsetenv("SIMPLER_SCHEDULER_TIMEOUT_MS");
}

}  // namespace
}  // namespace argsdump
