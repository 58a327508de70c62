#include "catalog/pg_connection.h"

#include <postgresql/libpq-fe.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace argsdump {
namespace {

// libpq prints NOTICEs (e.g. "relation already exists, skipping") to stderr
// by default; the catalog has nothing to say about them.
void IgnoreNotice(void*, const char*) {}

// libpq's messages end in a newline and may span lines; one line, trimmed.
std::string OneLine(absl::string_view message) {
  std::string line = absl::StrReplaceAll(absl::StripAsciiWhitespace(message), {{"\n", "; "}});
  return line.empty() ? "no message" : line;
}

// A failed connect has no SQLSTATE in libpq 15; the server's refusals are
// told apart by their (stable, English) messages: credentials refused is
// PermissionDenied, a missing database NotFound, the rest (nobody
// listening, a server starting or gone) Unavailable.
absl::Status ConnectError(const std::string& message) {
  const std::string text = absl::StrCat("catalog: cannot connect to PostgreSQL: ", message);
  if (absl::StrContains(message, "authentication failed") ||
      absl::StrContains(message, "pg_hba.conf") ||
      (absl::StrContains(message, "role \"") && absl::StrContains(message, "does not exist"))) {
    return absl::PermissionDeniedError(text);
  }
  if (absl::StrContains(message, "database \"") && absl::StrContains(message, "does not exist")) {
    return absl::NotFoundError(text);
  }
  return absl::UnavailableError(text);
}

}  // namespace

PgParam PgParam::Int(int64_t value) { return {absl::StrCat(value), false, false}; }

PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    if (result_ != nullptr) PQclear(result_);
    result_ = other.result_;
    other.result_ = nullptr;
  }
  return *this;
}

PgResult::~PgResult() {
  if (result_ != nullptr) PQclear(result_);
}

int PgResult::rows() const { return result_ == nullptr ? 0 : PQntuples(result_); }
int PgResult::columns() const { return result_ == nullptr ? 0 : PQnfields(result_); }

PgCell PgResult::cell(int row, int column) const {
  PgCell cell;
  if (result_ == nullptr || row < 0 || row >= rows() || column < 0 || column >= columns()) {
    cell.is_null = true;
    return cell;
  }
  cell.type = PQftype(result_, column);
  cell.is_null = PQgetisnull(result_, row, column) != 0;
  if (!cell.is_null) {
    const int length = PQgetlength(result_, row, column);
    cell.bytes = absl::string_view(PQgetvalue(result_, row, column),
                                  static_cast<size_t>(std::max(length, 0)));
  }
  return cell;
}

uint64_t PgResult::affected() const {
  if (result_ == nullptr) return 0;
  const char* tuples = PQcmdTuples(result_);
  if (tuples == nullptr || *tuples == '\0') return 0;
  return std::strtoull(tuples, nullptr, 10);
}

