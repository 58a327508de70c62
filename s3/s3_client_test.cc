// The S3 client against a real Ceph RGW that the test binary boots itself
// (tests/testing/ceph_rgw.h, shared by every case here), and against tiny
// local TCP servers for what a healthy store does not do: refuse
// connections, cut a body short, answer 503 SlowDown.
#include "s3/s3_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/ceph_rgw.h"
#include "tests/testing/child_process.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace argsdump::s3 {
namespace {

constexpr char kBucket[] = "argsdump-s3-client-test";

// Deterministic bytes, different at every offset of a part.
std::string Pattern(size_t size, uint32_t seed) {
  std::string out(size, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    out[i] = static_cast<char>(x >> 24);
  }
  return out;
}

std::unique_ptr<S3Client> ClientFor(const CephRgw& rgw, const std::string& secret = "") {
  S3ClientOptions options;
  options.endpoint = rgw.endpoint();
  options.region = rgw.region();
  options.credentials = Credentials{rgw.access_key(), secret.empty() ? rgw.secret_key() : secret, ""};
  auto client = S3Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

class S3ClientRgwTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rgw = SharedCephRgw();
    ASSERT_TRUE(rgw.ok()) << rgw.status();
    rgw_ = *rgw;
    client_ = ClientFor(*rgw_);
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(client_->CreateBucket(kBucket).ok());
  }
  CephRgw* rgw_ = nullptr;
  std::unique_ptr<S3Client> client_;
};

TEST_F(S3ClientRgwTest, PutGetRangedGetHeadDelete) {
  const std::string key = "basic/hello.txt";
  auto etag = client_->PutObject(kBucket, key, "hello, object world");
  ASSERT_TRUE(etag.ok()) << etag.status();
  EXPECT_FALSE(etag->empty());

  auto whole = client_->GetObjectToString(kBucket, key, {}, 1 << 20);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, "hello, object world");

  auto part = client_->GetObjectToString(kBucket, key, {7, 6}, 1 << 20);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(*part, "object");
  auto tail = client_->GetObjectToString(kBucket, key, {14, std::nullopt}, 1 << 20);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(*tail, "world");

  auto head = client_->HeadObject(kBucket, key);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->size, 19u);
  EXPECT_EQ(head->etag, *etag);

  // Content-MD5 instead of a signed SHA-256: S3's ETag of a plain PUT is the MD5.
  PutOptions md5;
  md5.body_check = PutOptions::BodyCheck::kContentMd5;
  auto md5_etag = client_->PutObject(kBucket, "basic/md5.txt", "hello", md5);
  ASSERT_TRUE(md5_etag.ok()) << md5_etag.status();
  EXPECT_EQ(*md5_etag, "\"5d41402abc4b2a76b9719d911017c592\"");

  ASSERT_TRUE(client_->DeleteObject(kBucket, key).ok());
  auto gone = client_->HeadObject(kBucket, key);
  EXPECT_TRUE(absl::IsNotFound(gone.status())) << gone.status();
  auto missing = client_->GetObjectToString(kBucket, key, {}, 1 << 20);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), key)) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "NoSuchKey")) << missing.status();
  EXPECT_TRUE(client_->DeleteObject(kBucket, key).ok());  // again: still fine
}

TEST_F(S3ClientRgwTest, KeysWithCharactersThatNeedEncoding) {
  const std::vector<std::string> keys = {"odd/a b+c=d&e%f~g.txt", "odd/./dot", "odd/x//y",
                                         "odd/\xE1\x88\xB4 unicode", "odd/q?r#s"};
  for (const std::string& key : keys) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(client_->PutObject(kBucket, key, key).ok());
    auto back = client_->GetObjectToString(kBucket, key, {}, 1024);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, key);
  }
  auto page = client_->ListObjectsV2(kBucket, "odd/");
  ASSERT_TRUE(page.ok()) << page.status();
  std::set<std::string> listed;
  for (const ObjectEntry& e : page->objects) listed.insert(e.key);
  EXPECT_EQ(listed, std::set<std::string>(keys.begin(), keys.end()));
}

