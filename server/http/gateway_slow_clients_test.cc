// The HTTP face's bounds on what a client may hold of the server, against
// a real capture_server (in this process): request bodies framed or
// refused at once, clients that trickle their request or do not take
// their answer, hundreds of them beside a normal client, a request that
// does not arrive in time.
#include <string>
#include <vector>

#include "server/http/gateway_test_fixture.h"

namespace argsdump {
namespace {

TEST_F(HttpGatewayTest, RequestBodiesAreFramedOrRefusedAtOnce) {
  Start("framing");
  WriteScene("scene");
  // No Content-Length and no Transfer-Encoding: no body (it used to wait
  // for the client to close). The connection stays open for the next one.
  RawConnection c(server_->http_port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("POST /v1/rpc/GetCapture HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string answer = c.ReadAnswer();
  EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;  // GetCapture of ""
  EXPECT_NE(answer.find("capture"), std::string::npos) << answer;
  ASSERT_TRUE(c.Send("POST /v1/rpc/ListCaptures HTTP/1.1\r\nHost: x\r\n\r\n"));
  answer = c.ReadAnswer();
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("\"scene\""), std::string::npos) << answer;
  // A length that is no number, two that differ, one over the limit: an
  // answer naming it before any body byte is sent (httplib waited 10 s for
  // the bytes, then said "HTTP 400" or read "abc" as 0).
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"Content-Length: abc\r\n", "400"},
      {"Content-Length: -5\r\n", "400"},
      {"Content-Length: 2\r\nContent-Length: 3\r\n", "400"},
      {"Content-Length: 99999999999999999999\r\n", "400"},
      {"Content-Length: 1048577\r\n", "413"},
  };
  for (const auto& [headers, status] : bad) {
    RawConnection r(server_->http_port());
    ASSERT_TRUE(r.Send("POST /v1/rpc/ListCaptures HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n"));
    const std::string got = r.ReadAnswer();
    EXPECT_EQ(got.rfind("HTTP/1.1 " + status, 0), 0u) << headers << got;
    EXPECT_TRUE(got.find("Content-Length: '") != std::string::npos ||
                got.find("request body of 1048577 bytes") != std::string::npos)
        << headers << got;
  }
}

TEST_F(HttpGatewayTest, SlowClientsDoNotStopTheOthers) {
  Start("slow");
  WriteScene("scene");
  // 40 clients that never finish their request's head (more than a fixed
  // pool had threads).
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 40; ++i) {
    slow.push_back(std::make_unique<RawConnection>(server_->http_port()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send("GET /v1/captures/scene HTTP/1.1\r\nHost: x\r\n"));
  }
  // Another client is answered while they wait...
  auto res = Get("/v1/captures/scene");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // ...and so are they once their heads end: none was dropped meanwhile.
  for (auto& c : slow) {
    ASSERT_TRUE(c->Send("\r\n"));
    const std::string answer = c->ReadAnswer();
    EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  }
  // Shutdown does not wait for clients that keep a connection open.
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<RawConnection>(server_->http_port()));
    ASSERT_TRUE(slow.back()->Send("GET /v1/captures HTTP/1.1\r\n"));
  }
  server_->Shutdown(std::chrono::milliseconds(100));
  for (auto& c : slow) EXPECT_TRUE(c->ClosedByServer());
}

