// What capture_server's HTTP face is configured with (its --http_* flags):
// the listener's address and limits, the in-flight byte budget, the tensor
// endpoint's bounds, CORS origins and the bearer token.
#ifndef ARGSDUMP_SERVER_HTTP_GATEWAY_OPTIONS_H_
#define ARGSDUMP_SERVER_HTTP_GATEWAY_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "server/http/tensor_view.h"

namespace argsdump {

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
  // What a client may hold of the server (server/http/listener.h): its
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

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_GATEWAY_OPTIONS_H_
