#include "server/http/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace argsdump {

struct HttpListener::Tls {
  ~Tls() {
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }
  SSL_CTX* ctx = nullptr;
};

namespace {

using Clock = ConnectionThreads::Clock;

// A connection's bytes, both ways, under the listener's bounds. Reads are
// buffered (httplib reads a request head a byte at a time). The socket is
// non-blocking: every wait is a poll(2) with the time left.
class BoundedStream : public httplib::Stream {
 public:
  BoundedStream(int fd, SSL* ssl, ConnectionThreads::Client* client,
                const HttpListenerLimits& limits)
      : fd_(fd), ssl_(ssl), client_(client), limits_(limits) {}

  // A request begins: it must have arrived by now + request_timeout.
  void StartRequest() {
    request_started_ = Clock::now();
    request_deadline_ = request_started_ + limits_.request_timeout;
  }

  // TLS: the handshake, within the first request's time.
  bool Handshake() {
    for (;;) {
      ERR_clear_error();
      const int r = SSL_accept(ssl_);
      if (r == 1) return true;
      if (!WaitForSsl(r)) return false;
    }
  }

  // The first byte of the next request, within keep_alive_timeout.
  bool AwaitRequest() {
    if (buffered() > 0 || (ssl_ != nullptr && SSL_pending(ssl_) > 0)) return true;
    return Wait(POLLIN, std::min(request_deadline_, Clock::now() + limits_.keep_alive_timeout),
                /*for_answer=*/false, /*mark_timeout=*/false);
  }

  HttpListener::Cut cut() const { return cut_; }
  bool broken() const { return broken_; }

  // httplib's Stream declares these const, yet asking means waiting (a
  // poll with the time left), which marks the stream timed out or broken:
  // the one place the listener casts const away, on its own object.
  bool is_readable() const override {
    if (buffered() > 0 || (ssl_ != nullptr && SSL_pending(ssl_) > 0)) return true;
    return const_cast<BoundedStream*>(this)->Wait(POLLIN, request_deadline_, false, true);
  }

  bool is_writable() const override {
    return !broken_ && const_cast<BoundedStream*>(this)->Wait(
                           POLLOUT, Clock::now() + limits_.write_stall_timeout, true, false);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered() == 0) {
      const ssize_t n = Receive(buffer_, sizeof buffer_);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, buffered());
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (broken_) return -1;
    if (size == 0) return 0;
    for (;;) {
      if (ssl_ != nullptr) {
        ERR_clear_error();
        const int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
        if (n > 0) return n;
        if (!WaitForSsl(n)) return Broke();
        continue;
      }
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Broke();
      if (!Wait(POLLOUT, Clock::now() + limits_.write_stall_timeout, true, false)) return Broke();
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) Describe(a, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) Describe(a, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  size_t buffered() const { return end_ - begin_; }

  ssize_t Broke() {
    broken_ = true;
    return -1;
  }

  // Request bytes: > 0 read, 0 the end (the client's, or its slot taken),
  // -1 an error or the request's time is up.
  ssize_t Receive(char* into, size_t size) {
    for (;;) {
      if (ssl_ != nullptr) {
        ERR_clear_error();
        const int n = SSL_read(ssl_, into, static_cast<int>(size));
        if (n > 0) return n;
        if (SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN) return Ended();
        if (!WaitForSsl(n)) return client_->evicted() ? Ended() : -1;
        continue;
      }
      const ssize_t n = ::recv(fd_, into, size, 0);
      if (n > 0) return n;
      if (n == 0) return Ended();
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!Wait(POLLIN, request_deadline_, false, true)) return client_->evicted() ? Ended() : -1;
    }
  }

  ssize_t Ended() {
    if (client_->evicted() && cut_ == HttpListener::Cut::kNone) cut_ = HttpListener::Cut::kEvicted;
    return 0;
  }

  // After an OpenSSL call returned `r` <= 0: waits for what it wants (a
  // read within the request's time, a write within the stall bound).
  bool WaitForSsl(int r) {
    switch (SSL_get_error(ssl_, r)) {
      case SSL_ERROR_WANT_READ:
        return Wait(POLLIN, request_deadline_, false, true);
      case SSL_ERROR_WANT_WRITE:
        return Wait(POLLOUT, Clock::now() + limits_.write_stall_timeout, true, false);
      default:
        return false;
    }
  }

