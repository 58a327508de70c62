// A capture service for tests: a real CaptureServer (gRPC, and the HTTP face
// when asked) on a free loopback port over a folder the test names, with the
// token, TLS files and quota a test needs. Tests talk to it over the network
// as any client does; it stops when the object goes away.
//
// With CAPTURE_SERVICE_TEST_BACKEND=object_store in the environment, the same
// service keeps its captures in an object store with a catalog: a real
// Ceph RGW and a real PostgreSQL started once per test binary, a bucket and
// a database per root folder (a restart over the same folder finds them
// again), the folder being the scratch disk. Tests read a capture's files
// through CaptureFile, whichever the backend.
#ifndef ARGSDUMP_TESTS_TESTING_CAPTURE_SERVICE_FIXTURE_H_
#define ARGSDUMP_TESTS_TESTING_CAPTURE_SERVICE_FIXTURE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "server/capture_hub.h"
#include "server/capture_service.h"
#include "store/remote_captures.h"

namespace argsdump {

struct TestCaptureServiceOptions {
  // The hub's root folder (made if missing; what is there is served).
  std::string root;
  // A free port by default; a restart may ask for the port it had before.
  std::string listen = "127.0.0.1:0";
  // args.bin bytes per capture, 0: no limit.
  uint64_t max_capture_bytes = 0;
  // Non-empty: every call needs "authorization: Bearer <token>".
  std::string auth_token;
  // Both set: TLS with this certificate chain and private key (PEM files).
  std::string tls_cert_file;
  std::string tls_key_file;
  // The HTTP/JSON face too, on a free loopback port of its own.
  bool http = false;
};

class TestCaptureService {
 public:
  // Starts the server; its error when it cannot (a port taken, bad TLS files).
  static absl::StatusOr<std::unique_ptr<TestCaptureService>> Start(
      TestCaptureServiceOptions options);
  // Shutdown with a second's grace, unless Shutdown ran already.
  ~TestCaptureService();

  const std::string& root() const { return root_; }
  // "127.0.0.1:<port>": what a client dials.
  const std::string& target() const { return target_; }
  int port() const { return server_->port(); }
  int http_port() const { return server_->http_port(); }
  CaptureHub& hub() { return server_->hub(); }
  // A stub over a plaintext channel to target().
  std::unique_ptr<v1::CaptureService::Stub> NewStub() const;
  // Whether the captures are in an object store (CAPTURE_SERVICE_TEST_BACKEND).
  bool object_store() const { return remote_ != nullptr; }
  // A capture's file (args_dump.json, args.bin, args.index) as stored: from
  // the root, or the object store's copy once it is finished there.
  absl::StatusOr<std::string> CaptureFile(const std::string& capture,
                                          const std::string& file) const;
  // A folder holding a finished capture's files, for readers of a local
  // capture: <root>/<capture>/args_dump, or the object store's three files
  // downloaded into a fresh folder. Empty (and a test failure) when they
  // cannot be had.
  std::string CaptureDir(const std::string& capture) const;
  // Stops accepting calls and cancels those still running after `grace`;
  // once only (later calls and the destructor do nothing).
  void Shutdown(std::chrono::milliseconds grace) { server_->Shutdown(grace); }

 private:
  TestCaptureService() = default;
  std::string root_;
  std::string target_;
  std::unique_ptr<RemoteCaptures> remote_;  // outlives the server
  std::unique_ptr<CaptureServer> server_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_CAPTURE_SERVICE_FIXTURE_H_
