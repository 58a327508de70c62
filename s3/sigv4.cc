#include "s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cassert>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace argsdump::s3 {
namespace {

constexpr char kAlgorithm[] = "AWS4-HMAC-SHA256";

// Debian's Abseil has its own string_view: the one conversion.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '.' || c == '_' || c == '~';
}

// Leading and trailing blanks removed, each run of spaces inside made one.
std::string TrimmedHeaderValue(std::string_view value) {
  const absl::string_view stripped = absl::StripAsciiWhitespace(Sv(value));
  std::string out;
  out.reserve(stripped.size());
  bool in_space = false;
  for (char c : stripped) {
    if (c == ' ' || c == '\t') {
      if (!in_space) out.push_back(' ');
      in_space = true;
    } else {
      out.push_back(c);
      in_space = false;
    }
  }
  return out;
}

// Dot segments and empty segments removed (RFC 3986 5.2.4 for a path that
// is already absolute); a trailing '/' stays.
std::string NormalizedPath(std::string_view path) {
  std::vector<absl::string_view> kept;
  bool trailing_slash = !path.empty() && path.back() == '/';
  for (absl::string_view segment : absl::StrSplit(Sv(path), '/')) {
    if (segment.empty() || segment == ".") {
      continue;
    }
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();
      continue;
    }
    kept.push_back(segment);
  }
  if (!path.empty()) {
    const size_t last_slash = path.rfind('/');
    const std::string_view last = path.substr(last_slash + 1);
    if (last == "." || last == "..") trailing_slash = true;
  }
  std::string out = "/" + absl::StrJoin(kept, "/");
  if (trailing_slash && !kept.empty()) out.push_back('/');
  return out;
}

std::string CredentialScope(const SigningScope& scope) {
  return absl::StrCat(scope.date_time.substr(0, 8), "/", scope.region, "/", scope.service,
                      "/aws4_request");
}

}  // namespace

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    out[2 * i] = kHex[b >> 4];
    out[2 * i + 1] = kHex[b & 15];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const int ok = EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  assert(ok == 1);
  (void)ok;
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const unsigned char* ok =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest, &length);
  assert(ok != nullptr);
  (void)ok;
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::string UriEncode(std::string_view text, bool encode_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3 / 2);
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (Unreserved(c) || (c == '/' && !encode_slash)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string CanonicalUri(std::string_view path, PathRule rule) {
  if (path.empty()) return "/";
  if (rule == PathRule::kNormalized) return UriEncode(NormalizedPath(path), false);
  return UriEncode(path, false);
}

std::string CanonicalQuery(const NameValues& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) {
    encoded.emplace_back(UriEncode(name, true), UriEncode(value, true));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    absl::StrAppend(&out, name, "=", value);
  }
  return out;
}

std::string CanonicalRequest(const SigningInput& input, PathRule rule,
                             std::string* signed_headers) {
  // Lower-cased names, stable-sorted, so repeats keep their order.
  std::vector<std::pair<std::string, std::string>> headers;
  headers.reserve(input.headers.size());
  for (const auto& [name, value] : input.headers) {
    headers.emplace_back(absl::AsciiStrToLower(name), TrimmedHeaderValue(value));
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string canonical_headers;
  std::string names;
  for (size_t i = 0; i < headers.size(); ++i) {
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      absl::StrAppend(&canonical_headers, ",", headers[i].second);
      continue;
    }
    if (i > 0) canonical_headers.push_back('\n');
    absl::StrAppend(&canonical_headers, headers[i].first, ":", headers[i].second);
    if (!names.empty()) names.push_back(';');
    names += headers[i].first;
  }
  if (!headers.empty()) canonical_headers.push_back('\n');
  std::string out = absl::StrCat(input.method, "\n", CanonicalUri(input.path, rule), "\n",
                                 CanonicalQuery(input.query), "\n", canonical_headers, "\n",
                                 names, "\n", input.payload_hash);
  if (signed_headers != nullptr) *signed_headers = std::move(names);
  return out;
}

std::string StringToSign(std::string_view canonical_request, const SigningScope& scope) {
  return absl::StrCat(kAlgorithm, "\n", scope.date_time, "\n", CredentialScope(scope), "\n",
                      Sha256Hex(canonical_request));
}

std::string SigningKey(std::string_view secret_access_key, const SigningScope& scope) {
  const std::string date_key =
      HmacSha256(absl::StrCat("AWS4", Sv(secret_access_key)), scope.date_time.substr(0, 8));
  const std::string region_key = HmacSha256(date_key, scope.region);
  const std::string service_key = HmacSha256(region_key, scope.service);
  return HmacSha256(service_key, "aws4_request");
}

std::string Signature(std::string_view signing_key, std::string_view string_to_sign) {
  return HexEncode(HmacSha256(signing_key, string_to_sign));
}

std::string AuthorizationHeader(const SigningInput& input, const SigningScope& scope,
                                const Credentials& credentials, PathRule rule) {
  std::string signed_headers;
  const std::string canonical = CanonicalRequest(input, rule, &signed_headers);
  const std::string signature = Signature(
      SigningKey(credentials.secret_access_key, scope), StringToSign(canonical, scope));
  return absl::StrCat(kAlgorithm, " Credential=", credentials.access_key_id, "/",
                      CredentialScope(scope), ", SignedHeaders=", signed_headers,
                      ", Signature=", signature);
}

std::string PresignedQuery(std::string_view method, std::string_view path,
                           const NameValues& query, std::string_view host,
                           const SigningScope& scope, const Credentials& credentials,
                           int expires_seconds) {
  SigningInput input;
  input.method = std::string(method);
  input.path = std::string(path);
  input.query = query;
  input.query.emplace_back("X-Amz-Algorithm", std::string(kAlgorithm));
  input.query.emplace_back("X-Amz-Credential",
                           absl::StrCat(credentials.access_key_id, "/", CredentialScope(scope)));
  input.query.emplace_back("X-Amz-Date", scope.date_time);
  input.query.emplace_back("X-Amz-Expires", absl::StrCat(expires_seconds));
  if (!credentials.session_token.empty()) {
    input.query.emplace_back("X-Amz-Security-Token", credentials.session_token);
  }
  input.query.emplace_back("X-Amz-SignedHeaders", "host");
  input.headers = {{"host", std::string(host)}};
  input.payload_hash = std::string(kUnsignedPayload);
  const std::string canonical = CanonicalRequest(input, PathRule::kS3, nullptr);
  const std::string signature = Signature(SigningKey(credentials.secret_access_key, scope),
                                          StringToSign(canonical, scope));
  return absl::StrCat(CanonicalQuery(input.query), "&X-Amz-Signature=", signature);
}

std::string AmzDateTime(long long unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace argsdump::s3
