#include "server/http/request_checks.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/bearer_token.h"
#include "server/http/params.h"
#include "server/http/responses.h"

namespace argsdump {

std::string BadOrigin(absl::string_view origin) {
  if (origin == "*") return "";
  absl::string_view rest = origin;
  if (!absl::ConsumePrefix(&rest, "http://") && !absl::ConsumePrefix(&rest, "https://")) {
    return "not http:// or https://";
  }
  if (rest.empty()) return "no host";
  for (char c : rest) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("-.:[]").find(c) == absl::string_view::npos) {
      return absl::StrCat("'", std::string(1, c), "' is not in a host[:port] (no path, no "
                          "trailing '/')");
    }
  }
  return "";
}

bool AnswerCors(const httplib::Request& req, httplib::Response& res,
                const std::vector<std::string>& allowed) {
  if (allowed.empty() || req.path.rfind("/v1/", 0) != 0) return false;
  const std::string origin = req.get_header_value("Origin");
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (origin.empty() ||
      !(any || std::find(allowed.begin(), allowed.end(), origin) != allowed.end())) {
    return false;
  }
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) res.set_header("Vary", "Origin");
  res.set_header("Access-Control-Expose-Headers", "Content-Range, Content-Length, Accept-Ranges");
  if (req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) {
    return false;
  }
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE");
  res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, Range");
  res.set_header("Access-Control-Max-Age", "600");
  return true;
}

absl::StatusOr<std::optional<std::string>> AuthorizationMetadata(const httplib::Request& req) {
  if (!req.has_header("Authorization")) return std::nullopt;
  const std::string value = req.get_header_value("Authorization");
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) {
      return absl::UnauthenticatedError(
          "the Authorization header holds a byte that is not printable ASCII");
    }
  }
  const bool bearer = value.size() > 7 && absl::EqualsIgnoreCase(value.substr(0, 7), "bearer ");
  return bearer ? absl::StrCat("Bearer ", value.substr(7)) : value;
}

bool Authorize(const httplib::Request& req, httplib::Response& res,
               const std::string& auth_token) {
  if (req.path.rfind("/v1/", 0) != 0) return true;  // the page holds no data
  absl::StatusOr<std::optional<std::string>> authorization = AuthorizationMetadata(req);
  absl::Status s = authorization.status();
  if (s.ok()) {
    s = CheckBearerToken(authorization->has_value()
                             ? std::optional<absl::string_view>(**authorization)
                             : std::nullopt,
                         auth_token);
  }
  if (s.ok()) return true;
  SendError(res, 401, grpc::StatusCode::UNAUTHENTICATED, s.message());
  return false;
}

bool CheckBody(httplib::Request& req, httplib::Response& res) {
  if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS") return true;
  auto refuse = [&](int status, grpc::StatusCode code, std::string message) {
    SendError(res, status, code, message);
    return false;
  };
  const size_t lengths = req.get_header_value_count("Content-Length");
  if (lengths == 0) {
    if (!req.has_header("Transfer-Encoding")) req.set_header("Content-Length", "0");
  } else {
    uint64_t length = 0;
    for (size_t i = 0; i < lengths; ++i) {
      const std::string value = req.get_header_value("Content-Length", i);
      uint64_t v = 0;
      if (!ParseDecimal(value, &v) || (i > 0 && v != length)) {
        return refuse(400, grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("Content-Length: '", value, "'",
                                   i > 0 ? " differs from the first one" : " is not a byte count"));
      }
      length = v;
    }
    if (length > kMaxRequestBody) {
      return refuse(413, grpc::StatusCode::RESOURCE_EXHAUSTED,
                    absl::StrCat("request body of ", length, " bytes; at most ", kMaxRequestBody,
                                 " are read"));
    }
  }
  if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
    req.headers.erase("Content-Type");
  }
  return true;
}

}  // namespace argsdump
