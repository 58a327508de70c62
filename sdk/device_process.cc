#include "sdk/device_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/thread.h"

namespace argsdump {
namespace {

FlightTable* g_flight = nullptr;  // the child's, for the fault handler

void OnFault(int signal, siginfo_t* info, void*) {
  if (g_flight != nullptr) {
    // si_addr means something only when the kernel raised the fault (a
    // kill() or raise() has si_code <= 0, and the union holds the sender's
    // pid there, not an address).
    const bool has_address =
        info != nullptr && info->si_code > 0 &&
        (signal == SIGSEGV || signal == SIGBUS || signal == SIGFPE || signal == SIGILL);
    g_flight->RecordFault(signal, has_address ? info->si_addr : nullptr, has_address);
  }
  // SA_RESETHAND restored the default action: die of the same signal.
  ::raise(signal);
}

void InstallFaultHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnFault;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(s, &sa, nullptr);
}

// After the report: only a report that ends with it was sent whole (a
// kernel that calls _exit(0) sends nothing and is a crash all the same).
constexpr char kTrailer[] = "\0ARGSDUMP-DEVICE-REPORT-END";
constexpr size_t kTrailerBytes = sizeof(kTrailer) - 1;

// The child's exit status when `device` threw (DeviceExit::exit_status).
constexpr int kDeviceThrew = 5;

constexpr int kHeartbeatPeriodMs = static_cast<int>(abi::kFlightHeartbeatMs);

// The child's exit status when its watch thread could not start.
constexpr int kDeviceNoWatch = 6;

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string SignalName(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);  // "SEGV"; null for none
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", signal);
}

int DeviceProcess::ThreadCount() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

namespace {

// ThreadSanitizer's runtime keeps a background thread of its own once a
// thread was started (it is fork-safe: the runtime locks itself around
// fork).
#if defined(__SANITIZE_THREAD__)
constexpr int kRuntimeThreads = 1;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr int kRuntimeThreads = 1;
#else
constexpr int kRuntimeThreads = 0;
#endif
#else
constexpr int kRuntimeThreads = 0;
#endif

// FailedPrecondition when this process runs threads besides the caller's
// (and the sanitizer runtime's): a forked child inherits their locks, not them.
absl::Status CheckForkable() {
  const int others = DeviceProcess::ThreadCount() - 1;
  if (others < 0 || others > kRuntimeThreads) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the device process cannot be forked: this process runs ",
        std::max(others - kRuntimeThreads, 0), " other thread(s) (a forked child inherits "
        "their locks, not them). Open the session with "
        "device_process before anything in the process starts a thread (a gRPC channel, a "
        "thread pool), or run the device in this process (device_process = false)"));
  }
  return absl::OkStatus();
}

// The child's watch thread: bumps the heartbeat the host's watch reads (a
// process stopped as a whole bumps it no more) until the parent ends, then
// runs `host_gone`.
void WatchParent(FlightTable* flight, int parent_fd, pid_t parent,
                 const std::function<void()>& host_gone) {
  for (;;) {
    flight->header().heartbeat.fetch_add(1, std::memory_order_relaxed);
    bool gone;
    if (parent_fd >= 0) {
      pollfd p = {parent_fd, POLLIN, 0};
      const int n = ::poll(&p, 1, kHeartbeatPeriodMs);
      gone = n > 0;
    } else {
      // No pidfd (a kernel before 5.3): the parent is gone once this
      // process was re-parented.
      ::usleep(kHeartbeatPeriodMs * 1000);
      gone = ::getppid() != parent;
    }
    if (gone) break;
  }
  if (host_gone) host_gone();
}

