#include "server/http/httplib_workarounds.h"

#include <sys/socket.h>

#include <thread>
#include <utility>

#include "absl/strings/str_split.h"
#include "server/http/connection_threads.h"

namespace argsdump {

httplib::Request& MutableRequest(const httplib::Request& req) {
  return const_cast<httplib::Request&>(req);
}

httplib::Ranges& MutableRanges(const httplib::Request& req) { return MutableRequest(req).ranges; }

std::map<std::string, size_t> RawQueryNameCounts(absl::string_view target) {
  std::map<std::string, size_t> given;
  const size_t q = target.find('?');
  if (q == absl::string_view::npos) return given;
  for (absl::string_view part : absl::StrSplit(target.substr(q + 1), '&', absl::SkipEmpty())) {
    ++given[httplib::detail::decode_url(std::string(part.substr(0, part.find('='))), true)];
  }
  return given;
}

void UseReuseAddrOnly(httplib::Server* http, std::shared_ptr<int> listening) {
  http->set_socket_options([listening = std::move(listening)](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listening = sock;
  });
}

void RaiseListenBacklog(int listening_fd) {
  if (listening_fd >= 0) ::listen(listening_fd, SOMAXCONN);
}

void WaitForAcceptLoop(const httplib::Server& http, const std::function<bool()>& exited) {
  while (!http.is_running() && !exited()) std::this_thread::yield();
}

void CutConnectionsOnPort(int port) { ConnectionThreads::CutConnections(port); }

}  // namespace argsdump
