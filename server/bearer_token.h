// The one check of a bearer token: the capture service's on every call's
// "authorization" metadata, and the HTTP face's on every /v1/ request before
// it looks at anything else in it (so an unauthenticated request learns
// nothing from a parameter error).
#ifndef ARGSDUMP_SERVER_BEARER_TOKEN_H_
#define ARGSDUMP_SERVER_BEARER_TOKEN_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace argsdump {

// OK when `token` is empty (no authentication) or `authorization` is
// exactly "Bearer <token>"; Unauthenticated otherwise (missing or wrong).
absl::Status CheckBearerToken(std::optional<absl::string_view> authorization,
                              absl::string_view token);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_BEARER_TOKEN_H_
