#include "proto/grpc_status.h"

#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {

// The codes both enums share: 1 (CANCELLED) .. 16 (UNAUTHENTICATED).
constexpr int kFirstErrorCode = 1;
constexpr int kLastErrorCode = 16;
static_assert(static_cast<int>(grpc::StatusCode::UNAUTHENTICATED) == kLastErrorCode);
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) == kLastErrorCode);
static_assert(static_cast<int>(grpc::StatusCode::CANCELLED) == kFirstErrorCode);
static_assert(static_cast<int>(absl::StatusCode::kCancelled) == kFirstErrorCode);
static_assert(static_cast<int>(grpc::StatusCode::DATA_LOSS) ==
              static_cast<int>(absl::StatusCode::kDataLoss));

bool IsErrorCode(int code) { return code >= kFirstErrorCode && code <= kLastErrorCode; }

}  // namespace

std::string BoundedStatusMessage(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  // The suffix names at most 20 digits; keep room for the longest.
  constexpr size_t kSuffixRoom = sizeof(" ... (18446744073709551615 more bytes)") - 1;
  size_t keep = kMaxStatusMessageBytes - kSuffixRoom;
  // Never split a UTF-8 sequence: back off over continuation bytes.
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xC0) == 0x80) --keep;
  return absl::StrCat(message.substr(0, keep), " ... (", message.size() - keep, " more bytes)");
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  return grpc::Status(
      IsErrorCode(code) ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::UNKNOWN,
      BoundedStatusMessage(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  const std::string message = BoundedStatusMessage(status.error_message());
  return absl::Status(
      IsErrorCode(code) ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
      context.empty() ? message : absl::StrCat(context, ": ", message));
}

}  // namespace argsdump
