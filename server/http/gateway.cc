#include "server/http/gateway.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/thread.h"
#include "server/http/capture_calls.h"
#include "server/http/connection_threads.h"
#include "server/http/httplib_workarounds.h"
#include "server/http/listener.h"
#include "server/http/payload_calls.h"
#include "server/http/request_checks.h"
#include "server/http/routes.h"
#include "server/http/service_calls.h"

namespace argsdump {
namespace {

constexpr int kKeepAliveSeconds = 5;

}  // namespace

// What the routes call, alive as long as the listener: the options they
// read, the service's stub, the handlers.
struct HttpGateway::Handlers {
  Handlers(const HttpGatewayOptions& options, std::shared_ptr<grpc::Channel> channel)
      : options(options),
        calls(std::move(channel)),
        captures(&calls),
        payloads(&calls, options.inflight_budget_bytes, options.budget_wait, options.tensor) {}
  const HttpGatewayOptions options;
  ServiceCalls calls;
  CaptureCalls captures;
  PayloadCalls payloads;
};

namespace {

struct ListenAddress {
  std::string host;
  int port = 0;  // 0: any free one
};

// The options Start refuses before it binds: --http_listen not host:port
// ("[::1]:port" for IPv6), half of a TLS pair, a CORS origin that is not
// one, a TLS file that cannot be read.
absl::StatusOr<ListenAddress> CheckOptions(const HttpGatewayOptions& options) {
  const size_t colon = options.listen.rfind(':');
  ListenAddress address;
  address.port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &address.port) || address.port < 0 ||
      address.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_listen ", options.listen, ": not host:port"));
  }
  address.host = options.listen.substr(0, colon);
  if (address.host.size() > 2 && address.host.front() == '[' && address.host.back() == ']') {
    address.host = address.host.substr(1, address.host.size() - 2);
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  for (const std::string& origin : options.cors_origins) {
    if (auto bad = BadOrigin(origin); !bad.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--http_cors_origin ", origin, ": ", bad));
    }
  }
  if (!options.tls_cert_file.empty()) {
    // OpenSSL says only "not valid": name the file that is not readable.
    for (const std::string* f : {&options.tls_cert_file, &options.tls_key_file}) {
      if (auto bytes = ReadFileToString(*f); !bytes.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("HTTPS: cannot read ", *f, ": ",
                                                       bytes.status().message()));
      }
    }
  }
  return address;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(
    const HttpGatewayOptions& options, std::shared_ptr<grpc::Channel> channel) {
  absl::StatusOr<ListenAddress> address = CheckOptions(options);
  if (!address.ok()) return address.status();
  const std::string& host = address->host;
  int port = address->port;
  std::unique_ptr<HttpGateway> gateway(new HttpGateway());
  HttpListenerLimits limits;
  limits.max_connections = static_cast<size_t>(std::max(2, options.max_connections));
  limits.request_timeout = options.request_timeout;
  limits.write_stall_timeout = options.write_stall_timeout;
  limits.evict_after = options.evict_after;
  limits.send_buffer_bytes = options.send_buffer_bytes;
  limits.keep_alive_timeout = std::chrono::seconds(kKeepAliveSeconds);
  gateway->http_ =
      std::make_unique<HttpListener>(limits, options.tls_cert_file, options.tls_key_file);
  if (!gateway->http_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTPS: ", options.tls_cert_file, " and ", options.tls_key_file,
        " are not a PEM certificate chain and its private key"));
  }
  // What the answers' Keep-Alive header says (the listener closes an idle
  // connection after as long).
  gateway->http_->set_keep_alive_timeout(kKeepAliveSeconds);
  gateway->http_->set_payload_max_length(kMaxRequestBody);
  // An answer goes out as two writes (headers, body): with Nagle on, the
  // body waits for the ACK of the headers, which a keep-alive client delays
  // by 40 ms (the second query on a connection took 42 ms instead of 1).
  gateway->http_->set_tcp_nodelay(true);
  // SO_REUSEADDR only, and the listening socket kept for its backlog.
  auto listening = std::make_shared<int>(-1);
  UseReuseAddrOnly(gateway->http_.get(), listening);
  gateway->handlers_ = std::make_unique<Handlers>(options, std::move(channel));
  Handlers& handlers = *gateway->handlers_;
  InstallRoutes(gateway->http_.get(), handlers.options, &handlers.captures, &handlers.payloads);
  if (port == 0) {
    port = gateway->http_->bind_to_any_port(host);
  } else if (!gateway->http_->bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--http_listen ", options.listen, ": cannot listen (in use, or no such address)"));
  }
  gateway->port_ = port;
  RaiseListenBacklog(*listening);
  HttpListener* http = gateway->http_.get();
  auto exited = std::make_shared<std::atomic<bool>>(false);
  if (absl::Status s = StartThread("the HTTP accept thread", &gateway->listener_,
                                   [http, exited] {
                                     http->listen_after_bind();
                                     exited->store(true);
                                   });
      !s.ok()) {
    return s;
  }
  WaitForAcceptLoop(*http, [&exited] { return exited->load(); });
  return gateway;
}

void HttpGateway::Shutdown(std::chrono::milliseconds grace) {
  if (http_ == nullptr || !listener_.joinable()) return;
  http_->stop();  // no new connections; kept-alive ones close after their request
  // A request still arriving (a client that trickles its head), a download
  // a slow client reads, an idle kept-alive connection: cut after the grace,
  // so a SIGTERM ends the server whatever its clients do.
  // Again until all are gone: one accepted as the listener closed is cut
  // on the next round.
  ConnectionThreads& connections = http_->threads();
  if (!connections.WaitIdle(std::chrono::steady_clock::now() + grace)) {
    do {
      CutConnectionsOnPort(port_);
    } while (!connections.WaitIdle(std::chrono::steady_clock::now() +
                                   std::chrono::milliseconds(100)));
  }
  listener_.join();
}

HttpGateway::~HttpGateway() { Shutdown(std::chrono::milliseconds(0)); }

}  // namespace argsdump
