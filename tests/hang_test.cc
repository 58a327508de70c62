// Fault test: a kernel that never finishes. The scheduler timeout comes from
// the environment (set low here); the run must return an error instead of
// hanging, and the capture must hold the inputs of the stuck task and the
// partial output it had drained, flagged as an in-flight snapshot, besides
// everything that completed before.
#include <cstdlib>
#include <cstring>
#include <thread>
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
  RecordingHarness harness(rc);
  const DumpRegion* region = harness.region.get();
  DumpRecorder& recorder = *harness.recorder;
  TestHost& host = *harness.host;

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

// Busy for ~20 ms of wall time (work, not a wait on anything): a slow kernel.
absl::Status Slow(KernelContext& ctx) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < until && !ctx.cancelled()) {
    std::this_thread::yield();
  }
  auto x = ctx.tensor(0);
  if (!x.ok()) return x.status();
  x->Set<float>(0, x->Get<float>(0) + 1.0f);
  return absl::OkStatus();
}

// A stuck op while the same scheduler keeps making progress: no hang is
// declared, but the op is reaped at the op-execute budget, its partial output
// is recorded as an in-flight snapshot, the rest of the run completes, and
// the run reports the reaped op.
TEST(HangTest, OpPastTheOpExecuteBudgetIsReapedWhileOthersProgress) {
  KernelRegistry registry;
  ASSERT_TRUE(RegisterBuiltinKernels(&registry).ok());
  const uint16_t slow = *registry.Register("slow", {ArgDirection::kInOut}, Slow);
  DumpRegionConfig rc;
  rc.level = abi::DumpLevel::kFull;
  rc.num_threads = 1;
  rc.arena_bytes = 1 << 20;
  RecordingHarness harness(rc);
  DumpRecorder& recorder = *harness.recorder;
  TestHost& host = *harness.host;
  SimConfig sc;
  sc.scheduler_threads = 1;
  sc.worker_threads = 2;
  sc.max_inflight_per_scheduler = 2;
  SimTimeouts timeouts;
  timeouts.scheduler = std::chrono::milliseconds(1000);
  timeouts.op_execute = std::chrono::milliseconds(1500);
  timeouts.stream_sync = std::chrono::seconds(60);
  sc.timeouts = timeouts;
  SimRuntime rt(sc, registry, &recorder);
  Tensor x = *rt.Alloc(DataType::kFloat32, {8});
  Tensor y = *rt.Alloc(DataType::kFloat32, {8});
  Tensor counter = *rt.Alloc(DataType::kFloat32, {1});
  for (uint64_t i = 0; i < 8; ++i) x.Set<float>(i, 10.0f + i);
  CoreTaskArgs stuck;
  ASSERT_TRUE(stuck.add_input(x).ok());
  ASSERT_TRUE(stuck.add_output(y).ok());
  const uint64_t hang_id = *rt.Submit({*registry.IdOf("hang")}, std::move(stuck));
  constexpr int kSlowTasks = 120;  // ~2.4 s of progress, past op-execute
  for (int i = 0; i < kSlowTasks; ++i) {
    CoreTaskArgs step;
    ASSERT_TRUE(step.add_inout(counter).ok());
    ASSERT_TRUE(rt.Submit({slow}, std::move(step)).ok());
  }
  ASSERT_TRUE(rt.Start().ok());
  absl::Status s = rt.Synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("reaped"), std::string::npos) << s;
  EXPECT_EQ(rt.tasks_completed(), kSlowTasks + 1u);
  EXPECT_EQ(counter.Get<float>(0), float(kSlowTasks));
  ASSERT_TRUE(host.Stop().ok());
  bool saw_snapshot = false;
  for (const CapturedArg& r : host.TakeRecords()) {
    if (r.record.task_id != hang_id || r.record.stage != 1) continue;
    saw_snapshot = true;
    EXPECT_EQ(r.record.flags & abi::kFlagInFlightSnapshot, abi::kFlagInFlightSnapshot);
    std::vector<float> v(8);
    std::memcpy(v.data(), r.payload.data(), 32);
    EXPECT_EQ(v, (std::vector<float>{10, 11, 12, 13, 0, 0, 0, 0}));
  }
  EXPECT_TRUE(saw_snapshot);
}

}  // namespace
}  // namespace argsdump
