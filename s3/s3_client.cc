#include "s3/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace argsdump::s3 {

// ------------------------------------------------------------ credentials

absl::StatusOr<Credentials> CredentialsFromEnvironment() {
  const char* id = std::getenv("AWS_ACCESS_KEY_ID");
  const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  if (id == nullptr || secret == nullptr || *id == '\0' || *secret == '\0') {
    return absl::NotFoundError("AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not set");
  }
  const char* token = std::getenv("AWS_SESSION_TOKEN");
  return Credentials{id, secret, token != nullptr ? token : ""};
}

absl::StatusOr<Credentials> CredentialsFromFile(const std::string& path,
                                                const std::string& profile) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the credentials file ", path));
  Credentials credentials;
  bool in_profile = false;
  bool found_profile = false;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line_number > 10000) break;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text[0] == '[') {
      if (text.back() != ']') {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number, ": a section header without ']'"));
      }
      absl::string_view name = absl::StripAsciiWhitespace(text.substr(1, text.size() - 2));
      absl::ConsumePrefix(&name, "profile ");  // ~/.aws/config spelling
      in_profile = name == profile;
      found_profile |= in_profile;
      continue;
    }
    if (!in_profile) continue;
    const size_t eq = text.find('=');
    if (eq == absl::string_view::npos) {
      // Never quote the line: it may hold a secret.
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": a line without '=' in [", profile, "]"));
    }
    const std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(text.substr(eq + 1)));
    if (key == "aws_access_key_id") credentials.access_key_id = value;
    if (key == "aws_secret_access_key") credentials.secret_access_key = value;
    if (key == "aws_session_token") credentials.session_token = value;
  }
  if (!found_profile) {
    return absl::NotFoundError(absl::StrCat("no profile [", profile, "] in ", path));
  }
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile [", profile, "] in ", path,
        " lacks aws_access_key_id or aws_secret_access_key"));
  }
  return credentials;
}

absl::StatusOr<Credentials> DefaultCredentials(const std::string& path,
                                               const std::string& profile) {
  auto from_env = CredentialsFromEnvironment();
  if (from_env.ok()) return from_env;
  std::string file = path;
  if (file.empty()) {
    const char* shared = std::getenv("AWS_SHARED_CREDENTIALS_FILE");
    const char* home = std::getenv("HOME");
    if (shared != nullptr && *shared != '\0') {
      file = shared;
    } else if (home != nullptr) {
      file = absl::StrCat(home, "/.aws/credentials");
    }
  }
  std::string name = profile;
  if (name.empty()) {
    const char* env_profile = std::getenv("AWS_PROFILE");
    name = env_profile != nullptr && *env_profile != '\0' ? env_profile : "default";
  }
  if (file.empty()) return absl::NotFoundError("no S3 credentials (environment or file)");
  return CredentialsFromFile(file, name);
}

absl::StatusOr<absl::Time> ParseIso8601(const std::string& text) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", text, &t, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an ISO 8601 time: '", Printable(text, 40), "'"));
  }
  return t;
}

// ---------------------------------------------------------- the request

struct S3Client::Request {
  std::string method;
  std::string bucket;  // "" for the service root
  std::string key;     // "" for the bucket itself
  NameValues query;
  NameValues headers;     // besides host, x-amz-date, x-amz-content-sha256
  std::string_view body;  // PUT / POST
  std::string payload_hash;
  size_t max_body_bytes = 16 << 20;  // a collected (non-streamed) body
  // The Range asked for, if any: a store may ignore it and send the whole
  // object (200); the stream then gets only the asked bytes.
  std::optional<ByteRange> range;
  int attempts = 0;  // set by Execute: how many it made
  // What the request is, for messages: "GET bucket/key".
  std::string What() const {
    return absl::StrCat("S3 ", method, " ", bucket, bucket.empty() || key.empty() ? "" : "/", key);
  }
};

struct S3Client::Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // collected (errors, XML, ToString)
  uint64_t streamed = 0;                       // bytes given to the stream
  absl::Status refused;                        // the stream's own refusal: final
  absl::Status broken;                         // the transfer broke after `streamed` bytes
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

