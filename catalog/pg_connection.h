// A thin PostgreSQL connection over libpq: parameterised statements only
// (values never go into SQL text), results in binary format as PgCells,
// errors as absl::Status by SQLSTATE. A connection broken by a server
// restart fails the statement in flight with Unavailable and reconnects on
// the next call. Messages never hold the connection string or a password.
// Not thread-safe: one thread at a time (Catalog keeps a pool).
#ifndef ARGSDUMP_CATALOG_PG_CONNECTION_H_
#define ARGSDUMP_CATALOG_PG_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "catalog/pg_cell.h"

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace argsdump {

struct PgOptions {
  // "postgresql://user@host:port/db?..." or "key=value ..." conninfo; empty:
  // libpq's PG* environment variables (PGHOST, PGPORT, PGUSER, PGPASSWORD,
  // PGDATABASE, ...) alone.
  std::string uri;
  // Bounds connecting (libpq counts whole seconds, at least 2) and every
  // statement (the server's statement_timeout; DeadlineExceeded past it).
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration statement_timeout = absl::Seconds(30);
};

// A statement parameter: text (sent as text, typed by the SQL: $1::int8)
// or bytes (sent binary: bytea). Text may not hold a NUL byte (the statement
// is then refused with InvalidArgument before it is sent).
struct PgParam {
  static PgParam Text(std::string value) { return {std::move(value), false, false}; }
  static PgParam Int(int64_t value);
  static PgParam Bytes(std::string value) { return {std::move(value), false, true}; }
  static PgParam Null() { return {std::string(), true, false}; }
  std::string value;
  bool is_null = false;
  bool binary = false;
};

// A statement's rows (binary format). Move-only; frees the PGresult.
class PgResult {
 public:
  explicit PgResult(PGresult* result) : result_(result) {}
  PgResult(PgResult&& other) noexcept : result_(other.result_) { other.result_ = nullptr; }
  PgResult& operator=(PgResult&& other) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  ~PgResult();

  int rows() const;
  int columns() const;
  PgCell cell(int row, int column) const;
  // Rows an INSERT/UPDATE/DELETE touched (0 when not such a statement).
  uint64_t affected() const;

 private:
  friend class PgConnection;
  PGresult* result_;
};

class PgConnection {
 public:
  // Connects now: Unavailable when the server cannot be reached (its
  // message from libpq, without the connection string), PermissionDenied
  // when it refuses the credentials, NotFound for a missing database,
  // InvalidArgument for a connection string libpq cannot parse.
  static absl::StatusOr<std::unique_ptr<PgConnection>> Connect(const PgOptions& options);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one statement with $1..$n. Reconnects first when the connection was
  // lost earlier, unless it was lost inside a transaction: then only BEGIN
  // or ROLLBACK reconnect, and anything else is Unavailable. Errors by SQLSTATE: connection lost, server shutting down
  // or starting, too many connections -> Unavailable; serialization failure,
  // deadlock -> Aborted; unique violation -> AlreadyExists; other integrity
  // violations -> FailedPrecondition; statement timeout -> DeadlineExceeded;
  // invalid data -> InvalidArgument; insufficient privilege ->
  // PermissionDenied; anything else -> Internal.
  absl::StatusOr<PgResult> Exec(absl::string_view sql, const std::vector<PgParam>& params = {});

  // The caller has given up the transaction the connection was lost in
  // (the server discarded it): the next Exec may reconnect for anything.
  void ForgetLostTransaction() { lost_in_transaction_ = false; }

  // True when the last statement left the connection broken (the next Exec
  // reconnects).
  bool broken() const;
  // True inside BEGIN ... COMMIT/ROLLBACK (libpq's transaction status).
  bool in_transaction() const;

 private:
  explicit PgConnection(PgOptions options) : options_(std::move(options)) {}
  absl::Status Open();
  PgOptions options_;
  PGconn* conn_ = nullptr;
  // The connection broke inside BEGIN ... COMMIT (see Exec).
  bool lost_in_transaction_ = false;
};

// The status for SQLSTATE `sqlstate` (5 characters) and `message` (exposed
// for tests of the mapping).
absl::Status StatusFromSqlState(absl::string_view sqlstate, absl::string_view message);

}  // namespace argsdump

#endif  // ARGSDUMP_CATALOG_PG_CONNECTION_H_
