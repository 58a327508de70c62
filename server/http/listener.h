// The HTTP face's listener: an httplib::Server whose connections are each
// served on a thread of their own (ConnectionThreads) through a stream
// that bounds what a client may hold of the server, whatever httplib's
// own per-read timeouts allow:
//   - its request (the TLS handshake, the head, the body) must have
//     arrived `request_timeout` after the connection's turn came (or the
//     previous answer on it ended); the first byte of a request on a kept
//     alive connection within `keep_alive_timeout`;
//   - an answer must take bytes: a write that waits `write_stall_timeout`
//     for the client to make room fails and the connection is cut;
//   - with every slot taken, the client that has kept the server waiting
//     longest gives its slot up (ConnectionThreads).
// A request cut while it arrives is answered by the error handler, which
// asks RequestCut() why (408 or 503); an answer cut is a closed connection.
// HTTPS when a certificate and key are given (OpenSSL, the same streams).
#ifndef ARGSDUMP_SERVER_HTTP_LISTENER_H_
#define ARGSDUMP_SERVER_HTTP_LISTENER_H_

#include <chrono>
#include <memory>
#include <string>

#include "httplib.h"
#include "server/http/connection_threads.h"

namespace argsdump {

struct HttpListenerLimits {
  size_t max_connections = 256;
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds keep_alive_timeout{5000};
  std::chrono::milliseconds write_stall_timeout{10000};
  std::chrono::milliseconds evict_after{1000};
  size_t keep_alive_max_count = 1000;
  // SO_SNDBUF of each connection: what the kernel holds of an answer the
  // client has not taken (it goes on holding it after the close). 0: the
  // kernel's own sizing (on loopback it takes a megabyte or more).
  int send_buffer_bytes = 0;
};

class HttpListener : public httplib::Server {
 public:
  // Both files empty: plain HTTP. Otherwise is_valid() says whether they
  // are a PEM certificate chain and its private key.
  HttpListener(const HttpListenerLimits& limits, const std::string& tls_cert_file,
               const std::string& tls_key_file);
  ~HttpListener() override;

  bool is_valid() const override;
  ConnectionThreads& threads() { return threads_; }

  // Why the request being served on this thread stopped arriving.
  enum class Cut {
    kNone,
    kTimedOut,  // it had not arrived within request_timeout
    kEvicted,   // every slot was taken and this client had waited longest
  };
  static Cut RequestCut();
  // The connection of the request served on this thread closes after its
  // answer (a body that was not read would be taken for the next request).
  static void CloseAfterAnswer();

 private:
  struct Tls;

  // httplib's per-connection entry point (its accept loop calls it on the
  // connection's thread).
  bool process_and_close_socket(socket_t sock) override;

  const HttpListenerLimits limits_;
  const bool tls_wanted_;
  std::unique_ptr<Tls> tls_;
  ConnectionThreads threads_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_LISTENER_H_
