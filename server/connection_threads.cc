#include "server/connection_threads.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "httplib.h"

namespace argsdump {

namespace connection_threads_internal {

struct State {
  explicit State(size_t max) : max(max) {}
  const size_t max;
  std::mutex mu;
  std::condition_variable idle;
  std::condition_variable slot;  // a thread ended or a waiting one was taken
  size_t running = 0;  // threads serving (each ends when nothing waits)
  std::deque<std::function<void()>> waiting;
};

}  // namespace connection_threads_internal

namespace {

using connection_threads_internal::State;

// Runs `fn`, then whatever waits, then ends (the last one says so).
void Serve(const std::shared_ptr<State>& state, std::function<void()> fn) {
  for (;;) {
    fn();
    fn = nullptr;
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->waiting.empty()) {
      if (--state->running == 0) state->idle.notify_all();
      state->slot.notify_all();
      return;
    }
    fn = std::move(state->waiting.front());
    state->waiting.pop_front();
    state->slot.notify_all();
  }
}

class Queue : public httplib::TaskQueue {
 public:
  explicit Queue(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Called on httplib's accept loop. With every thread busy and as many
  // connections waiting, it waits for a slot: the loop stops accepting, so
  // a flood of idle connections stays in the kernel's backlog instead of
  // taking this process's descriptors (10 000 of them had left gRPC unable
  // to accept at all: EMFILE).
  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->slot.wait(lock, [this] {
      return state_->running < state_->max || state_->waiting.size() < state_->max;
    });
    if (state_->running >= state_->max) {
      state_->waiting.push_back(std::move(fn));
      return;
    }
    ++state_->running;
    // Detached: the thread holds the state, and httplib's listen returns
    // (and its server may go) only after shutdown() saw every one end.
    std::thread([state = state_, fn = std::move(fn)]() mutable { Serve(state, std::move(fn)); })
        .detach();
  }

  // httplib's listen ends with this: every accepted connection served.
  void shutdown() override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->idle.wait(lock, [this] { return state_->running == 0; });
  }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace

ConnectionThreads::ConnectionThreads(size_t max)
    : state_(std::make_shared<connection_threads_internal::State>(max < 1 ? 1 : max)) {}

ConnectionThreads::~ConnectionThreads() = default;

httplib::TaskQueue* ConnectionThreads::NewTaskQueue() const { return new Queue(state_); }

bool ConnectionThreads::WaitIdle(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->idle.wait_until(lock, deadline, [this] { return state_->running == 0; });
}

void ConnectionThreads::CutConnections(int port) {
  for (int fd : Connections(port)) ::shutdown(fd, SHUT_RDWR);
}

std::vector<int> ConnectionThreads::Connections(int port) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    int fd = -1;
    if (!absl::SimpleAtoi(e->d_name, &fd) || fd == ::dirfd(d)) continue;
    int type = 0;
    socklen_t type_len = sizeof type;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    int listening = 0;
    socklen_t listening_len = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM ||
        ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &listening_len) != 0 ||
        listening != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      continue;
    }
    int local_port = -1;
    if (local.ss_family == AF_INET) {
      local_port = ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
    } else if (local.ss_family == AF_INET6) {
      local_port = ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port);
    }
    if (local_port == port) out.push_back(fd);
  }
  ::closedir(d);
  return out;
}

}  // namespace argsdump
