// capture_server: the argsdump capture service over a folder of captures.
//   bazel run //server:capture_server -- --root /tmp/captures
// Prints "capture_server listening on <host>:<port>" once it accepts calls.
// SIGINT/SIGTERM: stops accepting calls, gives running ones --shutdown_grace_ms,
// then writes the manifest of every live capture and exits 0.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/files.h"
#include "grpc/health/v1/health.pb.h"
#include "server/capture_service.h"
#include "tools/cli_flags.h"
#include "tools/quantity.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "host:port to listen on (port 0: any free port, printed at start)");
ABSL_FLAG(std::string, root, "captures", "folder holding the captures (<root>/<name>/args_dump)");
ABSL_FLAG(std::string, max_capture_bytes, "0",
          "args.bin bytes one capture may hold (such as 4096 or 64GiB); more is "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(bool, payload_dedup, true,
          "store a payload equal to one already in the same capture once (entries share its "
          "bin_offset); --payload_dedup=false stores every payload as sent");
ABSL_FLAG(std::string, max_total_bytes, "0",
          "bytes on disk all captures under --root may take (such as 500GiB): a new capture "
          "first evicts finished ones, oldest first, only as many as it takes, never a live "
          "one; RESOURCE_EXHAUSTED (deleting nothing) when that cannot make room");
ABSL_FLAG(std::string, retain_for, "0",
          "evict finished captures whose manifest is older than this (a unit is needed: 168h, "
          "30m, 7d)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve TLS (with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding a bearer token every CaptureService call must present "
          "('authorization: Bearer <token>')");
ABSL_FLAG(std::string, http_listen, "",
          "host:port to serve the HTTP/JSON API and the web view on as well (port 0: any "
          "free port, printed at start; empty: off). Same --tls_cert/--tls_key and "
          "--auth_token_file as gRPC");
ABSL_FLAG(std::vector<std::string>, http_cors_origin, {},
          "origins (comma-separated, e.g. https://grafana.example:3000; * for any) whose "
          "pages may call the HTTP API from a browser (CORS; empty: none, the built-in page "
          "needs none)");
ABSL_FLAG(std::string, http_max_connections, "256",
          "HTTP connections served at once (a thread each while open); more wait for one to "
          "end");
ABSL_FLAG(std::string, http_max_tensor_elements, "262144",
          "elements a .../tensor answer may hold as JSON numbers without fit= (more: 413)");
ABSL_FLAG(std::string, http_request_timeout, "10s",
          "an HTTP request (head and body) must arrive within this of its connection's turn: "
          "408, then the connection closes");
ABSL_FLAG(std::string, http_write_stall_timeout, "10s",
          "an HTTP answer the client takes no byte of for this long is cut");
ABSL_FLAG(std::string, http_evict_after, "1s",
          "with every HTTP connection slot taken, a new connection takes the slot of the client "
          "that has kept the server waiting longest, once that has lasted this (0: at once)");
ABSL_FLAG(std::string, http_inflight_budget_bytes, "256MiB",
          "payload and tensor work in flight across HTTP requests; a request that would take "
          "more waits --http_budget_wait for others to end, then gets 503 with Retry-After");
ABSL_FLAG(std::string, http_budget_wait, "1s",
          "how long an HTTP request waits for --http_inflight_budget_bytes (0: not at all)");
ABSL_FLAG(std::string, http_send_buffer_bytes, "0",
          "what the kernel buffers of an HTTP answer per connection (SO_SNDBUF)");
ABSL_FLAG(std::string, shutdown_grace_ms, "5000",
          "how long running calls get at SIGINT/SIGTERM, in ms or with a unit (then they are "
          "cancelled; live captures stay live on disk, resumable after a restart)");
ABSL_FLAG(std::string, live_idle_timeout_ms, "600000",
          "a live capture no stream is attached to gets its manifest after this long without "
          "activity, in ms or with a unit (30m)");

namespace argsdump {
namespace {

CommandLineSpec CaptureServerSpec() {
  CommandLineSpec spec;
  spec.program = "capture_server";
  spec.synopsis =
      "capture_server: the argsdump capture service (gRPC) over a folder of captures.\n"
      "  capture_server [--root DIR] [--listen HOST:PORT] [--http_listen HOST:PORT] [flags]\n"
      "Prints \"capture_server listening on <host>:<port>\" once it accepts calls;\n"
      "SIGINT/SIGTERM stops it (exit 0). Exit status 2: a bad flag, an unreadable token\n"
      "file, a root another server holds, a port in use.";
  spec.flags_file = __FILE__;
  constexpr int64_t kPiB = int64_t{1} << 50;
  constexpr int64_t kCentury = 36500 * kMillisecondsPerDay;
  spec.quantities = {
      {"max_capture_bytes", Quantity::Bytes(0, kPiB, "no limit")},
      {"max_total_bytes", Quantity::Bytes(0, kPiB, "no limit")},
      {"retain_for", Quantity::Duration(0, kCentury, "keep them")},
      {"live_idle_timeout_ms", Quantity::Milliseconds(0, kCentury, "never")},
      {"shutdown_grace_ms", Quantity::Milliseconds(0, 3600 * 1000, "cancel at once")},
      {"http_max_connections", Quantity::Count(1, 65536)},
      {"http_max_tensor_elements", Quantity::Count(1, int64_t{1} << 24)},
      {"http_request_timeout", Quantity::Duration(100, 3600 * 1000)},
      {"http_write_stall_timeout", Quantity::Duration(100, 3600 * 1000)},
      {"http_evict_after", Quantity::Duration(0, 3600 * 1000, "at once")},
      {"http_inflight_budget_bytes", Quantity::Bytes(int64_t{1} << 20, int64_t{1} << 40)},
      {"http_budget_wait", Quantity::Duration(0, 60 * 1000, "not at all")},
      {"http_send_buffer_bytes", Quantity::Bytes(0, int64_t{64} << 20, "the kernel's sizing")},
  };
  return spec;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "capture_server: %s\n", message.c_str());
  return 2;
}

bool IsLoopback(const std::string& listen) {
  return listen.rfind("127.", 0) == 0 || listen.rfind("localhost:", 0) == 0 ||
         listen.rfind("[::1]:", 0) == 0 || listen.rfind("unix:", 0) == 0;
}

// The server's options from the flags (every number was range-checked by
// the parser) except the token, which is read from its file.
CaptureServerOptions OptionsFromFlags(const CommandLine& line) {
  CaptureServerOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.hub.root = absl::GetFlag(FLAGS_root);
  o.hub.max_capture_bytes = static_cast<uint64_t>(line.Quantity("max_capture_bytes"));
  o.hub.payload_dedup = absl::GetFlag(FLAGS_payload_dedup);
  o.hub.live_idle_timeout = line.Duration("live_idle_timeout_ms");
  o.hub.max_total_bytes = static_cast<uint64_t>(line.Quantity("max_total_bytes"));
  o.hub.retain_for = line.Duration("retain_for");
  o.http.listen = absl::GetFlag(FLAGS_http_listen);
  o.http.tensor.max_elements = static_cast<uint64_t>(line.Quantity("http_max_tensor_elements"));
  o.http.cors_origins = absl::GetFlag(FLAGS_http_cors_origin);
  o.http.max_connections = static_cast<int>(line.Quantity("http_max_connections"));
  o.http.request_timeout = absl::ToChronoMilliseconds(line.Duration("http_request_timeout"));
  o.http.write_stall_timeout =
      absl::ToChronoMilliseconds(line.Duration("http_write_stall_timeout"));
  o.http.evict_after = absl::ToChronoMilliseconds(line.Duration("http_evict_after"));
  o.http.inflight_budget_bytes =
      static_cast<uint64_t>(line.Quantity("http_inflight_budget_bytes"));
  o.http.budget_wait = absl::ToChronoMilliseconds(line.Duration("http_budget_wait"));
  o.http.send_buffer_bytes = static_cast<int>(line.Quantity("http_send_buffer_bytes"));
  o.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  return o;
}

// A warning for each address past loopback that has no token or no TLS.
void WarnIfExposed(const CaptureServerOptions& o) {
  for (const std::string& address : {o.listen, o.http.listen}) {
    if (address.empty() || IsLoopback(address)) continue;
    if (o.auth_token.empty() || o.tls_cert_file.empty()) {
      std::fprintf(stderr,
                   "capture_server: warning: %s is not a loopback address and %s; anyone who "
                   "reaches it can read and write captures\n",
                   address.c_str(),
                   o.auth_token.empty() ? "no --auth_token_file is set" : "there is no TLS");
    }
  }
}

// Where the server listens (stdout, which tests and scripts read), and the
// HTTP face's limits (stderr).
void PrintListening(const CaptureServerOptions& o, const CaptureServer& server) {
  const std::string host = o.listen.substr(0, o.listen.rfind(':'));
  std::printf("capture_server listening on %s:%d root=%s\n", host.c_str(), server.port(),
              o.hub.root.c_str());
  if (server.http_port() != 0) {
    const std::string http_host = o.http.listen.substr(0, o.http.listen.rfind(':'));
    std::printf("capture_server http on %s://%s:%d/\n", o.tls_cert_file.empty() ? "http" : "https",
                http_host.c_str(), server.http_port());
    std::fprintf(
        stderr,
        "capture_server: HTTP limits: %d connections, request deadline %s, answer stall %s, "
        "evict after %s, %s in flight (waited for %s), send buffer %s\n",
        o.http.max_connections,
        FormatQuantity(o.http.request_timeout.count(), Quantity::kDuration).c_str(),
        FormatQuantity(o.http.write_stall_timeout.count(), Quantity::kDuration).c_str(),
        FormatQuantity(o.http.evict_after.count(), Quantity::kDuration).c_str(),
        FormatQuantity(static_cast<int64_t>(o.http.inflight_budget_bytes), Quantity::kBytes)
            .c_str(),
        FormatQuantity(o.http.budget_wait.count(), Quantity::kDuration).c_str(),
        o.http.send_buffer_bytes == 0
            ? "sized by the kernel"
            : FormatQuantity(o.http.send_buffer_bytes, Quantity::kBytes).c_str());
  }
}

int Main(const CommandLine& line) {
  if (!line.positional.empty()) {
    return Fail(absl::StrCat("unexpected argument '", line.positional[0], "'"));
  }
  CaptureServerOptions o = OptionsFromFlags(line);
  if (!o.http.cors_origins.empty() && o.http.listen.empty()) {
    return Fail(absl::StrCat(line.Spelling("http_cors_origin"),
                             ": the HTTP face is off; it needs --http_listen"));
  }
  const std::string token_file = absl::GetFlag(FLAGS_auth_token_file);
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(token_file);
    if (!token.ok()) {
      return Fail(absl::StrCat(line.Spelling("auth_token_file"), ": ", token.status().message()));
    }
    o.auth_token = *std::move(token);
  }
  WarnIfExposed(o);
  // Signals are taken by sigwait below, not by handlers.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = CaptureServer::Start(o);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  PrintListening(o, **server);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "capture_server: signal %d, shutting down\n", sig);
  (*server)->Shutdown(std::chrono::milliseconds(line.Quantity("shutdown_grace_ms")));
  return 0;
}

}  // namespace
}  // namespace argsdump

int main(int argc, char** argv) {
  const argsdump::CommandLine line =
      argsdump::ParseMainCommandLine(argsdump::CaptureServerSpec(), argc, argv);
  // The generated health descriptors must be in this binary for reflection
  // to describe grpc.health.v1.Health (gRPC's own health service uses upb).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  return argsdump::Main(line);
}
