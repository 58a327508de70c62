#include "server/http/routes.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/http/httplib_workarounds.h"
#include "server/http/listener.h"
#include "server/http/request_checks.h"
#include "server/http/responses.h"
#include "server/http/web_assets.h"

namespace argsdump {
namespace {

using HandlerResponse = httplib::Server::HandlerResponse;

// Before routing: CORS, the token, the body's framing. Handled when one of
// them answered.
// `open`: "METHOD path" of the routes that need no token.
HandlerResponse PreRoute(const HttpGatewayOptions& options, const std::set<std::string>& open,
                         const httplib::Request& req, httplib::Response& res) {
  // The Range header means something only to /payload: elsewhere
  // httplib would cut the JSON by it.
  httplib::Request& mutable_req = MutableRequest(req);
  if (req.path.find("/payload") == std::string::npos) mutable_req.ranges.clear();
  const bool token_free = open.count(absl::StrCat(req.method, " ", req.path)) > 0;
  if (AnswerCors(req, res, options.cors_origins) ||
      (!token_free && !Authorize(req, res, options.auth_token)) || !CheckBody(mutable_req, res)) {
    // A body not read would be taken for the next request.
    if (req.get_header_value("Content-Length", 0) != "0" || req.has_header("Transfer-Encoding")) {
      HttpListener::CloseAfterAnswer();
    }
    return HandlerResponse::Handled;
  }
  return HandlerResponse::Unhandled;
}

void InstallWebAssets(httplib::Server* http) {
  for (const WebAsset& asset : WebAssets()) {
    auto serve = [&asset](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' "
                     "data: blob:; frame-ancestors 'none'");
      res.set_content(std::string(asset.bytes), asset.content_type);
    };
    http->Get(asset.path, serve);
    if (asset.path == "/index.html") http->Get("/", serve);
  }
}

// A request the listener stopped reading (408, 503): its connection closes
// after this answer. Handled when it was one.
bool AnswerCutRequest(const HttpGatewayOptions& options, httplib::Response& res) {
  switch (HttpListener::RequestCut()) {
    case HttpListener::Cut::kNone:
      return false;
    case HttpListener::Cut::kTimedOut:
      res.set_header("Connection", "close");
      SendError(res, 408, grpc::StatusCode::DEADLINE_EXCEEDED,
                absl::StrCat("the request (its head and body) did not arrive within ",
                             options.request_timeout.count(), " ms"));
      return true;
    case HttpListener::Cut::kEvicted:
      res.set_header("Connection", "close");
      res.set_header("Retry-After", "1");
      SendError(res, 503, grpc::StatusCode::UNAVAILABLE,
                "every connection slot was taken, and this connection had kept the server "
                "waiting longest for its request: retry");
      return true;
  }
  return false;
}

// An error httplib raised itself (no route, a bad request head, a bad
// Range) in the error body every answer has.
HandlerResponse AnswerError(const HttpGatewayOptions& options, const httplib::Request& req,
                            httplib::Response& res) {
  if (!res.body.empty()) return HandlerResponse::Unhandled;
  if (AnswerCutRequest(options, res)) return HandlerResponse::Handled;
  const int status = res.status;
  // httplib refuses a bad Range before routing: the token comes first.
  if (status == 416 && !Authorize(req, res, options.auth_token)) return HandlerResponse::Handled;
  // httplib answers these before routing, from the request's head.
  const std::string what =
      status == 404   ? absl::StrCat("no such endpoint: ", req.method, " ", req.path,
                                     " (the API is under /v1/captures; see docs/http.md)")
      : status == 413 ? absl::StrCat("request body over ", kMaxRequestBody, " bytes")
      : status == 414 ? std::string("request target (path and query) too long")
      : status == 416 ? absl::StrCat("Range: '", req.get_header_value("Range"),
                                     "' is not a byte range this server reads (bytes=FIRST-"
                                     "LAST, bytes=FIRST- or bytes=-SUFFIX; /payload only)")
      : status == 400 ? std::string("malformed HTTP request (its request line, a header, "
                                    "or the body's framing)")
                      : absl::StrCat("HTTP ", status);
  SendError(res, status,
            status == 404   ? grpc::StatusCode::NOT_FOUND
            : status == 413 ? grpc::StatusCode::RESOURCE_EXHAUSTED
                            : grpc::StatusCode::INVALID_ARGUMENT,
            what);
  return HandlerResponse::Handled;
}

void AnswerException(const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
  std::string what = "internal error";
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::exception& x) {
    what = x.what();
  } catch (...) {
  }
  SendError(res, 500, grpc::StatusCode::INTERNAL, what);
}

}  // namespace

