#include "sdk/session_state.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;

constexpr SessionCall kRuntimeCalls[] = {SessionCall::kAlloc, SessionCall::kSubmit,
                                         SessionCall::kBeginStep, SessionCall::kSynchronize};

TEST(SessionStateTest, InProcessTakesEveryCallUntilFinished) {
  for (SessionState s : {SessionState::kOpen, SessionState::kRanInProcess}) {
    for (SessionCall c : kRuntimeCalls) EXPECT_TRUE(CheckCall(s, false, c).ok());
    EXPECT_TRUE(CheckCall(s, false, SessionCall::kRunDevice).ok()) << SessionStateName(s);
    EXPECT_TRUE(CheckCall(s, false, SessionCall::kFinish).ok());
    EXPECT_TRUE(CheckCall(s, false, SessionCall::kSetDumpConfig).ok());
  }
}

TEST(SessionStateTest, FinishedRefusesAllButSetDumpConfig) {
  for (bool isolated : {false, true}) {
    for (SessionCall c : kRuntimeCalls) {
      const absl::Status st = CheckCall(SessionState::kFinished, isolated, c);
      EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(st.message(), std::string(SessionCallName(c)) + ": the session is finished");
    }
    EXPECT_EQ(CheckCall(SessionState::kFinished, isolated, SessionCall::kFinish).message(),
              "Finish: the session is finished");
    EXPECT_EQ(CheckCall(SessionState::kFinished, isolated, SessionCall::kRunDevice).message(),
              "RunDevice: the session is finished");
  }
  EXPECT_TRUE(CheckCall(SessionState::kFinished, false, SessionCall::kSetDumpConfig).ok());
}

TEST(SessionStateTest, TheHostOfAnIsolatedSessionHasNoRuntime) {
  for (SessionState s : {SessionState::kOpen, SessionState::kDeviceForked}) {
    for (SessionCall c :
         {SessionCall::kAlloc, SessionCall::kSubmit, SessionCall::kBeginStep,
          SessionCall::kSynchronize, SessionCall::kSetDumpConfig}) {
      const absl::Status st = CheckCall(s, true, c);
      EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(st.message(), HasSubstr("call it inside RunDevice's function"));
      EXPECT_THAT(st.message(), HasSubstr(SessionCallName(c)));
    }
  }
  for (SessionCall c : kRuntimeCalls) {
    EXPECT_TRUE(CheckCall(SessionState::kInDevice, true, c).ok());
  }
}

TEST(SessionStateTest, OneDeviceProcessPerSession) {
  EXPECT_TRUE(CheckCall(SessionState::kOpen, true, SessionCall::kRunDevice).ok());
  EXPECT_THAT(CheckCall(SessionState::kDeviceForked, true, SessionCall::kRunDevice).message(),
              HasSubstr("ran already (one per session)"));
  EXPECT_TRUE(CheckCall(SessionState::kDeviceForked, true, SessionCall::kFinish).ok());
}

TEST(SessionStateTest, TheDeviceCopyNeitherRunsADeviceNorFinishes) {
  EXPECT_EQ(CheckCall(SessionState::kInDevice, true, SessionCall::kRunDevice).message(),
            "RunDevice: called on the device (inside RunDevice)");
  EXPECT_EQ(CheckCall(SessionState::kInDevice, true, SessionCall::kFinish).message(),
            "Finish: called on the device (inside RunDevice); the host finishes the session");
}

}  // namespace
}  // namespace argsdump
