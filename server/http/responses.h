// How the HTTP face answers: every error is the body
//   {"code": 5, "status": "NOT_FOUND", "message": "..."}
// with the HTTP status its gRPC code maps to; a success is one JSON
// message and a newline.
#ifndef ARGSDUMP_SERVER_HTTP_RESPONSES_H_
#define ARGSDUMP_SERVER_HTTP_RESPONSES_H_

#include <string>

#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"

namespace argsdump {

// The HTTP status for a gRPC status code (the usual mapping: NOT_FOUND 404,
// INVALID_ARGUMENT / FAILED_PRECONDITION / OUT_OF_RANGE 400,
// UNAUTHENTICATED 401, PERMISSION_DENIED 403, ALREADY_EXISTS / ABORTED 409,
// RESOURCE_EXHAUSTED 429, CANCELLED 499, UNIMPLEMENTED 501, UNAVAILABLE
// 503, DEADLINE_EXCEEDED 504, others 500).
int HttpStatusFor(grpc::StatusCode code);

// The error body every failed request gets (401 adds WWW-Authenticate).
void SendError(httplib::Response& res, int http_status, grpc::StatusCode code,
               absl::string_view message);
// A call's status, with the HTTP status HttpStatusFor maps it to.
void SendStatus(httplib::Response& res, const grpc::Status& s);
// 400 INVALID_ARGUMENT.
void BadRequest(httplib::Response& res, absl::string_view message);
// 200 and `json` with a newline.
void SendJson(httplib::Response& res, const std::string& json);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_RESPONSES_H_
