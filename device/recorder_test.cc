#include "device/recorder.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <map>
#include <vector>

#include "device/region.h"
#include "device/testing/test_host.h"
#include "device/testing/views.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

using abi::ArgRole;
using abi::DropCause;
using abi::DumpLevel;
using abi::Stage;
using std::chrono::milliseconds;

constexpr milliseconds kEventTimeout(20000);

DumpRegionConfig SmallConfig(DumpLevel level, uint32_t threads = 1) {
  DumpRegionConfig c;
  c.level = level;
  c.num_threads = threads;
  c.records_per_buffer = 8;
  c.buffers_per_thread = 4;
  c.ready_queue_depth = 4;
  c.arena_bytes = 64 * 1024;
  c.wait_bound_ms = 20000;
  return c;
}

std::unique_ptr<DumpRegion> MakeRegion(const DumpRegionConfig& c) {
  auto region = DumpRegion::Create(c);
  EXPECT_TRUE(region.ok()) << region.status();
  return std::move(region).value();
}


TensorView Flat(const std::vector<float>& data) {
  return MakeView(DataType::kFloat32, {static_cast<uint32_t>(data.size())}, {1}, 0,
              data.data());
}

DumpTensorArg Arg(TensorView view, ArgRole role, uint32_t index, bool marked = false) {
  DumpTensorArg a;
  a.view = view;
  a.role = role;
  a.arg_index = index;
  a.marked = marked;
  return a;
}

DumpTask Task(uint64_t id, const std::vector<DumpTensorArg>& tensors,
              const std::vector<DumpScalarArg>& scalars = {}, bool marker = false) {
  DumpTask t;
  t.task_id = id;
  t.func_ids[0] = 7;
  t.func_count = 1;
  t.has_marker = marker;
  t.tensors = tensors.data();
  t.tensor_count = static_cast<uint32_t>(tensors.size());
  t.scalars = scalars.data();
  t.scalar_count = static_cast<uint32_t>(scalars.size());
  return t;
}

template <typename T>
std::vector<T> As(const std::vector<uint8_t>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// Drains everything once the device flushed (single-threaded tests).
std::vector<CapturedArg> DrainAll(TestHost& host) {
  EXPECT_TRUE(host.Stop().ok());
  return host.TakeRecords();
}

TEST(RecorderTest, FullLevelCapturesStagesInoutAndScalars) {
  auto region = MakeRegion(SmallConfig(DumpLevel::kFull));
  DumpRecorder recorder(*region);
  ASSERT_EQ(recorder.level(), DumpLevel::kFull);
  ThreadRecorder& rec = recorder.thread(0);
  TestHost host(*region);

  std::vector<float> a(16, 2.0f), b(16, 3.0f), acc(16, 1.0f);
  std::vector<DumpTensorArg> tensors = {Arg(Flat(a), ArgRole::kInput, 0),
                                        Arg(Flat(b), ArgRole::kOutput, 1),
                                        Arg(Flat(acc), ArgRole::kInOut, 2)};
  DumpScalarArg scale;
  scale.dtype = DataType::kFloat64;
  double value = 0.1;
  std::memcpy(&scale.bits, &value, 8);
  scale.arg_index = 3;
  std::vector<DumpScalarArg> scalars = {scale};
  DumpTask task = Task(0x0000000200000a00, tensors, scalars);

  rec.RecordTask(task, Stage::kBeforeDispatch);
  for (float& x : acc) x += 5.0f;  // the "kernel"
  b.assign(16, 9.0f);
  rec.RecordTask(task, Stage::kAfterCompletion);
  rec.Flush();

  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 5u);  // a, acc(before), scale, b, acc(after)
  EXPECT_EQ(got[0].record.arg_index, 0u);
  EXPECT_EQ(got[0].record.stage, uint8_t(Stage::kBeforeDispatch));
  EXPECT_EQ(As<float>(got[0].payload), a);
  EXPECT_EQ(got[1].record.arg_index, 2u);
  EXPECT_EQ(got[1].record.role, uint8_t(ArgRole::kInOut));
  EXPECT_EQ(As<float>(got[1].payload), std::vector<float>(16, 1.0f));
  EXPECT_EQ(got[2].record.kind, uint8_t(abi::ArgKind::kScalar));
  EXPECT_EQ(got[2].record.dtype, uint8_t(DataType::kFloat64));
  EXPECT_EQ(got[2].record.payload_size, 0u);
  double back = 0;
  std::memcpy(&back, &got[2].record.scalar_value, 8);
  EXPECT_EQ(back, 0.1);
  EXPECT_EQ(got[3].record.stage, uint8_t(Stage::kAfterCompletion));
  EXPECT_EQ(As<float>(got[3].payload), std::vector<float>(16, 9.0f));
  EXPECT_EQ(As<float>(got[4].payload), std::vector<float>(16, 6.0f));
  for (const CapturedArg& c : got) {
    EXPECT_EQ(c.record.task_id, 0x0000000200000a00u);
    EXPECT_EQ(c.record.func_count, 1);
    EXPECT_EQ(c.record.func_ids[0], 7);
    EXPECT_EQ(c.record.func_ids[1], abi::kUnknownFuncId);
  }
  EXPECT_EQ(got[0].record.shapes[0], 16u);
  EXPECT_EQ(got[0].record.logical_bytes, 64u);
  const abi::ThreadState& st = region->thread_state(0);
  EXPECT_EQ(st.records_written.load(), 5u);
  EXPECT_EQ(st.payload_bytes.load(), 4u * 64);
  EXPECT_EQ(st.dropped_records.load(), 0u);
  EXPECT_EQ(st.flushed.load(), 1u);
}

