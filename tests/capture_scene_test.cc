// Scene tests of the whole local pipeline: sim workload -> recorder ->
// collector (both transports) -> CaptureStore -> args_dump.json + args.bin,
// read back with an independent JSON parser and checked value by value.
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "apps/sim_run/sim_job.h"
#include "device/sim/kernels.h"
#include "device/workload.h"
#include "gtest/gtest.h"
#include "tests/capture_reader.h"
#include "tests/testing/sim_jobs.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

v1::WorkloadSpec FromJson(const std::string& name, const std::string& json) {
  const std::string path = TempPath(name + ".json");
  std::ofstream(path) << json;
  auto spec = LoadWorkloadFile(path, BuiltinKernels());
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : v1::WorkloadSpec();
}

uint16_t Func(const char* name) { return *BuiltinKernels().IdOf(name); }

class SceneTest : public ::testing::TestWithParam<Platform> {
 protected:
  SimJobOptions Options(int level, const std::string& name) {
    SimJobOptions o = SmallSimJob(
        level, TempPath(absl::StrCat(name, "_", PlatformName(GetParam()), "_l", level)),
        /*threads=*/2);
    o.platform = GetParam();
    return o;
  }
  SimJobResult Run(const v1::WorkloadSpec& w, const SimJobOptions& o) {
    auto r = RunSimJob(w, BuiltinKernels(), o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(r).value() : SimJobResult();
  }
};

// f = (a + b) + 1 over 16384 FLOAT32: the a+b payload is 5.0 at every level.
TEST_P(SceneTest, VectorExampleAtLevelsOneTwoThree) {
  const v1::WorkloadSpec w = *BuiltinWorkload("vector_example");
  const std::vector<float> five(16384, 5.0f), six(16384, 6.0f), two(16384, 2.0f);
  for (int level : {1, 2, 3}) {
    SCOPED_TRACE(level);
    SimJobResult r = Run(w, Options(level, "vector"));
    ASSERT_TRUE(r.run_status.ok()) << r.run_status;
    ASSERT_TRUE(r.wrote_capture);
    CaptureFiles c = ReadCapture(r.dump_dir);
    EXPECT_EQ(c.manifest.dump_args_level(), level);
    EXPECT_EQ(c.manifest.dropped_records(), 0);
    std::map<EntryKey, Entry> by_key;
    for (const Entry& e : c.entries) by_key[e.Key()] = e;
    const std::string t0 = "0x0000000100000000", t1 = "0x0000000100000001";
    const Entry& sum = by_key.at({t0, v1::STAGE_AFTER_COMPLETION, 2u, v1::ROLE_OUTPUT});
    EXPECT_EQ(sum.As<float>(), five);
    EXPECT_EQ(sum.func_id, std::vector<int>{Func("add")});
    const Entry& in = by_key.at({t1, v1::STAGE_BEFORE_DISPATCH, 0u, v1::ROLE_INPUT});
    EXPECT_EQ(in.As<float>(), five);
    EXPECT_EQ(by_key.at({t1, v1::STAGE_AFTER_COMPLETION, 1u, v1::ROLE_OUTPUT}).As<float>(), six);
    const Entry& one = by_key.at({t1, v1::STAGE_BEFORE_DISPATCH, 2u, v1::ROLE_INPUT});
    EXPECT_EQ(one.kind, v1::KIND_SCALAR);
    EXPECT_EQ(one.dtype, DataType::kFloat32);
    EXPECT_EQ(one.value.number_value(), 1.0);
    EXPECT_EQ(one.bin_size, 0u);
    if (level == 1) {
      EXPECT_EQ(c.entries.size(), 4u);  // only what was marked
      EXPECT_EQ(by_key.count({t0, v1::STAGE_BEFORE_DISPATCH, 0u, v1::ROLE_INPUT}), 0u);
    } else {
      EXPECT_EQ(c.entries.size(), 6u);
      const Entry& a = by_key.at({t0, v1::STAGE_BEFORE_DISPATCH, 0u, v1::ROLE_INPUT});
      if (level == 2) {
        EXPECT_EQ(a.As<float>(), two);
        EXPECT_EQ(c.manifest.payload_bytes(), 5 * 65536);
      } else {
        EXPECT_EQ(a.bin_size, 0u);  // level 3: unmarked tensors are metadata only
        EXPECT_EQ(a.numel, 16384u);
        EXPECT_EQ(c.manifest.payload_bytes(), 3 * 65536);
      }
    }
    EXPECT_EQ(c.manifest.bin_file().string_value(), "args.bin");
  }
}

TEST_P(SceneTest, HybridWithoutMarkersHasNoBinFile) {
  v1::WorkloadSpec w = *BuiltinWorkload("vector_example");
  for (auto& t : *w.mutable_tasks()) {
    t.set_dump(false);
    for (auto& a : *t.mutable_args()) a.set_dump(false);
  }
  SimJobResult r = Run(w, Options(3, "hybrid_plain"));
  CaptureFiles c = ReadCapture(r.dump_dir);
  EXPECT_EQ(c.manifest.bin_file().kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(c.entries.size(), 6u);
  for (const Entry& e : c.entries) EXPECT_EQ(e.bin_size, 0u);
  std::ifstream bin(r.dump_dir + "/args.bin");
  EXPECT_FALSE(bin.good());
  // And level 1 with no markers captures nothing at all: no directory.
  SimJobResult none = Run(w, Options(1, "partial_none"));
  EXPECT_FALSE(none.wrote_capture);
  std::ifstream manifest(none.dump_dir + "/args_dump.json");
  EXPECT_FALSE(manifest.good());
}

TEST_P(SceneTest, PartialDumpSelectsExactlyTheMarkedArgs) {
  const v1::WorkloadSpec w = FromJson("partial", R"({
    "name": "partial",
    "buffers": [
      {"name": "a", "dtype": "FLOAT32", "shape": [64], "init": {"fill": 1}},
      {"name": "b", "dtype": "FLOAT32", "shape": [64], "init": {"fill": 2}},
      {"name": "c", "dtype": "FLOAT32", "shape": [64]},
      {"name": "d", "dtype": "FLOAT32", "shape": [64]},
      {"name": "y", "dtype": "FLOAT32", "shape": [64]}],
    "tasks": [
      {"func": "add", "args": [{"tensor": "a", "role": "input"}, {"tensor": "b", "role": "input"},
                               {"tensor": "c", "role": "output"}]},
      {"func": "relu", "dump": true,
       "args": [{"tensor": "c", "role": "input"}, {"tensor": "d", "role": "output"}]},
      {"func": "add_scalar",
       "args": [{"tensor": "d", "role": "input"}, {"tensor": "y", "role": "output", "dump": true},
                {"scalar": {"dtype": "FLOAT32", "value": 2, "var": "k"}, "dump": true},
                {"scalar": {"dtype": "FLOAT32", "value": 2, "var": "k"}}]}]})");
  SimJobResult r = Run(w, Options(1, "partial"));
  ASSERT_TRUE(r.run_status.ok()) << r.run_status;
  CaptureFiles c = ReadCapture(r.dump_dir);
  std::vector<std::string> got;
  for (const Entry& e : c.entries) {
    got.push_back(absl::StrCat(e.task_id, " ", StageName(e.stage), " ", e.arg_index, " ",
                               RoleName(e.role), " ", KindName(e.kind),
                               e.arg_index_ambiguous ? " ambiguous" : ""));
  }
  EXPECT_EQ(got, (std::vector<std::string>{
                     "0x0000000100000001 before_dispatch 0 input tensor",
                     "0x0000000100000001 after_completion 1 output tensor",
                     "0x0000000100000002 before_dispatch 2 input scalar ambiguous",
                     "0x0000000100000002 after_completion 1 output tensor"}));
  EXPECT_EQ(c.entries[0].As<float>(), std::vector<float>(64, 3.0f));
  EXPECT_EQ(c.entries[2].value.number_value(), 2.0);
  EXPECT_EQ(c.entries[3].As<float>(), std::vector<float>(64, 5.0f));
}

TEST_P(SceneTest, InoutBeforeAndAfterDifferExactlyByTheKernel) {
  const v1::WorkloadSpec w = FromJson("inout", R"({
    "buffers": [
      {"name": "acc", "dtype": "FLOAT32", "shape": [4, 8], "init": {"fill": 10}},
      {"name": "x", "dtype": "FLOAT32", "shape": [4, 8], "init": {"iota": {"start": 0, "step": 0.5}}}],
    "tasks": [{"func": "accumulate", "args": [{"tensor": "acc", "role": "inout"},
                                               {"tensor": "x", "role": "input"}]}]})");
  SimJobResult r = Run(w, Options(2, "inout"));
  CaptureFiles c = ReadCapture(r.dump_dir);
  ASSERT_EQ(c.entries.size(), 3u);
  const Entry& before = c.entries[0];
  const Entry& after = c.entries[2];
  EXPECT_EQ(before.role, v1::ROLE_INOUT);
  EXPECT_EQ(before.stage, v1::STAGE_BEFORE_DISPATCH);
  EXPECT_EQ(after.role, v1::ROLE_INOUT);
  EXPECT_EQ(after.stage, v1::STAGE_AFTER_COMPLETION);
  const std::vector<float> b = before.As<float>(), a = after.As<float>();
  ASSERT_EQ(b.size(), 32u);
  ASSERT_EQ(a.size(), 32u);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(b[i], 10.0f);
    EXPECT_EQ(a[i] - b[i], 0.5f * i);
  }
  EXPECT_EQ(c.manifest.inout_args(), 2);
}

