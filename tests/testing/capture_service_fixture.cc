#include "tests/testing/capture_service_fixture.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace argsdump {

absl::StatusOr<std::unique_ptr<TestCaptureService>> TestCaptureService::Start(
    TestCaptureServiceOptions options) {
  CaptureServerOptions o;
  o.listen = options.listen;
  o.hub.root = options.root;
  o.hub.max_capture_bytes = options.max_capture_bytes;
  o.auth_token = std::move(options.auth_token);
  o.tls_cert_file = std::move(options.tls_cert_file);
  o.tls_key_file = std::move(options.tls_key_file);
  if (options.http) o.http.listen = "127.0.0.1:0";
  auto server = CaptureServer::Start(std::move(o));
  if (!server.ok()) return server.status();
  std::unique_ptr<TestCaptureService> service(new TestCaptureService());
  service->root_ = std::move(options.root);
  service->server_ = std::move(server).value();
  service->target_ = absl::StrCat("127.0.0.1:", service->server_->port());
  return service;
}

TestCaptureService::~TestCaptureService() { Shutdown(std::chrono::milliseconds(1000)); }

std::unique_ptr<v1::CaptureService::Stub> TestCaptureService::NewStub() const {
  return v1::CaptureService::NewStub(
      grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
}

}  // namespace argsdump
