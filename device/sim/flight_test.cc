// DeviceMemory (shared device memory) and the flight table: what the host
// reads of a dead device. A forked child writes; the parent reads after it
// ended, as the session does; garbage in a slot is dropped, never used.
#include "device/sim/flight.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"
#include "device/sim/device_memory.h"

namespace argsdump {
namespace {

TEST(DeviceMemoryTest, AllocatesFreesReusesAndCoalesces) {
  auto memory = DeviceMemory::Create(uint64_t{1} << 24);  // 16 MiB
  ASSERT_TRUE(memory.ok()) << memory.status();
  DeviceMemory& m = **memory;
  // Small buffers: 64-byte aligned, packed.
  auto a = m.Allocate(100), b = m.Allocate(5000), c = m.Allocate(64);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(m.OffsetOf(*a), 0u);
  EXPECT_EQ(m.OffsetOf(*b), 128u);
  EXPECT_EQ(m.OffsetOf(*c), 128u + 5056u);
  std::memset(*a, 0xAB, 100);
  std::memset(*b, 0xAB, 5000);
  m.Free(*a, 100);
  m.Free(*b, 5000);  // merges with a's range: 5184 bytes free at 0
  auto d = m.Allocate(5184);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, *a);
  for (uint64_t i = 0; i < 5184; ++i) ASSERT_EQ((*d)[i], 0) << "reused bytes read as zero: " << i;
  // A large buffer: page-aligned, its pages given back when freed and zero
  // when the range is reused, also where small buffers had been.
  auto big = m.Allocate(uint64_t{2} << 20);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(m.OffsetOf(*big) % 4096, 0u);
  std::memset(*big, 0xCD, uint64_t{2} << 20);
  m.Free(*big, uint64_t{2} << 20);
  m.Free(*c, 64);
  m.Free(*d, 5184);
  auto again = m.Allocate(uint64_t{3} << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0], 0);
  EXPECT_EQ((*again)[(uint64_t{2} << 20) - 1], 0);
  m.Free(*again, uint64_t{3} << 20);
  // Small again, at the start of what was handed out before: zero.
  auto small = m.Allocate(4000);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(m.OffsetOf(*small), 0u);
  std::memset(*small, 0x11, 4000);
  m.Free(*small, 4000);
  auto reused = m.Allocate(8000);
  ASSERT_TRUE(reused.ok());
  for (uint64_t i = 0; i < 8000; ++i) ASSERT_EQ((*reused)[i], 0) << i;
  m.Free(*reused, 8000);
  // Everything freed: the whole reservation is one range again.
  auto whole = m.Allocate(m.size());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(m.Allocate(1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m.Allocate(m.size() + 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(m.Contains(0, m.size()));
  EXPECT_FALSE(m.Contains(1, m.size()));
  EXPECT_FALSE(m.Contains(m.size() + 1, 0));
  EXPECT_FALSE(m.Contains(~uint64_t{0}, 2));
}

TEST(DeviceMemoryTest, TheReservationIsBoundedByTheMachine) {
  auto memory = DeviceMemory::Create(uint64_t{1} << 50);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_LE((*memory)->size(), DeviceMemory::MachineBytes());
}

// A task of two tensors and a scalar, its views in `m`.
struct Views {
  std::vector<DumpTensorArg> tensors;
  std::vector<DumpScalarArg> scalars;
  DumpTask task;
};

Views TwoTensors(DeviceMemory& m) {
  Views v;
  for (uint32_t i = 0; i < 2; ++i) {
    DumpTensorArg a;
    a.view.dtype = DataType::kFloat32;
    a.view.ndims = 2;
    a.view.shape[0] = 4;
    a.view.shape[1] = 8;
    a.view.strides[0] = 8;
    a.view.strides[1] = 1;
    a.view.data = *m.Allocate(4 * 8 * 4);
    a.role = i == 0 ? abi::ArgRole::kInput : abi::ArgRole::kOutput;
    a.arg_index = i;
    a.marked = i == 1;
    v.tensors.push_back(a);
  }
  DumpScalarArg s;
  s.dtype = DataType::kInt32;
  s.bits = 7;
  s.arg_index = 2;
  v.scalars.push_back(s);
  v.task.task_id = 0x100000005;
  v.task.step = 3;
  v.task.func_ids[0] = 9;
  v.task.func_count = 1;
  v.task.tensors = v.tensors.data();
  v.task.tensor_count = 2;
  v.task.scalars = v.scalars.data();
  v.task.scalar_count = 1;
  return v;
}

TEST(FlightTableTest, WhatTheDeadDeviceWroteIsReadBack) {
  auto memory = DeviceMemory::Create(uint64_t{1} << 24);
  auto flight = FlightTable::Create(2, 4, 3);
  ASSERT_TRUE(memory.ok() && flight.ok());
  DeviceMemory& m = **memory;
  FlightTable& f = **flight;
  Views v = TwoTensors(m);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The device: task in slot 5 (scheduler 1), its kernel on worker 2,
    // half of its output written, then it dies.
    f.Publish(5, 1, v.task, /*dumped=*/true, /*dump_after=*/true, m);
    f.Publish(6, 1, v.task, true, true, m);
    f.Release(6);
    f.header().tasks_submitted.store(6);
    f.header().tasks_completed.store(4);
    f.EnterKernel(2, 5, 0);
    float* out = reinterpret_cast<float*>(const_cast<uint8_t*>(v.tensors[1].view.data));
    for (int i = 0; i < 16; ++i) out[i] = 1.5f * i;
    f.RecordFault(SIGSEGV, nullptr, true);
    ::_exit(0);
  }
  int status;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  FlightTask t;
  ASSERT_TRUE(f.ReadTask(5, m, &t));
  EXPECT_FALSE(f.ReadTask(6, m, &t)) << "released";
  ASSERT_TRUE(f.ReadTask(5, m, &t));
  EXPECT_FALSE(f.ReadTask(4, m, &t)) << "never used";
  EXPECT_FALSE(f.ReadTask(99, m, &t)) << "out of range";
  EXPECT_EQ(t.scheduler, 1u);
  EXPECT_TRUE(t.dumped && t.dump_after);
  EXPECT_EQ(t.task.task_id, 0x100000005u);
  EXPECT_EQ(t.task.step, 3u);
  ASSERT_EQ(t.task.tensor_count, 2u);
  ASSERT_EQ(t.task.scalar_count, 1u);
  EXPECT_EQ(t.task.scalars[0].bits, 7u);
  EXPECT_TRUE(t.task.tensors[1].marked);
  const float* out = reinterpret_cast<const float*>(t.task.tensors[1].view.data);
  EXPECT_EQ(out[15], 1.5f * 15);  // the child's write, through shared memory
  EXPECT_EQ(out[16], 0.0f);
  EXPECT_EQ(f.worker(2).slot.load(), 5u);
  EXPECT_EQ(f.worker(0).slot.load(), abi::kNoFlightSlot);
  EXPECT_EQ(f.header().crash.signal.load(), SIGSEGV);
  EXPECT_EQ(f.header().crash.worker, 2);
  EXPECT_EQ(f.header().crash.slot, 5u);
  EXPECT_EQ(f.header().tasks_submitted.load(), 6u);
}

TEST(FlightTableTest, GarbageInASlotIsDroppedNotUsed) {
  auto memory = DeviceMemory::Create(uint64_t{1} << 24);
  auto flight = FlightTable::Create(1, 1, 1);
  ASSERT_TRUE(memory.ok() && flight.ok());
  DeviceMemory& m = **memory;
  FlightTable& f = **flight;
  Views v = TwoTensors(m);
  f.Publish(0, 0, v.task, true, true, m);
  abi::FlightSlot& s = f.slot(0);
  s.tensors[0].memory_offset = m.size() - 8;  // the view runs past the mapping
  s.tensors[1].dtype = 250;                   // no dtype
  s.scalars[0].dtype = 251;
  s.tensor_count = 1000;                      // more than a slot holds
  s.func_count = 200;
  FlightTask t;
  ASSERT_TRUE(f.ReadTask(0, m, &t));
  EXPECT_EQ(t.task.tensor_count, 0u);
  EXPECT_EQ(t.task.scalar_count, 0u);
  EXPECT_EQ(t.task.func_count, abi::kMaxFuncIds);
  // A view whose strides leave the buffer it claims.
  f.Publish(0, 0, v.task, true, true, m);
  s.tensors[0].strides[0] = 1u << 30;
  ASSERT_TRUE(f.ReadTask(0, m, &t));
  ASSERT_EQ(t.task.tensor_count, 1u);
  EXPECT_EQ(t.task.tensors[0].arg_index, 1u);
}

TEST(FlightTableTest, RefusesSizesOutOfRange) {
  EXPECT_FALSE(FlightTable::Create(0, 1, 1).ok());
  EXPECT_FALSE(FlightTable::Create(1, 0, 1).ok());
  EXPECT_FALSE(FlightTable::Create(1, 1, 0).ok());
  EXPECT_FALSE(FlightTable::Create(5000, 1, 1).ok());
}

}  // namespace
}  // namespace argsdump
