// A real sim run's records, with the task times the device recorded, made
// into a JSON trace (format/trace_json) and checked with python3's json
// module: one slice per task, times monotonic on each track, the kernels'
// names.
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "base/files.h"
#include "collector/collector.h"
#include "device/region.h"
#include "device/sim/kernels.h"
#include "device/sim/sim_runtime.h"
#include "device/testing/test_host.h"
#include "format/trace_json.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

TEST(SimTraceTest, ARealRunsTraceHasASlicePerTaskInOrderOnEachTrack) {
  DumpRegionConfig rc;
  rc.level = abi::DumpLevel::kFull;
  rc.num_threads = 4;
  rc.records_per_buffer = 16;
  rc.arena_bytes = 1 << 20;
  RecordingHarness cap(rc);
  SimConfig config;
  config.scheduler_threads = 4;
  config.worker_threads = 3;
  config.timeouts = SimTimeouts();
  const KernelRegistry& kernels = BuiltinKernels();
  SimRuntime rt(config, kernels, cap.recorder.get());
  ASSERT_TRUE(rt.Start().ok());
  Tensor x = *rt.Alloc(DataType::kFloat32, {16});
  for (uint64_t i = 0; i < x.numel(); ++i) x.Set<float>(i, static_cast<float>(i) - 4.0f);
  // Pairs of tasks: add(x, x) -> sum_i, then relu(sum_i) -> out_i, which
  // waits for its add; the pairs are independent of each other.
  constexpr int kPairs = 12;
  std::set<uint64_t> ids;
  for (int i = 0; i < kPairs; ++i) {
    Tensor sum = *rt.Alloc(DataType::kFloat32, {16});
    Tensor out = *rt.Alloc(DataType::kFloat32, {16});
    CoreTaskArgs add;
    ASSERT_TRUE(add.add_input(x).ok());
    ASSERT_TRUE(add.add_input(x).ok());
    ASSERT_TRUE(add.add_output(sum).ok());
    auto a = rt.Submit({*kernels.IdOf("add")}, std::move(add));
    ASSERT_TRUE(a.ok()) << a.status();
    CoreTaskArgs relu;
    ASSERT_TRUE(relu.add_input(sum).ok());
    ASSERT_TRUE(relu.add_output(out).ok());
    auto r = rt.Submit({*kernels.IdOf("relu")}, std::move(relu));
    ASSERT_TRUE(r.ok()) << r.status();
    ids.insert(*a);
    ids.insert(*r);
  }
  ASSERT_TRUE(rt.Synchronize().ok());
  ASSERT_TRUE(cap.host->Stop().ok());

  TraceRank rank;
  rank.label = "rank 0 (sim_trace)";
  rank.clock.set_base_unix_ns(1'700'000'000'000'000'000);
  for (uint16_t f : {*kernels.IdOf("add"), *kernels.IdOf("relu")}) {
    v1::Kernel* k = rank.kernels.Add();
    k->set_func_id(f);
    k->set_name(kernels.Find(f)->name);
  }
  for (const CapturedArg& c : cap.host->TakeRecords()) {
    auto record = ConvertRecord(c.record, c.thread);
    ASSERT_TRUE(record.ok()) << record.status();
    rank.records.push_back(*std::move(record));
  }
  TraceCounts counts;
  const std::string trace = TraceJson({rank}, &counts);
  EXPECT_EQ(counts.slices, ids.size());
  EXPECT_EQ(counts.incomplete, 0u);
  EXPECT_EQ(counts.untimed, 0u);

  const std::string path = FreshTempDir("sim_trace_test") + "/trace.json";
  ASSERT_TRUE(WriteStringToFile(path, trace).ok());
  const std::string check = "python3 tests/check_trace.py " + path + " " +
                            std::to_string(ids.size()) + " add,relu";
  EXPECT_EQ(std::system(check.c_str()), 0) << trace;
}

}  // namespace
}  // namespace argsdump