// Many clients that hold the server up, driven from one thread over
// non-blocking sockets: `trickling` ones send a request head a header line
// at a time (every 100 ms, far inside any per-read timeout) and never end
// it; `downloading` ones ask for a payload larger than their 4 KiB receive
// window and never read it. Whenever the server ends one, it comes back at
// once, so the pressure lasts until Stop.
class SlowClients {
 public:
  SlowClients(int port, int trickling, int downloading, std::string download_request)
      : port_(port), download_request_(std::move(download_request)) {
    for (int i = 0; i < trickling; ++i) clients_.push_back({false});
    for (int i = 0; i < downloading; ++i) clients_.push_back({true});
    thread_ = std::thread([this] { Run(); });
  }
  ~SlowClients() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    for (Client& c : clients_) {
      if (c.fd >= 0) ::close(c.fd);
      c.fd = -1;
    }
  }
  // Every client connected and sent (part of) its request once.
  absl::Notification all_sent;
  // The server ended a client of each kind.
  absl::Notification both_ended;
  // Connections the server ended, of each kind.
  std::atomic<int> trickling_ended{0}, downloading_ended{0};
  std::atomic<int> connect_failures{0};

 private:
  struct Client {
    bool download;
    int fd = -1;
    bool sent = false;  // its request line (and all of a download's head)
    std::chrono::steady_clock::time_point next_line{};
  };

  void Connect(Client& c) {
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c.download) {
      const int small = 4096;
      ::setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 &&
        errno != EINPROGRESS) {
      connect_failures.fetch_add(1);
    }
    c.sent = false;
  }

  void Run() {
    for (Client& c : clients_) Connect(c);
    size_t sent_once = 0;
    std::vector<pollfd> fds(clients_.size());
    while (!stop_.load()) {
      const auto now = std::chrono::steady_clock::now();
      for (size_t i = 0; i < clients_.size(); ++i) {
        Client& c = clients_[i];
        fds[i] = {c.fd, static_cast<short>(POLLRDHUP | (c.download ? 0 : POLLIN) |
                                           (c.sent ? 0 : POLLOUT)),
                  0};
        if (!c.download && c.sent && now >= c.next_line) {
          ::send(c.fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
          c.next_line = now + std::chrono::milliseconds(100);
        }
      }
      if (::poll(fds.data(), fds.size(), 20) < 0 && errno != EINTR) return;
      for (size_t i = 0; i < clients_.size(); ++i) {
        Client& c = clients_[i];
        bool ended = (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
        // A head that never ends is answered only to end its connection.
        if ((fds[i].revents & POLLIN) != 0) ended = true;
        if (ended) {
          (c.download ? downloading_ended : trickling_ended).fetch_add(1);
          if (downloading_ended.load() > 0 && trickling_ended.load() > 0 &&
              !both_ended.HasBeenNotified()) {
            both_ended.Notify();
          }
          ::close(c.fd);
          Connect(c);
          continue;
        }
        if (!c.sent && (fds[i].revents & POLLOUT) != 0) {
          const std::string head = c.download ? download_request_
                                              : std::string("GET /v1/captures HTTP/1.1\r\n");
          if (::send(c.fd, head.data(), head.size(), MSG_NOSIGNAL) ==
              static_cast<ssize_t>(head.size())) {
            c.sent = true;
            c.next_line = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
            if (++sent_once == clients_.size()) all_sent.Notify();
          }
        }
      }
    }
  }

  const int port_;
  const std::string download_request_;
  std::vector<Client> clients_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// 300 clients trickling their request heads and 300 downloads never read,
// beside a client that asks normally: it is answered, over and over, while
// they last. The bounds are short here (1 s) so that the test is quick; a
// client that is not answered in 20 s fails it (the test ends then).
TEST_F(HttpGatewayTest, ANormalClientIsAnsweredBesideSixHundredSlowOnes) {
  // Each connection is a descriptor at both ends.
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_cur < 4096 && files.rlim_max > files.rlim_cur) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 4096);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
  }
  ASSERT_GE(files.rlim_cur, 2048u) << "this test needs 2048 descriptors (ulimit -n)";
  configure_ = [](HttpGatewayOptions* o) {
    o->request_timeout = std::chrono::milliseconds(1000);
    o->write_stall_timeout = std::chrono::milliseconds(1000);
    o->evict_after = std::chrono::milliseconds(200);
    // Else loopback's send buffers take a whole 256 KiB answer.
    o->send_buffer_bytes = 32 << 10;
  };
  Start("six_hundred");
  // A 256 KiB payload: far more than a 4 KiB window and a 32 KiB send
  // buffer take, so every download stalls.
  SceneRecords big;
  big.Add(TensorRecord(kSceneTask).FuncIds({1}).Arg(0).Shape({256, 256}).Contiguous(),
          Ramp(256 * 256, 0.01f, 0));
  {
    SceneIngest in(stub_.get(), "big");
    ASSERT_TRUE(in.Send(big, 0, 1));
    ASSERT_TRUE(in.Finish());
  }
  SlowClients slow(server_->http_port(), 300, 300,
                   "GET /v1/captures/big/args/0/payload HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(slow.all_sent.WaitForNotificationWithTimeout(absl::Seconds(20)));
  http_->set_connection_timeout(20);
  http_->set_read_timeout(20);
  auto ask = [&](int i) {
    const auto start = std::chrono::steady_clock::now();
    auto res = http_->Get("/v1/captures/big");
    ASSERT_TRUE(res) << "request " << i << ": " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200) << res->body;
    // Reported, not checked: the test's bound is the client's timeout.
    std::fprintf(stderr, "normal request %d answered in %lld ms\n", i,
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::steady_clock::now() - start)
                                            .count()));
  };
  for (int i = 0; i < 3; ++i) ask(i);
  // The slow ones are ended (and come back at once), not served forever...
  ASSERT_TRUE(slow.both_ended.WaitForNotificationWithTimeout(absl::Seconds(20)))
      << slow.trickling_ended.load() << " trickling and " << slow.downloading_ended.load()
      << " downloading clients ended";
  // ...and the normal client is still answered while they press on.
  for (int i = 3; i < 6; ++i) ask(i);
  slow.Stop();
  EXPECT_EQ(slow.connect_failures.load(), 0);
}

TEST_F(HttpGatewayTest, ARequestThatDoesNotArriveInTimeIs408AndClosed) {
  configure_ = [](HttpGatewayOptions* o) {
    o->request_timeout = std::chrono::milliseconds(300);
  };
  Start("request_timeout");
  // A head that never ends, and a body that never ends: each gets its 408
  // (however steadily its bytes trickle) and its connection is closed.
  RawConnection head(server_->http_port());
  ASSERT_TRUE(head.Send("GET /v1/captures HTTP/1.1\r\nHost: x\r\n"));
  RawConnection body(server_->http_port());
  ASSERT_TRUE(body.Send("POST /v1/rpc/ListCaptures HTTP/1.1\r\nHost: x\r\n"
                        "Content-Length: 100\r\n\r\n{"));
  for (RawConnection* c : {&head, &body}) {
    const std::string answer = c->ReadAnswer();
    EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
    EXPECT_NE(answer.find("DEADLINE_EXCEEDED"), std::string::npos) << answer;
    EXPECT_NE(answer.find("within 300 ms"), std::string::npos) << answer;
    EXPECT_TRUE(c->ClosedByServer());
  }
  // A kept-alive connection's next request has its own time.
  RawConnection kept(server_->http_port());
  ASSERT_TRUE(kept.Send("GET /v1/captures HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(kept.ReadAnswer().rfind("HTTP/1.1 200", 0), 0u);
  ASSERT_TRUE(kept.Send("GET /v1/captures HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(kept.ReadAnswer().rfind("HTTP/1.1 200", 0), 0u);
}

}  // namespace
}  // namespace argsdump
