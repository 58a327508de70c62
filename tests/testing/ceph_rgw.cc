#include "tests/testing/ceph_rgw.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/shared_instance.h"
#include "absl/strings/str_split.h"

namespace argsdump {
namespace {

// The script, from the test's runfiles (or ARGSDUMP_CEPH_RGW_UP).
std::string UpScript() {
  const char* override_path = std::getenv("ARGSDUMP_CEPH_RGW_UP");
  if (override_path != nullptr && *override_path != '\0') return override_path;
  return "tools/ceph_rgw_up.sh";
}

bool Ended(int pidfd, std::chrono::milliseconds bound) {
  pollfd p{pidfd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, static_cast<int>(bound.count()));
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}

void SendSignal(int pidfd, int signal) {
  ::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CephRgw>> CephRgw::Start() {
  char pattern[] = "/tmp/argsdump_rgw_XXXXXX";  // short: unix socket paths are <= 107 bytes
  if (::mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
  std::unique_ptr<CephRgw> rgw(new CephRgw);
  rgw->dir_ = pattern;
  const auto started = std::chrono::steady_clock::now();
  auto up = ChildProcess::Start({"/bin/bash", UpScript(), rgw->dir_}, rgw->dir_ + "/up.out");
  if (!up.ok()) return up.status();
  // Each stage of the script is bounded (90 s); this is the hang guard.
  const std::optional<int> status = (*up)->Wait(std::chrono::minutes(6));
  // Whatever the script got to start is ours to stop, success or not.
  {
    std::ifstream pids(rgw->dir_ + "/pids");
    std::ifstream starting(rgw->dir_ + "/pids.starting");
    std::istream& in = pids.good() ? static_cast<std::istream&>(pids) : starting;
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      Daemon d;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &d.pid)) continue;
      d.name = parts[1];
      d.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, d.pid, 0));
      if (d.pidfd >= 0) rgw->daemons_.push_back(d);
    }
  }
  if (!status.has_value()) {
    (*up)->Signal(SIGKILL);
    return absl::DeadlineExceededError(
        absl::StrCat("tools/ceph_rgw_up.sh did not finish; logs in ", rgw->dir_, "/log"));
  }
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 77) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Ceph is not installed (tools/setup.sh installs ceph-mon ceph-osd radosgw ceph-common): ",
        (*up)->stderr_text()));
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return absl::InternalError(absl::StrCat("tools/ceph_rgw_up.sh failed: ", (*up)->stderr_text()));
  }
  std::ifstream out(rgw->dir_ + "/endpoint");
  std::string line;
  std::getline(out, line);
  for (absl::string_view field : absl::StrSplit(line, ' ')) {
    const size_t eq = field.find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view name = field.substr(0, eq);
    const std::string value(field.substr(eq + 1));
    if (name == "endpoint") rgw->endpoint_ = value;
    if (name == "access_key") rgw->access_key_ = value;
    if (name == "secret_key") rgw->secret_key_ = value;
    if (name == "region") rgw->region_ = value;
    if (name == "tls_endpoint") rgw->tls_endpoint_ = value;
    if (name == "ca_file") rgw->ca_file_ = value;
  }
  if (rgw->endpoint_.empty() || rgw->daemons_.size() != 3) {
    return absl::InternalError(absl::StrCat("tools/ceph_rgw_up.sh printed no endpoint or pids (",
                                            rgw->daemons_.size(), " daemons) in ", rgw->dir_));
  }
  std::string pids;
  for (const Daemon& d : rgw->daemons_) absl::StrAppend(&pids, " ", d.pid);
  rgw->Watch(pids);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  std::fprintf(stderr, "%sceph_rgw: RGW at %s up in %lld ms (folder %s)\n",
               (*up)->stderr_text().c_str(), rgw->endpoint_.c_str(),
               static_cast<long long>(took.count()), rgw->dir_.c_str());
  return rgw;
}