TEST_P(SceneTest, NonContiguousViewIsGatheredWithItsGeometry) {
  const v1::WorkloadSpec w = FromJson("strided", R"({
    "buffers": [
      {"name": "m", "dtype": "INT32", "shape": [6, 10], "init": {"iota": {"start": 0, "step": 1}}},
      {"name": "out", "dtype": "INT32", "shape": [3, 4]}],
    "views": [{"name": "win", "buffer": "m", "shape": [3, 4], "strides": [20, 2],
               "start_offset": 11}],
    "tasks": [{"func": "copy", "args": [{"tensor": "win", "role": "input"},
                                         {"tensor": "out", "role": "output"}]}]})");
  SimJobResult r = Run(w, Options(2, "strided"));
  CaptureFiles c = ReadCapture(r.dump_dir);
  ASSERT_EQ(c.entries.size(), 2u);
  const Entry& win = c.entries[0];
  EXPECT_FALSE(win.is_contiguous);
  EXPECT_EQ(win.shape, (std::vector<int>{3, 4}));
  EXPECT_EQ(win.strides, (std::vector<int>{20, 2}));
  EXPECT_EQ(win.start_offset, 11u);
  EXPECT_EQ(win.numel, 12u);
  std::vector<int32_t> expected;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) expected.push_back(11 + 20 * i + 2 * j);
  EXPECT_EQ(win.As<int32_t>(), expected);
  EXPECT_EQ(c.entries[1].As<int32_t>(), expected);
  EXPECT_TRUE(c.entries[1].is_contiguous);
}

