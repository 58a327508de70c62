// Scene test: 4 scheduler threads run 10,000 random tasks at level 2 while a
// host drains concurrently; every record must match what the kernels saw,
// computed independently here by replaying the tasks in submission order on
// a host-side copy of device memory (dependencies make the concurrent run
// equal to that sequential one).
#include <cstring>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "device/recorder.h"
#include "device/region.h"
#include "device/sim/kernels.h"
#include "device/sim/sim_runtime.h"
#include "device/testing/test_host.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

// A view over one of the test's buffers: every view has 64 elements.
struct ViewSpec {
  std::vector<uint32_t> shape;
  std::vector<uint32_t> strides;
  uint64_t start;
  uint32_t buffer_elements;
};

const ViewSpec kViews[] = {
    {{64}, {1}, 0, 64},                   // whole, contiguous
    {{8, 8}, {16, 1}, 20, 256},           // 2-D window with start_offset
    {{8, 8}, {1, 8}, 0, 64},              // transposed
    {{4, 4, 4}, {32, 8, 2}, 1, 128},      // 3-D, strided innermost
};

// Element index in the buffer of logical element i (row-major over shape).
uint64_t Locate(const ViewSpec& v, uint64_t i) {
  uint64_t index = v.start;
  for (size_t d = v.shape.size(); d-- > 0;) {
    index += (i % v.shape[d]) * v.strides[d];
    i /= v.shape[d];
  }
  return index;
}

struct Arg {
  uint32_t buffer;
  uint32_t view;
  abi::ArgRole role;
};

using Key = std::tuple<uint64_t, uint8_t, uint32_t>;  // task, stage, arg_index