// The host's doorbell: a host thread asleep on it (with a bound of an hour:
// a wake that never comes fails the test by its timeout) wakes when the
// device publishes a buffer, and does not sleep at all when its work is
// already there.
TEST(RecorderTest, ThePublishOfABufferRingsTheHostsDoorbell) {
  auto region = MakeRegion(SmallConfig(DumpLevel::kFull));
  DumpRecorder recorder(*region);
  ThreadRecorder& rec = recorder.thread(0);
  const std::chrono::hours bound(1);
  auto published = [&] { return region->ready_queue(0).HasItem(); };
  std::atomic<bool> asleep_once{false};
  std::thread host([&] {
    while (!published()) {
      region->WaitHostDoorbell([&] {
        asleep_once = true;
        return published();
      }, bound);
    }
  });
  // The device publishes once the host counted itself a sleeper (or was
  // about to): either order must end the wait.
  while (!asleep_once.load()) std::this_thread::yield();
  std::vector<float> a(16, 2.0f);
  std::vector<DumpTensorArg> tensors = {Arg(Flat(a), ArgRole::kInput, 0)};
  rec.RecordTask(Task(1, tensors, {}), Stage::kBeforeDispatch);
  rec.Flush();
  host.join();
  EXPECT_TRUE(published());
  // Work already there: no sleep.
  region->WaitHostDoorbell(published, bound);
  // No sleeper left counted: a ring is a fence and a load.
  EXPECT_EQ(region->header().host_sleepers.load(), 0u);
}

// A task's times go into its records after the region's time base: the
// dispatch time on every record, the completion (as a duration) only on
// after_completion ones; too large a value saturates instead of wrapping.
TEST(RecorderTest, RecordsCarryTheTaskTimesAfterTheRegionsBase) {
  auto region = MakeRegion(SmallConfig(DumpLevel::kFull));
  DumpRecorder recorder(*region);
  ThreadRecorder& rec = recorder.thread(0);
  TestHost host(*region);
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  std::vector<DumpTensorArg> tensors = {Arg(Flat(a), ArgRole::kInput, 0),
                                        Arg(Flat(b), ArgRole::kOutput, 1)};
  DumpScalarArg scale;
  scale.arg_index = 2;
  std::vector<DumpScalarArg> scalars = {scale};
  const uint64_t base = region->time_base_ns();
  ASSERT_GT(base, 0u);
  DumpTask task = Task(1, tensors, scalars);
  task.dispatch_mono_ns = base + 1000;
  rec.RecordTask(task, Stage::kBeforeDispatch);
  task.complete_mono_ns = base + 1500;
  rec.RecordTask(task, Stage::kAfterCompletion);
  // Still running (an in-flight snapshot): the dispatch time only.
  DumpTask running = Task(2, tensors);
  running.dispatch_mono_ns = base + 2000;
  rec.RecordTask(running, Stage::kAfterCompletion, abi::kFlagInFlightSnapshot);
  // Times past what the bytes hold saturate.
  DumpTask far = Task(3, tensors);
  far.dispatch_mono_ns = base + abi::kMaxDispatchNs + 5;
  far.complete_mono_ns = far.dispatch_mono_ns + abi::kMaxDurationNs + 5;
  rec.RecordTask(far, Stage::kAfterCompletion);
  // A task without times (a runtime that keeps none).
  rec.RecordTask(Task(4, tensors), Stage::kBeforeDispatch);
  rec.Flush();

  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 6u);  // a, scale, b; b; b; a
  for (int i : {0, 1}) {
    EXPECT_EQ(got[i].record.time_flags, abi::kTimeDispatch) << i;
    EXPECT_EQ(abi::DispatchNs(got[i].record), 1000u) << i;
    EXPECT_EQ(abi::DurationNs(got[i].record), 0u) << i;
  }
  EXPECT_EQ(got[2].record.time_flags, abi::kTimeDispatch | abi::kTimeComplete);
  EXPECT_EQ(abi::DispatchNs(got[2].record), 1000u);
  EXPECT_EQ(abi::DurationNs(got[2].record), 500u);
  EXPECT_EQ(got[3].record.time_flags, abi::kTimeDispatch);
  EXPECT_EQ(abi::DispatchNs(got[3].record), 2000u);
  EXPECT_EQ(got[4].record.time_flags, abi::kTimeDispatch | abi::kTimeComplete);
  EXPECT_EQ(abi::DispatchNs(got[4].record), abi::kMaxDispatchNs);
  EXPECT_EQ(abi::DurationNs(got[4].record), abi::kMaxDurationNs);
  EXPECT_EQ(got[5].record.time_flags, 0);
  EXPECT_EQ(abi::DispatchNs(got[5].record), 0u);
}

