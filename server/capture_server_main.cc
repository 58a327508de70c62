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
#include "catalog/catalog.h"
#include "s3/s3_client.h"
#include "server/capture_service.h"
#include "store/remote_captures.h"
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
ABSL_FLAG(std::string, object_store, "",
          "s3://BUCKET[/PREFIX]: keep captures in an S3-compatible object store, catalogued "
          "in PostgreSQL (--catalog); --root is then the live captures' scratch disk");
ABSL_FLAG(std::string, s3_endpoint, "",
          "the store's URL (http://127.0.0.1:7480, https://s3.eu-west-1.amazonaws.com); "
          "required with --object_store");
ABSL_FLAG(std::string, s3_region, "us-east-1", "the region requests are signed for");
ABSL_FLAG(std::string, s3_credentials_file, "",
          "AWS credentials file (ini: [profile] aws_access_key_id / aws_secret_access_key); "
          "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the environment come first");
ABSL_FLAG(std::string, s3_profile, "", "the profile in --s3_credentials_file (default: "
          "AWS_PROFILE, else \"default\")");
ABSL_FLAG(bool, s3_virtual_host, false,
          "address the bucket as BUCKET.host (virtual-host style) instead of host/BUCKET");
ABSL_FLAG(std::string, s3_ca_file, "",
          "PEM file of the CA(s) to trust for an https endpoint (default: the system's)");
ABSL_FLAG(std::string, s3_retry_deadline, "20s",
          "how long one request to the store is retried (backoff with jitter) before it "
          "fails: a segment's commit then fails its appends UNAVAILABLE, and clients resume "
          "(kept below the clients' 30 s wait for an acknowledgment)");
ABSL_FLAG(std::string, catalog, "",
          "the PostgreSQL catalog: postgresql://USER[:PASSWORD]@HOST:PORT/DB (empty: libpq's "
          "PG* variables); with --object_store");
ABSL_FLAG(std::string, cache_bytes, "1GiB",
          "local cache of finished captures' indexes read from the object store");
ABSL_FLAG(std::string, group_commit_ms, "0",
          "with --object_store: the least time (in ms or with a unit) between the starts of two "
          "commits of a capture, unless --group_commit_bytes are waiting: fewer, larger "
          "segments (fewer PUTs) for at most this much more acknowledgment latency");
ABSL_FLAG(std::string, group_commit_bytes, "8MiB",
          "with --object_store: the most appended bytes one segment holds (one append larger "
          "than this goes alone)");
ABSL_FLAG(bool, seal_copy_parts, false,
          "with --object_store: build a sealed args.bin by copying the segments' payload bytes "
          "inside the store (UploadPartCopy) where a segment holds a whole part, instead of "
          "uploading it from --root (slower on a store on the same machine; saves the "
          "server's uplink)");
ABSL_FLAG(std::string, gc_every, "1h",
          "with --object_store: how often objects no catalog row names are looked for "
          "(also at startup; 0: only at startup)");
ABSL_FLAG(std::string, gc_min_age, "1h",
          "with --object_store: an orphan object is deleted once it is this old (younger "
          "ones may be an upload whose commit is on its way)");
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
      {"cache_bytes", Quantity::Bytes(int64_t{1} << 20, kPiB)},
      {"s3_retry_deadline", Quantity::Duration(100, 3600 * 1000)},
      {"group_commit_ms", Quantity::Milliseconds(0, 10 * 1000, "as soon as the last commit ended")},
      // A segment is read back whole to rebuild a capture: bounded well
      // below what one may hold (1 GiB).
      {"group_commit_bytes", Quantity::Bytes(int64_t{4} << 10, int64_t{256} << 20)},
      {"gc_every", Quantity::Duration(0, kCentury, "only at startup")},
      // An upload on its way to its commit is an orphan for a moment: a
      // minute at least, far longer than a commit's retries.
      {"gc_min_age", Quantity::Duration(60 * 1000, kCentury)},
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
  o.hub.group_commit_delay = line.Duration("group_commit_ms");
  o.hub.group_commit_bytes = static_cast<uint64_t>(line.Quantity("group_commit_bytes"));
  o.hub.gc_every = line.Duration("gc_every");
  o.hub.gc_min_age = line.Duration("gc_min_age");
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
  std::printf("capture_server listening on %s:%d root=%s%s\n", host.c_str(), server.port(),
              o.hub.root.c_str(),
              o.hub.remote == nullptr
                  ? ""
                  : absl::StrCat(" object_store=s3://", o.hub.remote->options().location.bucket,
                                 "/", o.hub.remote->options().location.prefix)
                        .c_str());
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

// The object store and its catalog from the flags; null without
// --object_store. Errors name the flag.
absl::StatusOr<std::unique_ptr<RemoteCaptures>> OpenObjectStore(const CommandLine& line) {
  const std::string uri = absl::GetFlag(FLAGS_object_store);
  if (uri.empty()) {
    for (const char* flag : {"s3_endpoint", "s3_credentials_file", "catalog"}) {
      if (line.Given(flag)) {
        return absl::InvalidArgumentError(
            absl::StrCat(line.Spelling(flag), " is for an object store: set --object_store too"));
      }
    }
    return std::unique_ptr<RemoteCaptures>();
  }
  absl::StatusOr<ObjectStoreUri> location = ParseObjectStoreUri(uri);
  if (!location.ok()) return location.status();
  s3::S3ClientOptions s3;
  s3.endpoint = absl::GetFlag(FLAGS_s3_endpoint);
  if (s3.endpoint.empty()) {
    return absl::InvalidArgumentError("--object_store needs --s3_endpoint (the store's URL)");
  }
  s3.region = absl::GetFlag(FLAGS_s3_region);
  s3.virtual_host_style = absl::GetFlag(FLAGS_s3_virtual_host);
  s3.ca_file = absl::GetFlag(FLAGS_s3_ca_file);
  s3.retry.total_deadline = absl::ToChronoMilliseconds(line.Duration("s3_retry_deadline"));
  absl::StatusOr<s3::Credentials> credentials = s3::DefaultCredentials(
      absl::GetFlag(FLAGS_s3_credentials_file), absl::GetFlag(FLAGS_s3_profile));
  if (!credentials.ok()) {
    return absl::Status(credentials.status().code(),
                        absl::StrCat("object store credentials: ", credentials.status().message(),
                                     " (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                                     "--s3_credentials_file)"));
  }
  s3.credentials = *std::move(credentials);
  absl::StatusOr<std::unique_ptr<s3::S3Client>> client = s3::S3Client::Create(std::move(s3));
  if (!client.ok()) return client.status();
  Catalog::Options catalog_options;
  catalog_options.pg.uri = absl::GetFlag(FLAGS_catalog);
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(catalog_options);
  if (!catalog.ok()) {
    return absl::Status(catalog.status().code(),
                        absl::StrCat("--catalog: ", catalog.status().message()));
  }
  RemoteCaptures::Options options;
  options.location = *std::move(location);
  options.cache_bytes = static_cast<uint64_t>(line.Quantity("cache_bytes"));
  options.copy_parts = absl::GetFlag(FLAGS_seal_copy_parts);
  return RemoteCaptures::Open(*std::move(client), *std::move(catalog), std::move(options));
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

  absl::StatusOr<std::unique_ptr<RemoteCaptures>> remote = OpenObjectStore(line);
  if (!remote.ok()) return Fail(std::string(remote.status().message()));
  o.hub.remote = remote->get();
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