TEST_P(SceneTest, MixTaskDumpsEachSlotOnceWithSortedFuncIds) {
  const v1::WorkloadSpec w = FromJson("mix", R"({
    "buffers": [
      {"name": "a", "dtype": "FLOAT32", "shape": [16], "init": {"fill": 2}},
      {"name": "b", "dtype": "FLOAT32", "shape": [16], "init": {"fill": -3}},
      {"name": "s", "dtype": "FLOAT32", "shape": [16]},
      {"name": "p", "dtype": "FLOAT32", "shape": [16]},
      {"name": "m", "dtype": "FLOAT32", "shape": [16]}],
    "tasks": [{"funcs": ["mix_max", "mix_prod", "mix_sum"],
               "args": [{"tensor": "a", "role": "input"}, {"tensor": "b", "role": "input"},
                        {"tensor": "s", "role": "output"}, {"tensor": "p", "role": "output"},
                        {"tensor": "m", "role": "output"}]}]})");
  SimJobResult r = Run(w, Options(2, "mix"));
  CaptureFiles c = ReadCapture(r.dump_dir);
  ASSERT_EQ(c.entries.size(), 5u);
  std::vector<int> funcs = {Func("mix_sum"), Func("mix_prod"), Func("mix_max")};
  std::sort(funcs.begin(), funcs.end());
  std::set<int> slots;
  for (const Entry& e : c.entries) {
    EXPECT_EQ(e.func_id, funcs);
    EXPECT_TRUE(slots.insert(e.arg_index).second) << e.arg_index;
  }
  EXPECT_EQ(c.entries[2].As<float>(), std::vector<float>(16, -1.0f));
  EXPECT_EQ(c.entries[3].As<float>(), std::vector<float>(16, -6.0f));
  EXPECT_EQ(c.entries[4].As<float>(), std::vector<float>(16, 2.0f));
}

