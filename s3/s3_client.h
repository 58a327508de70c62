// An S3 client over libcurl and our SigV4 signer: objects (put, ranged get
// streamed to a callback, head, delete, list), multipart uploads (and the
// abort of stale ones), buckets for tests and tools. It talks to any
// S3-compatible store (tested against Ceph RGW) and writes nothing
// store-specific.
//
// Invariants: every request is signed (x-amz-content-sha256 on every one);
// retries (exponential backoff with full jitter, bounded attempts and a
// total deadline) happen in one place, Execute(), for connection errors,
// 5xx, 429/SlowDown and RequestTimeout only; credentials never appear in an
// error message or a log line. Thread-safe: each call takes a curl handle
// from a small pool (connections are reused).
#ifndef ARGSDUMP_S3_S3_CLIENT_H_
#define ARGSDUMP_S3_S3_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "s3/s3_xml.h"
#include "s3/sigv4.h"

namespace argsdump::s3 {

// Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and
// AWS_SESSION_TOKEN); NotFound when they are not set.
absl::StatusOr<Credentials> CredentialsFromEnvironment();
// Credentials from a file in the AWS ini format ([profile] then
// aws_access_key_id / aws_secret_access_key / aws_session_token lines).
// Errors name the file and profile, never a value.
absl::StatusOr<Credentials> CredentialsFromFile(const std::string& path,
                                                const std::string& profile);
// The environment first, else `path` (when "": AWS_SHARED_CREDENTIALS_FILE,
// else ~/.aws/credentials) with `profile` (when "": AWS_PROFILE, else
// "default").
absl::StatusOr<Credentials> DefaultCredentials(const std::string& path = "",
                                               const std::string& profile = "");

struct RetryPolicy {
  int max_attempts = 6;                                   // >= 1
  std::chrono::milliseconds initial_backoff{50};          // the first cap
  std::chrono::milliseconds max_backoff{5000};            // caps grow x2 up to this
  std::chrono::milliseconds total_deadline{60000};        // all attempts of one call
};

struct S3ClientOptions {
  std::string endpoint;  // "http://127.0.0.1:8000", "https://s3.eu-west-1.amazonaws.com"
  std::string region = "us-east-1";
  bool virtual_host_style = false;  // bucket.host/key instead of host/bucket/key
  Credentials credentials;
  RetryPolicy retry;
  std::chrono::milliseconds connect_timeout{5000};
  // A transfer slower than low_speed_bytes_per_second for low_speed_time is
  // a timeout (and retried): a stalled store never hangs a call.
  std::chrono::seconds low_speed_time{30};
  long low_speed_bytes_per_second = 1024;
  std::string ca_file;  // "": the system CA store
  size_t max_idle_handles = 8;
};

struct ObjectInfo {
  uint64_t size = 0;  // the whole object's size (also for a ranged GET)
  std::string etag;   // as sent, quotes included
};

struct PutOptions {
  // Create only: If-None-Match: *; an existing key is FailedPrecondition.
  bool if_none_match = false;
  // How the store can check the body: its SHA-256 in the signature (the
  // default), or Content-MD5 with an UNSIGNED-PAYLOAD signature, or neither
  // (UNSIGNED-PAYLOAD only: for TLS, or for measuring).
  enum class BodyCheck { kSignedSha256, kContentMd5, kNone };
  BodyCheck body_check = BodyCheck::kSignedSha256;
  std::string content_type;
};

// Bytes [offset, offset + length) of an object; length nullopt: to its end.
struct ByteRange {
  uint64_t offset = 0;
  std::optional<uint64_t> length;
};

struct CompletedPart {
  int part_number = 0;
  std::string etag;
};

// Receives an object's bytes in order, chunk by chunk; a non-OK status
// stops the transfer and is what the call returns (never retried).
using ChunkCallback = std::function<absl::Status(std::string_view)>;

class S3Client {
 public:
  static absl::StatusOr<std::unique_ptr<S3Client>> Create(S3ClientOptions options);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // The stored object's ETag.
  absl::StatusOr<std::string> PutObject(const std::string& bucket, const std::string& key,
                                        std::string_view body, const PutOptions& options = {});
  // Streams the range to `on_chunk`. A body cut short is retried from the
  // byte where it broke (If-Match on the first answer's ETag); still short
  // after the last attempt, DataLoss naming the key and the byte.
  absl::StatusOr<ObjectInfo> GetObject(const std::string& bucket, const std::string& key,
                                       const ByteRange& range, const ChunkCallback& on_chunk);
  // The range in memory, refused (ResourceExhausted) past max_bytes.
  absl::StatusOr<std::string> GetObjectToString(const std::string& bucket,
                                                const std::string& key, const ByteRange& range,
                                                size_t max_bytes);
  absl::StatusOr<ObjectInfo> HeadObject(const std::string& bucket, const std::string& key);
  // Deleting a missing key is OK (S3's answer is 204 either way).
  absl::Status DeleteObject(const std::string& bucket, const std::string& key);
  // One page; follow next_continuation_token while is_truncated.
  absl::StatusOr<ListObjectsPage> ListObjectsV2(const std::string& bucket,
                                                const std::string& prefix,
                                                const std::string& continuation_token = "",
                                                int max_keys = 1000);

