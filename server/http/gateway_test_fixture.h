// Test-only: the HTTP face's tests' fixture. A real capture_server (in
// this process) with its HTTP face on 127.0.0.1 port 0, an HTTP client
// and a gRPC stub on it, and a raw connection for what a client library
// would not send.
#ifndef ARGSDUMP_SERVER_HTTP_GATEWAY_TEST_FIXTURE_H_
#define ARGSDUMP_SERVER_HTTP_GATEWAY_TEST_FIXTURE_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/files.h"
#include "grpcpp/grpcpp.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "server/capture_service.h"
#include "server/http/http_test_capture.h"
#include "server/http/proto_json.h"
#include "server/http/tensor_view.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {

// A raw connection to 127.0.0.1:port, for what an HTTP client library
// would not send (a head never finished, no Content-Length). Reads give
// up after 30 s (a failure, not a pace the test relies on).
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval limit{30, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // An answer's head and its Content-Length bytes of body; "" when the
  // connection ended first.
  std::string ReadAnswer() {
    std::string got;
    size_t body_at = std::string::npos, length = 0;
    for (;;) {
      if (body_at == std::string::npos && (body_at = got.find("\r\n\r\n")) != std::string::npos) {
        body_at += 4;
        const size_t h = got.find("Content-Length: ");
        if (h != std::string::npos && h < body_at) length = std::strtoull(&got[h + 16], nullptr, 10);
      }
      if (body_at != std::string::npos && got.size() >= body_at + length) return got;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return "";
      got.append(buf, static_cast<size_t>(n));
    }
  }
  // True when the server closed the connection (a read sees its end).
  bool ClosedByServer() {
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  int fd_;
  bool connected_ = false;
};

class HttpGatewayTest : public ::testing::Test {
 protected:
  void Start(const std::string& name, const std::string& token = "",
             const std::string& cert = "", const std::string& key = "") {
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = FreshTempDir(name);
    o.auth_token = token;
    o.tls_cert_file = cert;
    o.tls_key_file = key;
    o.http.listen = "127.0.0.1:0";
    o.http.tensor.max_elements = 300;  // the 16x32 tensor is over it
    o.http.cors_origins = cors_;
    if (configure_) configure_(&o.http);
    auto server = CaptureServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->http_port(), 0);
    auto creds = grpc::InsecureChannelCredentials();
    if (!cert.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = *ReadFileToString(cert);
      creds = grpc::SslCredentials(ssl);
    }
    stub_ = v1::CaptureService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()), creds));
    if (cert.empty()) {
      http_ = std::make_unique<httplib::ClientImpl>("127.0.0.1", server_->http_port());
    } else {
      auto tls = std::make_unique<httplib::SSLClient>("127.0.0.1", server_->http_port());
      tls->set_ca_cert_path(cert.c_str());
      tls->enable_server_certificate_verification(true);
      http_ = std::move(tls);
    }
    // The library's 5 s read bound is shorter than a reduction of a large
    // slice takes on a loaded machine (the gateway has its own bounds, which
    // the tests that need them set).
    http_->set_read_timeout(60);
    token_ = token;
  }

  std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
    return ctx;
  }

  // A GET with the test's token; the status and body.
  httplib::Result Get(const std::string& path, httplib::Headers headers = {}) {
    if (!token_.empty() && headers.count("Authorization") == 0) {
      headers.emplace("Authorization", "Bearer " + token_);
    }
    return http_->Get(path.c_str(), headers);
  }

  // GET `path` must be 200 with exactly the JSON of `grpc_answer`.
  void ExpectSameAnswer(const std::string& path, const google::protobuf::Message& grpc_answer) {
    auto res = Get(path);
    ASSERT_TRUE(res) << path << ": " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    EXPECT_EQ(res->body, ProtoToJson(grpc_answer) + "\n") << path;
  }

  void ExpectError(const std::string& path, int status, const std::string& code,
                   const std::string& message_part, httplib::Headers headers = {}) {
    auto res = Get(path, headers);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, status) << path << ": " << res->body;
    EXPECT_NE(res->body.find("\"status\": \"" + code + "\""), std::string::npos)
        << path << ": " << res->body;
    EXPECT_NE(res->body.find(message_part), std::string::npos) << path << ": " << res->body;
  }

  std::string GrpcPayload(const std::string& capture, uint64_t id) {
    v1::ReadPayloadRequest req;
    req.set_capture(capture);
    req.set_record_id(id);
    auto ctx = Ctx();
    auto reader = stub_->ReadPayload(ctx.get(), req);
    std::string out;
    v1::PayloadChunk chunk;
    while (reader->Read(&chunk)) out += chunk.data();
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  }

  void WriteScene(const std::string& name) {
    const SceneRecords s = SceneCapture();
    SceneIngest in(stub_.get(), name, token_);
    ASSERT_TRUE(in.Send(s, 0, s.records.size()));
    ASSERT_TRUE(in.Finish());
  }

  std::unique_ptr<CaptureServer> server_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
  std::unique_ptr<httplib::ClientImpl> http_;
  std::string token_;
  std::vector<std::string> cors_;  // set before Start
  std::function<void(HttpGatewayOptions*)> configure_;  // set before Start
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_GATEWAY_TEST_FIXTURE_H_