// Seed 003: optional outputs with an empty shape (no element) skip the
// dump, at every level and in the overflow dump; an empty input or inout
// is still recorded (it says what the kernel was given).
TEST(RecorderTest, OutputsWithAnEmptyShapeAreSkipped) {
  for (DumpLevel level : {DumpLevel::kPartial, DumpLevel::kFull, DumpLevel::kHybrid}) {
    SCOPED_TRACE(static_cast<int>(level));
    auto region = MakeRegion(SmallConfig(level));
    DumpRecorder recorder(*region);
    ThreadRecorder& rec = recorder.thread(0);
    TestHost host(*region);
    std::vector<float> x(4, 1.0f), y(4, 2.0f);
    const TensorView empty = MakeView(DataType::kFloat32, {0}, {1}, 0, y.data());
    const TensorView empty2d = MakeView(DataType::kFloat32, {3, 0}, {1, 1}, 0, y.data());
    std::vector<DumpTensorArg> tensors = {
        Arg(Flat(x), ArgRole::kInput, 0, true), Arg(empty, ArgRole::kInput, 1, true),
        Arg(Flat(y), ArgRole::kOutput, 2, true), Arg(empty, ArgRole::kOutput, 3, true),
        Arg(empty2d, ArgRole::kOutput, 4, true), Arg(empty, ArgRole::kInOut, 5, true)};
    DumpTask task = Task(0x100000001, tensors, {}, /*marker=*/true);
    rec.RecordTask(task, Stage::kBeforeDispatch);
    rec.RecordTask(task, Stage::kAfterCompletion);
    rec.RecordOverflow(task, /*recorded_before=*/true);
    rec.Flush();
    std::vector<uint32_t> before, after, overflow;
    for (const CapturedArg& c : DrainAll(host)) {
      std::vector<uint32_t>& into = (c.record.flags & abi::kFlagOverflow) ? overflow
                                    : c.record.stage == uint8_t(Stage::kBeforeDispatch)
                                        ? before
                                        : after;
      into.push_back(c.record.arg_index);
    }
    EXPECT_EQ(before, (std::vector<uint32_t>{0, 1, 5}));
    EXPECT_EQ(after, (std::vector<uint32_t>{2, 5}));
    EXPECT_EQ(overflow, (std::vector<uint32_t>{0, 1, 2, 5}));
  }
}

TEST(RecorderTest, NonContiguousViewsAreGatheredRowMajor) {
  auto region = MakeRegion(SmallConfig(DumpLevel::kFull));
  DumpRecorder recorder(*region);
  TestHost host(*region);
  std::vector<float> m(6 * 8);
  std::iota(m.begin(), m.end(), 0.0f);
  std::vector<int16_t> cube(3 * 4 * 5);
  std::iota(cube.begin(), cube.end(), int16_t{0});
  // 2-D: rows 1..3, cols 2..5 of a 6 x 8 matrix.  3-D: [2][3][2] window of a
  // [3][4][5] cube starting at (1,1,1) with every other element of the last dim.
  std::vector<DumpTensorArg> tensors = {
      Arg(MakeView(DataType::kFloat32, {3, 4}, {8, 1}, 10, m.data()), ArgRole::kInput, 0),
      Arg(MakeView(DataType::kInt16, {2, 3, 2}, {20, 5, 2}, 26, cube.data()), ArgRole::kInput, 1)};
  recorder.thread(0).RecordTask(Task(1, tensors), Stage::kBeforeDispatch);
  recorder.thread(0).Flush();
  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].record.is_contiguous, 0);
  EXPECT_EQ(got[0].record.start_offset, 10u);
  EXPECT_EQ(got[0].record.strides[0], 8u);
  EXPECT_EQ(As<float>(got[0].payload),
            (std::vector<float>{10, 11, 12, 13, 18, 19, 20, 21, 26, 27, 28, 29}));
  std::vector<int16_t> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) expected.push_back(cube[26 + i * 20 + j * 5 + k * 2]);
  EXPECT_EQ(As<int16_t>(got[1].payload), expected);
  EXPECT_EQ(got[1].record.ndims, 3);
  EXPECT_EQ(got[1].record.payload_size, 24u);
}

TEST(RecorderTest, EveryDtypeRecordsItsElementSize) {
  auto region = MakeRegion(SmallConfig(DumpLevel::kFull));
  DumpRecorder recorder(*region);
  TestHost host(*region);
  std::vector<uint8_t> bytes(64 * 8);
  std::iota(bytes.begin(), bytes.end(), uint8_t{0});
  std::vector<DumpTensorArg> tensors;
  for (int d = 0; d < kDataTypeCount; ++d) {
    tensors.push_back(Arg(MakeView(static_cast<DataType>(d), {10}, {1}, 0, bytes.data()),
                          ArgRole::kInput, d));
  }
  recorder.thread(0).RecordTask(Task(2, tensors), Stage::kBeforeDispatch);
  recorder.thread(0).Flush();
  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), size_t(kDataTypeCount));
  for (const CapturedArg& c : got) {
    const auto dtype = static_cast<DataType>(c.record.dtype);
    const uint64_t size = (10 * ElementBits(dtype) + 7) / 8;
    EXPECT_EQ(c.record.payload_size, size) << DataTypeName(dtype);
    EXPECT_EQ(c.record.logical_bytes, size);
    EXPECT_EQ(0, std::memcmp(c.payload.data(), bytes.data(), size));
  }
}

