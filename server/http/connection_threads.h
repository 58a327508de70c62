// The threads that serve the HTTP face's connections (cpp-httplib's task
// queue), and which connection gives its slot up when they are all taken.
// A connection gets a thread of its own when it is accepted, up to `max`
// at once; past that, up to `max` more wait for one to end, and then no
// more are accepted until one does (they wait in the kernel's listen
// backlog). With every slot taken, each connection that waits takes the
// slot of a client that keeps the server waiting (for its request, or to
// take its answer; its thread says so through a Client): the one that has
// done so longest, once that has lasted `evict_after`. Its socket is shut
// down for reading (its request reads end) or both ways (its answer's
// writes fail), and its thread ends it.
#ifndef ARGSDUMP_SERVER_HTTP_CONNECTION_THREADS_H_
#define ARGSDUMP_SERVER_HTTP_CONNECTION_THREADS_H_

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
struct ClientEntry;
}  // namespace connection_threads_internal

class ConnectionThreads {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ConnectionThreads(size_t max,
                             std::chrono::milliseconds evict_after = std::chrono::seconds(1));
  ~ConnectionThreads();

  // A task queue for httplib::Server::new_task_queue (httplib owns and
  // deletes it; it shares this object's state, which outlives it).
  httplib::TaskQueue* NewTaskQueue() const;

  // True once every connection accepted so far has been served; false at
  // `deadline` if some are still open.
  bool WaitIdle(Clock::time_point deadline) const;

  // A served connection as the slot policy sees it, made on the thread
  // that serves it and gone when it is closed.
  class Client {
   public:
    Client(const ConnectionThreads& threads, int fd);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;
    // The server waits on the client from `since`: for its request (since
    // the request began) or, `for_answer`, to take its answer (since this
    // write began). Until Resumed.
    void Waiting(Clock::time_point since, bool for_answer);
    void Resumed();
    // True once its slot was taken (its socket shut down).
    bool evicted() const;
    // Takes the slots due to connections that wait for one from the
    // clients the server has waited on for evict_after (maybe this one):
    // a client's thread calls it once its own wait has lasted that long,
    // since the accept loop evicts only when it accepts.
    void EvictDue();

   private:
    std::shared_ptr<connection_threads_internal::State> state_;
    std::unique_ptr<connection_threads_internal::ClientEntry> entry_;
  };

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

#endif  // ARGSDUMP_SERVER_HTTP_CONNECTION_THREADS_H_
