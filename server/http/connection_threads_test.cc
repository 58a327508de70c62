// ConnectionThreads under a real httplib::Server on 127.0.0.1 port 0: more
// clients than threads, connections that never finish their request, and
// shutdown while clients are busy. No gRPC here, so this runs under
// ThreadSanitizer too.
#include "server/http/connection_threads.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
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

// A connection that sends half a request head, then waits.
int HalfRequest(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const std::string head = "GET /x HTTP/1.1\r\nHost: x\r\n";
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  return fd;
}

// True when the other end ended the connection (a read sees it at once).
bool Ended(int fd) {
  char c;
  const ssize_t n = ::recv(fd, &c, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

class ServerOnThreads {
 public:
  explicit ServerOnThreads(size_t max) : threads_(max) {
    http_.new_task_queue = [this] { return threads_.NewTaskQueue(); };
    http_.Get("/x", [this](const httplib::Request&, httplib::Response& res) {
      served_.fetch_add(1);
      res.set_content("x", "text/plain");
    });
    // As HttpGateway does: a backlog past httplib's 5 (no SYN retried a
    // second later), and reads that wait long enough for a slow machine.
    http_.set_read_timeout(60);
    http_.set_socket_options([this](int fd) { listening_ = fd; });
    port_ = http_.bind_to_any_port("127.0.0.1");
    ::listen(listening_, SOMAXCONN);
    listener_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::yield();
  }
  ~ServerOnThreads() { Stop(std::chrono::milliseconds(0)); }

  // What HttpGateway::Shutdown does.
  void Stop(std::chrono::milliseconds grace) {
    if (!listener_.joinable()) return;
    http_.stop();
    if (!threads_.WaitIdle(std::chrono::steady_clock::now() + grace)) {
      ConnectionThreads::CutConnections(port_);
    }
    listener_.join();
  }

  int port() const { return port_; }
  int served() const { return served_.load(); }

 private:
  ConnectionThreads threads_;
  httplib::Server http_;
  int port_ = 0;
  int listening_ = -1;
  std::atomic<int> served_{0};
  std::thread listener_;
};

TEST(ConnectionThreadsTest, ClientsPastTheBoundWaitAndAreServed) {
  ServerOnThreads server(3);
  ASSERT_GT(server.port(), 0);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client http("127.0.0.1", server.port());
      http.set_keep_alive(t % 2 == 0);  // half hold their connection (and thread)
      for (int i = 0; i < 20; ++i) {
        auto res = http.Get("/x");
        if (res && res->status == 200 && res->body == "x") ok.fetch_add(1);
      }
      http.stop();  // frees the thread for a waiting one
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 8 * 20);
  EXPECT_EQ(server.served(), 8 * 20);
}

TEST(ConnectionThreadsTest, HalfRequestsHoldNoOneElseUp) {
  ServerOnThreads server(256);
  std::vector<int> held;
  for (int i = 0; i < 40; ++i) {
    held.push_back(HalfRequest(server.port()));
    ASSERT_GE(held.back(), 0);
  }
  httplib::Client http("127.0.0.1", server.port());
  auto res = http.Get("/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // The held ones are still open (not timed out, not dropped): they finish
  // their heads and are answered.
  for (int fd : held) {
    ASSERT_EQ(::send(fd, "\r\n", 2, MSG_NOSIGNAL), 2);
    char buf[16] = {};
    ASSERT_GT(::recv(fd, buf, sizeof buf - 1, 0), 0);
    EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 200");
    ::close(fd);
  }
}

TEST(ConnectionThreadsTest, PastTheBoundAndAsManyWaitingNoMoreAreAccepted) {
  ServerOnThreads server(2);
  // Connections that send nothing: 2 served, 2 waiting, then the accept
  // loop holds the next one and the rest stay in the kernel's backlog.
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server.port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    idle.push_back(fd);
  }
  // 2 + 2, and the one the accept loop holds.
  EXPECT_LE(ConnectionThreads::Connections(server.port()).size(), 5u);
  // Once they go, the server accepts again.
  for (int fd : idle) ::close(fd);
  httplib::Client http("127.0.0.1", server.port());
  http.set_read_timeout(60);
  auto res = http.Get("/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(ConnectionThreadsTest, StopCutsWhatIsStillOpenWhileClientsAreBusy) {
  auto server = std::make_unique<ServerOnThreads>(256);
  std::vector<int> held;
  for (int i = 0; i < 12; ++i) {
    held.push_back(HalfRequest(server->port()));
    ASSERT_GE(held.back(), 0);
  }
  std::atomic<bool> done{false};
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      httplib::Client http("127.0.0.1", server->port());
      http.set_keep_alive(true);
      while (!done.load()) {
        if (!http.Get("/x")) break;  // refused once the server is gone
        answered.fetch_add(1);
      }
    });
  }
  // Stop once the clients are being answered (an event, not a pause).
  while (answered.load() < 20) std::this_thread::yield();
  server->Stop(std::chrono::milliseconds(10));
  done.store(true);
  for (auto& c : clients) c.join();
  for (int fd : held) {
    EXPECT_TRUE(Ended(fd));
    ::close(fd);
  }
  server.reset();
}

}  // namespace
}  // namespace argsdump
