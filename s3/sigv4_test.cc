// The signer against AWS's published vectors (s3/testdata/sigv4_vectors.txt:
// the aws-sig-v4-test-suite and the S3 API reference's examples), each step
// apart: the canonical request, its hash (the string to sign's last line),
// the signature, the Authorization header.
#include "s3/sigv4.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace argsdump::s3 {
namespace {

struct Vector {
  std::string name;
  PathRule rule = PathRule::kNormalized;
  Credentials credentials;
  SigningScope scope;
  SigningInput input;
  std::string body;
  std::vector<std::string> creq;
  std::string sts_hash;
  std::string signature;
  std::string presign_host;
  int presign_expires = 0;
};

std::vector<Vector> ReadVectors() {
  std::ifstream in("s3/testdata/sigv4_vectors.txt");
  EXPECT_TRUE(in.good()) << "s3/testdata/sigv4_vectors.txt missing";
  std::vector<Vector> out;
  Vector scope_state;
  Vector* current = nullptr;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      out.push_back(Vector{});
      current = &out.back();
      current->name = line.substr(1, line.size() - 2);
      current->rule = scope_state.rule;
      current->credentials = scope_state.credentials;
      current->scope = scope_state.scope;
      continue;
    }
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    Vector* v = current != nullptr ? current : &scope_state;
    if (key == "rule") {
      scope_state.rule = value == "s3" ? PathRule::kS3 : PathRule::kNormalized;
    } else if (key == "access") {
      scope_state.credentials.access_key_id = value;
    } else if (key == "secret") {
      scope_state.credentials.secret_access_key = value;
    } else if (key == "date") {
      scope_state.scope.date_time = value;
    } else if (key == "region") {
      scope_state.scope.region = value;
    } else if (key == "service") {
      scope_state.scope.service = value;
    } else if (key == "method") {
      v->input.method = value;
    } else if (key == "path") {
      v->input.path = value;
    } else if (key == "query") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos) {
        v->input.query.emplace_back(value, "");
      } else {
        v->input.query.emplace_back(value.substr(0, eq), value.substr(eq + 1));
      }
    } else if (key == "header") {
      const size_t colon = value.find(':');
      v->input.headers.emplace_back(value.substr(0, colon), value.substr(colon + 1));
    } else if (key == "body") {
      v->body = value;
    } else if (key == "creq") {
      v->creq.push_back(value);
    } else if (key == "sts-hash") {
      v->sts_hash = value;
    } else if (key == "signature") {
      v->signature = value;
    } else if (key == "presign-host") {
      v->presign_host = value;
    } else if (key == "presign-expires") {
      v->presign_expires = std::stoi(value);
    } else {
      ADD_FAILURE() << "unknown line in the vectors: " << line;
    }
    // Scope lines written inside a case apply from that case on.
    if (current != nullptr && (key == "rule" || key == "access" || key == "secret" ||
                               key == "date" || key == "region" || key == "service")) {
      current = nullptr;
    }
  }
  for (Vector& v : out) v.input.payload_hash = Sha256Hex(v.body);
  return out;
}

TEST(SigV4Test, PublishedVectors) {
  const std::vector<Vector> vectors = ReadVectors();
  ASSERT_GE(vectors.size(), 25u);
  for (const Vector& v : vectors) {
    SCOPED_TRACE(v.name);
    if (!v.presign_host.empty()) {
      const std::string query =
          PresignedQuery(v.input.method, v.input.path, v.input.query, v.presign_host, v.scope,
                         v.credentials, v.presign_expires);
      EXPECT_TRUE(absl::EndsWith(query, "&X-Amz-Signature=" + v.signature)) << query;
      EXPECT_TRUE(absl::StrContains(
          query, "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"))
          << query;
      continue;
    }
    std::string signed_headers;
    const std::string creq = CanonicalRequest(v.input, v.rule, &signed_headers);
    if (!v.creq.empty()) EXPECT_EQ(creq, absl::StrJoin(v.creq, "\n"));
    const std::string sts = StringToSign(creq, v.scope);
    if (!v.sts_hash.empty()) {
      EXPECT_EQ(sts, absl::StrCat("AWS4-HMAC-SHA256\n", v.scope.date_time, "\n",
                                  v.scope.date_time.substr(0, 8), "/", v.scope.region, "/",
                                  v.scope.service, "/aws4_request\n", v.sts_hash));
    }
    EXPECT_EQ(Signature(SigningKey(v.credentials.secret_access_key, v.scope), sts), v.signature)
        << creq;
    EXPECT_EQ(AuthorizationHeader(v.input, v.scope, v.credentials, v.rule),
              absl::StrCat("AWS4-HMAC-SHA256 Credential=", v.credentials.access_key_id, "/",
                           v.scope.date_time.substr(0, 8), "/", v.scope.region, "/",
                           v.scope.service, "/aws4_request, SignedHeaders=", signed_headers,
                           ", Signature=", v.signature));
  }
}

// The derived key of the AWS documentation's worked example (secret
// wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, 20150830/us-east-1/iam).
TEST(SigV4Test, SigningKeyOfTheDocumentedExample) {
  const SigningScope scope{"20150830T123600Z", "us-east-1", "iam"};
  EXPECT_EQ(HexEncode(SigningKey("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", scope)),
            "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
}

TEST(SigV4Test, S3PathsAreEncodedOnceAndNeverNormalised) {
  EXPECT_EQ(CanonicalUri("/b/a b/../c//d/./e", PathRule::kS3), "/b/a%20b/../c//d/./e");
  EXPECT_EQ(CanonicalUri("/b/100%", PathRule::kS3), "/b/100%25");
  EXPECT_EQ(CanonicalUri("/b/k+e=y&:@~", PathRule::kS3), "/b/k%2Be%3Dy%26%3A%40~");
  EXPECT_EQ(CanonicalUri("", PathRule::kS3), "/");
  EXPECT_EQ(CanonicalUri("/b/ü", PathRule::kS3), "/b/%C3%BC");
}

TEST(SigV4Test, QueryValuesAreEncodedAndSortedBytewise) {
  EXPECT_EQ(CanonicalQuery({{"prefix", "a/b c"}, {"list-type", "2"}, {"continuation-token", "x+y="}}),
            "continuation-token=x%2By%3D&list-type=2&prefix=a%2Fb%20c");
  EXPECT_EQ(CanonicalQuery({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(CanonicalQuery({{"a", "10"}, {"a", "9"}, {"B", "1"}}), "B=1&a=10&a=9");
}

TEST(SigV4Test, TheSecretIsNeverInTheHeader) {
  SigningInput input;
  input.method = "GET";
  input.path = "/bucket/key";
  input.headers = {{"host", "h"}, {"x-amz-date", "20260101T000000Z"}};
  input.payload_hash = std::string(kUnsignedPayload);
  const Credentials credentials{"AKID", "very-secret-value", ""};
  const std::string header = AuthorizationHeader(
      input, SigningScope{"20260101T000000Z", "r", "s3"}, credentials, PathRule::kS3);
  EXPECT_FALSE(absl::StrContains(header, "very-secret-value"));
  EXPECT_TRUE(absl::StartsWith(header, "AWS4-HMAC-SHA256 Credential=AKID/20260101/r/s3/aws4_request"));
}

TEST(SigV4Test, AmzDateTime) {
  EXPECT_EQ(AmzDateTime(1440938160), "20150830T123600Z");
  EXPECT_EQ(AmzDateTime(0), "19700101T000000Z");
}

}  // namespace
}  // namespace argsdump::s3
