// The HTTP face's routes: one table of the /v1/ endpoints (a row each:
// method, path, what the handler needs of the request, the handler), the
// web view's files, and what every request passes on its way (CORS, the
// bearer token, its body's framing) and every error's answer.
#ifndef ARGSDUMP_SERVER_HTTP_ROUTES_H_
#define ARGSDUMP_SERVER_HTTP_ROUTES_H_

#include <functional>
#include <string>
#include <vector>

#include "httplib.h"
#include "server/http/capture_calls.h"
#include "server/http/gateway_options.h"
#include "server/http/payload_calls.h"

namespace argsdump {

// What a route's handler reads of the request beyond its path, and what
// it holds; a bit set.
enum RouteNeeds : unsigned {
  kNeedsNothing = 0,
  kNeedsQuery = 1u << 0,   // query parameters (Params)
  kNeedsBody = 1u << 1,    // a JSON body (at most kMaxRequestBody)
  kNeedsRange = 1u << 2,   // the Range header (elsewhere it is dropped)
  kNeedsBudget = 1u << 3,  // bytes of the in-flight budget while it answers
  // Answers without the bearer token: it holds no capture's data and is the
  // same on every server. Its path is literal, not a pattern.
  kNeedsNoToken = 1u << 4,
};

struct Route {
  const char* method;  // "GET", "POST", "DELETE"
  std::string path;    // httplib's regex; group 1 the capture, 2 the record id
  unsigned needs;      // RouteNeeds
  std::function<void(const httplib::Request&, httplib::Response&)> handler;
};

// The /v1/ endpoints, served by `captures` and `payloads` (which outlive
// the routes).
std::vector<Route> ApiRoutes(CaptureCalls* captures, PayloadCalls* payloads);

// Installs every route on `http`: the checks before routing, the web view
// at "/", ApiRoutes, and the error and exception handlers.
void InstallRoutes(httplib::Server* http, const HttpGatewayOptions& options,
                   CaptureCalls* captures, PayloadCalls* payloads);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_ROUTES_H_
