// The host's reading of a dead device's flight table (sdk/device_crash.h):
// which task crashed, what was executing, and a device_crash the capture
// accepts whatever the kernels are called and however many ran.
#include "sdk/device_crash.h"

#include <signal.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "format/device_crash.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;

absl::Status Nop(KernelContext&) { return absl::OkStatus(); }

struct Device {
  std::unique_ptr<DeviceMemory> memory = *DeviceMemory::Create(uint64_t{1} << 24);
  std::unique_ptr<FlightTable> flight;
  KernelRegistry kernels;
  explicit Device(uint32_t workers) : flight(*FlightTable::Create(1, workers, workers)) {}
  // Task `n` in slot `n`, its kernel running on worker `n`.
  void Run(uint32_t n, uint16_t func) {
    DumpTask t;
    t.task_id = (uint64_t{1} << 32) | n;
    t.func_ids[0] = func;
    t.func_count = 1;
    flight->Publish(n, 0, t, true, true, *memory);
    flight->EnterKernel(n, n, 0);
  }
};

TEST(DeviceCrashTest, TheFaultingKernelIsTheCrashingTask) {
  Device d(3);
  const uint16_t f = *d.kernels.Register("relu", {}, &Nop, "elementwise");
  d.Run(0, f);
  d.Run(1, f);
  // The fault handler runs on worker 1's thread (this one ran EnterKernel
  // for it last); a second fault does not overwrite the first.
  d.flight->RecordFault(SIGSEGV, reinterpret_cast<void*>(0x10), true);
  d.flight->EnterKernel(0, 0, 0);
  d.flight->RecordFault(SIGBUS, reinterpret_cast<void*>(0x20), true);
  DeviceExit exit;
  exit.signaled = true;
  exit.signal = SIGSEGV;
  const DeviceCrashAnalysis a = AnalyzeDeviceCrash(exit, *d.flight, *d.memory, d.kernels);
  EXPECT_TRUE(CheckDeviceCrash(a.crash).ok()) << CheckDeviceCrash(a.crash);
  ASSERT_EQ(a.crash.executing_size(), 2);
  ASSERT_EQ(a.dumps.size(), 1u);
  const v1::CrashedTask& e = a.crash.executing(a.dumps[0]);
  EXPECT_TRUE(e.crashing());
  EXPECT_EQ(e.task_id(), (uint64_t{1} << 32) | 1);
  EXPECT_EQ(e.func(), "relu");
  EXPECT_EQ(e.func_type(), "elementwise");
  EXPECT_EQ(a.crash.fault_address(), 0x10u);
  EXPECT_THAT(a.crash.description(),
              HasSubstr("killed by SIGSEGV (fault address 0x10) while task 0x0000000100000001"));
  EXPECT_EQ(CrashDumpName("w", e), "crash_w_relu_elementwise_0_0_0x0000000100000001");
}

TEST(DeviceCrashTest, WithoutAFaultEveryExecutingTaskIsDumped) {
  Device d(2);
  const uint16_t f = *d.kernels.Register("k", {}, &Nop);
  d.Run(0, f);
  d.Run(1, f);
  DeviceExit exit;
  exit.exit_status = 3;
  const DeviceCrashAnalysis a = AnalyzeDeviceCrash(exit, *d.flight, *d.memory, d.kernels);
  EXPECT_EQ(a.dumps.size(), 2u);
  EXPECT_THAT(a.crash.description(), HasSubstr("exited with status 3"));
  EXPECT_THAT(a.crash.description(), HasSubstr("while these kernels ran: task "));
  EXPECT_EQ(a.crash.tasks_in_flight(), 2u);
}

// Many workers, kernel names of the user's bytes (long, not UTF-8): the
// crash stays within what the store and the service accept, and parses.
TEST(DeviceCrashTest, StaysWithinTheCapturesBounds) {
  Device d(64);
  std::string name(10000, 'x');
  name[5] = '\xff';
  name[9000] = '\xc3';
  const uint16_t f = *d.kernels.Register(name, {}, &Nop, std::string(5000, '\xe9'));
  for (uint32_t w = 0; w < 64; ++w) d.Run(w, f);
  DeviceExit exit;
  exit.signaled = true;
  exit.signal = SIGKILL;
  const DeviceCrashAnalysis a = AnalyzeDeviceCrash(exit, *d.flight, *d.memory, d.kernels);
  EXPECT_TRUE(CheckDeviceCrash(a.crash).ok()) << CheckDeviceCrash(a.crash);
  EXPECT_EQ(a.crash.executing_size(), 64);
  EXPECT_THAT(a.crash.description(), HasSubstr(" and 60 more"));
  v1::DeviceCrash back;
  ASSERT_TRUE(back.ParseFromString(a.crash.SerializeAsString())) << "not valid UTF-8";
  EXPECT_EQ(back.executing(0).func().substr(0, 6), "xxxxx?");
}

}  // namespace
}  // namespace argsdump