std::vector<Route> ApiRoutes(CaptureCalls* c, PayloadCalls* p) {
  const std::string capture = "/v1/captures/([A-Za-z0-9._-]+)";
  const std::string arg = capture + "/args/([^/]+)";
  const std::string job = "/v1/jobs/([A-Za-z0-9._-]+)";
  auto on = [](auto* handlers, auto method) {
    return [handlers, method](const httplib::Request& req, httplib::Response& res) {
      (handlers->*method)(req, res);
    };
  };
  return {
      {"GET", "/v1/schema", kNeedsQuery | kNeedsNoToken, on(c, &CaptureCalls::Schema)},
      {"GET", "/v1/captures", kNeedsQuery, on(c, &CaptureCalls::ListCaptures)},
      {"GET", capture, kNeedsQuery, on(c, &CaptureCalls::GetCapture)},
      {"POST", capture + ":finish", kNeedsNothing, on(c, &CaptureCalls::FinishCapture)},
      {"DELETE", capture, kNeedsNothing, on(c, &CaptureCalls::DeleteCapture)},
      {"GET", capture + "/args", kNeedsQuery, on(c, &CaptureCalls::QueryArgs)},
      {"GET", arg, kNeedsQuery, on(c, &CaptureCalls::GetArg)},
      {"GET", arg + "/payload", kNeedsQuery | kNeedsRange | kNeedsBudget,
       on(p, &PayloadCalls::Payload)},
      {"GET", arg + "/tensor", kNeedsQuery | kNeedsBudget, on(p, &PayloadCalls::Tensor)},
      {"GET", "/v1/jobs", kNeedsQuery, on(c, &CaptureCalls::ListJobs)},
      {"GET", job, kNeedsQuery, on(c, &CaptureCalls::GetJob)},
      {"GET", job + "/args", kNeedsQuery, on(c, &CaptureCalls::QueryJob)},
      {"GET", job + "/first_nonfinite", kNeedsQuery, on(c, &CaptureCalls::FirstNonfinite)},
      {"GET", job + "/grid", kNeedsQuery, on(c, &CaptureCalls::JobGrid)},
      {"GET", job + "/compare", kNeedsQuery, on(c, &CaptureCalls::CompareJobs)},
      {"GET", job + "/compare_ranks", kNeedsQuery, on(c, &CaptureCalls::CompareRanks)},
      {"GET", capture + "/trace", kNeedsQuery, on(c, &CaptureCalls::CaptureTrace)},
      {"GET", job + "/trace", kNeedsQuery, on(c, &CaptureCalls::JobTrace)},
      {"POST", "/v1/rpc/([A-Za-z]+)", kNeedsBody, on(c, &CaptureCalls::Rpc)},
  };
}

void InstallRoutes(httplib::Server* http, const HttpGatewayOptions& options,
                   CaptureCalls* captures, PayloadCalls* payloads) {
  std::vector<Route> routes = ApiRoutes(captures, payloads);
  auto open = std::make_shared<std::set<std::string>>();
  for (const Route& route : routes) {
    if (route.needs & kNeedsNoToken) open->insert(absl::StrCat(route.method, " ", route.path));
  }
  http->set_pre_routing_handler(
      [&options, open](const httplib::Request& req, httplib::Response& res) {
        return PreRoute(options, *open, req, res);
      });
  InstallWebAssets(http);
  for (Route& route : routes) {
    const std::string method = route.method;
    if (method == "GET") {
      http->Get(route.path, std::move(route.handler));
    } else if (method == "POST") {
      http->Post(route.path, std::move(route.handler));
    } else if (method == "DELETE") {
      http->Delete(route.path, std::move(route.handler));
    } else {
      std::fprintf(stderr, "ApiRoutes: no method %s\n", route.method);
      std::abort();  // a row of the table above: a programming error
    }
  }
  http->set_error_handler(httplib::Server::HandlerWithResponse(
      [&options](const httplib::Request& req, httplib::Response& res) {
        return AnswerError(options, req, res);
      }));
  http->set_exception_handler(AnswerException);
}

}  // namespace argsdump
