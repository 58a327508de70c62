#include "sdk/isolated_device.h"

#include <unistd.h>

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;

SimConfig SmallSim() {
  SimConfig sim;
  sim.scheduler_threads = 1;
  sim.worker_threads = 1;
  sim.max_inflight_per_scheduler = 2;
  return sim;
}

std::string Report(const absl::Status& orchestration, uint64_t tasks) {
  v1::DeviceReport r;
  SetDeviceStatus(orchestration, r.mutable_orchestration());
  r.set_tasks_submitted(tasks);
  return r.SerializeAsString();
}

TEST(IsolatedDeviceTest, PointsTheSimAtSharedMemoryAndTheFlightTable) {
  KernelRegistry kernels;
  auto device = IsolatedDevice::Create(SmallSim(), kernels);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_NE((*device)->sim().memory, nullptr);
  EXPECT_EQ((*device)->sim().flight, &(*device)->flight());
  EXPECT_FALSE((*device)->forked());
}

TEST(IsolatedDeviceTest, TheReportIsHowTheDeviceEnded) {
  KernelRegistry kernels;
  auto device = IsolatedDevice::Create(SmallSim(), kernels);
  ASSERT_TRUE(device.ok());
  int forked = 0, started = 0;
  IsolatedDevice::Hooks hooks;
  hooks.device = [] { return Report(absl::InvalidArgumentError("the function's"), 7); };
  hooks.host_gone = [] {};
  hooks.forked = [&] {
    ++forked;
    return absl::OkStatus();
  };
  hooks.started = [&] { ++started; };
  const absl::Status st = (*device)->Run(hooks);
  EXPECT_EQ(st, absl::InvalidArgumentError("the function's"));
  EXPECT_TRUE((*device)->forked());
  EXPECT_EQ(forked, 1);
  EXPECT_EQ(started, 1);
  ASSERT_TRUE((*device)->report().has_value());
  EXPECT_EQ((*device)->report()->tasks_submitted(), 7u);
  EXPECT_FALSE((*device)->crash().has_value());
  EXPECT_FALSE((*device)->hang().has_value());
  EXPECT_TRUE((*device)->error().ok());
}

TEST(IsolatedDeviceTest, ADeviceThatDiesIsACrashReadFromTheFlightTable) {
  KernelRegistry kernels;
  auto device = IsolatedDevice::Create(SmallSim(), kernels);
  ASSERT_TRUE(device.ok());
  IsolatedDevice::Hooks hooks;
  hooks.device = []() -> std::string { std::abort(); };
  hooks.host_gone = [] {};
  hooks.forked = [] { return absl::OkStatus(); };
  const absl::Status st = (*device)->Run(hooks);
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted);
  ASSERT_TRUE((*device)->crash().has_value());
  EXPECT_THAT(std::string(st.message()), HasSubstr("SIGABRT"));
  EXPECT_EQ(st.message(), (*device)->crash()->crash.description());
  EXPECT_FALSE((*device)->report().has_value());
}

TEST(IsolatedDeviceTest, NothingToCollectStopsTheDevice) {
  KernelRegistry kernels;
  auto device = IsolatedDevice::Create(SmallSim(), kernels);
  ASSERT_TRUE(device.ok());
  bool started = false;
  IsolatedDevice::Hooks hooks;
  hooks.device = []() -> std::string {
    for (;;) ::pause();  // until the host kills it
  };
  hooks.host_gone = [] {};
  hooks.forked = [] { return absl::UnavailableError("no sink"); };
  hooks.started = [&] { started = true; };
  EXPECT_EQ((*device)->Run(hooks), absl::UnavailableError("no sink"));
  EXPECT_TRUE((*device)->forked());
  EXPECT_FALSE(started);
  EXPECT_FALSE((*device)->report().has_value());
  EXPECT_FALSE((*device)->crash().has_value());
}

TEST(DeviceStatusTest, RoundTripsAndRefusesUnknownCodes) {
  v1::DeviceStatus s;
  SetDeviceStatus(absl::NotFoundError("x"), &s);
  EXPECT_EQ(DeviceStatusOf(s), absl::NotFoundError("x"));
  s.set_code(99);
  EXPECT_EQ(DeviceStatusOf(s).code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(DeviceStatusOf(s).message()), HasSubstr("status code 99"));
}

TEST(SampleDeviceTest, ReadsTheFlightTableAlone) {
  KernelRegistry kernels;
  auto device = IsolatedDevice::Create(SmallSim(), kernels);
  ASSERT_TRUE(device.ok());
  const DeviceProgress p = SampleDevice((*device)->flight(), nullptr);
  EXPECT_EQ(p.tasks_submitted, 0u);
  EXPECT_EQ(p.records, 0u);
  EXPECT_FALSE(p.host_behind);
}

}  // namespace
}  // namespace argsdump