TEST(RecorderTest, TensorLargerThanArenaIsTruncatedToHalf) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.arena_bytes = 4096;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  TestHost host(*region);
  std::vector<float> big(2000);  // 8000 bytes > 4096
  std::iota(big.begin(), big.end(), 0.0f);
  std::vector<float> exact(1024, 1.5f);  // exactly one arena: kept whole
  std::vector<DumpTensorArg> tensors = {Arg(Flat(big), ArgRole::kInput, 0),
                                        Arg(Flat(exact), ArgRole::kInput, 1)};
  host.Start();
  recorder.thread(0).RecordTask(Task(3, tensors), Stage::kBeforeDispatch);
  recorder.thread(0).Flush();
  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].record.truncated, 1);
  EXPECT_EQ(got[0].record.payload_size, 2048u);
  EXPECT_EQ(got[0].record.logical_bytes, 8000u);
  EXPECT_EQ(As<float>(got[0].payload), std::vector<float>(big.begin(), big.begin() + 512));
  EXPECT_EQ(got[1].record.truncated, 0);
  EXPECT_EQ(As<float>(got[1].payload), exact);
  // The second payload did not fit the rest of the cycle: it starts a new one.
  EXPECT_EQ(got[1].record.payload_offset, 4096u);
  EXPECT_EQ(region->thread_state(0).truncated_records.load(), 1u);
  EXPECT_EQ(region->thread_state(0).arena_waits.load(), 1u);
}

// Thread 0 fills its arena; the host drains both threads but acknowledges
// only thread 1. Thread 0 must neither overwrite nor proceed; with the drop
// policy its next payload record is dropped for the missing ack.
TEST(RecorderTest, ArenaWrapNeedsThisThreadsOwnAck) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull, 2);
  c.arena_bytes = 4096;
  c.full_policy = abi::FullPolicy::kDrop;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  TestHost host(*region);
  host.SetAck(0, false);
  std::vector<float> block(256, 1.0f);  // 1 KiB
  std::vector<DumpTensorArg> t = {Arg(Flat(block), ArgRole::kInput, 0)};
  for (int i = 0; i < 4; ++i) {
    recorder.thread(0).RecordTask(Task(10 + i, t), Stage::kBeforeDispatch);
    recorder.thread(1).RecordTask(Task(20 + i, t), Stage::kBeforeDispatch);
  }
  recorder.thread(1).Flush();
  host.DrainOnce(1);
  EXPECT_EQ(host.acked(1), 4u);
  recorder.thread(1).RecordTask(Task(24, t), Stage::kBeforeDispatch);  // wraps
  recorder.thread(1).Flush();
  host.DrainOnce(1);
  EXPECT_EQ(host.acked(1), 5u);
  // Thread 0's arena is full; its buffer is published by the wrap attempt.
  recorder.thread(0).RecordTask(Task(14, t), Stage::kBeforeDispatch);
  host.DrainOnce(0);
  EXPECT_EQ(host.acked(0), 0u);
  EXPECT_EQ(region->thread_state(0).dropped_by_cause[uint32_t(DropCause::kArenaAckTimeout)].load(), 1u);
  EXPECT_EQ(region->thread_state(1).dropped_records.load(), 0u);
  // Acknowledge thread 0: the next payload goes to the start of a new cycle.
  host.SetAck(0, true);
  std::vector<float> marker(256, 42.0f);
  std::vector<DumpTensorArg> m = {Arg(Flat(marker), ArgRole::kInput, 0)};
  recorder.thread(0).RecordTask(Task(15, m), Stage::kBeforeDispatch);
  recorder.thread(0).Flush();
  std::vector<CapturedArg> got = DrainAll(host);
  std::vector<uint64_t> t0;
  for (const CapturedArg& a : got) {
    if (a.thread != 0) continue;
    t0.push_back(a.record.task_id);
    if (a.record.task_id == 15) {
      EXPECT_EQ(a.record.payload_offset, 4096u);
      EXPECT_EQ(As<float>(a.payload), marker);
    } else {
      EXPECT_EQ(As<float>(a.payload), block);  // never overwritten
    }
  }
  EXPECT_EQ(t0, (std::vector<uint64_t>{10, 11, 12, 13, 15}));
}

