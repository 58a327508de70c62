#include "tests/testing/postgres_server.h"

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <postgresql/libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "catalog/pg_connection.h"
#include "tests/testing/child_process.h"
#include "tests/testing/shared_instance.h"
#include "tests/testing/temp_dir.h"

extern char** environ;

namespace argsdump {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat("postgres fixture: ", what, ": ", std::strerror(errno)));
}

std::string FindBinDir() {
  if (const char* env = std::getenv("PG_BINDIR"); env != nullptr && *env != '\0') return env;
  for (int version = 20; version >= 12; --version) {
    std::string dir = absl::StrCat("/usr/lib/postgresql/", version, "/bin");
    if (::access((dir + "/postgres").c_str(), X_OK) == 0) return dir;
  }
  return "";
}

absl::StatusOr<int> FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    absl::Status s = Errno("bind 127.0.0.1:0");
    ::close(fd);
    return s;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A line on the child's stderr (its log), async-signal-safe.
void ChildSays(const char* text) {
  size_t n = 0;
  while (text[n] != '\0') ++n;
  (void)!::write(2, text, n);
}

// Writes `text` to `path` with async-signal-safe calls only.
bool WriteProcFile(const char* path, const char* text, size_t size) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text, size) == static_cast<ssize_t>(size);
  ::close(fd);
  return ok;
}

// In a forked child of root: a new user namespace where this process is
// `uid`/`gid` (the server's user, which has a passwd entry) mapped onto
// root outside. PostgreSQL then runs as a non-root user that owns root's
// files, which also works inside Bazel's sandbox (a user namespace that
// maps only root, so setuid to another user fails there). False when the
// kernel refuses; the caller then switches user with setuid.
bool EnterUserNamespace(uid_t uid, gid_t gid) {
  if (::unshare(CLONE_NEWUSER) != 0) {
    return false;
  }
  char map[64];
  // "<inside> 0 1": async-signal-safe formatting by hand.
  auto format = [&map](unsigned id) {
    char digits[16];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + id % 10);
      id /= 10;
    } while (id != 0);
    size_t len = 0;
    while (n > 0) map[len++] = digits[--n];
    const char tail[] = " 0 1\n";
    for (size_t i = 0; i + 1 < sizeof(tail); ++i) map[len++] = tail[i];
    return len;
  };
  size_t len = format(uid);
  if (!WriteProcFile("/proc/self/uid_map", map, len)) return false;
  if (!WriteProcFile("/proc/self/setgroups", "deny", 4)) return false;
  len = format(gid);
  return WriteProcFile("/proc/self/gid_map", map, len);
}

// A process started with its stdout and stderr in `log`, as `uid`/`gid`
// when `drop` (everything it needs is prepared before fork: only
// async-signal-safe calls run in the child).
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args, const std::string& dir,
                            const std::string& log, bool drop, uid_t uid, gid_t gid,
                            const std::vector<gid_t>& groups) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string map_user = absl::StrCat("--map-user=", uid);
  const std::string map_group = absl::StrCat("--map-group=", gid);
  std::vector<char*> via_unshare = {const_cast<char*>("/usr/bin/unshare"),
                                    const_cast<char*>(map_user.c_str()),
                                    const_cast<char*>(map_group.c_str()),
                                    const_cast<char*>("--")};
  via_unshare.insert(via_unshare.end(), argv.begin(), argv.end());
  std::vector<std::string> env_storage = {"HOME=" + dir, "LC_ALL=C.UTF-8"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "HOME=", 5) != 0 && std::strncmp(*e, "LC_ALL=", 7) != 0 &&
        std::strncmp(*e, "PG", 2) != 0) {
      env_storage.push_back(*e);
    }
  }
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Errno("open " + log);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return Errno("fork");
  }
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    if (::chdir(dir.c_str()) != 0) {
      ChildSays("postgres fixture: cannot enter the folder\n");
      ::_exit(126);
    }
    // As root, in order: the server's user in a user namespace of our own;
    // else the real user, given the folder first; else (a sandbox's user
    // namespace that maps only root, in a process the kernel will not
    // unshare, as under TSan) util-linux's unshare(1) doing the same
    // mapping and exec'ing the server in place (the pid stays the server's).
    if (drop && !EnterUserNamespace(uid, gid)) {
      if (::chown(dir.c_str(), uid, gid) != 0) {
        ::execve(via_unshare[0], via_unshare.data(), envp.data());
        ChildSays("postgres fixture: cannot take the server's user\n");
        ::_exit(126);
      }
      if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 ||
          ::setuid(uid) != 0) {
        ChildSays("postgres fixture: cannot take the server's user\n");
        ::_exit(126);
      }
    }
    // A test that dies (a crash, a timeout's SIGKILL) takes its server
    // with it: immediate shutdown when the forking thread ends. Set after
    // the user changed (a change of credentials clears it).
    ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
    if (::getppid() != parent) ::_exit(125);
    ::execve(argv[0], argv.data(), envp.data());
    ChildSays("postgres fixture: cannot exec\n");
    ::_exit(127);
  }
  ::close(log_fd);
  return pid;
}

