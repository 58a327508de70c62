#include "tests/testing/capture_service_fixture.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "catalog/catalog.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "s3/s3_client.h"
#include "tests/testing/ceph_rgw.h"
#include "tests/testing/postgres_server.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

constexpr char kPrefix[] = "captures/";

bool ObjectStoreBackend() {
  const char* backend = std::getenv("CAPTURE_SERVICE_TEST_BACKEND");
  return backend != nullptr && std::string(backend) == "object_store";
}

absl::StatusOr<std::unique_ptr<s3::S3Client>> RgwClient() {
  auto rgw = SharedCephRgw();
  if (!rgw.ok()) return rgw.status();
  return s3::S3Client::Create((*rgw)->ClientOptions());
}

// Where a root folder's captures go: its bucket and catalog, made on first
// sight and the same for every service over that folder.
struct Home {
  std::string bucket;
  std::string catalog;
};
absl::StatusOr<Home> HomeFor(const std::string& root) {
  static std::mutex mu;
  static std::map<std::string, Home>* homes = new std::map<std::string, Home>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = homes->find(root);
  if (it != homes->end()) return it->second;
  const size_t n = homes->size();
  auto pg = SharedPostgresServer();
  if (!pg.ok()) return pg.status();
  auto db = (*pg)->CreateDatabase(absl::StrCat("svc_", n));
  if (!db.ok()) return db.status();
  auto client = RgwClient();
  if (!client.ok()) return client.status();
  Home home{absl::StrCat("svc-", ::getpid(), "-", n), *db};
  if (absl::Status s = (*client)->CreateBucket(home.bucket); !s.ok()) return s;
  return (*homes)[root] = home;
}

absl::StatusOr<std::unique_ptr<RemoteCaptures>> OpenRemote(const std::string& root) {
  auto home = HomeFor(root);
  if (!home.ok()) return home.status();
  auto client = RgwClient();
  if (!client.ok()) return client.status();
  Catalog::Options co;
  co.pg.uri = home->catalog;
  auto catalog = Catalog::Open(co);
  if (!catalog.ok()) return catalog.status();
  RemoteCaptures::Options o;
  o.location.bucket = home->bucket;
  o.location.prefix = kPrefix;
  return RemoteCaptures::Open(*std::move(client), *std::move(catalog), std::move(o));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TestCaptureService>> TestCaptureService::Start(
    TestCaptureServiceOptions options) {
  std::unique_ptr<TestCaptureService> service(new TestCaptureService());
  CaptureServerOptions o;
  o.listen = options.listen;
  o.hub.root = options.root;
  o.hub.max_capture_bytes = options.max_capture_bytes;
  if (ObjectStoreBackend()) {
    if (absl::Status s = CreateDirectories(options.root); !s.ok()) return s;
    auto remote = OpenRemote(options.root);
    if (!remote.ok()) return remote.status();
    service->remote_ = std::move(remote).value();
    o.hub.remote = service->remote_.get();
    o.hub.gc_every = absl::ZeroDuration();
  }
  o.auth_token = std::move(options.auth_token);
  o.tls_cert_file = std::move(options.tls_cert_file);
  o.tls_key_file = std::move(options.tls_key_file);
  if (options.http) o.http.listen = "127.0.0.1:0";
  auto server = CaptureServer::Start(std::move(o));
  if (!server.ok()) return server.status();
  service->root_ = std::move(options.root);
  service->server_ = std::move(server).value();
  service->target_ = absl::StrCat("127.0.0.1:", service->server_->port());
  return service;
}

TestCaptureService::~TestCaptureService() {
  Shutdown(std::chrono::milliseconds(1000));
  server_.reset();  // before the object store it uses
}

absl::StatusOr<std::string> TestCaptureService::CaptureFile(const std::string& capture,
                                                            const std::string& file) const {
  if (remote_ == nullptr) {
    return ReadFileToString(absl::StrCat(root_, "/", capture, "/args_dump/", file), 1ull << 32);
  }
  // Sealed under some epoch: <prefix><capture>/<epoch>/args_dump/<file>.
  s3::S3Client& client = remote_->client();
  const std::string& bucket = remote_->options().location.bucket;
  auto listed = client.ListObjectsV2(bucket, absl::StrCat(kPrefix, capture, "/"));
  if (!listed.ok()) return listed.status();
  for (const s3::ObjectEntry& o : listed->objects) {
    if (absl::EndsWith(o.key, absl::StrCat("/args_dump/", file))) {
      return client.GetObjectToString(bucket, o.key, {}, 1ull << 32);
    }
  }
  return absl::NotFoundError(absl::StrCat("capture ", capture, " has no sealed ", file));
}

std::string TestCaptureService::CaptureDir(const std::string& capture) const {
  if (remote_ == nullptr) return absl::StrCat(root_, "/", capture, "/args_dump");
  static std::atomic<int> downloads{0};
  const std::string dir =
      TempPath(absl::StrCat("downloaded_", capture, "_", downloads++, "/args_dump"));
  EXPECT_TRUE(CreateDirectories(dir).ok()) << dir;
  for (const char* file : {kManifestName, kBinName, kIndexName}) {
    absl::StatusOr<std::string> bytes = CaptureFile(capture, file);
    // A level 3 capture without payloads has no args.bin.
    if (!bytes.ok() && absl::IsNotFound(bytes.status()) && std::string(file) == kBinName) continue;
    EXPECT_TRUE(bytes.ok()) << capture << "/" << file << ": " << bytes.status();
    if (!bytes.ok()) return "";
    EXPECT_TRUE(WriteStringToFile(absl::StrCat(dir, "/", file), *bytes).ok());
  }
  return dir;
}

std::unique_ptr<v1::CaptureService::Stub> TestCaptureService::NewStub() const {
  return v1::CaptureService::NewStub(
      grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
}

}  // namespace argsdump
