// The HTTP/JSON face of the capture service (capture_server --http_listen)
// and the web view it serves at "/". The endpoints are one table in
// server/http/routes.cc; this is what capture_server starts and stops.
//
// Every /v1/ request is one call of argsdump.v1.CaptureService on the
// server's in-process channel: the same handlers, the same checks, the same
// bearer token (the request's "Authorization" header is the call's
// metadata), the same answers, printed with protobuf's JSON mapping
// (server/http/proto_json.h). No query is implemented twice. Errors are the
// call's status: an HTTP status code (HttpStatusFor, server/http/responses.h) and
//   {"code": 5, "status": "NOT_FOUND", "message": "..."}.
//
//   GET    /v1/captures[?state=&label=k:v&page_size=&page_token=]  ListCaptures
//   GET    /v1/captures/NAME                                      GetCapture
//   POST   /v1/captures/NAME:finish                               FinishCapture
//   DELETE /v1/captures/NAME                                      DeleteCapture
//   GET    /v1/captures/NAME/args[?task_id=&stage=&role=&kind=&dtype=&arg_index=
//            &func_id=&step=&overflow=&has_nonfinite=&func_unknown=&page_size=
//            &page_token=]                                        QueryArgs
//   GET    /v1/captures/NAME/args/ID                              GetArg
//   GET    /v1/captures/NAME/args/ID/payload   (Range: bytes=)    ReadPayload
//   GET    /v1/captures/NAME/args/ID/tensor[?index=&fit=]         GetArg + ReadPayload
//   POST   /v1/rpc/METHOD  (body: the request message in JSON)   any unary method
//   GET    /  /app.js  /*.mjs  /style.css                         the web view
//   OPTIONS /v1/...  a CORS preflight from an origin in cors_origins
#ifndef ARGSDUMP_SERVER_HTTP_GATEWAY_H_
#define ARGSDUMP_SERVER_HTTP_GATEWAY_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/http/gateway_options.h"

namespace argsdump {

class HttpListener;

class HttpGateway {
 public:
  // `channel`: the capture server's in-process channel. Listens once this
  // returns (InvalidArgument for a bad --http_listen or TLS files,
  // Unavailable when the port cannot be bound).
  static absl::StatusOr<std::unique_ptr<HttpGateway>> Start(
      const HttpGatewayOptions& options, std::shared_ptr<grpc::Channel> channel);
  ~HttpGateway();
  int port() const { return port_; }
  // Stops listening, gives the requests being served `grace` to end, then
  // cuts the connections still open, and waits for their threads (before
  // the gRPC server shuts down: they are calls on it). The destructor
  // shuts down with no grace.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  struct Handlers;
  HttpGateway() = default;
  std::unique_ptr<HttpListener> http_;
  std::unique_ptr<Handlers> handlers_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_GATEWAY_H_