namespace {

// True once GET / on the endpoint answers 200 (a plain socket: the fixture
// does not depend on the client it tests).
bool Answers(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(endpoint.substr(colon + 1), &port)) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    timeval timeout{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[64] = {0};
      const ssize_t n = ::recv(fd, buf, sizeof(buf) - 1, 0);
      ok = n > 12 && std::string(buf, static_cast<size_t>(n)).find(" 200 ") != std::string::npos;
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace

absl::Status CephRgw::StopGateway() {
  if (restarted_gateway_ != nullptr) {
    restarted_gateway_->Signal(SIGTERM);
    if (!restarted_gateway_->Wait(std::chrono::seconds(15)).has_value()) {
      restarted_gateway_->Signal(SIGKILL);
    }
    restarted_gateway_.reset();
    return absl::OkStatus();
  }
  for (Daemon& d : daemons_) {
    if (d.name != "rgw.0" || d.pidfd < 0) continue;
    SendSignal(d.pidfd, SIGTERM);
    if (!Ended(d.pidfd, std::chrono::seconds(15))) {
      SendSignal(d.pidfd, SIGKILL);
      Ended(d.pidfd, std::chrono::seconds(5));
    }
    ::close(d.pidfd);
    d.pidfd = -1;
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError("radosgw is not running");
}

absl::Status CephRgw::StartGateway() {
  if (restarted_gateway_ != nullptr) return absl::FailedPreconditionError("radosgw runs");
  for (const Daemon& d : daemons_) {
    if (d.name == "rgw.0" && d.pidfd >= 0) return absl::FailedPreconditionError("radosgw runs");
  }
  // Our child this time (ChildProcess reaps it); its stderr to a file, so
  // an unread pipe can never block it.
  auto gateway = ChildProcess::Start(
      {"/bin/sh", "-c",
       absl::StrCat("exec radosgw -f -c ", dir_, "/ceph.conf -n client.rgw.0 2>>", dir_,
                    "/log/rgw.restart.err")},
      dir_ + "/log/rgw.restart.out");
  if (!gateway.ok()) return gateway.status();
  restarted_gateway_ = std::move(*gateway);
  Watch(absl::StrCat(restarted_gateway_->pid()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!Answers(endpoint_)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("radosgw did not answer within 60 s; logs in ", dir_, "/log"));
    }
    // Between two asks, waits on the gateway's end: one that died is
    // reported at once, with where its logs are.
    if (WaitForProcessEnd(restarted_gateway_->pid(), std::chrono::milliseconds(50))) {
      return absl::InternalError(
          absl::StrCat("radosgw exited before it answered; logs in ", dir_, "/log"));
    }
  }
  return absl::OkStatus();
}

void CephRgw::Watch(const std::string& pids) {
  auto watchdog = ChildProcess::Start(
      {"/bin/sh", "-c",
       absl::StrCat("tail --pid=", ::getpid(), " -f /dev/null >/dev/null 2>&1; kill -KILL ", pids,
                    " 2>/dev/null")},
      "/dev/null");
  if (watchdog.ok()) watchdogs_.push_back(std::move(*watchdog));
}

void CephRgw::StopAll() {
  for (Daemon& d : daemons_) {
    if (d.pidfd < 0) continue;
    SendSignal(d.pidfd, SIGTERM);
    if (!Ended(d.pidfd, std::chrono::seconds(15))) {
      std::fprintf(stderr, "ceph_rgw: %s (%d) ignored SIGTERM; SIGKILL\n", d.name.c_str(), d.pid);
      SendSignal(d.pidfd, SIGKILL);
      Ended(d.pidfd, std::chrono::seconds(5));
    }
    ::close(d.pidfd);
    d.pidfd = -1;
  }
}

CephRgw::~CephRgw() {
  watchdogs_.clear();  // SIGKILLs and reaps each sh (its tail ends with us)
  if (restarted_gateway_ != nullptr) (void)StopGateway();
  StopAll();
  if (std::getenv("ARGSDUMP_KEEP_RGW") == nullptr && !dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

s3::S3ClientOptions CephRgw::ClientOptions() const {
  s3::S3ClientOptions o;
  o.endpoint = endpoint_;
  o.region = region_;
  o.credentials.access_key_id = access_key_;
  o.credentials.secret_access_key = secret_key_;
  return o;
}

absl::StatusOr<CephRgw*> SharedCephRgw() { return SharedInstance<CephRgw>(); }

}  // namespace argsdump
