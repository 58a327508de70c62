#include "server/http/connection_threads.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "base/thread.h"
#include "httplib.h"

namespace argsdump {

namespace connection_threads_internal {

struct ClientEntry {
  int fd = -1;
  // When the server began to wait on the client; max while it does not.
  ConnectionThreads::Clock::time_point since = ConnectionThreads::Clock::time_point::max();
  bool for_answer = false;
  bool evicted = false;
};

struct State {
  State(size_t max, std::chrono::milliseconds evict_after) : max(max), evict_after(evict_after) {}
  const size_t max;
  const std::chrono::milliseconds evict_after;
  std::mutex mu;
  std::condition_variable idle;
  std::condition_variable slot;  // a thread ended, a waiting one was taken, a client waits
  size_t running = 0;  // threads serving (each ends when nothing waits)
  std::deque<std::function<void()>> waiting;
  std::set<ClientEntry*> clients;  // the connections being served
  size_t evicting = 0;             // clients evicted and not yet gone
};

}  // namespace connection_threads_internal

namespace {

using connection_threads_internal::ClientEntry;
using connection_threads_internal::State;
using Clock = ConnectionThreads::Clock;

// Evicts clients until `wanted` slots are being freed, the one the server
// has waited on longest first, and only once it has waited `evict_after`.
// Returns when the next one may be evicted (max: none is waited on).
Clock::time_point EvictFor(State& s, size_t wanted, Clock::time_point now) {
  while (s.evicting < wanted) {
    ClientEntry* oldest = nullptr;
    for (ClientEntry* c : s.clients) {
      if (!c->evicted && c->since != Clock::time_point::max() &&
          (oldest == nullptr || c->since < oldest->since)) {
        oldest = c;
      }
    }
    if (oldest == nullptr) return Clock::time_point::max();
    if (now - oldest->since < s.evict_after) return oldest->since + s.evict_after;
    oldest->evicted = true;
    ++s.evicting;
    // Its thread wakes: a read sees the end, a write fails.
    ::shutdown(oldest->fd, oldest->for_answer ? SHUT_RDWR : SHUT_RD);
  }
  return Clock::time_point::max();
}

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
    for (;;) {
      if (state_->running < state_->max) break;
      // Every slot taken: one freed for this connection and each that
      // waits, from clients that keep the server waiting.
      const Clock::time_point next =
          EvictFor(*state_, state_->waiting.size() + 1, Clock::now());
      if (state_->waiting.size() < state_->max) {
        state_->waiting.push_back(std::move(fn));
        return;
      }
      if (next == Clock::time_point::max()) {
        state_->slot.wait(lock);
      } else {
        state_->slot.wait_until(lock, next);
      }
    }
    ++state_->running;
    // Detached: the thread holds the state, and httplib's listen returns
    // (and its server may go) only after shutdown() saw every one end.
    auto task = std::make_shared<std::function<void()>>(std::move(fn));
    std::thread thread;
    const absl::Status started =
        StartThread("an HTTP connection thread", &thread, [state = state_, task]() mutable {
          // A write to a connection the client closed fails (EPIPE) instead
          // of killing the process (TLS writes through OpenSSL's socket BIO).
          sigset_t pipe;
          sigemptyset(&pipe);
          sigaddset(&pipe, SIGPIPE);
          pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
          Serve(state, std::move(*task));
        });
    if (started.ok()) {
      thread.detach();
      return;
    }
    // The system refused a thread: a thread already serving takes the
    // connection when it is done; with none, it is served here, on the
    // accept loop, which accepts no other meanwhile.
    --state_->running;
    if (state_->running > 0) {
      state_->waiting.push_back(std::move(*task));
      return;
    }
    ++state_->running;
    lock.unlock();
    Serve(state_, std::move(*task));
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

ConnectionThreads::ConnectionThreads(size_t max, std::chrono::milliseconds evict_after)
    : state_(std::make_shared<State>(max < 1 ? 1 : max, evict_after)) {}

ConnectionThreads::~ConnectionThreads() = default;

httplib::TaskQueue* ConnectionThreads::NewTaskQueue() const { return new Queue(state_); }

bool ConnectionThreads::WaitIdle(Clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->idle.wait_until(lock, deadline, [this] { return state_->running == 0; });
}

ConnectionThreads::Client::Client(const ConnectionThreads& threads, int fd)
    : state_(threads.state_), entry_(std::make_unique<ClientEntry>()) {
  entry_->fd = fd;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->clients.insert(entry_.get());
}

ConnectionThreads::Client::~Client() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->clients.erase(entry_.get());
  if (entry_->evicted) --state_->evicting;
}

void ConnectionThreads::Client::Waiting(Clock::time_point since, bool for_answer) {
  std::lock_guard<std::mutex> lock(state_->mu);
  entry_->since = since;
  entry_->for_answer = for_answer;
  // The accept loop may be waiting for a client to evict.
  if (!state_->waiting.empty()) state_->slot.notify_all();
}

void ConnectionThreads::Client::Resumed() {
  std::lock_guard<std::mutex> lock(state_->mu);
  entry_->since = Clock::time_point::max();
}

void ConnectionThreads::Client::EvictDue() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->waiting.empty()) EvictFor(*state_, state_->waiting.size(), Clock::now());
}

bool ConnectionThreads::Client::evicted() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return entry_->evicted;
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