// The arena is a ring: a payload that wraps waits only for the payloads
// that lay where it goes (acknowledged ones are overwritten at once, under
// the drop policy too), never for the rest of the cycle; and it never goes
// over a payload the host has not acknowledged.
TEST(RecorderTest, ArenaRingReusesWhatTheHostAcknowledged) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull, 1);
  c.arena_bytes = 4096;  // four 1 KiB payloads; each fills a quarter, so each is a buffer
  c.full_policy = abi::FullPolicy::kDrop;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  TestHost host(*region);
  ThreadRecorder& rec = recorder.thread(0);
  std::vector<std::vector<float>> blocks;
  for (int i = 0; i < 8; ++i) blocks.emplace_back(256, float(i));
  auto record = [&](int i) {
    std::vector<DumpTensorArg> t = {Arg(Flat(blocks[i]), ArgRole::kInput, 0)};
    rec.RecordTask(Task(10 + i, t), Stage::kBeforeDispatch);
  };
  auto dropped = [&] {
    return region->thread_state(0).dropped_by_cause[uint32_t(DropCause::kArenaAckTimeout)].load();
  };
  record(0);  // [0, 1K)
  host.DrainOnce(0);
  EXPECT_EQ(host.acked(0), 1u);
  host.SetAck(0, false);
  record(1);  // [1K, 2K)
  record(2);  // [2K, 3K)
  record(3);  // [3K, 4K)
  host.DrainOnce(0);
  EXPECT_EQ(host.acked(0), 1u);
  record(4);  // wraps onto task 10's acknowledged space: no wait
  EXPECT_EQ(dropped(), 0u);
  EXPECT_EQ(region->thread_state(0).arena_waits.load(), 0u);
  record(5);  // would go over task 11's unacknowledged payload: dropped
  EXPECT_EQ(dropped(), 1u);
  EXPECT_EQ(region->thread_state(0).arena_waits.load(), 1u);
  host.SetAck(0, true);  // tasks 11-13 (drained) and 14 (published) acknowledged
  host.DrainOnce(0);
  record(6);  // now goes where task 11 was
  EXPECT_EQ(dropped(), 1u);
  rec.Flush();
  std::vector<CapturedArg> got = DrainAll(host);
  std::map<uint64_t, uint64_t> offset;
  for (const CapturedArg& a : got) {
    offset[a.record.task_id] = a.record.payload_offset;
    EXPECT_EQ(As<float>(a.payload), blocks[a.record.task_id - 10]) << a.record.task_id;
  }
  EXPECT_EQ(offset, (std::map<uint64_t, uint64_t>{
                        {10, 0}, {11, 1024}, {12, 2048}, {13, 3072}, {14, 4096}, {16, 5120}}));
}

// With the stall policy the device waits for the ack, and resumes as soon as
// the host gives it; acks of the other thread come first and do not release it.
TEST(RecorderTest, ArenaWrapStallsUntilAcked) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull, 2);
  c.arena_bytes = 4096;
  c.full_policy = abi::FullPolicy::kStall;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  TestHost host(*region);
  host.SetAck(0, false);
  host.Start();
  std::vector<float> block(256, 1.0f);
  std::vector<DumpTensorArg> t = {Arg(Flat(block), ArgRole::kInput, 0)};
  std::atomic<bool> device_done{false};
  std::thread device([&] {
    for (int i = 0; i < 6; ++i) {
      recorder.thread(0).RecordTask(Task(10 + i, t), Stage::kBeforeDispatch);
    }
    recorder.thread(0).Flush();
    device_done.store(true);
  });
  // The device published its first cycle and is waiting at the wrap.
  ASSERT_TRUE(host.WaitForRecords(4, kEventTimeout));
  ASSERT_TRUE(host.WaitForPublished(0, 1, kEventTimeout));
  // Thread 1 records and gets acked while thread 0 waits.
  for (int i = 0; i < 6; ++i) {
    recorder.thread(1).RecordTask(Task(20 + i, t), Stage::kBeforeDispatch);
  }
  recorder.thread(1).Flush();
  ASSERT_TRUE(host.WaitForRecords(10, kEventTimeout));
  EXPECT_EQ(host.acked(1), 6u);
  EXPECT_FALSE(device_done.load());
  EXPECT_EQ(region->thread_state(0).completed_payload_count.load(), 0u);
  host.SetAck(0, true);
  device.join();
  std::vector<CapturedArg> got = DrainAll(host);
  EXPECT_EQ(got.size(), 12u);
  EXPECT_EQ(region->thread_state(0).dropped_records.load(), 0u);
  EXPECT_EQ(region->thread_state(0).arena_waits.load(), 1u);
}

TEST(RecorderTest, ReadyQueueFullDropsAfterTheBoundWithCount) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.records_per_buffer = 4;
  c.buffers_per_thread = 2;
  c.ready_queue_depth = 1;
  c.wait_bound_ms = 20;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  DumpScalarArg s;
  s.dtype = DataType::kInt32;
  std::vector<DumpScalarArg> scalars = {s};
  for (uint64_t i = 0; i < 16; ++i) {
    recorder.thread(0).RecordTask(Task(i, {}, scalars), Stage::kBeforeDispatch);
  }
  const abi::ThreadState& st = region->thread_state(0);
  // Buffer 1 went to the ready queue; buffer 2 waited the bound, then its 4
  // records were dropped, and so were the next two fills (no more waiting).
  EXPECT_EQ(st.dropped_by_cause[uint32_t(DropCause::kReadyQueueFull)].load(), 12u);
  EXPECT_EQ(st.dropped_records.load(), 12u);
  EXPECT_EQ(st.records_written.load(), 4u);
  TestHost host(*region);
  EXPECT_EQ(host.DrainOnce(0), 4u);
  // The host is back: recording works again and nothing more is lost.
  for (uint64_t i = 16; i < 20; ++i) {
    recorder.thread(0).RecordTask(Task(i, {}, scalars), Stage::kBeforeDispatch);
  }
  recorder.thread(0).Flush();
  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[4].record.task_id, 16u);
  EXPECT_EQ(st.dropped_records.load(), 12u);
}

