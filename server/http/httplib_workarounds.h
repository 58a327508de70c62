// Every place the HTTP face works around cpp-httplib (Debian's 0.11), in
// one file: what the library does not let us do through its interface,
// each with why we need it. The rest of server/http/ calls these instead
// of reaching into httplib's internals itself. One kind stays where it
// lives: the listener's httplib::Stream subclass (listener.cc) implements
// httplib's const is_readable()/is_writable() by waiting on its own
// non-const state, and says so there; its per-connection entry point is
// httplib's virtual process_and_close_socket.
#ifndef ARGSDUMP_SERVER_HTTP_HTTPLIB_WORKAROUNDS_H_
#define ARGSDUMP_SERVER_HTTP_HTTPLIB_WORKAROUNDS_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "httplib.h"

namespace argsdump {

// httplib hands handlers a const Request, but two things must change in it
// before it answers: the pre-routing hook drops a Range header outside
// /payload (httplib would otherwise cut a JSON answer by it) and frames a
// bodiless POST; the payload handler rewrites the one range it serves
// (httplib cuts the provider's bytes by it and answers 206) or clears it
// when it answers an error (or httplib would cut the error's body).
httplib::Request& MutableRequest(const httplib::Request& req);
httplib::Ranges& MutableRanges(const httplib::Request& req);

// How many times each parameter name came in the raw query string:
// httplib's req.params keeps one of identical pairs ("state=live&state=live"),
// so a duplicate is invisible there. Names are decoded as httplib decodes
// the names of req.params (its detail::decode_url).
std::map<std::string, size_t> RawQueryNameCounts(absl::string_view target);

// Socket options for the listening socket, replacing httplib's: it sets
// SO_REUSEPORT, with which a second server on the same port would start and
// take half the connections. SO_REUSEADDR only (a restart binds while old
// connections linger in TIME_WAIT). `*listening` is set to the listening
// socket, for RaiseListenBacklog.
void UseReuseAddrOnly(httplib::Server* http, std::shared_ptr<int> listening);

// httplib listens with a backlog of 5: a burst of connections (a page's
// six, a dashboard's fan-out) overflowed it while the accept loop started
// threads, and the dropped SYNs were retried a second later. Listening
// again on the bound socket raises the backlog. No-op for fd < 0.
void RaiseListenBacklog(int listening_fd);

// Waits until httplib's accept loop runs (or `exited` says its thread
// ended): its stop() does nothing before that, and a Shutdown right after
// Start would then leave the listen thread running. The socket is bound
// and listening already, so this is a moment.
void WaitForAcceptLoop(const httplib::Server& http, const std::function<bool()>& exited);

// Cuts (shutdown(2)) every connection this process accepted on `port`:
// httplib does not hand out the sockets of the connections it serves, and
// has no way to end them, so Shutdown finds them by their local port.
void CutConnectionsOnPort(int port);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_HTTPLIB_WORKAROUNDS_H_