TEST_F(S3ClientRgwTest, ListFollowsContinuationTokens) {
  std::set<std::string> written;
  for (int i = 0; i < 7; ++i) {
    const std::string key = absl::StrCat("paged/k", i);
    ASSERT_TRUE(client_->PutObject(kBucket, key, std::string(i, 'x')).ok());
    written.insert(key);
  }
  ASSERT_TRUE(client_->PutObject(kBucket, "pagedother/k", "x").ok());
  std::set<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    auto page = client_->ListObjectsV2(kBucket, "paged/", token, 3);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->objects.size(), 3u);
    for (const ObjectEntry& e : page->objects) {
      EXPECT_TRUE(listed.insert(e.key).second) << "listed twice: " << e.key;
      EXPECT_EQ(e.size, static_cast<uint64_t>(e.key.back() - '0'));
    }
    token = page->is_truncated ? page->next_continuation_token : "";
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(listed, written);
}

TEST_F(S3ClientRgwTest, GetStreamsInChunksAndAStreamRefusalIsFinal) {
  const std::string body = Pattern(3 << 20, 7);
  ASSERT_TRUE(client_->PutObject(kBucket, "stream/3mib", body).ok());
  std::string got;
  int chunks = 0;
  size_t largest = 0;
  auto info = client_->GetObject(kBucket, "stream/3mib", {}, [&](std::string_view chunk) {
    got.append(chunk.data(), chunk.size());
    ++chunks;
    largest = std::max(largest, chunk.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, body.size());
  EXPECT_TRUE(got == body);
  EXPECT_GT(chunks, 10);               // streamed, not one buffer
  EXPECT_LE(largest, size_t{1} << 20);  // curl's buffer, not the object

  int calls = 0;
  auto refused = client_->GetObject(kBucket, "stream/3mib", {}, [&](std::string_view) {
    ++calls;
    return absl::CancelledError("the reader stopped");
  });
  EXPECT_TRUE(absl::IsCancelled(refused.status())) << refused.status();
  EXPECT_EQ(calls, 1);
  auto capped = client_->GetObjectToString(kBucket, "stream/3mib", {}, 1 << 20);
  EXPECT_TRUE(absl::IsResourceExhausted(capped.status())) << capped.status();
}

TEST_F(S3ClientRgwTest, MultipartOfThreePartsAndServerSideCopy) {
  const std::string key = "multipart/three";
  const std::vector<std::string> parts = {Pattern(5 << 20, 1), Pattern(5 << 20, 2),
                                          Pattern(1 << 20, 3)};
  auto id = client_->CreateMultipartUpload(kBucket, key);
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<CompletedPart> done;
  for (int i = 0; i < 3; ++i) {
    auto etag = client_->UploadPart(kBucket, key, *id, i + 1, parts[i]);
    ASSERT_TRUE(etag.ok()) << etag.status();
    done.push_back({i + 1, *etag});
  }
  ASSERT_TRUE(client_->CompleteMultipartUpload(kBucket, key, *id, done).ok());
  auto head = client_->HeadObject(kBucket, key);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->size, 11u << 20);
  EXPECT_TRUE(absl::EndsWith(head->etag, "-3\"")) << head->etag;
  // A range across the first part boundary.
  auto across = client_->GetObjectToString(kBucket, key, {(5 << 20) - 100, 200}, 1 << 20);
  ASSERT_TRUE(across.ok()) << across.status();
  EXPECT_TRUE(*across == parts[0].substr(parts[0].size() - 100) + parts[1].substr(0, 100));

  // Server-side copy: the first two parts of `key` become part 1, a fresh
  // body part 2.
  const std::string copy_key = "multipart/copied";
  auto copy_id = client_->CreateMultipartUpload(kBucket, copy_key);
  ASSERT_TRUE(copy_id.ok()) << copy_id.status();
  auto copied = client_->UploadPartCopy(kBucket, copy_key, *copy_id, 1, kBucket, key,
                                        ByteRange{0, uint64_t{10} << 20});
  ASSERT_TRUE(copied.ok()) << copied.status();
  auto fresh = client_->UploadPart(kBucket, copy_key, *copy_id, 2, "tail");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE(client_->CompleteMultipartUpload(kBucket, copy_key, *copy_id,
                                               {{1, *copied}, {2, *fresh}})
                  .ok());
  auto copy = client_->GetObjectToString(kBucket, copy_key, {}, 16 << 20);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_TRUE(*copy == parts[0] + parts[1] + "tail");
}

TEST_F(S3ClientRgwTest, StaleUploadsAreListedAndAborted) {
  const std::string prefix = "stale/";
  auto a = client_->CreateMultipartUpload(kBucket, prefix + "a");
  auto b = client_->CreateMultipartUpload(kBucket, prefix + "b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(client_->UploadPart(kBucket, prefix + "a", *a, 1, "some bytes").ok());
  auto listed = client_->ListMultipartUploads(kBucket, prefix);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->uploads.size(), 2u);
  for (const UploadEntry& u : listed->uploads) {
    EXPECT_TRUE(ParseIso8601(u.initiated).ok()) << u.initiated;
  }
  // Nothing is older than an hour ago; both are older than a minute ahead.
  auto none = client_->AbortUploadsInitiatedBefore(kBucket, prefix, absl::Now() - absl::Hours(1));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0);
  auto both = client_->AbortUploadsInitiatedBefore(kBucket, prefix, absl::Now() + absl::Minutes(1));
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(*both, 2);
  auto after = client_->ListMultipartUploads(kBucket, prefix);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->uploads.empty());
  // A part for an aborted upload is refused.
  auto late = client_->UploadPart(kBucket, prefix + "a", *a, 2, "late");
  EXPECT_TRUE(absl::IsNotFound(late.status())) << late.status();
}