TEST_P(SceneTest, HangKeepsInputsAndThePartialOutput) {
  SimJobOptions o = Options(2, "hang");
  SimTimeouts t;
  t.scheduler = std::chrono::milliseconds(300);
  o.sim.timeouts = t;
  SimJobResult r = Run(*BuiltinWorkload("hang_example"), o);
  EXPECT_EQ(r.run_status.code(), absl::StatusCode::kDeadlineExceeded) << r.run_status;
  ASSERT_TRUE(r.wrote_capture);
  CaptureFiles c = ReadCapture(r.dump_dir);
  ASSERT_EQ(c.entries.size(), 5u);  // add: a, b, c; hang: c in, d partial
  const Entry& hang_in = c.entries[3];
  const Entry& partial = c.entries[4];
  EXPECT_EQ(hang_in.task_id, "0x0000000100000001");
  EXPECT_EQ(hang_in.As<float>(), std::vector<float>(1024, 3.0f));
  EXPECT_EQ(partial.stage, v1::STAGE_AFTER_COMPLETION);
  EXPECT_TRUE(partial.in_flight_snapshot);
  std::vector<float> expected(1024, 0.0f);
  std::fill(expected.begin(), expected.begin() + 512, 3.0f);
  EXPECT_EQ(partial.As<float>(), expected);
  EXPECT_EQ(c.manifest.in_flight_snapshots(), 1);
}

// Tiny arenas and buffers: big tensors are truncated, small ones make the
// arena wrap many times, the ready queue of depth 1 makes the device wait at
// the gate; every record still arrives. Whether the device ever finds a
// wrapped payload not yet acked depends on how fast the collector runs on
// this machine, so the count of arena waits is not asserted here (the
// recorder's own tests drive that wait step by step).
TEST_P(SceneTest, PressureTruncatesAndWaitsButLosesNothing) {
  v1::WorkloadSpec w;
  w.set_name("pressure");
  constexpr int kBig = 10, kSmall = 30;
  // One task `func`(in -> out) over fresh FLOAT32 buffers of `n` elements.
  auto add_task = [&w](const char* func, const std::string& name, uint32_t n, double start) {
    auto* in = w.add_buffers();
    in->set_name(name);
    in->set_dtype("FLOAT32");
    in->add_shape(n);
    in->mutable_init()->mutable_iota()->set_start(start);
    in->mutable_init()->mutable_iota()->set_step(1);
    auto* out = w.add_buffers();
    out->set_name(name + "_out");
    out->set_dtype("FLOAT32");
    out->add_shape(n);
    auto* t = w.add_tasks();
    t->set_func(func);
    auto* a = t->add_args();
    a->set_tensor(in->name());
    a->set_role("input");
    a = t->add_args();
    a->set_tensor(out->name());
    a->set_role("output");
  };
  for (int i = 0; i < kBig; ++i) add_task("relu", absl::StrCat("big", i), 2048, i);  // 8 KiB > arena
  for (int i = 0; i < kSmall; ++i) add_task("copy", absl::StrCat("small", i), 256, i);  // 1 KiB
  SimJobOptions o = Options(2, "pressure");
  o.region.arena_bytes = 4096;
  o.region.records_per_buffer = 4;
  o.region.buffers_per_thread = 2;
  o.region.ready_queue_depth = 1;
  SimJobResult r = Run(w, o);
  ASSERT_TRUE(r.run_status.ok());
  CaptureFiles c = ReadCapture(r.dump_dir);
  EXPECT_EQ(c.manifest.total_args(), 2 * (kBig + kSmall));
  EXPECT_EQ(c.manifest.truncated_args(), 2 * kBig);
  EXPECT_EQ(c.manifest.dropped_records(), 0);
  EXPECT_EQ(c.manifest.dropped_overwrite(), 0);
  // 2 threads x 4 KiB of arena carried 60 KiB of small payloads: it wrapped.
  static_assert(2 * kSmall * 1024 > 2 * 4096 * 4, "the arena must wrap");
  EXPECT_EQ(c.manifest.payload_bytes(), 2 * kBig * 2048 + 2 * kSmall * 1024);
  for (const Entry& e : c.entries) {
    EXPECT_FALSE(e.overwritten);
    if (e.numel == 2048) {
      EXPECT_TRUE(e.truncated);
      EXPECT_EQ(e.bin_size, 2048u);
      if (e.role == v1::ROLE_INPUT) {
        const std::vector<float> v = e.As<float>();
        const float start = v[0];
        for (int k = 0; k < 512; ++k) ASSERT_EQ(v[k], start + k);
      }
    } else {
      EXPECT_FALSE(e.truncated);
      EXPECT_EQ(e.bin_size, 1024u);
    }
  }
  EXPECT_EQ(r.collected.records, 2u * (kBig + kSmall));
}

