#include "sdk/crash_readback.h"

#include <signal.h>
#include <sys/stat.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::EndsWith;
using ::testing::SizeIs;

absl::Status Nop(KernelContext&) { return absl::OkStatus(); }

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A device whose one task crashed in its kernel.
struct Crashed {
  std::unique_ptr<DeviceMemory> memory = *DeviceMemory::Create(uint64_t{1} << 24);
  std::unique_ptr<FlightTable> flight = *FlightTable::Create(1, 1, 1);
  KernelRegistry kernels;
  DeviceCrashAnalysis analysis;
  Crashed() {
    const uint16_t f = *kernels.Register("relu", {}, &Nop, "elementwise");
    DumpTask t;
    t.task_id = (uint64_t{1} << 32) | 7;
    t.func_ids[0] = f;
    t.func_count = 1;
    flight->Publish(0, 0, t, true, true, *memory);
    flight->EnterKernel(0, 0, 0);
    flight->RecordFault(SIGSEGV, reinterpret_cast<void*>(0x10), true);
    DeviceExit exit;
    exit.signaled = true;
    exit.signal = SIGSEGV;
    analysis = AnalyzeDeviceCrash(exit, *flight, *memory, kernels);
  }
};

TEST(CaptureReadbackTest, WhereNamesTheCapture) {
  CaptureReadback c;
  EXPECT_EQ(c.Where(), "");
  c.kind = CaptureReadback::Kind::kLocal;
  c.dump_dir = "/d/args_dump";
  EXPECT_EQ(c.Where(), "/d/args_dump");
  c.kind = CaptureReadback::Kind::kRemote;
  c.server = "h:1";
  c.name = "run";
  EXPECT_EQ(c.Where(), "h:1/run");
}

TEST(CaptureReadbackTest, NoCaptureHasNoRecordsAndAMissingOneIsAnError) {
  auto none = ReadBeforeDispatch(CaptureReadback(), 7);
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, SizeIs(0));
  CaptureReadback missing;
  missing.kind = CaptureReadback::Kind::kLocal;
  missing.dump_dir = AbsentTempPath("readback_missing/args_dump");
  EXPECT_FALSE(ReadBeforeDispatch(missing, 7).ok());
}

TEST(WriteCrashExceptionDumpsTest, OneFolderForTheCrashingTask) {
  Crashed c;
  ASSERT_THAT(c.analysis.dumps, SizeIs(1));
  CrashDumpRequest request;
  request.prefix = FreshTempDir("readback_crash");
  request.workload = "w";
  const std::vector<std::string> dirs = WriteCrashExceptionDumps(c.analysis, request);
  ASSERT_THAT(dirs, SizeIs(1));
  EXPECT_THAT(dirs[0], EndsWith("/exception_dump/crash_w_relu_elementwise_0_0_0x0000000100000007"));
  EXPECT_TRUE(Exists(dirs[0] + "/context.json"));
}

TEST(WriteCrashExceptionDumpsTest, RecordsThatCannotBeReadBackStillLeaveADump) {
  Crashed c;
  CrashDumpRequest request;
  request.prefix = FreshTempDir("readback_unreadable");
  request.workload = "w";
  request.capture.kind = CaptureReadback::Kind::kLocal;
  request.capture.dump_dir = request.prefix + "/args_dump";  // never written
  const std::vector<std::string> dirs = WriteCrashExceptionDumps(c.analysis, request);
  ASSERT_THAT(dirs, SizeIs(1));
  EXPECT_TRUE(Exists(dirs[0] + "/context.json"));
}

}  // namespace
}  // namespace argsdump
