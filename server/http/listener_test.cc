// HttpListener under a plain route on 127.0.0.1 port 0, no gRPC: requests
// that do not arrive in time, answers that are not taken, and every slot
// taken by clients that keep the server waiting.
#include "server/http/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "httplib.h"

namespace argsdump {
namespace {

// A connection to the listener; reads give up after 30 s (a failure, not a
// pace the test relies on).
int Connect(int port, int receive_buffer = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  timeval limit{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool Send(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(bytes.size());
}

// Everything until the server ends the connection; `reset` says whether it
// ended with a reset.
std::string ReadToEnd(int fd, bool* reset = nullptr) {
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (reset != nullptr) *reset = n < 0 && errno == ECONNRESET;
    return got;
  }
}

class Listener {
 public:
  explicit Listener(HttpListenerLimits limits) : http_(limits, "", "") {
    http_.Get("/x", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("x", "text/plain");
    });
    http_.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(4 << 20, 'b'), "application/octet-stream");
    });
    // As the gateway does: a request the listener stopped reading.
    http_.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      switch (HttpListener::RequestCut()) {
        case HttpListener::Cut::kTimedOut:
          res.status = 408;
          res.set_content("timed out", "text/plain");
          break;
        case HttpListener::Cut::kEvicted:
          res.status = 503;
          res.set_content("evicted", "text/plain");
          break;
        case HttpListener::Cut::kNone:
          break;
      }
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    listener_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::yield();
  }
  ~Listener() {
    http_.stop();
    if (!http_.threads().WaitIdle(std::chrono::steady_clock::now())) {
      ConnectionThreads::CutConnections(port_);
    }
    listener_.join();
  }
  int port() const { return port_; }

 private:
  HttpListener http_;
  int port_ = 0;
  std::thread listener_;
};

TEST(HttpListenerTest, ARequestThatDoesNotArriveInTimeIsAnsweredAndClosed) {
  HttpListenerLimits limits;
  limits.request_timeout = std::chrono::milliseconds(200);
  Listener server(limits);
  // Nothing at all, half a head trickling, a body short of its length.
  const int silent = Connect(server.port());
  const int head = Connect(server.port());
  const int body = Connect(server.port());
  ASSERT_TRUE(Send(head, "GET /x HTTP/1.1\r\nA: 1\r\n"));
  ASSERT_TRUE(Send(body, "POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nab"));
  EXPECT_EQ(ReadToEnd(silent), "");  // closed, nothing to answer
  for (int fd : {head, body}) {
    const std::string answer = ReadToEnd(fd);
    EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  }
  for (int fd : {silent, head, body}) ::close(fd);
}

TEST(HttpListenerTest, PipelinedRequestsAreAnsweredInOrder) {
  Listener server(HttpListenerLimits{});
  const int fd = Connect(server.port());
  // Both in one write: the second waits in the listener's read buffer.
  ASSERT_TRUE(Send(fd, "GET /x HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\nConnection: close\r\n\r\n"));
  const std::string answers = ReadToEnd(fd);
  const size_t second = answers.find("HTTP/1.1 200", 1);
  EXPECT_EQ(answers.rfind("HTTP/1.1 200", 0), 0u) << answers;
  EXPECT_NE(second, std::string::npos) << answers;
  ::close(fd);
}

TEST(HttpListenerTest, AnAnswerNotTakenIsCutWithAReset) {
  HttpListenerLimits limits;
  limits.write_stall_timeout = std::chrono::milliseconds(200);
  limits.send_buffer_bytes = 32 << 10;
  Listener server(limits);
  const int fd = Connect(server.port(), 4096);
  ASSERT_TRUE(Send(fd, "GET /big HTTP/1.1\r\n\r\n"));
  // Nothing read: the server's writes stall, and it gives up with a reset
  // (a FIN would wait behind the bytes this client is not taking).
  pollfd p{fd, POLLRDHUP, 0};
  ASSERT_EQ(::poll(&p, 1, 30000), 1);
  EXPECT_NE(p.revents & (POLLERR | POLLHUP), 0) << p.revents;
  int error = 0;
  socklen_t len = sizeof error;
  ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len), 0);
  EXPECT_EQ(error, ECONNRESET);
  ::close(fd);
}

TEST(HttpListenerTest, WithEverySlotTakenTheClientWaitedOnLongestGivesItsSlotUp) {
  HttpListenerLimits limits;
  limits.max_connections = 4;
  limits.request_timeout = std::chrono::seconds(60);  // only eviction ends them
  limits.evict_after = std::chrono::milliseconds(50);
  Listener server(limits);
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(Connect(server.port()));
    ASSERT_TRUE(Send(held.back(), "GET /x HTTP/1.1\r\nA: 1\r\n"));
  }
  // A client that asks at once is answered: it takes a slot (the accept
  // loop's, or a held client's thread's once it has waited 50 ms).
  httplib::Client http("127.0.0.1", server.port());
  http.set_read_timeout(30);
  for (int i = 0; i < 3; ++i) {
    auto res = http.Get("/x");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    http.stop();  // its slot back, and the next request on a new connection
  }
  // Each slot taken was a held client's, told so (503) and closed; the
  // others still wait for their heads and are answered when they end.
  int evicted = 0, answered = 0;
  for (int fd : held) {
    ASSERT_TRUE(Send(fd, "Connection: close\r\n\r\n") || errno == EPIPE || errno == ECONNRESET);
    const std::string answer = ReadToEnd(fd);
    if (answer.rfind("HTTP/1.1 503", 0) == 0) ++evicted;
    if (answer.rfind("HTTP/1.1 200", 0) == 0) ++answered;
    ::close(fd);
  }
  EXPECT_GE(evicted, 1);
  EXPECT_EQ(evicted + answered, 4);
}

}  // namespace
}  // namespace argsdump
