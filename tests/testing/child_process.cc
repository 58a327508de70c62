#include "tests/testing/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace argsdump {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& stdout_path) {
  if (argv.empty()) return absl::InvalidArgumentError("no program");
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (std::string& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid;
  const int rc = ::posix_spawn(&pid, args[0].c_str(), &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(err[1]);
  if (rc != 0) {
    ::close(err[0]);
    return absl::InternalError(absl::StrCat("cannot start ", args[0], ": ", std::strerror(rc)));
  }
  std::unique_ptr<ChildProcess> p(new ChildProcess);
  p->pid_ = pid;
  p->stderr_fd_ = err[0];
  return p;
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (stderr_fd_ >= 0) ::close(stderr_fd_);
}

bool ChildProcess::ReadSome(std::chrono::steady_clock::time_point until) {
  if (stderr_ended_) return false;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{stderr_fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
  if (ready < 0 && errno == EINTR) return true;
  if (ready <= 0) return false;
  char buf[4096];
  const ssize_t n = ::read(stderr_fd_, buf, sizeof(buf));
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    stderr_ended_ = true;
    return false;
  }
  stderr_.append(buf, static_cast<size_t>(n));
  return true;
}

bool ChildProcess::WaitForLine(const std::string& text, std::chrono::milliseconds bound,
                               std::string* line) {
  const auto until = std::chrono::steady_clock::now() + bound;
  for (;;) {
    // Every whole line so far (the order of lines from different threads or
    // processes is not the test's to know).
    size_t from = 0, end;
    while ((end = stderr_.find('\n', from)) != std::string::npos) {
      const std::string l = stderr_.substr(from, end - from);
      from = end + 1;
      if (l.find(text) != std::string::npos) {
        if (line != nullptr) *line = l;
        return true;
      }
    }
    if (!ReadSome(until)) return false;
  }
}

bool ChildProcess::ReadStderrToEnd(std::chrono::milliseconds bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (ReadSome(until)) {
  }
  return stderr_ended_;
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds bound) {
  ReadStderrToEnd(bound);
  if (!WaitForProcessEnd(pid_, bound)) return std::nullopt;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status;
}

void ChildProcess::Signal(int signal) {
  if (!reaped_) ::kill(pid_, signal);
}

bool WaitForProcessEnd(pid_t pid, std::chrono::milliseconds bound) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already gone (and reaped)
  pollfd p{fd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, static_cast<int>(bound.count()));
  } while (ready < 0 && errno == EINTR);
  ::close(fd);
  return ready > 0;
}

}  // namespace argsdump