TEST_F(S3ClientRgwTest, CreateOnlyPutIsRefusedTheSecondTime) {
  const std::string key = "create-only/once";
  PutOptions create_only;
  create_only.if_none_match = true;
  ASSERT_TRUE(client_->DeleteObject(kBucket, key).ok());
  auto first = client_->PutObject(kBucket, key, "first", create_only);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = client_->PutObject(kBucket, key, "second", create_only);
  if (second.ok()) {
    GTEST_SKIP() << "this store ignores If-None-Match: * on PUT (the object was overwritten)";
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  auto kept = client_->GetObjectToString(kBucket, key, {}, 100);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "first");
}

TEST_F(S3ClientRgwTest, WrongSecretIsPermissionDeniedWithoutTheSecret) {
  const std::string wrong = "not-the-secret-0123456789abcdefghijklmno";
  auto client = ClientFor(*rgw_, wrong);
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto put = client->PutObject(kBucket, "denied/x", "x");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(absl::IsPermissionDenied(put.status())) << put.status();
  const std::string message(put.status().message());
  EXPECT_TRUE(absl::StrContains(message, "SignatureDoesNotMatch")) << message;
  EXPECT_TRUE(absl::StrContains(message, "denied/x")) << message;
  EXPECT_FALSE(absl::StrContains(message, wrong)) << message;
  EXPECT_FALSE(absl::StrContains(message, rgw_->secret_key())) << message;
  EXPECT_LT(took, std::chrono::seconds(5));  // not retried
  auto list = client->ListObjectsV2(kBucket, "");
  EXPECT_TRUE(absl::IsPermissionDenied(list.status())) << list.status();
}

TEST_F(S3ClientRgwTest, VirtualHostAddressing) {
  // http://BUCKET.localhost:PORT/key (the fixture sets rgw dns name = localhost).
  S3ClientOptions options;
  options.endpoint = absl::StrCat("http://localhost:", rgw_->endpoint().substr(rgw_->endpoint().rfind(':') + 1));
  options.region = rgw_->region();
  options.virtual_host_style = true;
  options.credentials = Credentials{rgw_->access_key(), rgw_->secret_key(), ""};
  auto client = S3Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->PutObject(kBucket, "vhost/a b", "virtual").ok());
  auto back = client_->GetObjectToString(kBucket, "vhost/a b", {}, 100);  // path style
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "virtual");
  auto page = (*client)->ListObjectsV2(kBucket, "vhost/");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "vhost/a b");
}