// Waits up to `bound` for `pid` (our child) to end; its wait status, or
// nullopt. Waits on the process's pidfd (WaitForProcessEnd), never by
// sleeping.
std::optional<int> WaitChild(pid_t pid, std::chrono::milliseconds bound) {
  if (!WaitForProcessEnd(pid, bound)) return std::nullopt;
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == pid) return status;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  server->bin_ = FindBinDir();
  if (server->bin_.empty()) {
    return absl::FailedPreconditionError(
        "postgres fixture: no /usr/lib/postgresql/*/bin/postgres (tools/setup.sh installs "
        "postgresql-15)");
  }
  // /tmp, not $TEST_TMPDIR: the server's user must reach the folder, and a
  // test's temp dir may sit below a home only root can enter.
  char tmpl[] = "/tmp/argsdump_pg_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return Errno("mkdtemp");
  server->dir_ = tmpl;
  std::vector<gid_t> groups;
  if (::geteuid() == 0) {
    const passwd* user = ::getpwnam("postgres");
    if (user == nullptr) user = ::getpwnam("nobody");
    if (user == nullptr) return absl::FailedPreconditionError("postgres fixture: no postgres or nobody user");
    server->drop_privileges_ = true;
    server->run_uid_ = user->pw_uid;
    server->run_gid_ = user->pw_gid;
    int count = 32;
    groups.resize(static_cast<size_t>(count));
    if (::getgrouplist(user->pw_name, user->pw_gid, groups.data(), &count) < 0) {
      groups.resize(static_cast<size_t>(count));
      ::getgrouplist(user->pw_name, user->pw_gid, groups.data(), &count);
    }
    groups.resize(static_cast<size_t>(count));
  }
  absl::StatusOr<int> port = FreePort();
  if (!port.ok()) return port.status();
  server->port_ = *port;
  const std::string data = server->dir_ + "/data";
  absl::StatusOr<pid_t> initdb =
      Spawn({server->bin_ + "/initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
             "--locale=C.UTF-8", "--no-sync", "--no-instructions"},
            server->dir_, server->dir_ + "/initdb.log", server->drop_privileges_,
            server->run_uid_, server->run_gid_, groups);
  if (!initdb.ok()) return initdb.status();
  std::optional<int> status = WaitChild(*initdb, std::chrono::seconds(120));
  if (!status.has_value()) {
    ::kill(*initdb, SIGKILL);
    ::waitpid(*initdb, nullptr, 0);
    return absl::DeadlineExceededError("postgres fixture: initdb did not end within 120 s");
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    // Exit 126: the child could not take the server's user or enter the
    // folder; 127: no initdb to run.
    return absl::InternalError(absl::StrCat(
        "postgres fixture: initdb failed (wait status ", *status, "): ",
        ReadFileOrEmpty(server->dir_ + "/initdb.log")));
  }
  if (absl::Status s = server->RunPostgres(); !s.ok()) return s;
  return server;
}

