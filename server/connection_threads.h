// The threads that serve the HTTP face's connections (cpp-httplib's task
// queue). httplib serves a connection on one thread for as long as it is
// kept alive, or its request head trickles in (its read timeout is per
// read): with its fixed pool of N threads, N clients sending a header line
// every few seconds stopped the face for everyone else. Here a connection
// gets a thread of its own when it is accepted, up to `max` at once; past
// that, up to `max` more wait for one to end, and then no more are
// accepted until one does (they wait in the kernel's listen backlog).
#ifndef ARGSDUMP_SERVER_CONNECTION_THREADS_H_
#define ARGSDUMP_SERVER_CONNECTION_THREADS_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

namespace httplib {
class TaskQueue;
}

namespace argsdump {

namespace connection_threads_internal {
struct State;
}

class ConnectionThreads {
 public:
  explicit ConnectionThreads(size_t max);
  ~ConnectionThreads();

  // A task queue for httplib::Server::new_task_queue (httplib owns and
  // deletes it; it shares this object's state, which outlives it).
  httplib::TaskQueue* NewTaskQueue() const;

  // True once every connection accepted so far has been served; false at
  // `deadline` if some are still open.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const;

  // Cuts (shutdown(2), both ways) every TCP connection of this process
  // whose local port is `port`: the ones a server on it accepted (httplib
  // does not hand them out). Their threads then see the end and finish.
  static void CutConnections(int port);
  // The descriptors of those connections.
  static std::vector<int> Connections(int port);

 private:
  std::shared_ptr<connection_threads_internal::State> state_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_CONNECTION_THREADS_H_
