#include "device/workload.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "device/region.h"
#include "device/sim/device_memory.h"
#include "device/sim/flight.h"
#include "device/sim/kernels.h"
#include "device/sim/sim_runtime.h"
#include "device/testing/test_host.h"
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

// A record as a run of the same tasks repeats it: without its task's times
// and its payload's place in the arena (both the schedule's), with its
// payload's bytes.
struct StepRecord {
  std::vector<uint8_t> record;
  std::vector<uint8_t> payload;
  uint64_t task_id = 0;
  uint8_t stage = 0;
  uint32_t arg_index = 0;
  bool operator<(const StepRecord& o) const {
    return std::tie(task_id, stage, arg_index) < std::tie(o.task_id, o.stage, o.arg_index);
  }
  bool operator==(const StepRecord& o) const {
    return record == o.record && payload == o.payload;
  }
};

std::vector<StepRecord> Normalised(const std::vector<CapturedArg>& captured) {
  std::vector<StepRecord> out;
  for (const CapturedArg& c : captured) {
    abi::ArgsDumpRecord r = c.record;
    std::memset(r.dispatch_ns, 0, sizeof(r.dispatch_ns));
    std::memset(r.duration_ns, 0, sizeof(r.duration_ns));
    r.payload_offset = 0;
    StepRecord s;
    s.record.resize(sizeof(r));
    std::memcpy(s.record.data(), &r, sizeof(r));
    s.payload = c.payload;
    s.task_id = r.task_id;
    s.stage = r.stage;
    s.arg_index = r.arg_index;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// How a run of steps gets each step's tasks: a new SubmitWorkload per step
// (new buffers, what a run did before), or one PreparedWorkload submitted
// again (reset buffers).
enum class Setup { kFresh, kPrepared };

struct StepRun {
  std::vector<StepRecord> records;
  // Each buffer's bytes after the last step.
  std::map<std::string, std::vector<uint8_t>> last_step;
};

// `steps` steps of `spec` at level 2 (`faulty` instead at step `fault_step`),
// recorded; the dump switches to level 1 at step 2 and to matmul's and
// accumulate's records only at step 4. `shared_memory`: the tensors in
// device memory with a flight table, as in sim_run's device process.
StepRun RunSteps(const v1::WorkloadSpec& spec, Setup setup, uint32_t steps,
                 bool shared_memory, const v1::WorkloadSpec* faulty = nullptr,
                 uint32_t fault_step = 0) {
  DumpRegionConfig rc;
  rc.level = abi::DumpLevel::kFull;
  rc.num_threads = 2;
  rc.arena_bytes = 32 << 20;
  RecordingHarness cap(rc);
  SimConfig config = Config();
  std::unique_ptr<DeviceMemory> memory;
  std::unique_ptr<FlightTable> flight;
  if (shared_memory) {
    memory = *DeviceMemory::Create(uint64_t{1} << 30);
    flight = *FlightTable::Create(config.scheduler_threads, config.max_inflight_per_scheduler,
                                  config.worker_threads);
    config.memory = memory.get();
    config.flight = flight.get();
  }
  StepRun run;
  std::map<std::string, Tensor> last;
  {
    SimRuntime rt(config, BuiltinKernels(), cap.recorder.get());
    EXPECT_TRUE(rt.Start().ok());
    std::optional<PreparedWorkload> prepared, prepared_faulty;
    for (uint32_t step = 0; step < steps; ++step) {
      if (step == 2 || step == 4) {
        DumpConfig c;
        c.level = step == 2 ? 1 : 2;
        if (step == 4) c.funcs = {"matmul", "accumulate"};
        rt.SetDumpConfig(c);
      }
      rt.BeginStep(step);
      rt.HoldDispatch();
      const bool fault = faulty != nullptr && step == fault_step;
      const v1::WorkloadSpec& w = fault ? *faulty : spec;
      if (setup == Setup::kFresh) {
        auto tensors = SubmitWorkload(w, BuiltinKernels(), &rt);
        EXPECT_TRUE(tensors.ok()) << tensors.status();
        if (tensors.ok()) last = *tensors;
      } else {
        std::optional<PreparedWorkload>& ready = fault ? prepared_faulty : prepared;
        if (!ready) ready = *PreparedWorkload::Prepare(w, BuiltinKernels(), &rt);
        const absl::Status submitted = ready->Submit();
        EXPECT_TRUE(submitted.ok()) << submitted;
        last = ready->tensors();
      }
      rt.ReleaseDispatch();
      EXPECT_TRUE(rt.WaitIdle().ok());
    }
    EXPECT_TRUE(rt.Synchronize().ok());
    for (const v1::BufferSpec& b : spec.buffers()) {
      const DeviceBuffer& buffer = *last.at(b.name()).buffer();
      run.last_step[b.name()].assign(buffer.data(), buffer.data() + buffer.bytes());
    }
  }
  EXPECT_TRUE(cap.host->Stop().ok());
  run.records = Normalised(cap.host->TakeRecords());
  return run;
}

// Every kind of argument a workload has: views, fill/iota/values inits, a
// named scalar given twice (one lvalue: its dump is ambiguous), anonymous
// scalars, markers; buffers a step writes (an inout accumulated into, an
// initialised one written over) that the next step must find as new; and
// two of over a megabyte: one zeroed by giving its pages back, one whose
// init is written again instead of copied back.
v1::WorkloadSpec EveryArgumentWorkload() {
  constexpr char kJson[] = R"({
    "name": "every_argument",
    "buffers": [
      {"name": "x", "dtype": "FLOAT32", "shape": [4, 8], "init": {"iota": {"start": -2, "step": 0.25}}},
      {"name": "v", "dtype": "FLOAT32", "shape": [4], "init": {"values": [1, -1, 2, -2]}},
      {"name": "y", "dtype": "FLOAT32", "shape": [4, 8]},
      {"name": "acc", "dtype": "FLOAT32", "shape": [4, 8]},
      {"name": "one", "dtype": "FLOAT32", "shape": [262400], "init": {"fill": 1}},
      {"name": "big", "dtype": "FLOAT32", "shape": [262400]},
      {"name": "w", "dtype": "FLOAT32", "shape": [4]}
    ],
    "views": [{"name": "x_col", "buffer": "x", "shape": [4], "strides": [8], "start_offset": 1}],
    "tasks": [
      {"func": "add_scalar", "args": [{"tensor": "x", "role": "input"},
                                      {"tensor": "y", "role": "output", "dump": true},
                                      {"scalar": {"var": "k", "value": 3}, "dump": true},
                                      {"scalar": {"var": "k", "value": 9}}]},
      {"func": "accumulate", "args": [{"tensor": "acc", "role": "inout", "dump": true},
                                      {"tensor": "y", "role": "input"}]},
      {"func": "accumulate", "args": [{"tensor": "big", "role": "inout"},
                                      {"tensor": "one", "role": "input"}]},
      {"funcs": ["add", "mix_sum"], "dump": true,
       "args": [{"tensor": "x_col", "role": "input"}, {"tensor": "v", "role": "input"},
                {"tensor": "w", "role": "output"}]},
      {"func": "scale", "args": [{"tensor": "w", "role": "input"}, {"tensor": "v", "role": "output"},
                                 {"scalar": {"value": -3}, "dump": true},
                                 {"scalar": {"dtype": "INT32", "value": 7}}]}
    ]})";
  auto spec = ParseWorkloadJson(kJson, "test", "every_argument", BuiltinKernels());
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

class PreparedWorkloadTest : public testing::TestWithParam<bool> {};

// Steps of one prepared workload record what steps of new setups record,
// task for task and byte for byte, and leave the same buffers behind; a
// dump configuration that changes between steps changes both alike.
TEST_P(PreparedWorkloadTest, StepsRecordWhatNewSetupsRecord) {
  const bool shared_memory = GetParam();
  std::vector<v1::WorkloadSpec> specs = {*BuiltinWorkload("mixed_example"),
                                         *BuiltinWorkload("crash_example_none"),
                                         EveryArgumentWorkload()};
  for (const v1::WorkloadSpec& spec : specs) {
    SCOPED_TRACE(spec.name());
    const StepRun fresh = RunSteps(spec, Setup::kFresh, 6, shared_memory);
    const StepRun prepared = RunSteps(spec, Setup::kPrepared, 6, shared_memory);
    ASSERT_FALSE(fresh.records.empty());
    ASSERT_EQ(prepared.records.size(), fresh.records.size());
    for (size_t i = 0; i < fresh.records.size(); ++i) {
      ASSERT_TRUE(prepared.records[i] == fresh.records[i])
          << "record " << i << ": task " << fresh.records[i].task_id << " stage "
          << int{fresh.records[i].stage} << " arg " << fresh.records[i].arg_index;
    }
    EXPECT_EQ(prepared.last_step, fresh.last_step);
  }
}

// A step that runs another workload (a planted fault: an added buffer, a
// changed scalar) between steps of the prepared one: the steps after it
// record what new setups record.
TEST_P(PreparedWorkloadTest, AnotherWorkloadBetweenStepsChangesNothingAfter) {
  const bool shared_memory = GetParam();
  const v1::WorkloadSpec spec = EveryArgumentWorkload();
  v1::WorkloadSpec faulty = spec;
  v1::BufferSpec* nan = faulty.add_buffers();
  *nan = spec.buffers(0);
  nan->set_name("x_nan");
  nan->mutable_init()->clear_iota();
  nan->mutable_init()->set_fill(std::nan(""));
  faulty.mutable_tasks(0)->mutable_args(0)->set_tensor("x_nan");
  faulty.mutable_tasks(4)->mutable_args(2)->mutable_scalar()->set_value(5);
  ASSERT_TRUE(ValidateWorkload(faulty, BuiltinKernels()).ok());
  const StepRun fresh = RunSteps(spec, Setup::kFresh, 5, shared_memory, &faulty, 1);
  const StepRun prepared = RunSteps(spec, Setup::kPrepared, 5, shared_memory, &faulty, 1);
  ASSERT_EQ(prepared.records.size(), fresh.records.size());
  for (size_t i = 0; i < fresh.records.size(); ++i) {
    ASSERT_TRUE(prepared.records[i] == fresh.records[i]) << "record " << i;
  }
  EXPECT_EQ(prepared.last_step, fresh.last_step);
}

INSTANTIATE_TEST_SUITE_P(HeapAndDeviceMemory, PreparedWorkloadTest, testing::Bool());

// The buffers are reset for each submission, so a submission while the
// runtime still has tasks to run is refused, and submits nothing.
TEST(PreparedWorkloadRefusalTest, SubmittingAgainBeforeTheTasksRanIsRefused) {
  SimRuntime rt(Config(), BuiltinKernels(), nullptr);  // not started: nothing runs
  auto prepared = PreparedWorkload::Prepare(*BuiltinWorkload("mixed_example"), BuiltinKernels(), &rt);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  ASSERT_TRUE(prepared->Submit().ok());
  EXPECT_EQ(rt.tasks_submitted(), 7u);
  EXPECT_EQ(prepared->Submit().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rt.tasks_submitted(), 7u);
}

// Prepare fails as SubmitWorkload does, with the same message: an invalid
// workload, and one whose buffers cannot be allocated.
TEST(PreparedWorkloadRefusalTest, PrepareFailsAsSubmitWorkloadDoes) {
  v1::WorkloadSpec bad = *BuiltinWorkload("mixed_example");
  bad.mutable_tasks(2)->mutable_args(0)->set_tensor("nope");
  v1::WorkloadSpec huge = *BuiltinWorkload("vector_example");
  for (int i = 0; i < 2; ++i) {
    huge.mutable_buffers(i)->set_dtype("FLOAT64");
    huge.mutable_buffers(i)->clear_shape();
    for (uint32_t d : {65536u, 65536u}) huge.mutable_buffers(i)->add_shape(d);
  }
  auto memory = *DeviceMemory::Create(uint64_t{1} << 32);
  auto flight = *FlightTable::Create(2, 4, 2);
  SimConfig config = Config();
  config.memory = memory.get();
  config.flight = flight.get();
  for (const v1::WorkloadSpec* spec : {&bad, &huge}) {
    SimRuntime rt(config, BuiltinKernels(), nullptr);
    const absl::Status submitted = SubmitWorkload(*spec, BuiltinKernels(), &rt).status();
    const absl::Status prepared = PreparedWorkload::Prepare(*spec, BuiltinKernels(), &rt).status();
    EXPECT_FALSE(prepared.ok());
    EXPECT_EQ(prepared, submitted);
    EXPECT_EQ(rt.tasks_submitted(), 0u);
  }
}

}  // namespace
}  // namespace argsdump
