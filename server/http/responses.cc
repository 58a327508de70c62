#include "server/http/responses.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "store/manifest.h"  // AppendJsonString

namespace argsdump {

int HttpStatusFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::CANCELLED: return 499;
    case grpc::StatusCode::INVALID_ARGUMENT: return 400;
    case grpc::StatusCode::FAILED_PRECONDITION: return 400;
    case grpc::StatusCode::OUT_OF_RANGE: return 400;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS: return 409;
    case grpc::StatusCode::ABORTED: return 409;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    default: return 500;  // UNKNOWN, INTERNAL, DATA_LOSS
  }
}

void SendError(httplib::Response& res, int http_status, grpc::StatusCode code,
               absl::string_view message) {
  std::string body = absl::StrCat("{\"code\": ", static_cast<int>(code), ", \"status\": \"",
                                  absl::StatusCodeToString(static_cast<absl::StatusCode>(code)),
                                  "\", \"message\": ");
  AppendJsonString(message, &body);
  body.append("}\n");
  res.status = http_status;
  if (http_status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"argsdump\"");
  res.set_content(body, "application/json");
}

void SendStatus(httplib::Response& res, const grpc::Status& s) {
  SendError(res, HttpStatusFor(s.error_code()), s.error_code(), s.error_message());
}

void BadRequest(httplib::Response& res, absl::string_view message) {
  SendError(res, 400, grpc::StatusCode::INVALID_ARGUMENT, message);
}

void SendJson(httplib::Response& res, const std::string& json) {
  res.status = 200;
  res.set_content(json + "\n", "application/json");
}

}  // namespace argsdump
