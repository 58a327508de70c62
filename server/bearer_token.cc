#include "server/bearer_token.h"

#include "absl/strings/strip.h"

namespace argsdump {

absl::Status CheckBearerToken(std::optional<absl::string_view> authorization,
                              absl::string_view token) {
  if (token.empty()) return absl::OkStatus();
  if (!authorization) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  }
  absl::string_view given = *authorization;
  if (!absl::ConsumePrefix(&given, "Bearer ") || given != token) {
    return absl::UnauthenticatedError("wrong bearer token");
  }
  return absl::OkStatus();
}

}  // namespace argsdump
