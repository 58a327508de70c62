// The workarounds' own behaviour: duplicate query names counted, the
// listening socket found and its backlog raised, the accept loop waited
// for, connections cut by port.
#include "server/http/httplib_workarounds.h"

#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"

namespace argsdump {
namespace {

TEST(RawQueryNameCountsTest, EveryNameAsOftenAsItCame) {
  auto counts = RawQueryNameCounts("/v1/captures?state=live&state=live&a%20b=1&&c");
  EXPECT_EQ(counts["state"], 2u);
  EXPECT_EQ(counts["a b"], 1u);
  EXPECT_EQ(counts["c"], 1u);
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_TRUE(RawQueryNameCounts("/v1/captures").empty());
}

TEST(MutableRangesTest, IsTheRequestsOwn) {
  httplib::Request req;
  req.ranges = {{0, 9}};
  MutableRanges(req).clear();
  EXPECT_TRUE(req.ranges.empty());
}

TEST(ListenerWorkaroundsTest, AServerWithThemServesAndItsConnectionsAreCut) {
  httplib::Server server;
  auto listening = std::make_shared<int>(-1);
  UseReuseAddrOnly(&server, listening);
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  ASSERT_GE(*listening, 0);
  RaiseListenBacklog(*listening);
  auto exited = std::make_shared<std::atomic<bool>>(false);
  std::thread loop([&server, exited] {
    server.listen_after_bind();
    exited->store(true);
  });
  WaitForAcceptLoop(server, [&exited] { return exited->load(); });
  EXPECT_TRUE(server.is_running());
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "ok");
  // The kept-alive connection is cut; the server still stops.
  CutConnectionsOnPort(port);
  server.stop();
  loop.join();
}

}  // namespace
}  // namespace argsdump