TEST_F(S3ClientRgwTest, TlsWithTheStoresCaAndRefusedWithoutIt) {
  S3ClientOptions options;
  options.endpoint = rgw_->tls_endpoint();
  options.region = rgw_->region();
  options.credentials = Credentials{rgw_->access_key(), rgw_->secret_key(), ""};
  options.ca_file = rgw_->ca_file();
  auto client = S3Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->PutObject(kBucket, "tls/x", "over TLS").ok());
  auto back = (*client)->GetObjectToString(kBucket, "tls/x", {}, 100);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "over TLS");
  // The system CA store does not know the test's self-signed certificate.
  options.ca_file.clear();
  auto untrusting = S3Client::Create(options);
  ASSERT_TRUE(untrusting.ok());
  auto head = (*untrusting)->HeadObject(kBucket, "tls/x");
  EXPECT_TRUE(absl::IsFailedPrecondition(head.status())) << head.status();
  EXPECT_TRUE(absl::StrContains(head.status().message(), "TLS")) << head.status();
}

TEST_F(S3ClientRgwTest, PresignedGetUrlIsFetchedWithoutCredentials) {
  ASSERT_TRUE(client_->PutObject(kBucket, "presigned/a b.txt", "shared by URL").ok());
  const std::string url = client_->PresignedGetUrl(kBucket, "presigned/a b.txt", std::chrono::seconds(300));
  EXPECT_FALSE(absl::StrContains(url, rgw_->secret_key()));
  EXPECT_TRUE(absl::StrContains(url, "X-Amz-Signature=")) << url;
  const std::string out = TempPath("presigned.out");
  auto curl = ChildProcess::Start({"/usr/bin/curl", "-sS", "-f", "-o", out, url}, "/dev/null");
  ASSERT_TRUE(curl.ok()) << curl.status();
  const std::optional<int> status = (*curl)->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << (*curl)->stderr_text();
  EXPECT_EQ(ReadFileOrEmpty(out), "shared by URL");
}

TEST_F(S3ClientRgwTest, ConcurrentCallsShareOneClient) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        const std::string key = absl::StrCat("concurrent/", t, "/", i);
        const std::string body = Pattern(1000 + i, t * 100 + i);
        if (!client_->PutObject(kBucket, key, body).ok()) ++failures;
        auto back = client_->GetObjectToString(kBucket, key, {}, 1 << 20);
        if (!back.ok() || *back != body) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// Last of the RGW cases (gtest runs them in order): the gateway goes away
// and comes back; RADOS kept the objects.
TEST_F(S3ClientRgwTest, ZzGatewayStoppedIsUnavailableAndRecovers) {
  ASSERT_TRUE(client_->PutObject(kBucket, "restart/kept", "kept across a restart").ok());
  ASSERT_TRUE(rgw_->StopGateway().ok());
  S3ClientOptions options;
  options.endpoint = rgw_->endpoint();
  options.region = rgw_->region();
  options.credentials = Credentials{rgw_->access_key(), rgw_->secret_key(), ""};
  options.retry.max_attempts = 3;
  options.retry.initial_backoff = std::chrono::milliseconds(20);
  auto impatient = S3Client::Create(options);
  ASSERT_TRUE(impatient.ok());
  auto head = (*impatient)->HeadObject(kBucket, "restart/kept");
  EXPECT_TRUE(absl::IsUnavailable(head.status())) << head.status();
  ASSERT_TRUE(rgw_->StartGateway().ok());
  auto back = client_->GetObjectToString(kBucket, "restart/kept", {}, 100);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "kept across a restart");
}

// ------------------------------------------------------ a misbehaving store