// The forked child: set up, start its watch, run `device`, send its report
// (with the trailer) on `report_fd`, and _exit; it never returns.
[[noreturn]] void RunDeviceChild(FlightTable* flight, const std::function<std::string()>& device,
                                 std::function<void()> host_gone, int report_fd, int parent_fd,
                                 pid_t parent) {
  struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_NAME, "argsdump-dev", 0, 0, 0);
  // A device stopped (SIGSTOP, a debugger detached) when the host dies
  // would never see it go: the host's death continues it, and the watch
  // below then stops it as for a running device.
  ::prctl(PR_SET_PDEATHSIG, SIGCONT, 0, 0, 0);
  g_flight = flight;
  InstallFaultHandlers();
  std::thread watch;
  const absl::Status watching = StartThread(
      "the device process's watch thread", &watch,
      [flight, parent_fd, parent, host_gone] { WatchParent(flight, parent_fd, parent, host_gone); });
  if (!watching.ok()) {
    std::fprintf(stderr, "[argsdump dumper] ERROR: %s\n", std::string(watching.message()).c_str());
    std::fflush(nullptr);
    ::_exit(kDeviceNoWatch);
  }
  watch.detach();
  // Nothing may unwind past the fork: the caller's code (a test suite's
  // next tests) would run on in this process.
  std::string report;
  try {
    report = device();
  } catch (...) {
    std::fflush(nullptr);
    ::_exit(kDeviceThrew);
  }
  const bool sent = WriteAll(report_fd, report + std::string(kTrailer, kTrailerBytes));
  std::fflush(nullptr);
  ::_exit(sent ? 0 : 4);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceProcess>> DeviceProcess::Start(
    FlightTable* flight, std::function<std::string()> device, std::function<void()> host_gone) {
  if (absl::Status s = CheckForkable(); !s.ok()) return s;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("device process: pipe: ", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  // Opened before the fork: the child then cannot miss a parent that ends
  // between the fork and its watch.
  const int parent_fd = PidfdOpen(parent);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    if (parent_fd >= 0) ::close(parent_fd);
    return absl::ResourceExhaustedError(absl::StrCat("device process: fork: ", std::strerror(e)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    RunDeviceChild(flight, device, std::move(host_gone), fds[1], parent_fd, parent);
  }
  ::close(fds[1]);
  if (parent_fd >= 0) ::close(parent_fd);
  // The child's end is what Wait waits for: the pipe's EOF alone would
  // wait for every process the child forked too (they inherit its end).
  const int child_fd = PidfdOpen(pid);  // close-on-exec (pidfd_open's default)
  return std::unique_ptr<DeviceProcess>(new DeviceProcess(pid, fds[0], child_fd));
}

DeviceExit DeviceProcess::Wait(const std::function<std::optional<std::string>()>& hung,
                               std::chrono::milliseconds period) {
  DeviceExit out;
  char buffer[1 << 16];
  bool child_ended = false;
  const int timeout_ms = hung ? static_cast<int>(std::max<int64_t>(1, period.count())) : -1;
  for (;;) {
    // The host's watch: asked between reads, and at least every `period`.
    if (hung && out.killed_by_host.empty()) {
      if (std::optional<std::string> why = hung()) {
        out.killed_by_host = *why;
        ::kill(pid_, SIGKILL);  // ends a stopped process too
      }
    }
    if (child_ended) {
      // Read to EOF below.
    } else if (child_fd_ >= 0) {
      pollfd p[2] = {{report_fd_, POLLIN, 0}, {child_fd_, POLLIN, 0}};
      const int ready = ::poll(p, 2, timeout_ms);
      if (ready == 0) continue;  // the watch's turn
      if (ready < 0) {
        if (errno == EINTR) continue;
        child_ended = true;  // cannot watch it: read to EOF as below
      } else if ((p[1].revents & POLLIN) != 0 && (p[0].revents & (POLLIN | POLLHUP)) == 0) {
        // The child ended and the pipe has nothing more: everything it
        // wrote is in (a process it forked may still hold the pipe open).
        break;
      }
    } else if (hung) {
      pollfd p = {report_fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, timeout_ms);
      if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    }
    const ssize_t n = ::read(report_fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed it by ending (or by exec'ing)
    out.report.append(buffer, static_cast<size_t>(n));
  }
  ::close(report_fd_);
  report_fd_ = -1;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  if (WIFSIGNALED(status)) {
    out.signaled = true;
    out.signal = WTERMSIG(status);
  } else {
    out.exit_status = WEXITSTATUS(status);
  }
  const std::string trailer(kTrailer, kTrailerBytes);
  out.no_watch = !out.signaled && out.exit_status == kDeviceNoWatch;
  out.reported = !out.signaled && out.exit_status == 0 && out.report.size() >= trailer.size() &&
                 out.report.compare(out.report.size() - trailer.size(), trailer.size(),
                                    trailer) == 0;
  if (out.reported) out.report.resize(out.report.size() - trailer.size());
  return out;
}

char DeviceProcess::State() const {
  if (reaped_) return 0;
  FILE* f = std::fopen(absl::StrCat("/proc/", pid_, "/stat").c_str(), "r");
  if (f == nullptr) return 0;
  char line[512] = {};
  const size_t n = std::fread(line, 1, sizeof(line) - 1, f);
  std::fclose(f);
  // "pid (comm) S ...": the state follows the last ')'.
  const char* close = std::strrchr(line, ')');
  return close != nullptr && close + 2 < line + n ? close[2] : 0;
}

void DeviceProcess::Kill() {
  if (!reaped_) ::kill(pid_, SIGKILL);
}

DeviceProcess::~DeviceProcess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (report_fd_ >= 0) ::close(report_fd_);
  if (child_fd_ >= 0) ::close(child_fd_);
}

}  // namespace argsdump
