#include "proto/grpc_status.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

// Every code, by name on both sides: the mapping is checked name for name,
// not assumed from the numbers.
const std::vector<std::pair<absl::StatusCode, grpc::StatusCode>>& EveryErrorCode() {
  static const auto* codes = new std::vector<std::pair<absl::StatusCode, grpc::StatusCode>>{
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  return *codes;
}

TEST(GrpcStatusTest, EveryCodeRoundTripsWithItsMessage) {
  ASSERT_EQ(EveryErrorCode().size(), 16u);
  for (const auto& [absl_code, grpc_code] : EveryErrorCode()) {
    SCOPED_TRACE(absl::StatusCodeToString(absl_code));
    const absl::Status original(absl_code, "capture run1: something went wrong");
    const grpc::Status wire = ToGrpcStatus(original);
    EXPECT_EQ(wire.error_code(), grpc_code);
    EXPECT_EQ(wire.error_message(), "capture run1: something went wrong");
    EXPECT_EQ(FromGrpcStatus(wire), original);
    const grpc::Status from_peer(grpc_code, "from the peer");
    EXPECT_EQ(FromGrpcStatus(from_peer), absl::Status(absl_code, "from the peer"));
    EXPECT_EQ(ToGrpcStatus(FromGrpcStatus(from_peer)).error_code(), grpc_code);
  }
}

TEST(GrpcStatusTest, OkIsOkBothWays) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "GetCapture").ok());
  // A message on OK means nothing on either side.
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::OK, "fine")), absl::OkStatus());
}

TEST(GrpcStatusTest, CodesOutsideTheSharedSetAreUnknownWithTheMessageKept) {
  const absl::Status odd(static_cast<absl::StatusCode>(42), "odd code");
  EXPECT_EQ(ToGrpcStatus(odd).error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(ToGrpcStatus(odd).error_message(), "odd code");
  // (grpc::StatusCode has no fixed underlying type: DO_NOT_USE is the one
  // value outside the shared codes it can hold.)
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::DO_NOT_USE, "peer's own code")),
            absl::UnknownError("peer's own code"));
}

TEST(GrpcStatusTest, ContextGoesBeforeTheMessage) {
  const grpc::Status s(grpc::StatusCode::NOT_FOUND, "no capture named x");
  EXPECT_EQ(FromGrpcStatus(s, "capture service 127.0.0.1:5"),
            absl::NotFoundError("capture service 127.0.0.1:5: no capture named x"));
}

TEST(GrpcStatusTest, LongMessagesAreBoundedAndSaySo) {
  EXPECT_EQ(BoundedStatusMessage(std::string(kMaxStatusMessageBytes, 'a')),
            std::string(kMaxStatusMessageBytes, 'a'));
  const std::string long_message = std::string(10000, 'x') + "END";
  const grpc::Status wire = ToGrpcStatus(absl::InvalidArgumentError(long_message));
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(wire.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_EQ(wire.error_message().rfind(std::string(100, 'x'), 0), 0u) << "the head is kept";
  const std::string cut = absl::StrCat(" more bytes)");
  ASSERT_GT(wire.error_message().size(), cut.size());
  EXPECT_EQ(wire.error_message().substr(wire.error_message().size() - cut.size()), cut);
  const size_t kept = wire.error_message().find(" ... (");
  ASSERT_NE(kept, std::string::npos);
  EXPECT_EQ(wire.error_message().substr(kept),
            absl::StrCat(" ... (", long_message.size() - kept, " more bytes)"));
  // The other way too: a peer's endless message is bounded, the context kept.
  const absl::Status back =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, long_message), "QueryArgs");
  EXPECT_EQ(back.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(back.message().rfind("QueryArgs: xxx", 0), 0u);
  EXPECT_LE(back.message().size(), kMaxStatusMessageBytes + sizeof("QueryArgs: "));
}

TEST(GrpcStatusTest, ACutNeverSplitsAUtf8Character) {
  // "é" is two bytes: wherever the cut falls, no half of one is left.
  for (size_t lead = 0; lead < 4; ++lead) {
    std::string message(lead, 'a');
    while (message.size() < 3 * kMaxStatusMessageBytes) message += "\xC3\xA9";
    const std::string bounded = BoundedStatusMessage(message);
    const std::string head = bounded.substr(0, bounded.find(" ... ("));
    ASSERT_GE(head.size(), lead);
    EXPECT_EQ((head.size() - lead) % 2, 0u) << lead;
    EXPECT_LE(bounded.size(), kMaxStatusMessageBytes);
  }
}

}  // namespace
}  // namespace argsdump