TEST(SimCaptureTest, TenThousandTasksAtLevelTwoMatchTheKernels) {
  constexpr int kTasks = 10000;
  constexpr uint32_t kBuffersPerView = 4;
  DumpRegionConfig rc;
  rc.level = abi::DumpLevel::kFull;
  rc.num_threads = 4;
  rc.arena_bytes = 256 * 1024;  // small enough that every thread wraps often
  RecordingHarness harness(rc);
  const DumpRegion* region = harness.region.get();
  DumpRecorder& recorder = *harness.recorder;
  TestHost& host = *harness.host;

  SimConfig sc;
  sc.scheduler_threads = 4;
  sc.worker_threads = 2;
  sc.timeouts = SimTimeouts();
  SimRuntime rt(sc, BuiltinKernels(), &recorder);

  // Buffers: kBuffersPerView per view kind; the reference keeps a copy.
  std::vector<Tensor> whole;
  std::vector<uint32_t> kind_of;
  std::vector<std::vector<float>> ref;
  for (uint32_t k = 0; k < std::size(kViews); ++k) {
    for (uint32_t j = 0; j < kBuffersPerView; ++j) {
      Tensor t = *rt.Alloc(DataType::kFloat32, {kViews[k].buffer_elements});
      std::vector<float> init(kViews[k].buffer_elements);
      for (uint32_t i = 0; i < init.size(); ++i) {
        init[i] = static_cast<float>((i * 7 + whole.size() * 3) % 11) - 5.0f;
        t.Set<float>(i, init[i]);
      }
      whole.push_back(t);
      kind_of.push_back(k);
      ref.push_back(init);
    }
  }
  auto view_of = [&](uint32_t b) {
    const ViewSpec& v = kViews[kind_of[b]];
    return *whole[b].View(v.shape, v.strides, v.start);
  };
  auto gather = [&](uint32_t b) {
    const ViewSpec& v = kViews[kind_of[b]];
    std::vector<float> out(64);
    for (uint64_t i = 0; i < 64; ++i) out[i] = ref[b][Locate(v, i)];
    return out;
  };
  auto scatter = [&](uint32_t b, const std::vector<float>& values) {
    const ViewSpec& v = kViews[kind_of[b]];
    for (uint64_t i = 0; i < 64; ++i) ref[b][Locate(v, i)] = values[i];
  };

  std::map<Key, std::vector<float>> expected;
  std::map<Key, uint64_t> expected_scalars;
  ASSERT_TRUE(rt.Start().ok());
  std::mt19937 rng(20261129);
  const char* kinds[] = {"add", "mul", "scale", "relu", "accumulate", "copy"};
  for (int n = 0; n < kTasks; ++n) {
    const std::string kernel = kinds[rng() % std::size(kinds)];
    // Distinct buffers for the args of one task.
    std::vector<uint32_t> pick;
    while (pick.size() < 3) {
      uint32_t b = rng() % whole.size();
      if (std::find(pick.begin(), pick.end(), b) == pick.end()) pick.push_back(b);
    }
    std::vector<Arg> args;
    float scale = 0.5f + static_cast<float>(rng() % 4);
    if (kernel == "add" || kernel == "mul") {
      args = {{pick[0], 0, abi::ArgRole::kInput}, {pick[1], 0, abi::ArgRole::kInput},
              {pick[2], 0, abi::ArgRole::kOutput}};
    } else if (kernel == "accumulate") {
      args = {{pick[0], 0, abi::ArgRole::kInOut}, {pick[1], 0, abi::ArgRole::kInput}};
    } else {
      args = {{pick[0], 0, abi::ArgRole::kInput}, {pick[1], 0, abi::ArgRole::kOutput}};
    }
    CoreTaskArgs task_args;
    for (const Arg& a : args) {
      Tensor t = view_of(a.buffer);
      absl::Status s = a.role == abi::ArgRole::kInput    ? task_args.add_input(t)
                       : a.role == abi::ArgRole::kOutput ? task_args.add_output(t)
                                                         : task_args.add_inout(t);
      ASSERT_TRUE(s.ok());
    }
    if (kernel == "scale") {
      ASSERT_TRUE(task_args.add_scalar(scale).ok());
    }
    auto id = rt.Submit({*BuiltinKernels().IdOf(kernel)}, std::move(task_args));
    ASSERT_TRUE(id.ok()) << id.status();

    // Reference: inputs before, the operation, outputs after.
    for (uint32_t i = 0; i < args.size(); ++i) {
      if (args[i].role != abi::ArgRole::kOutput) {
        expected[{*id, 0, i}] = gather(args[i].buffer);
      }
    }
    if (kernel == "scale") {
      uint64_t bits = 0;
      std::memcpy(&bits, &scale, 4);
      expected_scalars[{*id, 0, static_cast<uint32_t>(args.size())}] = bits;
    }
    std::vector<float> x = gather(args[0].buffer), y = gather(args[1].buffer), out(64);
    for (int i = 0; i < 64; ++i) {
      if (kernel == "add") out[i] = x[i] + y[i];
      if (kernel == "mul") out[i] = x[i] * y[i];
      if (kernel == "scale") out[i] = x[i] * scale;
      if (kernel == "relu") out[i] = x[i] > 0.0f ? x[i] : 0.0f;
      if (kernel == "accumulate") out[i] = x[i] + y[i];
      if (kernel == "copy") out[i] = x[i];
    }
    const uint32_t written = kernel == "accumulate" ? 0 : static_cast<uint32_t>(args.size()) - 1;
    scatter(args[written].buffer, out);
    expected[{*id, 1, written}] = out;
  }
  ASSERT_TRUE(rt.Synchronize().ok());
  ASSERT_TRUE(host.Stop().ok()) << host.status();

  std::vector<CapturedArg> got = host.TakeRecords();
  EXPECT_EQ(got.size(), expected.size() + expected_scalars.size());
  uint64_t matched = 0;
  for (const CapturedArg& c : got) {
    const Key key{c.record.task_id, c.record.stage, c.record.arg_index};
    if (c.record.kind == uint8_t(abi::ArgKind::kScalar)) {
      auto it = expected_scalars.find(key);
      ASSERT_NE(it, expected_scalars.end());
      EXPECT_EQ(c.record.scalar_value, it->second);
      EXPECT_EQ(c.record.dtype, uint8_t(DataType::kFloat32));
      expected_scalars.erase(it);
      ++matched;
      continue;
    }
    auto it = expected.find(key);
    ASSERT_NE(it, expected.end()) << "unexpected record for task " << c.record.task_id;
    ASSERT_EQ(c.payload.size(), 256u);
    ASSERT_EQ(0, std::memcmp(c.payload.data(), it->second.data(), 256))
        << "task " << c.record.task_id << " stage " << int(c.record.stage) << " arg "
        << c.record.arg_index;
    expected.erase(it);
    ++matched;
  }
  EXPECT_TRUE(expected.empty());
  EXPECT_TRUE(expected_scalars.empty());
  EXPECT_GE(matched, 2u * kTasks);
  // Device memory ends where the reference does.
  for (uint32_t b = 0; b < whole.size(); ++b) {
    for (uint32_t i = 0; i < ref[b].size(); ++i) ASSERT_EQ(whole[b].Get<float>(i), ref[b][i]);
  }
  uint64_t dropped = 0, wrapped = 0;
  for (uint32_t t = 0; t < 4; ++t) {
    dropped += region->thread_state(t).dropped_records.load();
    wrapped += region->thread_state(t).arena_write_offset.load() > region->arena_bytes();
  }
  EXPECT_EQ(dropped, 0u);
  EXPECT_GT(wrapped, 0u);  // the arenas wrapped (a ring reused under load)
}

}  // namespace
}  // namespace argsdump