absl::Status PostgresServer::RunPostgres() {
  std::vector<gid_t> groups;
  if (drop_privileges_) {
    const passwd* user = ::getpwuid(run_uid_);
    int count = 32;
    groups.resize(static_cast<size_t>(count));
    if (user != nullptr && ::getgrouplist(user->pw_name, run_gid_, groups.data(), &count) >= 0) {
      groups.resize(static_cast<size_t>(count));
    } else {
      groups = {run_gid_};
    }
  }
  // Test-only settings: no durability, a small footprint, TCP on loopback
  // only (no socket file: its path would be bounded to 107 bytes).
  absl::StatusOr<pid_t> pid = Spawn(
      {bin_ + "/postgres", "-D", dir_ + "/data", "-p", absl::StrCat(port_), "-c",
       "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off", "-c",
       "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "shared_buffers=32MB", "-c",
       "max_connections=60", "-c", "logging_collector=off", "-c",
       // Tests hold locks across a restart in prepared transactions.
       "max_prepared_transactions=8"},
      dir_, dir_ + "/postgres.log", drop_privileges_, run_uid_, run_gid_, groups);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  // Poll until it answers, bounded; between attempts wait on the process
  // (a server that dies is seen at once).
  const std::string ping = absl::StrCat(Uri("postgres"), "?connect_timeout=2");
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  while (PQping(ping.c_str()) != PQPING_OK) {
    if (std::optional<int> ended = WaitChild(pid_, std::chrono::milliseconds(20))) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("postgres fixture: postgres exited: ", LogTail()));
    }
    if (Clock::now() > deadline) {
      (void)Stop();
      return absl::DeadlineExceededError(
          absl::StrCat("postgres fixture: no answer within 60 s: ", LogTail()));
    }
  }
  return absl::OkStatus();
}

PostgresServer::~PostgresServer() {
  (void)Stop();
  if (!dir_.empty()) RemoveTree(dir_);
}

std::string PostgresServer::Uri(const std::string& database) const {
  return absl::StrCat("postgresql://postgres@127.0.0.1:", port_, "/", database);
}

absl::StatusOr<std::string> PostgresServer::CreateDatabase(const std::string& name) {
  if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") !=
                          std::string::npos) {
    return absl::InvalidArgumentError("postgres fixture: database names are [a-z0-9_]+");
  }
  PgOptions options;
  options.uri = Uri("postgres");
  absl::StatusOr<std::unique_ptr<PgConnection>> c = PgConnection::Connect(options);
  if (!c.ok()) return c.status();
  // An identifier cannot be a parameter; the name was checked above.
  absl::StatusOr<PgResult> created = (*c)->Exec(absl::StrCat("CREATE DATABASE \"", name, "\""));
  if (!created.ok()) return created.status();
  return Uri(name);
}

absl::Status PostgresServer::Stop() {
  if (pid_ <= 0) return absl::OkStatus();
  // SIGINT: fast shutdown (SIGTERM would wait for clients to leave).
  const int signals[] = {SIGINT, SIGQUIT, SIGKILL};
  const std::chrono::milliseconds bounds[] = {std::chrono::seconds(20), std::chrono::seconds(10),
                                              std::chrono::seconds(30)};
  for (int i = 0; i < 3; ++i) {
    ::kill(pid_, signals[i]);
    if (WaitChild(pid_, bounds[i]).has_value()) {
      pid_ = -1;
      return absl::OkStatus();
    }
  }
  return absl::DeadlineExceededError(absl::StrCat("postgres fixture: pid ", pid_, " did not end"));
}

absl::Status PostgresServer::Restart() {
  if (absl::Status s = Stop(); !s.ok()) return s;
  return RunPostgres();
}

std::string PostgresServer::LogTail() const {
  std::string log = ReadFileOrEmpty(dir_ + "/postgres.log");
  return log.size() > 2000 ? log.substr(log.size() - 2000) : log;
}

absl::StatusOr<PostgresServer*> SharedPostgresServer() { return SharedInstance<PostgresServer>(); }

}  // namespace argsdump
