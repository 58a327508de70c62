// AWS Signature Version 4 as pure functions over a plain request description:
// the canonical request, the string to sign, the signing key, the
// Authorization header and the presigned-URL query. Nothing here does I/O,
// reads a clock or logs; the same inputs give the same bytes (which is what
// lets sigv4_test check every step against AWS's published vectors).
#ifndef ARGSDUMP_S3_SIGV4_H_
#define ARGSDUMP_S3_SIGV4_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace argsdump::s3 {

// The secret material. Never logged or put in a message: only the access key
// id appears in what this file returns (the Credential= part of a header).
struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" when there is none
};

using NameValues = std::vector<std::pair<std::string, std::string>>;

// One request to sign. The path and the query are DECODED (raw bytes: the
// object key as it is); this file encodes them. `headers` are the headers
// to sign, in any case and order, repeats allowed (their values are joined
// by ',' in the order given); they must include `host` and `x-amz-date`.
struct SigningInput {
  std::string method;       // GET, PUT, ...
  std::string path;         // "/bucket/key", decoded; "" means "/"
  NameValues query;         // decoded names and values; "" value for ?lifecycle
  NameValues headers;
  std::string payload_hash;  // hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

// The credential scope: when, where, which service.
struct SigningScope {
  std::string date_time;  // YYYYMMDD'T'HHMMSS'Z', the x-amz-date value
  std::string region;     // "us-east-1"
  std::string service;    // "s3"
};

// How the canonical URI is made from the path. S3 encodes each segment once
// and keeps "." / ".." / "//" as they are (they are parts of a key); every
// other service removes dot segments and empty segments first.
enum class PathRule { kS3, kNormalized };

// RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~) pass; every other
// byte is %XX with upper-case hex. '/' passes when !encode_slash.
std::string UriEncode(std::string_view text, bool encode_slash);

std::string CanonicalUri(std::string_view path, PathRule rule);
// Names and values encoded, pairs sorted by name then value (bytewise).
std::string CanonicalQuery(const NameValues& query);
// The canonical request; *signed_headers receives the SignedHeaders list.
std::string CanonicalRequest(const SigningInput& input, PathRule rule,
                             std::string* signed_headers);
std::string StringToSign(std::string_view canonical_request, const SigningScope& scope);
// The derived key (32 raw bytes): HMAC chain over date, region, service.
std::string SigningKey(std::string_view secret_access_key, const SigningScope& scope);
// Hex HMAC-SHA256 of the string to sign under the signing key.
std::string Signature(std::string_view signing_key, std::string_view string_to_sign);
// "AWS4-HMAC-SHA256 Credential=AKID/scope, SignedHeaders=..., Signature=...".
std::string AuthorizationHeader(const SigningInput& input, const SigningScope& scope,
                                const Credentials& credentials, PathRule rule);

// The query of a presigned URL (SigV4 query form): `query` plus the X-Amz-*
// parameters and X-Amz-Signature last, each ENCODED, ready to follow '?'.
// Signs only the host header, with an UNSIGNED-PAYLOAD body.
std::string PresignedQuery(std::string_view method, std::string_view path,
                           const NameValues& query, std::string_view host,
                           const SigningScope& scope, const Credentials& credentials,
                           int expires_seconds);

// Digests (OpenSSL's libcrypto).
std::string Sha256Hex(std::string_view data);
std::string HmacSha256(std::string_view key, std::string_view data);  // raw bytes
std::string HexEncode(std::string_view bytes);                        // lower case
inline constexpr std::string_view kEmptySha256Hex =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

// The x-amz-date spelling of a Unix time (UTC).
std::string AmzDateTime(long long unix_seconds);

}  // namespace argsdump::s3

#endif  // ARGSDUMP_S3_SIGV4_H_