  absl::StatusOr<std::string> CreateMultipartUpload(const std::string& bucket,
                                                    const std::string& key);
  // The part's ETag (parts but the last are >= 5 MiB on S3); `check` as
  // PutObject's.
  absl::StatusOr<std::string> UploadPart(
      const std::string& bucket, const std::string& key, const std::string& upload_id,
      int part_number, std::string_view body,
      PutOptions::BodyCheck check = PutOptions::BodyCheck::kSignedSha256);
  // Server-side copy of `source_key` (a range of it, when given) as a part.
  absl::StatusOr<std::string> UploadPartCopy(const std::string& bucket, const std::string& key,
                                             const std::string& upload_id, int part_number,
                                             const std::string& source_bucket,
                                             const std::string& source_key,
                                             std::optional<ByteRange> source_range = {});
  // Does not trust the answer's ETag (Ceph RGW 16 sends it empty): HEAD the
  // key for it. A retried completion that finds the upload gone is OK when
  // the key now holds an object of as many parts (the lost answer's work).
  absl::Status CompleteMultipartUpload(const std::string& bucket, const std::string& key,
                                       const std::string& upload_id,
                                       const std::vector<CompletedPart>& parts);
  absl::Status AbortMultipartUpload(const std::string& bucket, const std::string& key,
                                    const std::string& upload_id);
  absl::StatusOr<ListUploadsPage> ListMultipartUploads(const std::string& bucket,
                                                       const std::string& prefix,
                                                       const std::string& key_marker = "",
                                                       const std::string& upload_id_marker = "");
  // Aborts every upload under `prefix` initiated before `initiated_before`;
  // how many it aborted.
  absl::StatusOr<int> AbortUploadsInitiatedBefore(const std::string& bucket,
                                                  const std::string& prefix,
                                                  absl::Time initiated_before);

  // For tests and tools; a bucket we already own is OK.
  absl::Status CreateBucket(const std::string& bucket);

  // A URL that GETs the object without credentials for `expires` (SigV4
  // query form). It carries the access key id and a signature, never the
  // secret; whoever holds it can read the object until it expires.
  std::string PresignedGetUrl(const std::string& bucket, const std::string& key,
                              std::chrono::seconds expires) const;

  // Internal (defined in s3_client.cc, incomplete here).
  struct Request;
  struct Response;

 private:
  explicit S3Client(S3ClientOptions options);
  // One attempt. `stream` (may be null) gets a 2xx body.
  absl::StatusOr<Response> Perform(const Request& request, const ChunkCallback* stream);
  // Every retry of the client is here.
  absl::StatusOr<Response> Execute(Request& request, const ChunkCallback* stream);
  // The Host header and the decoded path of a bucket and key, by addressing style.
  std::pair<std::string, std::string> HostAndPath(const std::string& bucket,
                                                  const std::string& key) const;
  static void CheckBody(PutOptions::BodyCheck check, Request* request);
  void* AcquireHandle();
  void ReleaseHandle(void* handle);

  S3ClientOptions options_;
  std::string scheme_;     // "http" / "https"
  std::string authority_;  // host[:port] as the Host header spells it
  std::mutex mu_;
  std::vector<void*> idle_handles_;  // CURL*, guarded by mu_
};

// An ISO 8601 time as S3 lists it ("2026-12-05T22:00:00.000Z").
absl::StatusOr<absl::Time> ParseIso8601(const std::string& text);

}  // namespace argsdump::s3

#endif  // ARGSDUMP_S3_S3_CLIENT_H_
