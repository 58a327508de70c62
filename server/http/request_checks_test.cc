// What every request passes before routing: CORS, the bearer token, the
// body's framing.
#include "server/http/request_checks.h"

#include <string>

#include "gtest/gtest.h"
#include "httplib.h"

namespace argsdump {
namespace {

httplib::Request Request(const std::string& method, const std::string& path) {
  httplib::Request req;
  req.method = method;
  req.path = path;
  return req;
}

TEST(BadOriginTest, SchemeHostAndPortOnly) {
  EXPECT_EQ(BadOrigin("*"), "");
  EXPECT_EQ(BadOrigin("https://grafana.example:3000"), "");
  EXPECT_EQ(BadOrigin("http://[::1]:8080"), "");
  EXPECT_EQ(BadOrigin("ftp://x"), "not http:// or https://");
  EXPECT_EQ(BadOrigin("https://"), "no host");
  EXPECT_EQ(BadOrigin("https://x/"), "'/' is not in a host[:port] (no path, no trailing '/')");
}

TEST(AnswerCorsTest, AnAllowedOriginIsNamedAndItsPreflightAnswered) {
  const std::vector<std::string> allowed = {"https://a.example"};
  httplib::Request get = Request("GET", "/v1/captures");
  get.set_header("Origin", "https://a.example");
  httplib::Response res;
  EXPECT_FALSE(AnswerCors(get, res, allowed));
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "https://a.example");
  EXPECT_EQ(res.get_header_value("Vary"), "Origin");

  httplib::Request preflight = Request("OPTIONS", "/v1/captures");
  preflight.set_header("Origin", "https://a.example");
  preflight.set_header("Access-Control-Request-Method", "GET");
  httplib::Response answered;
  EXPECT_TRUE(AnswerCors(preflight, answered, allowed));
  EXPECT_EQ(answered.status, 204);

  httplib::Request other = Request("GET", "/v1/captures");
  other.set_header("Origin", "https://b.example");
  httplib::Response none;
  EXPECT_FALSE(AnswerCors(other, none, allowed));
  EXPECT_FALSE(none.has_header("Access-Control-Allow-Origin"));
  // The page itself is same-origin: no CORS outside /v1/.
  httplib::Request page = Request("GET", "/");
  page.set_header("Origin", "https://a.example");
  httplib::Response page_res;
  EXPECT_FALSE(AnswerCors(page, page_res, allowed));
  EXPECT_FALSE(page_res.has_header("Access-Control-Allow-Origin"));
}

TEST(AuthorizeTest, V1NeedsTheTokenThePageDoesNot) {
  httplib::Request req = Request("GET", "/v1/captures");
  httplib::Response res;
  EXPECT_FALSE(Authorize(req, res, "secret"));
  EXPECT_EQ(res.status, 401);
  EXPECT_EQ(res.get_header_value("WWW-Authenticate"), "Bearer realm=\"argsdump\"");

  req.set_header("Authorization", "bearer secret");  // the scheme in any case
  httplib::Response ok;
  EXPECT_TRUE(Authorize(req, ok, "secret"));

  httplib::Response page;
  EXPECT_TRUE(Authorize(Request("GET", "/app.js"), page, "secret"));
  httplib::Response open;
  EXPECT_TRUE(Authorize(Request("GET", "/v1/captures"), open, ""));
}

TEST(AuthorizationMetadataTest, PrintableAsciiOnly) {
  httplib::Request req = Request("GET", "/v1/captures");
  EXPECT_EQ(*AuthorizationMetadata(req), std::nullopt);
  req.set_header("Authorization", "BEARER abc");
  EXPECT_EQ(*AuthorizationMetadata(req), std::optional<std::string>("Bearer abc"));
  httplib::Request bad = Request("GET", "/v1/captures");
  bad.set_header("Authorization", "Bearer a\x01");
  EXPECT_FALSE(AuthorizationMetadata(bad).ok());
}

TEST(CheckBodyTest, BodiesAreFramedAndBounded) {
  httplib::Request bare = Request("POST", "/v1/rpc/GetCapture");
  httplib::Response res;
  EXPECT_TRUE(CheckBody(bare, res));
  EXPECT_EQ(bare.get_header_value("Content-Length"), "0");

  httplib::Request big = Request("POST", "/v1/rpc/GetCapture");
  big.set_header("Content-Length", std::to_string(kMaxRequestBody + 1));
  httplib::Response too_big;
  EXPECT_FALSE(CheckBody(big, too_big));
  EXPECT_EQ(too_big.status, 413);

  httplib::Request two = Request("POST", "/v1/rpc/GetCapture");
  two.headers.emplace("Content-Length", "3");
  two.headers.emplace("Content-Length", "4");
  httplib::Response differ;
  EXPECT_FALSE(CheckBody(two, differ));
  EXPECT_EQ(differ.status, 400);

  httplib::Request form = Request("POST", "/v1/rpc/GetCapture");
  form.set_header("Content-Length", "2");
  form.set_header("Content-Type", "application/x-www-form-urlencoded");
  httplib::Response json;
  EXPECT_TRUE(CheckBody(form, json));
  EXPECT_FALSE(form.has_header("Content-Type"));

  httplib::Request get = Request("GET", "/v1/captures");
  httplib::Response untouched;
  EXPECT_TRUE(CheckBody(get, untouched));
  EXPECT_FALSE(get.has_header("Content-Length"));
}

}  // namespace
}  // namespace argsdump