TEST(RecorderTest, FreeQueueEmptyDropsRecordsWithCause) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.records_per_buffer = 4;
  c.buffers_per_thread = 1;
  c.ready_queue_depth = 1;
  c.wait_bound_ms = 20;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  DumpScalarArg s;
  std::vector<DumpScalarArg> scalars = {s};
  for (uint64_t i = 0; i < 7; ++i) {
    recorder.thread(0).RecordTask(Task(i, {}, scalars), Stage::kBeforeDispatch);
  }
  const abi::ThreadState& st = region->thread_state(0);
  EXPECT_EQ(st.dropped_by_cause[uint32_t(DropCause::kFreeQueueEmpty)].load(), 3u);
  EXPECT_EQ(st.records_written.load() + st.dropped_records.load(), 7u);
}

uint64_t DroppedBy(const abi::ThreadState& st, DropCause cause) {
  return st.dropped_by_cause[static_cast<uint32_t>(cause)].load();
}

// Yields until `done()` (another thread's progress), or fails after
// kEventTimeout so that a broken build ends instead of hanging.
template <typename Done>
bool WaitUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kEventTimeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// No host ever drains and the host is gone from the start: no buffer is
// handed over (nobody would drain it), and every record that would have to
// wait (ready queue full, free queue empty, arena never acked, the final
// flush) is dropped at once and counted as host gone. The
// bound is an hour (and infinite under kStall): the test ends only because
// no wait happens.
class HostGoneTest : public ::testing::TestWithParam<abi::FullPolicy> {};

TEST_P(HostGoneTest, EveryWaitingRecordDropsAtOnceAsHostGone) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.records_per_buffer = 4;
  c.buffers_per_thread = 2;
  c.ready_queue_depth = 1;
  c.full_policy = GetParam();
  c.wait_bound_ms = 3600 * 1000;
  auto region = MakeRegion(c);
  EXPECT_FALSE(region->host_gone());
  region->MarkHostGone();
  EXPECT_TRUE(region->host_gone());
  DumpRecorder recorder(*region);
  ThreadRecorder& rec = recorder.thread(0);
  const abi::ThreadState& st = region->thread_state(0);

  // Every full buffer (4 scalars) is dropped instead of handed over, though
  // the ready queue has room for the first.
  DumpScalarArg s;
  s.dtype = DataType::kInt32;
  std::vector<DumpScalarArg> scalars = {s};
  for (uint64_t i = 0; i < 16; ++i) rec.RecordTask(Task(i, {}, scalars), Stage::kBeforeDispatch);
  EXPECT_EQ(st.records_written.load(), 0u);
  EXPECT_EQ(DroppedBy(st, DropCause::kHostGone), 16u);

  // The final flush does not hand over either.
  rec.RecordTask(Task(200, {}, scalars), Stage::kBeforeDispatch);
  rec.Flush();
  EXPECT_EQ(st.flushed.load(), 1u);
  EXPECT_EQ(DroppedBy(st, DropCause::kHostGone), 17u);
  EXPECT_EQ(st.dropped_records.load(), 17u);
  for (DropCause other : {DropCause::kReadyQueueFull, DropCause::kFreeQueueEmpty,
                          DropCause::kArenaAckTimeout, DropCause::kFlushTimeout}) {
    EXPECT_EQ(DroppedBy(st, other), 0u) << static_cast<uint32_t>(other);
  }
  // Nothing was handed over.
  TestHost host(*region);
  EXPECT_TRUE(DrainAll(host).empty());
}

TEST_P(HostGoneTest, AnEmptyFreeQueueDropsAtOnceAsHostGone) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.records_per_buffer = 4;
  c.buffers_per_thread = 1;
  c.ready_queue_depth = 1;
  c.full_policy = GetParam();
  c.wait_bound_ms = 3600 * 1000;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  DumpScalarArg s;
  std::vector<DumpScalarArg> scalars = {s};
  // The one buffer goes out while the host is there; it never comes back.
  for (uint64_t i = 0; i < 4; ++i) {
    recorder.thread(0).RecordTask(Task(i, {}, scalars), Stage::kBeforeDispatch);
  }
  region->MarkHostGone();
  for (uint64_t i = 4; i < 7; ++i) {
    recorder.thread(0).RecordTask(Task(i, {}, scalars), Stage::kBeforeDispatch);
  }
  const abi::ThreadState& st = region->thread_state(0);
  EXPECT_EQ(st.records_written.load(), 4u);
  EXPECT_EQ(DroppedBy(st, DropCause::kHostGone), 3u);
  EXPECT_EQ(DroppedBy(st, DropCause::kFreeQueueEmpty), 0u);
}

TEST_P(HostGoneTest, AnUnackedArenaDropsAtOnceAsHostGone) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.arena_bytes = 4096;
  c.full_policy = GetParam();
  c.wait_bound_ms = 3600 * 1000;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  // 1 KiB each: four fill the arena (each published in its own buffer, a
  // quarter of the arena) while the host is there; then it goes, and the
  // next ones need an ack that never comes.
  std::vector<float> block(256, 1.0f);
  std::vector<DumpTensorArg> t = {Arg(Flat(block), ArgRole::kInput, 0)};
  for (uint64_t i = 0; i < 6; ++i) {
    if (i == 4) region->MarkHostGone();
    recorder.thread(0).RecordTask(Task(i, t), Stage::kBeforeDispatch);
  }
  recorder.thread(0).Flush();
  const abi::ThreadState& st = region->thread_state(0);
  EXPECT_EQ(st.records_written.load(), 4u);
  EXPECT_EQ(st.published_payload_count.load(), 4u);
  EXPECT_EQ(st.arena_waits.load(), 2u);
  EXPECT_EQ(DroppedBy(st, DropCause::kHostGone), 2u);
  EXPECT_EQ(DroppedBy(st, DropCause::kArenaAckTimeout), 0u);
}

