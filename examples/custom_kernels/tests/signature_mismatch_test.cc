// (d) A task whose args disagree with its kernel's signature: the dump skips
// it with one warning per process naming the kernel and the task, the task
// still runs, and every other task is dumped.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernels.h"
#include "sdk/argsdump.h"
#include "sdk/testing.h"

namespace custom_kernels {
namespace {

using argsdump::CoreTaskArgs;
using argsdump::DataType;
using argsdump::SimSession;
using argsdump::testing::ArgQuery;
using argsdump::testing::Capture;
using ::testing::HasSubstr;

TEST(SignatureMismatchTest, SkippedWithOneWarningAndExecutionGoesOn) {
  argsdump::KernelRegistry registry;
  auto ids = RegisterKernels(&registry);
  ASSERT_TRUE(ids.ok());
  auto session = SimSession::Open(registry);
  ASSERT_TRUE(session.ok());
  SimSession& s = **session;
  auto x = s.Alloc(DataType::kFloat32, {8});
  auto y = s.Alloc(DataType::kFloat32, {8});
  ASSERT_TRUE(x->Write(std::vector<float>(8, 2.0f)).ok());
  std::vector<uint64_t> good, bad;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 4; ++i) {
    CoreTaskArgs args;
    float a = 3.0f, b = 1.0f;
    if (i % 2 == 0) {
      ASSERT_TRUE(args.add_input(*x).ok() && args.add_output(*y).ok());
    } else {
      // axpb declares [in, out]: this task adds them the other way round
      // (an inout where an input belongs).
      ASSERT_TRUE(args.add_inout(*x).ok() && args.add_output(*y).ok());
    }
    ASSERT_TRUE(args.add_scalar(a).ok() && args.add_scalar(b).ok());
    auto id = s.Submit(ids->axpb, std::move(args));
    ASSERT_TRUE(id.ok()) << id.status();
    (i % 2 == 0 ? good : bad).push_back(*id);
  }
  auto result = s.Finish();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(result.ok()) << result.status();
  // Execution went on: every task ran, the mismatched ones too.
  EXPECT_TRUE(result->run_status.ok());
  EXPECT_EQ(result->tasks_completed, 4u);
  EXPECT_THAT(*y->Read<float>(), ::testing::Each(7.0f));
  if (result->dump.level == 0) GTEST_SKIP() << "the dump is off: nothing to skip";

  EXPECT_EQ(result->dump_skipped_tasks, 2u);
  int warnings = 0;
  for (const std::string& w : result->warnings) warnings += w.find("dump skipped") != std::string::npos;
  EXPECT_EQ(warnings, 1) << "one warning per process";
  char first_bad[32];
  std::snprintf(first_bad, sizeof(first_bad), "0x%016llx", static_cast<unsigned long long>(bad[0]));
  EXPECT_THAT(log, HasSubstr(std::string("WARNING: dump skipped for task ") + first_bad +
                             ": kernel 'axpb' declares tensor slot 0"));
  // Local (files to check against the schema) or on a capture service.
  ASSERT_TRUE(!result->capture_dir.empty() || !result->capture.empty());
  if (!result->capture_dir.empty()) {
    EXPECT_TRUE(argsdump::testing::CheckCaptureFiles(result->capture_dir).ok());
  }
  auto capture = Capture::Of(*result);
  ASSERT_TRUE(capture.ok()) << capture.status();
  for (uint64_t id : good) EXPECT_FALSE(capture->Find(ArgQuery().Task(id)).empty());
  for (uint64_t id : bad) EXPECT_TRUE(capture->Find(ArgQuery().Task(id)).empty());
}

}  // namespace
}  // namespace custom_kernels
