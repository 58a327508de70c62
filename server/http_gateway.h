// The HTTP/JSON face of the capture service (capture_server --http_listen,
// DESIGN.md §12) and the web view it serves at "/".
//
// Every /v1/ request is one call of argsdump.v1.CaptureService on the
// server's in-process channel: the same handlers, the same checks, the same
// bearer token (the request's "Authorization" header is the call's
// metadata), the same answers, printed with protobuf's JSON mapping
// (server/proto_json.h). No query is implemented twice. Errors are the
// call's status: an HTTP status code (HttpStatusFor) and
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
//   GET    /  /app.js  /style.css                                 the web view
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
#include "server/tensor_view.h"

namespace argsdump {

class HttpListener;

struct HttpGatewayOptions {
  // host:port ("[::1]:port" for IPv6); port 0 picks a free one.
  std::string listen;
  // Both set: HTTPS with this certificate chain and private key (PEM).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Connections served at once, a thread each while it is open (kept
  // alive, or its request still arriving); more wait for one to end. A
  // browser opens up to six.
  int max_connections = 256;
  // What a client may hold of the server (server/http_listener.h): its
  // request (head and body) must arrive within `request_timeout` of its
  // connection's turn (or of the previous answer's end on a kept-alive
  // one): 408, then the connection closes. An answer it takes no byte of
  // for `write_stall_timeout` is cut. With every connection slot taken, a
  // new connection takes the slot of the client that has kept the server
  // waiting longest (for its request, or to take its answer), once that
  // has lasted `evict_after`: that client gets 503 or its answer is cut.
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds write_stall_timeout{10000};
  std::chrono::milliseconds evict_after{1000};
  // What the kernel buffers of an answer per connection (SO_SNDBUF); 0:
  // its own sizing.
  int send_buffer_bytes = 0;
  // Payload and tensor work in flight across requests (their read chunks,
  // a tensor's grid and answer), in bytes. A request that would take it
  // past this waits up to `budget_wait` for others to end, then gets 503
  // with Retry-After.
  uint64_t inflight_budget_bytes = 256ull << 20;
  std::chrono::milliseconds budget_wait{1000};
  TensorViewLimits tensor;
  // Origins ("https://grafana.example:3000", or "*" for any) whose pages
  // may call /v1/ from a browser (CORS: the answers carry
  // Access-Control-Allow-Origin, preflights are answered). Empty: none
  // (the page at "/" is same-origin and needs none). Each one is checked
  // by Start (scheme://host[:port], no path).
  std::vector<std::string> cors_origins;
  // Non-empty: every /v1/ request needs "Authorization: Bearer <token>"
  // (the capture service's token; checked before anything else in the
  // request, then again by the service).
  std::string auth_token;
};

// The HTTP status for a gRPC status code (the usual mapping: NOT_FOUND 404,
// INVALID_ARGUMENT / FAILED_PRECONDITION / OUT_OF_RANGE 400,
// UNAUTHENTICATED 401, PERMISSION_DENIED 403, ALREADY_EXISTS / ABORTED 409,
// RESOURCE_EXHAUSTED 429, CANCELLED 499, UNIMPLEMENTED 501, UNAVAILABLE
// 503, DEADLINE_EXCEEDED 504, others 500).
int HttpStatusFor(grpc::StatusCode code);

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
  class Routes;
  HttpGateway() = default;
  std::unique_ptr<HttpListener> http_;
  std::unique_ptr<Routes> routes_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_GATEWAY_H_