INSTANTIATE_TEST_SUITE_P(Policies, HostGoneTest,
                         ::testing::Values(abi::FullPolicy::kStall,
                                           abi::FullPolicy::kStallThenDrop,
                                           abi::FullPolicy::kDrop));

// A recorder thread blocked at the gate (ready queue full, kStall: no bound
// at all) is released when another thread marks the host gone, and drops
// the rest without waiting again.
TEST(RecorderTest, HostGoneReleasesAThreadWaitingAtTheGate) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.records_per_buffer = 1;
  c.buffers_per_thread = 4;
  c.ready_queue_depth = 1;
  c.full_policy = abi::FullPolicy::kStall;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  const abi::ThreadState& st = region->thread_state(0);
  DumpScalarArg s;
  std::vector<DumpScalarArg> scalars = {s};
  std::atomic<bool> device_done{false};
  std::thread device([&] {
    for (uint64_t i = 0; i < 3; ++i) {
      recorder.thread(0).RecordTask(Task(i, {}, scalars), Stage::kBeforeDispatch);
    }
    recorder.thread(0).Flush();
    device_done.store(true);
  });
  // Record 0 went out; record 1's buffer waits for room in the ready queue.
  ASSERT_TRUE(WaitUntil([&] { return st.gate_waits.load() >= 1; }));
  EXPECT_FALSE(device_done.load());
  region->MarkHostGone();
  device.join();
  EXPECT_TRUE(device_done.load());
  EXPECT_EQ(st.records_written.load(), 1u);
  EXPECT_EQ(DroppedBy(st, DropCause::kHostGone), 2u);
  EXPECT_EQ(DroppedBy(st, DropCause::kReadyQueueFull), 0u);
  EXPECT_EQ(st.flushed.load(), 1u);
}

// The same for a thread waiting for an arena acknowledgement, under a bound
// of an hour.
TEST(RecorderTest, HostGoneReleasesAThreadWaitingForTheArena) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.arena_bytes = 4096;
  c.full_policy = abi::FullPolicy::kStallThenDrop;
  c.wait_bound_ms = 3600 * 1000;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  const abi::ThreadState& st = region->thread_state(0);
  std::vector<float> block(256, 1.0f);  // 1 KiB: four fill the arena
  std::vector<DumpTensorArg> t = {Arg(Flat(block), ArgRole::kInput, 0)};
  std::thread device([&] {
    for (uint64_t i = 0; i < 6; ++i) {
      recorder.thread(0).RecordTask(Task(i, t), Stage::kBeforeDispatch);
    }
    recorder.thread(0).Flush();
  });
  ASSERT_TRUE(WaitUntil([&] { return st.arena_waits.load() >= 1; }));
  region->MarkHostGone();
  device.join();
  // The first cycle was published before the wait; the two records after it
  // are lost for want of a host.
  EXPECT_EQ(st.records_written.load(), 4u);
  EXPECT_EQ(st.published_payload_count.load(), 4u);
  EXPECT_EQ(DroppedBy(st, DropCause::kHostGone), 2u);
  EXPECT_EQ(DroppedBy(st, DropCause::kArenaAckTimeout), 0u);
  EXPECT_EQ(st.flushed.load(), 1u);
}

TEST(RecorderTest, PartialLevelRecordsOnlyMarkedArgsOfMarkedTasks) {
  auto region = MakeRegion(SmallConfig(DumpLevel::kPartial));
  DumpRecorder recorder(*region);
  TestHost host(*region);
  std::vector<float> x(4, 1.0f), y(4, 2.0f), z(4, 3.0f);
  DumpScalarArg s1, s2;
  s1.arg_index = 3;
  s1.marked = true;
  s1.ambiguous = true;
  s2.arg_index = 4;
  std::vector<DumpScalarArg> scalars = {s1, s2};
  std::vector<DumpTensorArg> marked = {Arg(Flat(x), ArgRole::kInput, 0, true),
                                       Arg(Flat(y), ArgRole::kInput, 1, false),
                                       Arg(Flat(z), ArgRole::kOutput, 2, true)};
  std::vector<DumpTensorArg> unmarked = {Arg(Flat(x), ArgRole::kInput, 0)};
  ThreadRecorder& rec = recorder.thread(0);
  rec.RecordTask(Task(1, unmarked), Stage::kBeforeDispatch);
  rec.RecordTask(Task(1, unmarked), Stage::kAfterCompletion);
  rec.RecordTask(Task(2, marked, scalars, true), Stage::kBeforeDispatch);
  rec.RecordTask(Task(2, marked, scalars, true), Stage::kAfterCompletion);
  rec.Flush();
  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].record.arg_index, 0u);
  EXPECT_EQ(got[0].record.payload_size, 16u);
  EXPECT_EQ(got[1].record.arg_index, 3u);
  EXPECT_EQ(got[1].record.flags & abi::kFlagArgIndexAmbiguous, abi::kFlagArgIndexAmbiguous);
  EXPECT_EQ(got[2].record.arg_index, 2u);
  EXPECT_EQ(As<float>(got[2].payload), z);
}