  // Waits for `events` until `deadline`, the server waiting on the client
  // (for its request since it began, or for room for its answer from now:
  // the slot policy's order). False at the deadline (`mark_timeout`: the
  // request timed out), on an error, or when the slot was taken.
  bool Wait(short events, Clock::time_point deadline, bool for_answer, bool mark_timeout) {
    const Clock::time_point since = for_answer ? Clock::now() : request_started_;
    client_->Waiting(since, for_answer);
    // Once this wait makes the client evictable, a look at whether a
    // connection waits for its slot (none may be accepted meanwhile).
    Clock::time_point evictable = since + limits_.evict_after;
    bool ready = false;
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        if (mark_timeout && cut_ == HttpListener::Cut::kNone) cut_ = HttpListener::Cut::kTimedOut;
        break;
      }
      if (now >= evictable) {
        client_->EvictDue();  // when it is this one, its socket is shut down: poll returns
        evictable = Clock::time_point::max();
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
                            std::min(deadline, evictable) - now)
                            .count();
      pollfd p{fd_, static_cast<short>(events | POLLRDHUP), 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      // Readable, writable, or the end or an error (the next call says).
      ready = r > 0;
      if (r != 0) break;
    }
    client_->Resumed();
    if (client_->evicted()) {
      if (cut_ == HttpListener::Cut::kNone) cut_ = HttpListener::Cut::kEvicted;
      // A read still sees what arrived and then the end; a write fails.
      return ready && !for_answer;
    }
    return ready;
  }

  static void Describe(const sockaddr_storage& a, std::string& ip, int& port) {
    char text[INET6_ADDRSTRLEN] = "";
    if (a.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
      port = ntohs(in->sin6_port);
    }
    ip = text;
  }

  const int fd_;
  SSL* const ssl_;
  ConnectionThreads::Client* const client_;
  const HttpListenerLimits& limits_;
  Clock::time_point request_started_{}, request_deadline_{};
  HttpListener::Cut cut_ = HttpListener::Cut::kNone;
  bool broken_ = false;  // a write failed: the answer cannot be completed
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

// The stream of the request this thread serves, for RequestCut.
thread_local BoundedStream* current_stream = nullptr;
thread_local bool close_after_answer = false;

}  // namespace

HttpListener::HttpListener(const HttpListenerLimits& limits, const std::string& tls_cert_file,
                           const std::string& tls_key_file)
    : limits_(limits),
      tls_wanted_(!tls_cert_file.empty() || !tls_key_file.empty()),
      threads_(std::max<size_t>(1, limits.max_connections), limits.evict_after) {
  new_task_queue = [this] { return threads_.NewTaskQueue(); };
  set_keep_alive_max_count(std::max<size_t>(1, limits.keep_alive_max_count));
  if (!tls_wanted_) return;
  tls_ = std::make_unique<Tls>();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, tls_cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return;
  }
  tls_->ctx = ctx;
}

HttpListener::~HttpListener() = default;

bool HttpListener::is_valid() const { return !tls_wanted_ || tls_->ctx != nullptr; }

HttpListener::Cut HttpListener::RequestCut() {
  return current_stream != nullptr ? current_stream->cut() : Cut::kNone;
}

void HttpListener::CloseAfterAnswer() { close_after_answer = true; }

bool HttpListener::process_and_close_socket(socket_t sock) {
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
  if (limits_.send_buffer_bytes > 0) {
    ::setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &limits_.send_buffer_bytes,
                 sizeof limits_.send_buffer_bytes);
  }
  SSL* ssl = nullptr;
  bool ok = true;
  bool cut_answer = false;
  {
    // Gone before the socket is closed: the slot policy shuts sockets
    // down by descriptor.
    ConnectionThreads::Client client(threads_, sock);
    if (tls_ != nullptr) {
      ssl = SSL_new(tls_->ctx);
      ok = ssl != nullptr && SSL_set_fd(ssl, sock) == 1;
    }
    BoundedStream stream(sock, ssl, &client, limits_);
    stream.StartRequest();
    if (ok && ssl != nullptr) ok = stream.Handshake();
    size_t left = keep_alive_max_count_;
    while (ok && svr_sock_ != INVALID_SOCKET && left > 0 && stream.AwaitRequest()) {
      bool closed = false;
      current_stream = &stream;
      close_after_answer = false;
      ok = process_request(stream, /*close_connection=*/left == 1, closed, nullptr);
      current_stream = nullptr;
      if (closed || close_after_answer || stream.broken() ||
          stream.cut() != Cut::kNone) {
        break;
      }
      --left;
      stream.StartRequest();
    }
    cut_answer = stream.broken();
    if (ssl != nullptr) {
      // One close_notify, not waited for.
      if (!stream.broken()) SSL_shutdown(ssl);
      SSL_free(ssl);
      ERR_clear_error();
    }
  }
  if (cut_answer) {
    // A reset: the answer's unsent bytes are dropped at once (the client
    // is not reading them, so a FIN queued behind them would never reach
    // it and the kernel would hold them until its retries give up).
    const linger reset{1, 0};
    ::setsockopt(sock, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  } else {
    ::shutdown(sock, SHUT_RDWR);
  }
  ::close(sock);
  return ok;
}

}  // namespace argsdump