namespace {

std::once_flag curl_init_once;

struct Transfer {
  const S3Client::Request* request = nullptr;
  S3Client::Response* response = nullptr;
  const ChunkCallback* stream = nullptr;
  CURL* curl = nullptr;
  size_t upload_offset = 0;
  uint64_t whole_position = 0;     // bytes of a 200 answer seen, when a range was asked
  absl::Status callback_status;    // the stream's refusal
  bool body_too_large = false;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  absl::string_view line(data, n);
  if (absl::StartsWith(line, "HTTP/")) {
    t->response->headers.clear();  // a new answer (after 100 Continue)
    return n;
  }
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos && t->response->headers.size() < 200) {
    t->response->headers[absl::AsciiStrToLower(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return n;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  absl::string_view chunk(data, n);
  if (status >= 200 && status < 300 && t->stream != nullptr) {
    if (status == 200 && t->request->range.has_value()) {
      // The whole object although a range was asked: keep only the range.
      const ByteRange& r = *t->request->range;
      const uint64_t begin = t->whole_position;
      const uint64_t end = begin + chunk.size();
      t->whole_position = end;
      const uint64_t want_begin = r.offset;
      const uint64_t want_end = r.length.has_value() ? r.offset + *r.length : UINT64_MAX;
      const uint64_t from = std::max(begin, want_begin);
      const uint64_t to = std::min(end, want_end);
      if (from >= to) return n;
      chunk = chunk.substr(from - begin, to - from);
    }
    t->callback_status = (*t->stream)(std::string_view(chunk.data(), chunk.size()));
    if (!t->callback_status.ok()) return 0;  // stops the transfer
    t->response->streamed += chunk.size();
    return n;
  }
  const size_t limit = status >= 300 ? 64 << 10 : t->request->max_body_bytes;
  if (t->response->body.size() + chunk.size() > limit) {
    t->body_too_large = true;
    return 0;
  }
  t->response->body.append(chunk.data(), chunk.size());
  return n;
}

size_t OnUpload(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view body = t->request->body;
  const size_t n = std::min(size * count, body.size() - t->upload_offset);
  std::copy_n(body.data() + t->upload_offset, n, buffer);
  t->upload_offset += n;
  return n;
}

// libcurl asks to rewind an upload it must send again (a redirect, a
// connection that died before the answer).
int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > t->request->body.size()) {
    return CURL_SEEKFUNC_FAIL;
  }
  t->upload_offset = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

bool RetryableCurlError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

std::string Md5Base64(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_md5(), nullptr);
  return absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string RangeHeader(const ByteRange& range) {
  if (range.length.has_value()) {
    return absl::StrCat("bytes=", range.offset, "-", range.offset + *range.length - 1);
  }
  return absl::StrCat("bytes=", range.offset, "-");
}

// "bytes a-b/total" -> total; nullopt when not that form.
std::optional<uint64_t> ContentRangeTotal(const std::string& value) {
  const size_t slash = value.rfind('/');
  uint64_t total = 0;
  if (slash == std::string::npos || !absl::SimpleAtoi(value.substr(slash + 1), &total)) {
    return std::nullopt;
  }
  return total;
}

// S3's error body (code and message), or what the answer was when there is none.
std::string ErrorDetail(const S3Client::Response& response) {
  if (!response.body.empty()) {
    auto error = ParseError(response.body);
    if (error.ok()) {
      return absl::StrCat(error->code, error->message.empty() ? "" : ": ", error->message);
    }
  }
  return absl::StrCat("HTTP ", response.status);
}

std::string ErrorCode(const S3Client::Response& response) {
  if (response.body.empty()) return "";
  auto error = ParseError(response.body);
  return error.ok() ? error->code : "";
}

bool RetryableAnswer(const S3Client::Response& response) {
  if (response.status >= 500 || response.status == 429) return true;
  if (response.status == 400 || response.status == 503) {
    const std::string code = ErrorCode(response);
    return code == "RequestTimeout" || code == "SlowDown" || code == "Throttling" ||
           code == "ThrottlingException";
  }
  return false;
}

absl::Status StatusOfAnswer(const S3Client::Request& request,
                            const S3Client::Response& response, int attempts) {
  const std::string message =
      absl::StrCat(request.What(), ": ", response.status, " ", ErrorDetail(response));
  switch (response.status) {
    case 400:
      return absl::InvalidArgumentError(message);
    case 401:
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 409: {
      const std::string code = ErrorCode(response);
      if (code == "BucketAlreadyExists" || code == "BucketAlreadyOwnedByYou") {
        return absl::AlreadyExistsError(message);
      }
      return absl::FailedPreconditionError(message);
    }
    case 412:
      return absl::FailedPreconditionError(message);
    case 416:
      return absl::OutOfRangeError(message);
    case 301:
    case 307:
      // S3's answer to the wrong region or endpoint (redirects are not followed).
      return absl::FailedPreconditionError(absl::StrCat(message, " (wrong region or endpoint?)"));
    default:
      break;
  }
  if (RetryableAnswer(response)) {
    return absl::UnavailableError(absl::StrCat(message, " (after ", attempts, " attempts)"));
  }
  return absl::UnknownError(message);
}

}  // namespace

// ---------------------------------------------------------------- client

S3Client::S3Client(S3ClientOptions options) : options_(std::move(options)) {}

S3Client::~S3Client() {
  for (void* h : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

absl::StatusOr<std::unique_ptr<S3Client>> S3Client::Create(S3ClientOptions options) {
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::string endpoint = options.endpoint;
  std::string scheme;
  if (absl::StartsWith(endpoint, "http://")) {
    scheme = "http";
    endpoint.erase(0, 7);
  } else if (absl::StartsWith(endpoint, "https://")) {
    scheme = "https";
    endpoint.erase(0, 8);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 endpoint '", Printable(options.endpoint, 100), "' is not http:// or https://"));
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (endpoint.empty() || endpoint.find_first_of("/?#@ ") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 endpoint '", Printable(options.endpoint, 100), "' must be scheme://host[:port]"));
  }
  // The Host header omits the scheme's default port (as curl sends it).
  if ((scheme == "http" && absl::EndsWith(endpoint, ":80")) ||
      (scheme == "https" && absl::EndsWith(endpoint, ":443"))) {
    endpoint.erase(endpoint.rfind(':'));
  }
  if (options.region.empty()) return absl::InvalidArgumentError("S3 region is empty");
  if (options.credentials.access_key_id.empty() || options.credentials.secret_access_key.empty()) {
    return absl::InvalidArgumentError("S3 credentials are empty");
  }
  if (options.retry.max_attempts < 1) options.retry.max_attempts = 1;
  std::unique_ptr<S3Client> client(new S3Client(std::move(options)));
  client->scheme_ = scheme;
  client->authority_ = endpoint;
  return client;
}

void* S3Client::AcquireHandle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_handles_.empty()) {
      void* h = idle_handles_.back();
      idle_handles_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void S3Client::ReleaseHandle(void* handle) {
  curl_easy_reset(static_cast<CURL*>(handle));  // keeps its connections
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_handles_.size() < options_.max_idle_handles) {
    idle_handles_.push_back(handle);
    return;
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

std::pair<std::string, std::string> S3Client::HostAndPath(const std::string& bucket,
                                                          const std::string& key) const {
  if (bucket.empty()) return {authority_, "/"};
  if (options_.virtual_host_style) return {absl::StrCat(bucket, ".", authority_), "/" + key};
  return {authority_, absl::StrCat("/", bucket, key.empty() ? "" : "/", key)};
}

std::string S3Client::PresignedGetUrl(const std::string& bucket, const std::string& key,
                                      std::chrono::seconds expires) const {
  const auto [host, path] = HostAndPath(bucket, key);
  const SigningScope scope{AmzDateTime(absl::ToUnixSeconds(absl::Now())), options_.region, "s3"};
  return absl::StrCat(scheme_, "://", host, CanonicalUri(path, PathRule::kS3), "?",
                      PresignedQuery("GET", path, {}, host, scope, options_.credentials,
                                     static_cast<int>(expires.count())));
}

absl::StatusOr<S3Client::Response> S3Client::Perform(const Request& request,
                                                     const ChunkCallback* stream) {
  const auto [host, path] = HostAndPath(request.bucket, request.key);
  SigningInput input;
  input.method = request.method;
  input.path = path;
  input.query = request.query;
  input.payload_hash = request.payload_hash;
  const SigningScope scope{AmzDateTime(absl::ToUnixSeconds(absl::Now())), options_.region, "s3"};
  input.headers = request.headers;
  input.headers.emplace_back("host", host);
  input.headers.emplace_back("x-amz-date", scope.date_time);
  input.headers.emplace_back("x-amz-content-sha256", request.payload_hash);
  if (!options_.credentials.session_token.empty()) {
    input.headers.emplace_back("x-amz-security-token", options_.credentials.session_token);
  }
  const std::string authorization =
      AuthorizationHeader(input, scope, options_.credentials, PathRule::kS3);

  // The URL carries exactly the bytes that were signed.
  std::string url = absl::StrCat(scheme_, "://", host, CanonicalUri(path, PathRule::kS3));
  const std::string query = CanonicalQuery(request.query);
  if (!query.empty()) absl::StrAppend(&url, "?", query);

  curl_slist* header_list = nullptr;
  for (const auto& [name, value] : input.headers) {
    header_list = curl_slist_append(header_list, absl::StrCat(name, ": ", value).c_str());
  }
  header_list = curl_slist_append(header_list, absl::StrCat("Authorization: ", authorization).c_str());
  header_list = curl_slist_append(header_list, "Expect:");  // no 100-continue round trip
  if (request.method == "POST") {
    header_list = curl_slist_append(header_list, "Content-Type:");
  }

  CURL* curl = static_cast<CURL*>(AcquireHandle());
  if (curl == nullptr) {
    curl_slist_free_all(header_list);
    return absl::ResourceExhaustedError("curl_easy_init failed");
  }
  Response response;
  Transfer transfer;
  transfer.request = &request;
  transfer.response = &response;
  transfer.stream = stream;
  transfer.curl = curl;
  char error_buffer[CURL_ERROR_SIZE] = {0};

  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);  // a key's "./" and "//" stay
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, header_list);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, options_.low_speed_bytes_per_second);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.low_speed_time.count()));
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  if (!options_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (request.method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, OnUpload);
    curl_easy_setopt(curl, CURLOPT_READDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, OnSeek);
    curl_easy_setopt(curl, CURLOPT_SEEKDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    // Larger reads from the body than curl's 64 KiB default: fewer calls
    // and larger socket writes for big objects.
    curl_easy_setopt(curl, CURLOPT_UPLOAD_BUFFERSIZE, 1L << 20);
  } else if (request.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  const CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  ReleaseHandle(curl);
  curl_slist_free_all(header_list);

  if (!transfer.callback_status.ok()) {
    response.refused = transfer.callback_status;
    return response;
  }
  if (transfer.body_too_large) {
    return absl::ResourceExhaustedError(absl::StrCat(
        request.What(), ": the answer is larger than ", request.max_body_bytes, " bytes"));
  }
  if (code != CURLE_OK) {
    // error_buffer names the host and the failure, never a header.
    const std::string detail = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
    const std::string message = absl::StrCat(request.What(), ": ", detail);
    if (stream != nullptr && response.streamed > 0) {
      // Bytes went to the stream: only the caller can resume after them
      // (with the answer's headers: its ETag).
      response.broken = absl::DataLossError(
          absl::StrCat(message, " (cut short after ", response.streamed, " bytes)"));
      return response;
    }
    if (RetryableCurlError(code)) return absl::UnavailableError(message);
    if (code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE ||
        code == CURLE_SSL_CERTPROBLEM) {
      return absl::FailedPreconditionError(absl::StrCat(message, " (TLS: is the store's CA trusted?)"));
    }
    return absl::InternalError(message);
  }
  return response;
}

absl::StatusOr<S3Client::Response> S3Client::Execute(Request& request,
                                                     const ChunkCallback* stream) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options_.retry.total_deadline;
  thread_local std::mt19937_64 random(std::random_device{}());
  absl::Status last;
  for (int attempt = 1;; ++attempt) {
    request.attempts = attempt;
    absl::StatusOr<Response> response = Perform(request, stream);
    if (response.ok() && !response->refused.ok()) return response->refused;
    if (response.ok() && !response->broken.ok()) return response;  // the caller resumes
    if (response.ok() && !RetryableAnswer(*response)) {
      if (response->status >= 200 && response->status < 300) return response;
      return StatusOfAnswer(request, *response, attempt);
    }
    if (response.ok()) {
      last = StatusOfAnswer(request, *response, attempt);
    } else {
      // Only transport failures are retried.
      if (!absl::IsUnavailable(response.status())) return response.status();
      last = response.status();
    }
    if (attempt >= options_.retry.max_attempts) break;
    // Full jitter: uniform in [0, min(max, initial * 2^(attempt-1))].
    const auto cap = std::min<std::chrono::milliseconds::rep>(
        options_.retry.max_backoff.count(),
        options_.retry.initial_backoff.count() << std::min(attempt - 1, 20));
    std::uniform_int_distribution<std::chrono::milliseconds::rep> pick(0, std::max<long>(cap, 1));
    const auto wait = std::chrono::milliseconds(pick(random));
    if (std::chrono::steady_clock::now() + wait >= deadline) break;
    std::this_thread::sleep_for(wait);
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return absl::Status(last.code(), absl::StrCat(last.message(), " [gave up after ",
                                                elapsed.count(), " ms]"));
}

// ------------------------------------------------------------ operations

// How the store can check a body: its SHA-256 signed, or Content-MD5 with
// an unsigned payload, or neither.
void S3Client::CheckBody(PutOptions::BodyCheck check, Request* request) {
  switch (check) {
    case PutOptions::BodyCheck::kSignedSha256:
      request->payload_hash = Sha256Hex(request->body);
      break;
    case PutOptions::BodyCheck::kContentMd5:
      request->payload_hash = std::string(kUnsignedPayload);
      request->headers.emplace_back("content-md5", Md5Base64(request->body));
      break;
    case PutOptions::BodyCheck::kNone:
      request->payload_hash = std::string(kUnsignedPayload);
      break;
  }
}

absl::StatusOr<std::string> S3Client::PutObject(const std::string& bucket,
                                                const std::string& key, std::string_view body,
                                                const PutOptions& options) {
  Request request;
  request.method = "PUT";
  request.bucket = bucket;
  request.key = key;
  request.body = body;
  CheckBody(options.body_check, &request);
  if (options.if_none_match) request.headers.emplace_back("if-none-match", "*");
  if (!options.content_type.empty()) request.headers.emplace_back("content-type", options.content_type);
  auto response = Execute(request, nullptr);
  if (!response.ok()) return response.status();
  return response->Header("etag");
}

absl::StatusOr<ObjectInfo> S3Client::GetObject(const std::string& bucket, const std::string& key,
                                               const ByteRange& range,
                                               const ChunkCallback& on_chunk) {
  if (range.length.has_value() && *range.length == 0) {
    auto head = HeadObject(bucket, key);
    return head;
  }
  ObjectInfo info;
  uint64_t delivered = 0;
  std::optional<uint64_t> expected;  // bytes the range holds, once known
  const auto start = std::chrono::steady_clock::now();
  absl::Status last;
  for (int attempt = 1; attempt <= options_.retry.max_attempts; ++attempt) {
    Request request;
    request.method = "GET";
    request.bucket = bucket;
    request.key = key;
    request.payload_hash = std::string(kEmptySha256Hex);
    ByteRange now = range;
    now.offset += delivered;
    if (now.length.has_value()) *now.length -= delivered;
    const bool ranged = now.offset > 0 || now.length.has_value();
    if (ranged) {
      request.headers.emplace_back("range", RangeHeader(now));
      request.range = now;
    }
    if (delivered > 0 && !info.etag.empty()) request.headers.emplace_back("if-match", info.etag);
    uint64_t this_attempt = 0;
    const ChunkCallback counting = [&](std::string_view chunk) {
      this_attempt += chunk.size();
      return on_chunk(chunk);
    };
    // Connection failures, 5xx and throttling of one attempt are retried in
    // Execute; a body cut short comes back here to resume.
    auto response = Execute(request, &counting);
    delivered += this_attempt;
    if (response.ok() && info.etag.empty()) info.etag = response->Header("etag");
    if (response.ok() && !response->broken.ok()) {
      last = response->broken;
      if (std::chrono::steady_clock::now() - start > options_.retry.total_deadline) break;
      continue;
    }
    if (response.ok()) {
      const std::string content_range = response->Header("content-range");
      if (response->status == 206) {
        if (auto total = ContentRangeTotal(content_range)) info.size = *total;
      } else {
        uint64_t length = 0;
        if (absl::SimpleAtoi(response->Header("content-length"), &length)) {
          info.size = length;
        }
      }
      if (!expected.has_value()) {
        const uint64_t end = range.length.has_value()
                                 ? std::min(info.size, range.offset + *range.length)
                                 : info.size;
        expected = end > range.offset ? end - range.offset : 0;
      }
      if (delivered != *expected) {
        last = absl::DataLossError(absl::StrCat("S3 GET ", bucket, "/", key, ": got ", delivered,
                                                " bytes of ", *expected, " from byte ",
                                                range.offset));
        continue;
      }
      return info;
    }
    return response.status();
  }
  return absl::DataLossError(absl::StrCat(
      "S3 GET ", bucket, "/", key, ": the body ended at byte ", range.offset + delivered,
      " after ", options_.retry.max_attempts, " attempts (", last.message(), ")"));
}

absl::StatusOr<std::string> S3Client::GetObjectToString(const std::string& bucket,
                                                        const std::string& key,
                                                        const ByteRange& range,
                                                        size_t max_bytes) {
  std::string out;
  auto info = GetObject(bucket, key, range, [&](std::string_view chunk) {
    if (out.size() + chunk.size() > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("S3 GET ", bucket, "/", key,
                                                       ": more than ", max_bytes, " bytes"));
    }
    out.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  });
  if (!info.ok()) return info.status();
  return out;
}

absl::StatusOr<ObjectInfo> S3Client::HeadObject(const std::string& bucket,
                                                const std::string& key) {
  Request request;
  request.method = "HEAD";
  request.bucket = bucket;
  request.key = key;
  request.payload_hash = std::string(kEmptySha256Hex);
  auto response = Execute(request, nullptr);
  if (!response.ok()) return response.status();
  ObjectInfo info;
  info.etag = response->Header("etag");
  if (!absl::SimpleAtoi(response->Header("content-length"), &info.size)) {
    return absl::DataLossError(absl::StrCat("S3 HEAD ", bucket, "/", key,
                                            ": no valid Content-Length in the answer"));
  }
  return info;
}

absl::Status S3Client::DeleteObject(const std::string& bucket, const std::string& key) {
  Request request;
  request.method = "DELETE";
  request.bucket = bucket;
  request.key = key;
  request.payload_hash = std::string(kEmptySha256Hex);
  return Execute(request, nullptr).status();
}

absl::StatusOr<ListObjectsPage> S3Client::ListObjectsV2(const std::string& bucket,
                                                        const std::string& prefix,
                                                        const std::string& continuation_token,
                                                        int max_keys) {
  Request request;
  request.method = "GET";
  request.bucket = bucket;
  request.payload_hash = std::string(kEmptySha256Hex);
  request.query = {{"list-type", "2"}, {"max-keys", absl::StrCat(max_keys)}};
  if (!prefix.empty()) request.query.emplace_back("prefix", prefix);
  if (!continuation_token.empty()) request.query.emplace_back("continuation-token", continuation_token);
  auto response = Execute(request, nullptr);
  if (!response.ok()) return response.status();
  auto page = ParseListObjectsV2(response->body);
  if (!page.ok()) {
    return absl::DataLossError(absl::StrCat(request.What(), " (list): ", page.status().message()));
  }
  return page;
}

absl::StatusOr<std::string> S3Client::CreateMultipartUpload(const std::string& bucket,
                                                            const std::string& key) {
  Request request;
  request.method = "POST";
  request.bucket = bucket;
  request.key = key;
  request.query = {{"uploads", ""}};
  request.payload_hash = std::string(kEmptySha256Hex);
  auto response = Execute(request, nullptr);
  if (!response.ok()) return response.status();
  auto id = ParseInitiateMultipartUpload(response->body);
  if (!id.ok()) return absl::DataLossError(absl::StrCat(request.What(), ": ", id.status().message()));
  return id;
}

absl::StatusOr<std::string> S3Client::UploadPart(const std::string& bucket,
                                                 const std::string& key,
                                                 const std::string& upload_id, int part_number,
                                                 std::string_view body,
                                                 PutOptions::BodyCheck check) {
  Request request;
  request.method = "PUT";
  request.bucket = bucket;
  request.key = key;
  request.query = {{"partNumber", absl::StrCat(part_number)}, {"uploadId", upload_id}};
  request.body = body;
  CheckBody(check, &request);
  auto response = Execute(request, nullptr);
  if (!response.ok()) return response.status();
  std::string etag = response->Header("etag");
  if (etag.empty()) {
    return absl::DataLossError(absl::StrCat(request.What(), " part ", part_number, ": no ETag"));
  }
  return etag;
}

absl::StatusOr<std::string> S3Client::UploadPartCopy(
    const std::string& bucket, const std::string& key, const std::string& upload_id,
    int part_number, const std::string& source_bucket, const std::string& source_key,
    std::optional<ByteRange> source_range) {
  Request request;
  request.method = "PUT";
  request.bucket = bucket;
  request.key = key;
  request.query = {{"partNumber", absl::StrCat(part_number)}, {"uploadId", upload_id}};
  request.payload_hash = std::string(kEmptySha256Hex);
  request.headers.emplace_back("x-amz-copy-source",
                               UriEncode(absl::StrCat("/", source_bucket, "/", source_key), false));
  if (source_range.has_value()) {
    request.headers.emplace_back("x-amz-copy-source-range", RangeHeader(*source_range));
  }
  auto response = Execute(request, nullptr);
  if (!response.ok()) return response.status();
  auto result = ParseCopyResult(response->body);
  if (!result.ok()) {
    return absl::DataLossError(absl::StrCat(request.What(), " copy: ", result.status().message()));
  }
  if (result->failed) {
    return absl::UnavailableError(absl::StrCat(request.What(), " copy failed: ",
                                               result->error.code, ": ", result->error.message));
  }
  return result->etag;
}

absl::Status S3Client::CompleteMultipartUpload(const std::string& bucket,
                                               const std::string& key,
                                               const std::string& upload_id,
                                               const std::vector<CompletedPart>& parts) {
  std::string xml = "<CompleteMultipartUpload>";
  for (const CompletedPart& part : parts) {
    // ETags are quoted hex from the store; escape what XML needs anyway.
    std::string etag;
    for (char c : part.etag) {
      if (c == '&') {
        etag += "&amp;";
      } else if (c == '<') {
        etag += "&lt;";
      } else if (c == '>') {
        etag += "&gt;";
      } else if (c == '"') {
        etag += "&quot;";
      } else {
        etag.push_back(c);
      }
    }
    absl::StrAppend(&xml, "<Part><PartNumber>", part.part_number, "</PartNumber><ETag>", etag,
                    "</ETag></Part>");
  }
  xml += "</CompleteMultipartUpload>";
  Request request;
  request.method = "POST";
  request.bucket = bucket;
  request.key = key;
  request.query = {{"uploadId", upload_id}};
  request.body = xml;
  request.payload_hash = Sha256Hex(xml);
  auto response = Execute(request, nullptr);
  if (absl::IsNotFound(response.status()) && request.attempts > 1 &&
      absl::StrContains(response.status().message(), "NoSuchUpload")) {
    // A retry of a completion whose answer was lost: the first attempt may
    // have completed it (the upload is gone). The object with as many parts
    // says so.
    auto head = HeadObject(bucket, key);
    if (head.ok() && absl::EndsWith(head->etag, absl::StrCat("-", parts.size(), "\""))) {
      return absl::OkStatus();
    }
  }
  if (!response.ok()) return response.status();
  // 200 with an <Error> body: the completion failed after the headers.
  auto result = ParseCompleteMultipartUpload(response->body);
  if (!result.ok()) {
    return absl::DataLossError(absl::StrCat(request.What(), " complete: ", result.status().message()));
  }
  if (result->failed) {
    return absl::UnavailableError(absl::StrCat(request.What(), " complete failed: ",
                                               result->error.code, ": ", result->error.message));
  }
  return absl::OkStatus();
}

absl::Status S3Client::AbortMultipartUpload(const std::string& bucket, const std::string& key,
                                            const std::string& upload_id) {
  Request request;
  request.method = "DELETE";
  request.bucket = bucket;
  request.key = key;
  request.query = {{"uploadId", upload_id}};
  request.payload_hash = std::string(kEmptySha256Hex);
  return Execute(request, nullptr).status();
}

absl::StatusOr<ListUploadsPage> S3Client::ListMultipartUploads(
    const std::string& bucket, const std::string& prefix, const std::string& key_marker,
    const std::string& upload_id_marker) {
  Request request;
  request.method = "GET";
  request.bucket = bucket;
  request.payload_hash = std::string(kEmptySha256Hex);
  request.query = {{"uploads", ""}};
  if (!prefix.empty()) request.query.emplace_back("prefix", prefix);
  if (!key_marker.empty()) request.query.emplace_back("key-marker", key_marker);
  if (!upload_id_marker.empty()) request.query.emplace_back("upload-id-marker", upload_id_marker);
  auto response = Execute(request, nullptr);
  if (!response.ok()) return response.status();
  auto page = ParseListMultipartUploads(response->body);
  if (!page.ok()) {
    return absl::DataLossError(absl::StrCat(request.What(), " (uploads): ", page.status().message()));
  }
  return page;
}

absl::StatusOr<int> S3Client::AbortUploadsInitiatedBefore(const std::string& bucket,
                                                          const std::string& prefix,
                                                          absl::Time initiated_before) {
  int aborted = 0;
  std::string key_marker;
  std::string upload_id_marker;
  for (int pages = 0; pages < 100000; ++pages) {
    auto page = ListMultipartUploads(bucket, prefix, key_marker, upload_id_marker);
    if (!page.ok()) return page.status();
    for (const UploadEntry& upload : page->uploads) {
      auto initiated = ParseIso8601(upload.initiated);
      if (!initiated.ok() || *initiated >= initiated_before) continue;
      absl::Status s = AbortMultipartUpload(bucket, upload.key, upload.upload_id);
      if (s.ok() || absl::IsNotFound(s)) {
        ++aborted;
      } else {
        return s;
      }
    }
    if (!page->is_truncated) return aborted;
    if (page->next_key_marker == key_marker && page->next_upload_id_marker == upload_id_marker) {
      return absl::DataLossError(absl::StrCat("S3 list uploads of ", bucket,
                                              ": the markers did not advance"));
    }
    key_marker = page->next_key_marker;
    upload_id_marker = page->next_upload_id_marker;
  }
  return aborted;
}

absl::Status S3Client::CreateBucket(const std::string& bucket) {
  Request request;
  request.method = "PUT";
  request.bucket = bucket;
  request.payload_hash = std::string(kEmptySha256Hex);
  absl::Status s = Execute(request, nullptr).status();
  if (absl::IsAlreadyExists(s)) {
    // Ours already: fine. Someone else's: not.
    if (absl::StrContains(s.message(), "BucketAlreadyOwnedByYou")) return absl::OkStatus();
  }
  return s;
}

}  // namespace argsdump::s3