TEST(RecorderTest, HybridLevelKeepsMetadataForAllPayloadForMarkedTensors) {
  auto region = MakeRegion(SmallConfig(DumpLevel::kHybrid));
  DumpRecorder recorder(*region);
  TestHost host(*region);
  std::vector<float> x(4, 1.0f), y(4, 2.0f);
  std::vector<DumpTensorArg> args = {Arg(Flat(x), ArgRole::kInput, 0, true),
                                     Arg(Flat(y), ArgRole::kInput, 1, false)};
  std::vector<DumpTensorArg> plain = {Arg(Flat(y), ArgRole::kInput, 0, false)};
  recorder.thread(0).RecordTask(Task(1, args, {}, true), Stage::kBeforeDispatch);
  recorder.thread(0).RecordTask(Task(2, plain), Stage::kBeforeDispatch);
  recorder.thread(0).Flush();
  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].record.payload_size, 16u);
  EXPECT_EQ(As<float>(got[0].payload), x);
  EXPECT_EQ(got[1].record.payload_size, 0u);
  EXPECT_EQ(got[1].record.logical_bytes, 16u);
  EXPECT_EQ(got[2].record.payload_size, 0u);
  EXPECT_EQ(region->thread_state(0).payload_bytes.load(), 16u);
}

TEST(RecorderTest, BuffersRotateInSequenceWhileTheHostDrains) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull, 2);
  c.records_per_buffer = 3;
  c.buffers_per_thread = 2;
  c.ready_queue_depth = 1;
  c.arena_bytes = 1024;
  c.full_policy = abi::FullPolicy::kStall;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  TestHost host(*region);
  host.Start();
  std::vector<std::thread> devices;
  for (uint32_t t = 0; t < 2; ++t) {
    devices.emplace_back([&, t] {
      std::vector<uint32_t> data(50);
      for (uint32_t i = 0; i < 1000; ++i) {
        std::fill(data.begin(), data.end(), t * 100000 + i);
        TensorView v = MakeView(DataType::kUint32, {50}, {1}, 0, data.data());
        std::vector<DumpTensorArg> args = {Arg(v, ArgRole::kInput, 0)};
        recorder.thread(t).RecordTask(Task(t * 100000 + i, args), Stage::kBeforeDispatch);
      }
      recorder.thread(t).Flush();
    });
  }
  for (auto& d : devices) d.join();
  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 2000u);
  uint64_t next[2] = {0, 100000};
  for (const CapturedArg& a : got) {
    ASSERT_EQ(a.record.task_id, next[a.thread]);
    ++next[a.thread];
    EXPECT_EQ(As<uint32_t>(a.payload), std::vector<uint32_t>(50, uint32_t(a.record.task_id)));
  }
}

TEST(RecorderTest, UnflushedBufferIsRecoverableAfterTheDeviceStops) {
  auto region = MakeRegion(SmallConfig(DumpLevel::kFull));
  DumpRecorder recorder(*region);
  TestHost host(*region);
  std::vector<float> x(4, 7.0f);
  std::vector<DumpTensorArg> args = {Arg(Flat(x), ArgRole::kInput, 0)};
  for (uint64_t i = 0; i < 11; ++i) {  // one full buffer of 8 + 3 unflushed
    recorder.thread(0).RecordTask(Task(i, args), Stage::kBeforeDispatch);
  }
  EXPECT_EQ(host.DrainOnce(0), 8u);
  EXPECT_EQ(host.RecoverUnflushed(), 3u);
  std::vector<CapturedArg> got = host.TakeRecords();
  ASSERT_EQ(got.size(), 11u);
  EXPECT_EQ(As<float>(got[10].payload), x);
}

// The region holds offsets, not pointers: a byte copy of it at another address
// (as a second process would map it) reads back the same records and payload.
TEST(RecorderTest, RegionReadsTheSameAtAnotherAddress) {
  DumpRegionConfig c = SmallConfig(DumpLevel::kFull);
  c.arena_bytes = 4096;
  auto region = MakeRegion(c);
  DumpRecorder recorder(*region);
  std::vector<float> x(16);
  std::iota(x.begin(), x.end(), 1.0f);
  std::vector<DumpTensorArg> args = {Arg(Flat(x), ArgRole::kInput, 0)};
  for (uint64_t i = 0; i < 10; ++i) {
    recorder.thread(0).RecordTask(Task(i, args), Stage::kBeforeDispatch);
  }
  recorder.thread(0).Flush();
  std::vector<uint64_t> copy((region->bytes() + 7) / 8);
  std::memcpy(copy.data(), region->base(), region->bytes());
  auto other = DumpRegion::Attach(copy.data(), region->bytes());
  ASSERT_TRUE(other.ok()) << other.status();
  TestHost host(**other);
  std::vector<CapturedArg> got = DrainAll(host);
  ASSERT_EQ(got.size(), 10u);
  for (uint64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(got[i].record.task_id, i);
    EXPECT_EQ(As<float>(got[i].payload), x);
  }
}

}  // namespace
}  // namespace argsdump
