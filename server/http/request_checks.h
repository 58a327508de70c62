// What every request passes before it is routed: CORS for /v1/ (answers a
// preflight), the bearer token (before anything else in the request is
// looked at), and a body's framing and size (before its bytes are waited
// for). Each check that refuses a request sends its answer.
#ifndef ARGSDUMP_SERVER_HTTP_REQUEST_CHECKS_H_
#define ARGSDUMP_SERVER_HTTP_REQUEST_CHECKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "httplib.h"

namespace argsdump {

// Request bodies: /v1/rpc's JSON.
inline constexpr uint64_t kMaxRequestBody = 1 << 20;

// Why `origin` is not what a browser sends as Origin (scheme://host[:port]),
// or "" when it is (or is "*").
std::string BadOrigin(absl::string_view origin);

// CORS for /v1/: an origin in `allowed` gets Access-Control-Allow-Origin on
// every answer (errors too, so a dashboard can read their message), and
// its preflight (OPTIONS) is answered here: true when it was.
bool AnswerCors(const httplib::Request& req, httplib::Response& res,
                const std::vector<std::string>& allowed);

// The Authorization header as the service's metadata (the scheme is
// case-insensitive, RFC 9110 11.1; the service compares "Bearer <token>"
// exactly); nullopt without one; Unauthenticated for a byte gRPC metadata
// cannot carry.
absl::StatusOr<std::optional<std::string>> AuthorizationMetadata(const httplib::Request& req);

// Every /v1/ request shows its token before anything else in it is
// looked at (its parameters, body, record id, range): a client without
// it gets 401, never a 400 that tells it about the request. False (and
// the 401 sent) when it does not. `auth_token` empty: none needed.
// A route of the table that needs no token (routes.h, kNeedsNoToken) is
// not asked.
bool Authorize(const httplib::Request& req, httplib::Response& res,
               const std::string& auth_token);

// Before httplib reads a request's body (pre-routing): a POST or DELETE
// without Content-Length or Transfer-Encoding has none (RFC 9112 6.3;
// httplib would read until the client closed: `curl -X POST` waited 10 s
// for a 400), a bad or too large length is refused before its bytes
// are waited for, and a JSON body is not parsed as a form (httplib caps
// those at 8 KiB: `curl -d` sends that content type). False when refused
// (a body sent anyway then reads as a malformed request: httplib answers
// 400 and closes).
bool CheckBody(httplib::Request& req, httplib::Response& res);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_REQUEST_CHECKS_H_
