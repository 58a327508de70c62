#include "sdk/session_result.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/isolated_device.h"

namespace argsdump {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

TEST(ApplyDeviceReportTest, TheDevicesCountsLevelsAndWarnings) {
  v1::DeviceReport d;
  SetDeviceStatus(absl::InternalError("kernel"), d.mutable_run_status());
  d.set_tasks_submitted(5);
  d.set_tasks_completed(4);
  d.set_overflow_tasks(1);
  d.set_has_first_overflow_task(true);
  d.set_first_overflow_task(0x200);
  d.add_dump_log("line");
  d.add_warnings("known");
  d.add_warnings("new");
  d.add_exception_dumps("/x/exception_dump/exception_a_1");
  v1::DeviceReport::Level* l = d.add_step_levels();
  l->set_level(2);
  l->set_stats(7);  // out of range: off
  SessionResult r;
  SessionReport report;
  std::vector<std::string> warnings = {"known"};
  StepCount steps;
  ApplyDeviceReport(d, &r, &report, &warnings, &steps);
  EXPECT_EQ(r.run_status, absl::InternalError("kernel"));
  EXPECT_EQ(r.tasks, 5u);
  EXPECT_EQ(r.tasks_completed, 4u);
  EXPECT_EQ(r.first_overflow_task, 0x200u);
  EXPECT_THAT(report.dump_log, ElementsAre("line"));
  EXPECT_THAT(warnings, ElementsAre("known", "new"));
  ASSERT_THAT(report.step_levels, SizeIs(1));
  EXPECT_EQ(report.step_levels[0].level, 2u);
  EXPECT_EQ(report.step_levels[0].stats, StatsMode::kOff);
  EXPECT_THAT(r.exception_dumps, ElementsAre("/x/exception_dump/exception_a_1"));
  // Tasks with no BeginStep ran in step 0, which counts once.
  EXPECT_EQ(steps.begun, 1u);
  EXPECT_FALSE(steps.step.has_value());
}

TEST(ApplyDeviceReportTest, StepsAsTheDeviceCountedThem) {
  v1::DeviceReport d;
  d.set_tasks_submitted(3);
  d.set_steps_begun(4);
  d.set_has_step(true);
  d.set_step(9);
  SessionResult r;
  SessionReport report;
  std::vector<std::string> warnings;
  StepCount steps;
  ApplyDeviceReport(d, &r, &report, &warnings, &steps);
  EXPECT_EQ(steps.begun, 4u);
  EXPECT_EQ(steps.step, 9u);
}

TEST(ApplyDeviceLossTest, AHangIsDeadlineExceededAndNotACrash) {
  DeviceCrashAnalysis crash;
  crash.tasks_submitted = 2;
  crash.tasks_completed = 1;
  SessionResult r;
  SessionReport report;
  StepCount steps;
  ApplyDeviceLoss(crash, std::string("host watch: hung"), StepLevel{0, 1}, &r, &report, &steps);
  EXPECT_EQ(r.run_status, absl::DeadlineExceededError("host watch: hung"));
  EXPECT_FALSE(r.device_crashed);
  EXPECT_EQ(steps.begun, 1u);
  ASSERT_THAT(report.step_levels, SizeIs(1));
  EXPECT_EQ(report.step_levels[0].level, 1u);
}

TEST(ApplyDeviceLossTest, ACrashSaysHow) {
  DeviceCrashAnalysis crash;
  crash.crash.set_description("the device process died of SIGSEGV");
  crash.tasks_submitted = 1;
  SessionResult r;
  SessionReport report;
  StepCount steps;
  ApplyDeviceLoss(crash, std::nullopt, StepLevel{}, &r, &report, &steps);
  EXPECT_EQ(r.run_status.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(r.device_crashed);
  EXPECT_EQ(r.device_crash, "the device process died of SIGSEGV");
  EXPECT_EQ(steps.begun, 1u);
}

TEST(CopyCountsTest, CollectedAndLost) {
  SessionReport report;
  report.collected.records = 10;
  report.collected.payload_bytes = 400;
  report.losses.set_dropped_records(3);
  report.losses.set_dropped_host_gone(3);
  SessionResult r;
  CopyCounts(report, &r);
  EXPECT_EQ(r.records, 10u);
  EXPECT_EQ(r.payload_bytes, 400u);
  EXPECT_EQ(r.dropped_records, 3u);
  EXPECT_EQ(r.dropped_host_gone, 3u);
}

TEST(ExceptionCaptureNameTest, RunCaptureScenarioAndTask) {
  std::string scenario, task;
  EXPECT_EQ(ExceptionCaptureName("run", "crash_w_add_vec_0_1_0x0000000200000a00", &scenario,
                                 &task),
            "run.crash.0000000200000a00");
  EXPECT_EQ(scenario, "crash");
  EXPECT_EQ(task, "0x0000000200000a00");
  const std::string long_name =
      ExceptionCaptureName(std::string(200, 'r'), "exception_w_1", &scenario, &task);
  EXPECT_EQ(long_name.size(), 128u);
  EXPECT_EQ(long_name.substr(long_name.size() - 12), ".exception.1");
}

TEST(SessionSummaryTest, NamesWhereTheCaptureWent) {
  SessionResult r;
  r.records = 4;
  r.tasks = 2;
  r.steps = 1;
  EXPECT_EQ(SessionSummary("s", r),
            "session s: 4 records of 2 tasks in 1 step(s); capture: none (nothing was selected)");
  r.capture = "host:1/run";
  EXPECT_EQ(SessionSummary("s", r),
            "session s: 4 records of 2 tasks in 1 step(s); capture: host:1/run on the capture "
            "service");
}

}  // namespace
}  // namespace argsdump