INSTANTIATE_TEST_SUITE_P(Platforms, SceneTest,
                         ::testing::Values(Platform::kA2a3Sim, Platform::kA5Sim),
                         [](const auto& info) { return std::string(PlatformName(info.param)); });

// The two transports produce the same capture: byte for byte when the run is
// sequential (one scheduler, one task in flight, one shard), and entry by entry, payload bytes
// included, when threads make the append order vary.
TEST(PlatformParityTest, A2a3AndA5CapturesAreIdentical) {
  const v1::WorkloadSpec w = *BuiltinWorkload("mixed_example");
  for (uint32_t threads : {1u, 4u}) {
    std::vector<CaptureFiles> captures;
    for (Platform p : {Platform::kA2a3Sim, Platform::kA5Sim}) {
      SimJobOptions o;
      o.dump_level = 2;
      o.platform = p;
      o.output_prefix = TempPath(absl::StrCat("parity_", threads, "_", PlatformName(p)));
      o.sim.scheduler_threads = threads;
      o.sim.worker_threads = 2;
      // Sequential: one task in flight at a time, so the order is fixed.
      o.sim.max_inflight_per_scheduler = threads == 1 ? 1 : 4;
      o.sim.timeouts = SimTimeouts();
      o.collector_shards = threads == 1 ? 1 : 2;
      o.region.arena_bytes = 1 << 16;
      auto r = RunSimJob(w, BuiltinKernels(), o);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(r->run_status.ok());
      captures.push_back(ReadCapture(r->dump_dir));
    }
    ASSERT_EQ(captures[0].entries.size(), captures[1].entries.size());
    ASSERT_GE(captures[0].entries.size(), 20u);
    for (size_t i = 0; i < captures[0].entries.size(); ++i) {
      const Entry& x = captures[0].entries[i];
      const Entry& y = captures[1].entries[i];
      EXPECT_EQ(x.Key(), y.Key());
      EXPECT_TRUE(x.payload == y.payload) << x.task_id << " " << x.arg_index;
      EXPECT_EQ(x.shape, y.shape);
      EXPECT_EQ(x.bin_size, y.bin_size);
    }
    if (threads == 1) {
      EXPECT_TRUE(captures[0].bin == captures[1].bin);
      EXPECT_TRUE(ManifestWithoutTimes(captures[0].manifest_text) ==
                  ManifestWithoutTimes(captures[1].manifest_text));
    }
  }
}

}  // namespace
}  // namespace argsdump