absl::Status StatusFromSqlState(absl::string_view sqlstate, absl::string_view message) {
  const std::string text = absl::StrCat("catalog: ", message, " (SQLSTATE ", sqlstate, ")");
  if (sqlstate.size() != 5) return absl::UnavailableError(text);
  const absl::string_view cls = sqlstate.substr(0, 2);
  // Connection exceptions; admin/crash shutdown and "cannot connect now"
  // (57P01..57P03, a server restarting); too many connections (53300).
  if (cls == "08" || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03" ||
      sqlstate == "53300") {
    return absl::UnavailableError(text);
  }
  if (sqlstate == "57014") return absl::DeadlineExceededError(text);  // statement timeout
  if (sqlstate == "40001" || sqlstate == "40P01") return absl::AbortedError(text);
  if (sqlstate == "23505") return absl::AlreadyExistsError(text);
  if (cls == "23") return absl::FailedPreconditionError(text);
  if (cls == "22") return absl::InvalidArgumentError(text);
  if (sqlstate == "55P03") return absl::AbortedError(text);  // lock not available
  if (sqlstate == "42501") return absl::PermissionDeniedError(text);  // insufficient privilege
  return absl::InternalError(text);
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(const PgOptions& options) {
  std::unique_ptr<PgConnection> connection(new PgConnection(options));
  if (absl::Status s = connection->Open(); !s.ok()) return s;
  return connection;
}

PgConnection::~PgConnection() {
  if (conn_ != nullptr) PQfinish(conn_);
}

absl::Status PgConnection::Open() {
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  // Parse first: a malformed string is refused without libpq's message,
  // which may quote a piece of it (a password among them).
  if (!options_.uri.empty()) {
    char* error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(options_.uri.c_str(), &error);
    if (error != nullptr) PQfreemem(error);
    if (parsed == nullptr) {
      return absl::InvalidArgumentError(
          "catalog: the PostgreSQL connection string cannot be parsed (libpq refused it)");
    }
    PQconninfoFree(parsed);
  }
  const int64_t seconds = std::max<int64_t>(2, absl::ToInt64Seconds(options_.connect_timeout));
  const std::string timeout = absl::StrCat(seconds);
  // A server that vanishes without closing the connection (a host gone, a
  // partition) would leave a call waiting forever: TCP keepalives and a
  // TCP user timeout bound it client-side (the URI may say otherwise: the
  // keywords before dbname yield to what it expands to; those after win).
  const std::string user_timeout = absl::StrCat(
      std::max<int64_t>(10000, absl::ToInt64Milliseconds(options_.statement_timeout) + 10000));
  std::vector<const char*> keywords = {"keepalives", "keepalives_idle", "keepalives_interval",
                                       "keepalives_count", "tcp_user_timeout"};
  std::vector<const char*> values = {"1", "10", "5", "3", user_timeout.c_str()};
  // dbname is expanded (a URI or conninfo); unset keywords fall back to the
  // PG* variables.
  if (!options_.uri.empty()) {
    keywords.push_back("dbname");
    values.push_back(options_.uri.c_str());
  }
  keywords.push_back("connect_timeout");
  values.push_back(timeout.c_str());
  keywords.push_back("application_name");
  values.push_back("argsdump");
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  conn_ = PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/1);
  if (conn_ == nullptr) return absl::ResourceExhaustedError("catalog: libpq could not allocate");
  if (PQstatus(conn_) != CONNECTION_OK) {
    // libpq's connect messages name host, port and user, never the password.
    absl::Status status = ConnectError(OneLine(PQerrorMessage(conn_)));
    PQfinish(conn_);
    conn_ = nullptr;
    return status;
  }
  PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  const std::string ms = absl::StrCat(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.statement_timeout)));
  absl::StatusOr<PgResult> set = Exec("SELECT set_config('statement_timeout', $1, false)",
                                      {PgParam::Text(ms)});
  return set.status();
}

bool PgConnection::broken() const { return conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK; }

bool PgConnection::in_transaction() const {
  return conn_ != nullptr && PQtransactionStatus(conn_) != PQTRANS_IDLE &&
         PQtransactionStatus(conn_) != PQTRANS_UNKNOWN;
}

absl::StatusOr<PgResult> PgConnection::Exec(absl::string_view sql,
                                            const std::vector<PgParam>& params) {
  if (broken()) {
    // A transaction the connection died in is gone with it: its remaining
    // statements must not run on a new connection outside of it. Only
    // what ends it (ROLLBACK) or starts another (BEGIN) reconnects.
    if (lost_in_transaction_ && sql != "BEGIN" && sql != "ROLLBACK") {
      return absl::UnavailableError(
          "catalog: the connection to PostgreSQL was lost inside a transaction");
    }
    lost_in_transaction_ = false;
    if (absl::Status s = Open(); !s.ok()) return s;
  }
  const bool was_in_transaction = in_transaction();
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size());
  std::vector<int> formats(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const PgParam& p = params[i];
    if (!p.binary && p.value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("catalog: parameter $", i + 1, " holds a NUL byte"));
    }
    if (p.value.size() > static_cast<size_t>(1) << 30) {
      return absl::InvalidArgumentError(absl::StrCat("catalog: parameter $", i + 1,
                                                     " is over 1 GiB"));
    }
    values[i] = p.is_null ? nullptr : p.value.c_str();
    lengths[i] = static_cast<int>(p.value.size());
    formats[i] = p.binary ? 1 : 0;
  }
  const std::string text(sql);
  PgResult result(PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()),
                               /*paramTypes=*/nullptr, values.data(), lengths.data(),
                               formats.data(), /*resultFormat=binary*/ 1));
  PGresult* raw = result.result_;
  if (raw == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("catalog: no result from PostgreSQL: ", OneLine(PQerrorMessage(conn_))));
  }
  const ExecStatusType status = PQresultStatus(raw);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  const char* sqlstate = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(raw, PG_DIAG_MESSAGE_PRIMARY);
  const std::string message = OneLine(primary != nullptr ? primary : PQerrorMessage(conn_));
  if (sqlstate == nullptr || broken()) {
    lost_in_transaction_ = was_in_transaction || PQtransactionStatus(conn_) == PQTRANS_INTRANS ||
                           PQtransactionStatus(conn_) == PQTRANS_INERROR;
    // No SQLSTATE: libpq's own failure, in practice the connection ended.
    return absl::UnavailableError(absl::StrCat("catalog: connection to PostgreSQL lost: ",
                                               message));
  }
  return StatusFromSqlState(sqlstate, message);
}

}  // namespace argsdump
