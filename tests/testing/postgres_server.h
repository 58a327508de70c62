// A throw-away PostgreSQL for tests: initdb and postgres in a fresh folder
// under /tmp, listening on 127.0.0.1 only (TCP, no Unix socket) on a free
// port, with durability off. As root the server runs as the `postgres`
// user (else `nobody`): PostgreSQL refuses to run as root. Stopped by pid
// (SIGINT, then SIGQUIT, then SIGKILL) and the folder removed when the
// object dies. One server per test binary; a database per test.
#ifndef ARGSDUMP_TESTS_TESTING_POSTGRES_SERVER_H_
#define ARGSDUMP_TESTS_TESTING_POSTGRES_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argsdump {

class PostgresServer {
 public:
  // initdb, start, wait until it answers (bounded). FailedPrecondition when
  // the PostgreSQL binaries are not installed (tools/setup.sh installs
  // them); $PG_BINDIR overrides /usr/lib/postgresql/<newest>/bin.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // postgresql://postgres@127.0.0.1:<port>/<database>
  std::string Uri(const std::string& database) const;
  // CREATE DATABASE `name` ([a-z0-9_]+); its URI.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);

  // Fast shutdown by pid, bounded; then the same data folder and port again.
  absl::Status Stop();
  absl::Status Restart();
  // The server's log (for a failing test's message).
  std::string LogTail() const;

 private:
  PostgresServer() = default;
  absl::Status RunPostgres();
  std::string dir_;
  std::string bin_;
  int port_ = 0;
  pid_t pid_ = -1;
  uid_t run_uid_ = 0;
  gid_t run_gid_ = 0;
  bool drop_privileges_ = false;
};

// The one PostgreSQL of this test binary, started on first use and stopped
// at exit (its tests share it: a database each).
absl::StatusOr<PostgresServer*> SharedPostgresServer();

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_POSTGRES_SERVER_H_
