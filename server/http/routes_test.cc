// The route table: every endpoint the gateway documents is one row, and
// the Range header is for /payload alone.
#include "server/http/routes.h"

#include <regex>
#include <string>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

class RoutesTest : public ::testing::Test {
 protected:
  // A channel that is never used: the table is read, not called.
  ServiceCalls calls_{grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials())};
  CaptureCalls captures_{&calls_};
  PayloadCalls payloads_{&calls_, 1 << 20, std::chrono::milliseconds(0), TensorViewLimits{}};
};

// The row that serves `method path`, as httplib matches (the whole path).
const Route* Find(const std::vector<Route>& routes, const std::string& method,
                  const std::string& path) {
  const Route* found = nullptr;
  for (const Route& r : routes) {
    if (method == r.method && std::regex_match(path, std::regex(r.path))) {
      EXPECT_EQ(found, nullptr) << method << " " << path << " matches two rows";
      found = &r;
    }
  }
  return found;
}

TEST_F(RoutesTest, EveryEndpointIsOneRow) {
  const std::vector<Route> routes = ApiRoutes(&captures_, &payloads_);
  EXPECT_EQ(routes.size(), 19u);
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/schema"},
           {"GET", "/v1/captures"},
           {"GET", "/v1/captures/run1"},
           {"POST", "/v1/captures/run1:finish"},
           {"DELETE", "/v1/captures/run1"},
           {"GET", "/v1/captures/run1/args"},
           {"GET", "/v1/captures/run1/args/7"},
           {"GET", "/v1/captures/run1/args/7/payload"},
           {"GET", "/v1/captures/run1/args/7/tensor"},
           {"POST", "/v1/rpc/QueryArgs"},
           {"GET", "/v1/jobs"},
           {"GET", "/v1/jobs/train.1"},
           {"GET", "/v1/jobs/train.1/args"},
           {"GET", "/v1/jobs/train.1/first_nonfinite"},
           {"GET", "/v1/jobs/train.1/grid"},
           {"GET", "/v1/jobs/train.1/compare"},
           {"GET", "/v1/jobs/train.1/compare_ranks"},
           {"GET", "/v1/captures/run1/trace"},
           {"GET", "/v1/jobs/train.1/trace"},
       }) {
    const Route* r = Find(routes, method, path);
    ASSERT_NE(r, nullptr) << method << " " << path;
    EXPECT_TRUE(static_cast<bool>(r->handler));
  }
  EXPECT_EQ(Find(routes, "GET", "/v1/captures/a/b"), nullptr);
  EXPECT_EQ(Find(routes, "GET", "/v1/captures/run1:finish"), nullptr);
  EXPECT_EQ(Find(routes, "POST", "/v1/rpc/Get1"), nullptr);
}

TEST_F(RoutesTest, OnlyThePayloadReadsTheRangeOnlyRpcABody) {
  for (const Route& r : ApiRoutes(&captures_, &payloads_)) {
    const bool payload = r.path.size() >= 8 && r.path.substr(r.path.size() - 8) == "/payload";
    EXPECT_EQ((r.needs & kNeedsRange) != 0, payload) << r.path;
    EXPECT_EQ((r.needs & kNeedsBody) != 0, r.path.rfind("/v1/rpc/", 0) == 0) << r.path;
    const bool budget = payload || r.path.find("/tensor") != std::string::npos;
    EXPECT_EQ((r.needs & kNeedsBudget) != 0, budget) << r.path;
  }
}

}  // namespace
}  // namespace argsdump
