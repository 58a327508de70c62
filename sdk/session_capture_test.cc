#include "sdk/session_capture.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::StartsWith;

absl::Status Nop(KernelContext&) { return absl::OkStatus(); }

struct Session {
  KernelRegistry kernels;
  SessionOptions options;
  SessionWiring wiring;
  DumpConfig config;
  std::vector<std::string> warnings;

  Session() {
    options.scheduler_threads = 1;
    options.buffers_per_thread = 2;
    options.records_per_buffer = 16;
    options.arena_bytes = 4096;
    config.level = 1;
    wiring.test_labels = false;
  }
  SessionCapture::Context Context(const std::string& prefix, bool isolated) {
    SessionCapture::Context c;
    c.kernels = &kernels;
    c.options = &options;
    c.wiring = &wiring;
    c.config = &config;
    c.place.name = "s";
    c.place.prefix = prefix;
    c.place.dump_dir = prefix + "/args_dump";
    c.isolated = isolated;
    c.warn = [this](const std::string& w) { warnings.push_back(w); };
    return c;
  }
};

TEST(SessionCaptureTest, InProcessCollectsFromStartAndFinishesEmpty) {
  Session s;
  SessionCapture capture(s.Context(FreshTempDir("capture_empty"), false));
  SessionReport report;
  ASSERT_TRUE(capture.Start(&report).ok());
  EXPECT_TRUE(capture.collecting());
  ASSERT_NE(capture.region(), nullptr);
  EXPECT_NE(capture.recorder(), nullptr);
  EXPECT_NE(capture.sink().local, nullptr);
  ASSERT_THAT(report.dump_log, SizeIs(1));
  EXPECT_THAT(report.dump_log[0], StartsWith("dump buffers created: 1 recording threads"));

  CaptureLabels labels;
  SessionResult result;
  absl::Status dump_status;
  capture.Finish({}, &labels, &report, &result, &dump_status);
  EXPECT_TRUE(dump_status.ok()) << dump_status;
  EXPECT_FALSE(result.wrote_capture);  // nothing was recorded
  EXPECT_EQ(report.collected.records, 0u);
  EXPECT_THAT(report.dump_log, Contains("dump buffers freed"));
  EXPECT_THAT(s.warnings, SizeIs(0));
}

// The capture's clock is the region's time base, with the wall clock and
// the host read beside it.
TEST(SessionCaptureTest, TheCapturesClockIsTheRegionsTimeBase) {
  Session s;
  SessionCapture capture(s.Context(FreshTempDir("capture_clock"), false));
  SessionReport report;
  ASSERT_TRUE(capture.Start(&report).ok());
  ASSERT_NE(capture.region(), nullptr);
  const v1::CaptureClock& clock = capture.info().clock();
  EXPECT_EQ(clock.base_monotonic_ns(), static_cast<int64_t>(capture.region()->time_base_ns()));
  EXPECT_GT(clock.base_monotonic_ns(), 0);
  EXPECT_GT(clock.base_unix_ns(), 0);
  EXPECT_FALSE(clock.host().empty());
  EXPECT_FALSE(clock.has_server_offset());
  CaptureLabels labels;
  SessionResult result;
  absl::Status dump_status;
  capture.Finish({}, &labels, &report, &result, &dump_status);
  EXPECT_TRUE(dump_status.ok()) << dump_status;
}

TEST(SessionCaptureTest, IsolatedCollectsOnlyOnceAsked) {
  Session s;
  SessionCapture capture(s.Context(FreshTempDir("capture_isolated"), true));
  SessionReport report;
  ASSERT_TRUE(capture.Start(&report).ok());
  EXPECT_FALSE(capture.collecting());
  ASSERT_TRUE(capture.StartCollecting().ok());
  EXPECT_TRUE(capture.collecting());
  CaptureLabels labels;
  SessionResult result;
  absl::Status dump_status;
  capture.Finish({}, &labels, &report, &result, &dump_status);
  EXPECT_TRUE(dump_status.ok());
}

TEST(SessionCaptureTest, ANeverStartedDeviceLeavesAnEmptyCapture) {
  Session s;
  SessionCapture capture(s.Context(FreshTempDir("capture_never"), true));
  SessionReport report;
  ASSERT_TRUE(capture.Start(&report).ok());
  CaptureLabels labels;
  SessionResult result;
  result.wrote_capture = true;
  absl::Status dump_status;
  capture.Finish({}, &labels, &report, &result, &dump_status);
  EXPECT_FALSE(result.wrote_capture);
  EXPECT_TRUE(dump_status.ok());
}

TEST(FillKernelTableTest, AKernelTheTableCannotHoldIsLeftOutWithAWarning) {
  KernelRegistry kernels;
  ASSERT_TRUE(kernels.Register("relu", {ArgDirection::kIn, ArgDirection::kOut}, &Nop, "ew").ok());
  ASSERT_TRUE(kernels.Register(std::string(200, 'k'), {}, &Nop).ok());
  v1::CaptureInfo info;
  std::vector<std::string> warnings;
  FillKernelTable(kernels, &info, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_EQ(info.kernels_size(), 1);
  EXPECT_EQ(info.kernels(0).name(), "relu");
  EXPECT_EQ(info.kernels(0).signature_size(), 2);
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0], HasSubstr("kernel 1 is left out of the capture's kernel table"));
}

}  // namespace
}  // namespace argsdump