// A local HTTP server on 127.0.0.1:0, one connection at a time, answering
// each request with `answer(request_text, connection_index)` and closing.
class TinyServer {
 public:
  using Answer = std::function<std::string(const std::string&, int)>;
  explicit TinyServer(Answer answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TinyServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }
  int connections() const { return connections_.load(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Serve() {
    while (!stopping_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(c, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      const int index = connections_++;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
      }
      const std::string reply = answer_(request, index);
      size_t sent = 0;
      while (sent < reply.size()) {
        const ssize_t n = ::send(c, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      ::close(c);
    }
  }
  Answer answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

std::unique_ptr<S3Client> ClientOf(const std::string& endpoint, int attempts) {
  S3ClientOptions options;
  options.endpoint = endpoint;
  options.credentials = Credentials{"AKIDLOCAL", "local-secret-value", ""};
  options.retry.max_attempts = attempts;
  options.retry.initial_backoff = std::chrono::milliseconds(20);
  options.retry.max_backoff = std::chrono::milliseconds(200);
  options.connect_timeout = std::chrono::milliseconds(2000);
  options.low_speed_time = std::chrono::seconds(5);
  auto client = S3Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return std::move(*client);
}

// The object the cutting servers serve: 1000 bytes; a Range is honoured.
const std::string& ServedObject() {
  static const std::string object = Pattern(1000, 42);
  return object;
}

// A reply for `request` of bytes [from, to) of the object, of which only
// the first `send` bytes of the body go out before the connection closes.
std::string RangeReply(const std::string& request, size_t send_at_most) {
  size_t from = 0, to = ServedObject().size();
  const size_t at = request.find("\r\nrange: bytes=");
  if (at != std::string::npos) {
    const size_t start = at + 15;
    const size_t dash = request.find('-', start);
    const size_t end = request.find("\r\n", start);
    (void)absl::SimpleAtoi(request.substr(start, dash - start), &from);
    size_t last = 0;
    if (dash + 1 < end && absl::SimpleAtoi(request.substr(dash + 1, end - dash - 1), &last)) {
      to = last + 1;
    }
  }
  const std::string body = ServedObject().substr(from, to - from);
  std::string head = at != std::string::npos
                         ? absl::StrCat("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes ", from,
                                        "-", to - 1, "/", ServedObject().size(), "\r\n")
                         : "HTTP/1.1 200 OK\r\n";
  absl::StrAppend(&head, "Content-Length: ", body.size(), "\r\nETag: \"e1\"\r\nConnection: close\r\n\r\n");
  return head + body.substr(0, std::min(send_at_most, body.size()));
}

TEST(S3ClientFaultTest, RefusedConnectionsAreUnavailableAfterBoundedRetries) {
  // A port with nothing listening: bind, read the port, close.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::close(fd);

  auto client = ClientOf(absl::StrCat("http://127.0.0.1:", port), 4);
  const auto start = std::chrono::steady_clock::now();
  auto head = client->HeadObject("bucket", "key");
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  ASSERT_TRUE(absl::IsUnavailable(head.status())) << head.status();
  EXPECT_TRUE(absl::StrContains(head.status().message(), "gave up after")) << head.status();
  EXPECT_FALSE(absl::StrContains(head.status().message(), "local-secret-value"));
  // 4 attempts, backoff caps 20 + 40 + 80 ms: well under a second.
  EXPECT_LT(took.count(), 2000) << head.status();
  std::fprintf(stderr, "refused: Unavailable after %lld ms (4 attempts)\n",
               static_cast<long long>(took.count()));
}

TEST(S3ClientFaultTest, ABodyCutOnceIsResumedFromTheByteWhereItBroke) {
  TinyServer server([](const std::string& request, int index) {
    return RangeReply(request, index == 0 ? 400 : SIZE_MAX);
  });
  auto client = ClientOf(server.endpoint(), 4);
  std::string got;
  auto info = client->GetObject("bucket", "cut/once", {}, [&](std::string_view chunk) {
    got.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(got == ServedObject());
  EXPECT_EQ(info->size, 1000u);
  const std::vector<std::string> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(absl::StrContains(requests[1], "range: bytes=400-")) << requests[1];
  EXPECT_TRUE(absl::StrContains(requests[1], "if-match: \"e1\"")) << requests[1];
  // Every request was signed, with the payload hash header RGW needs.
  EXPECT_TRUE(absl::StrContains(requests[0], "x-amz-content-sha256: "));
  EXPECT_TRUE(absl::StrContains(requests[0], "Authorization: AWS4-HMAC-SHA256 Credential=AKIDLOCAL/"));
}

TEST(S3ClientFaultTest, AStoreIgnoringTheRangeOfAResumedReadIsCutToTheRange) {
  // The first answer breaks after 400 bytes; the second ignores the Range
  // and sends the whole object (200): the stream must still see each byte once.
  TinyServer server([](const std::string&, int index) {
    const std::string& object = ServedObject();
    return absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", object.size(),
                        "\r\nETag: \"e1\"\r\nConnection: close\r\n\r\n",
                        index == 0 ? object.substr(0, 400) : object);
  });
  auto client = ClientOf(server.endpoint(), 4);
  std::string got;
  auto info = client->GetObject("bucket", "ignores/range", {}, [&](std::string_view chunk) {
    got.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(got == ServedObject());
  EXPECT_EQ(server.connections(), 2);
}

TEST(S3ClientFaultTest, ABodyAlwaysCutIsDataLossNamingKeyAndByte) {
  TinyServer server([](const std::string& request, int) { return RangeReply(request, 200); });
  auto client = ClientOf(server.endpoint(), 3);
  uint64_t received = 0;
  auto info = client->GetObject("bucket", "cut/always", {100, 800}, [&](std::string_view chunk) {
    received += chunk.size();
    return absl::OkStatus();
  });
  ASSERT_TRUE(absl::IsDataLoss(info.status())) << info.status();
  const std::string message(info.status().message());
  EXPECT_TRUE(absl::StrContains(message, "bucket/cut/always")) << message;
  // Bytes [100, 900) asked; every answer is cut after 200 bytes, each
  // attempt resumes where the last broke: 3 attempts reach byte 700.
  EXPECT_TRUE(absl::StrContains(message, "ended at byte 700")) << message;
  EXPECT_EQ(received, 600u);
}

TEST(S3ClientFaultTest, SlowDownAndServerErrorsAreRetriedThenSucceed) {
  TinyServer server([](const std::string& request, int index) -> std::string {
    if (index == 0) {
      const std::string body = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
      return absl::StrCat("HTTP/1.1 503 Slow Down\r\nContent-Length: ", body.size(),
                          "\r\nConnection: close\r\n\r\n", body);
    }
    if (index == 1) return "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    return RangeReply(request, SIZE_MAX);
  });
  auto client = ClientOf(server.endpoint(), 4);
  auto body = client->GetObjectToString("bucket", "busy", {}, 4096);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_TRUE(*body == ServedObject());
  EXPECT_EQ(server.connections(), 3);
}

TEST(S3ClientFaultTest, ServerErrorsUntilTheLastAttemptAreUnavailable) {
  TinyServer server([](const std::string&, int) -> std::string {
    const std::string body = "<Error><Code>InternalError</Code><Message>boom</Message></Error>";
    return absl::StrCat("HTTP/1.1 500 Internal Server Error\r\nContent-Length: ", body.size(),
                        "\r\nConnection: close\r\n\r\n", body);
  });
  auto client = ClientOf(server.endpoint(), 3);
  auto put = client->PutObject("bucket", "k", "payload");
  ASSERT_TRUE(absl::IsUnavailable(put.status())) << put.status();
  EXPECT_TRUE(absl::StrContains(put.status().message(), "InternalError: boom")) << put.status();
  EXPECT_EQ(server.connections(), 3);
}

TEST(S3ClientFaultTest, ACompletionWhoseAnswerWasLostIsRecognisedOnRetry) {
  // 1st: the connection closes with no answer (the store may have completed);
  // 2nd: NoSuchUpload; then HEAD finds an object of 2 parts.
  TinyServer server([](const std::string& request, int index) -> std::string {
    if (index == 0) return "";
    if (index == 1) {
      const std::string body = "<Error><Code>NoSuchUpload</Code><Message>gone</Message></Error>";
      return absl::StrCat("HTTP/1.1 404 Not Found\r\nContent-Length: ", body.size(),
                          "\r\nConnection: close\r\n\r\n", body);
    }
    EXPECT_TRUE(absl::StartsWith(request, "HEAD ")) << request;
    return "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nETag: \"abc-2\"\r\nConnection: close\r\n\r\n";
  });
  auto client = ClientOf(server.endpoint(), 3);
  EXPECT_TRUE(client->CompleteMultipartUpload("bucket", "k", "u1", {{1, "\"a\""}, {2, "\"b\""}}).ok());
  EXPECT_EQ(server.connections(), 3);

  // NoSuchUpload on the first attempt is the caller's mistake, not a lost answer.
  TinyServer first([](const std::string&, int) -> std::string {
    const std::string body = "<Error><Code>NoSuchUpload</Code></Error>";
    return absl::StrCat("HTTP/1.1 404 Not Found\r\nContent-Length: ", body.size(),
                        "\r\nConnection: close\r\n\r\n", body);
  });
  auto direct = ClientOf(first.endpoint(), 3);
  absl::Status s = direct->CompleteMultipartUpload("bucket", "k", "u1", {{1, "\"a\""}});
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(first.connections(), 1);
}

TEST(S3ClientFaultTest, GarbledListingIsDataLoss) {
  TinyServer server([](const std::string&, int) -> std::string {
    const std::string body = "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents>";
    return absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(),
                        "\r\nConnection: close\r\n\r\n", body);
  });
  auto client = ClientOf(server.endpoint(), 2);
  auto page = client->ListObjectsV2("bucket", "p/");
  EXPECT_TRUE(absl::IsDataLoss(page.status())) << page.status();
}

// ------------------------------------------------------------ credentials

TEST(S3CredentialsTest, IniFileProfilesAndErrorsWithoutValues) {
  const std::string path = TempPath("s3_credentials_test.ini");
  {
    std::ofstream out(path);
    out << "# comment\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = "
           "secret-default\n\n[profile ci]\naws_access_key_id=AKIDCI\naws_secret_access_key=secret-ci\n"
           "aws_session_token = token-ci\n[broken]\naws_access_key_id = AKIDB\nsecret-broken-line\n";
  }
  auto d = CredentialsFromFile(path, "default");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->access_key_id, "AKIDDEFAULT");
  EXPECT_EQ(d->secret_access_key, "secret-default");
  auto ci = CredentialsFromFile(path, "ci");
  ASSERT_TRUE(ci.ok()) << ci.status();
  EXPECT_EQ(ci->session_token, "token-ci");
  auto none = CredentialsFromFile(path, "absent");
  EXPECT_TRUE(absl::IsNotFound(none.status()));
  auto broken = CredentialsFromFile(path, "broken");
  ASSERT_FALSE(broken.ok());
  EXPECT_FALSE(absl::StrContains(broken.status().message(), "secret-broken-line"));
  EXPECT_TRUE(absl::IsNotFound(CredentialsFromFile(path + ".missing", "default").status()));
}

TEST(S3CredentialsTest, TheEnvironmentFirstThenTheSharedFileAndProfile) {
  const std::string path = TempPath("s3_default_credentials.ini");
  {
    std::ofstream out(path);
    out << "[default]\naws_access_key_id=AKIDFILE\naws_secret_access_key=s-file\n"
           "[other]\naws_access_key_id=AKIDOTHER\naws_secret_access_key=s-other\n";
  }
  {
    ScopedEnv id("AWS_ACCESS_KEY_ID", "AKIDENV");
    ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "s-env");
    ScopedEnv token("AWS_SESSION_TOKEN", "t-env");
    auto c = DefaultCredentials(path);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->access_key_id, "AKIDENV");
    EXPECT_EQ(c->session_token, "t-env");
  }
  ScopedEnv no_id("AWS_ACCESS_KEY_ID", nullptr);
  ScopedEnv no_secret("AWS_SECRET_ACCESS_KEY", nullptr);
  ScopedEnv file("AWS_SHARED_CREDENTIALS_FILE", path);
  {
    ScopedEnv profile("AWS_PROFILE", nullptr);
    auto c = DefaultCredentials();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->access_key_id, "AKIDFILE");
  }
  ScopedEnv profile("AWS_PROFILE", "other");
  auto c = DefaultCredentials();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "AKIDOTHER");
  EXPECT_EQ(DefaultCredentials("", "default")->access_key_id, "AKIDFILE");
}

TEST(S3CredentialsTest, EndpointsAreChecked) {
  S3ClientOptions options;
  options.credentials = Credentials{"a", "b", ""};
  for (const char* bad : {"", "ftp://h", "http://", "http://h/path", "http://user@h"}) {
    options.endpoint = bad;
    EXPECT_FALSE(S3Client::Create(options).ok()) << bad;
  }
  options.endpoint = "https://s3.example.com:443/";
  EXPECT_TRUE(S3Client::Create(options).ok());
  options.credentials = Credentials{};
  EXPECT_FALSE(S3Client::Create(options).ok());
}

}  // namespace
}  // namespace argsdump::s3
