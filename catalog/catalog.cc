#include "catalog/catalog.h"

#include <chrono>
#include <limits>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_replace.h"
#include "catalog/catalog_row.h"

namespace argsdump {
namespace {

// The key of the advisory lock migrations hold ("argsdump" in ASCII).
constexpr int64_t kMigrationLock = 0x6172677364756d70;
constexpr int kMaxAttempts = 3;  // of a statement or transaction that aborted

// One schema version's statements, applied in order.
struct Migration {
  int version;
  std::vector<const char*> statements;
};

// Ordered; a version's statements never change once released (a new
// version adds a Migration).
const std::vector<Migration>& Migrations() {
  static const auto* migrations = new std::vector<Migration>{
      {1,
       {
           // name and job compare bytewise (COLLATE "C"): pages and prefix
           // ranges are the same under every database locale.
           "CREATE TABLE captures ("
           "  name text COLLATE \"C\" PRIMARY KEY,"
           "  state smallint NOT NULL CHECK (state IN (1, 2)),"
           "  epoch bigint NOT NULL DEFAULT 1 CHECK (epoch >= 1),"
           "  info bytea NOT NULL,"
           "  counters bytea NOT NULL,"
           "  labels jsonb NOT NULL,"
           "  job text COLLATE \"C\","
           "  rank integer CHECK (rank >= 0),"
           "  world_size integer NOT NULL DEFAULT 0 CHECK (world_size >= 0),"
           "  level integer NOT NULL DEFAULT 0,"
           "  committed_records bigint NOT NULL DEFAULT 0 CHECK (committed_records >= 0),"
           "  committed_bytes bigint NOT NULL DEFAULT 0 CHECK (committed_bytes >= 0),"
           "  bin_bytes bigint NOT NULL DEFAULT 0 CHECK (bin_bytes >= 0),"
           "  stored_bytes bigint NOT NULL DEFAULT 0 CHECK (stored_bytes >= 0),"
           "  object_prefix text NOT NULL,"
           "  manifest_key text,"
           "  bin_key text,"
           "  index_key text,"
           "  created_at timestamptz NOT NULL DEFAULT now(),"
           "  finished_at timestamptz,"
           "  CONSTRAINT captures_job_rank UNIQUE (job, rank),"
           "  CONSTRAINT captures_job_has_rank CHECK ((job IS NULL) = (rank IS NULL)),"
           "  CONSTRAINT captures_finished CHECK ((state = 2) = (finished_at IS NOT NULL))"
           ")",
           // Label filters: labels @> '{"k":"v"}' through the GIN index.
           "CREATE INDEX captures_labels ON captures USING gin (labels jsonb_path_ops)",
           "CREATE INDEX captures_state_name ON captures (state, name)",
           "CREATE INDEX captures_finished_created ON captures (created_at, name) "
           "WHERE state = 2",
           "CREATE INDEX captures_manifest_key ON captures (manifest_key)",
           "CREATE INDEX captures_bin_key ON captures (bin_key)",
           "CREATE INDEX captures_index_key ON captures (index_key)",
           "CREATE TABLE segments ("
           "  capture text COLLATE \"C\" NOT NULL REFERENCES captures (name) ON DELETE CASCADE,"
           "  seq bigint NOT NULL CHECK (seq >= 0),"
           "  object_key text NOT NULL,"
           "  first_record bigint NOT NULL CHECK (first_record >= 0),"
           "  record_count bigint NOT NULL CHECK (record_count >= 0),"
           "  bytes bigint NOT NULL CHECK (bytes >= 0),"
           "  committed_at timestamptz NOT NULL DEFAULT now(),"
           "  PRIMARY KEY (capture, seq)"
           ")",
           "CREATE INDEX segments_object_key ON segments (object_key)",
       }},
  };
  return *migrations;
}

std::vector<PgCell> RowCells(const PgResult& result, int row) {
  std::vector<PgCell> cells(static_cast<size_t>(result.columns()));
  for (int c = 0; c < result.columns(); ++c) cells[static_cast<size_t>(c)] = result.cell(row, c);
  return cells;
}

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    absl::Status status_ = (expr);             \
    if (!status_.ok()) return status_;         \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr)            \
  auto lhs##_or = (expr);                      \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

std::string Quoted(const std::string& name) { return absl::StrCat("'", absl::CHexEscape(name), "'"); }

absl::Status CheckName(const char* what, const std::string& value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat("catalog: ", what, " is empty"));
  if (value.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("catalog: ", what, " is over ", kMaxNameBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckInt64(const char* what, uint64_t value) {
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("catalog: ", what, " is over 2^63 - 1"));
  }
  return absl::OkStatus();
}

PgParam Count(uint64_t value) { return PgParam::Int(static_cast<int64_t>(value)); }

// Why a fenced write matched no row: the capture's state, read afresh.
absl::Status ExplainFencedMiss(PgConnection& c, const std::string& name, int64_t epoch,
                               uint64_t records, uint64_t bytes, bool check_watermark) {
  ASSIGN_OR_RETURN(result, c.Exec("SELECT state, epoch, committed_records, committed_bytes "
                                  "FROM captures WHERE name = $1",
                                  {PgParam::Text(name)}));
  if (result.rows() == 0) return absl::NotFoundError(absl::StrCat("catalog: no capture ", Quoted(name)));
  const std::string row = Quoted(name);
  std::vector<PgCell> cells = RowCells(result, 0);
  if (cells.size() != 4) return absl::DataLossError("catalog: unexpected columns reading captures");
  ASSIGN_OR_RETURN(state, DecodeInt2(cells[0], {"captures", "state", row}));
  ASSIGN_OR_RETURN(current, DecodeInt8(cells[1], {"captures", "epoch", row}));
  ASSIGN_OR_RETURN(have_records, DecodeCount(cells[2], {"captures", "committed_records", row}));
  ASSIGN_OR_RETURN(have_bytes, DecodeCount(cells[3], {"captures", "committed_bytes", row}));
  if (current != epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "catalog: capture ", row, " is at epoch ", current, "; a write under epoch ", epoch,
        " is fenced off"));
  }
  if (state != v1::CAPTURE_STATE_LIVE) {
    return absl::FailedPreconditionError(absl::StrCat("catalog: capture ", row, " is finished"));
  }
  if (check_watermark && (records < have_records || bytes < have_bytes)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "catalog: capture ", row, " has committed ", have_records, " records (", have_bytes,
        " bytes); a watermark of ", records, " records (", bytes, " bytes) would go back"));
  }
  return absl::AbortedError(absl::StrCat("catalog: capture ", row, " changed during the write"));
}

}  // namespace

absl::StatusOr<int> CatalogSchemaVersion(PgConnection& c) {
  ASSIGN_OR_RETURN(exists, c.Exec("SELECT to_regclass('schema_version') IS NOT NULL"));
  if (exists.rows() != 1 || exists.columns() != 1) {
    return absl::DataLossError("catalog: to_regclass answered no row");
  }
  ASSIGN_OR_RETURN(has_table, DecodeBool(exists.cell(0, 0), {"schema_version", "exists", "#0"}));
  if (!has_table) return 0;
  ASSIGN_OR_RETURN(result, c.Exec("SELECT version FROM schema_version"));
  if (result.rows() == 0) return 0;
  if (result.rows() > 1) {
    return absl::DataLossError(absl::StrCat("catalog table schema_version holds ", result.rows(),
                                            " rows, expected one"));
  }
  ASSIGN_OR_RETURN(version, DecodeInt4(result.cell(0, 0), {"schema_version", "version", "#0"}));
  if (version < 0) return absl::DataLossError("catalog table schema_version: negative version");
  return version;
}

absl::StatusOr<std::unique_ptr<Catalog>> Catalog::Open(const Options& options) {
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError("catalog: max_connections must be at least 1");
  }
  std::unique_ptr<Catalog> catalog(new Catalog(options));
  absl::Status migrated = catalog->Run(true, [](PgConnection& c) -> absl::Status {
    // Held to the end of the transaction: a second server starting now
    // waits here and then finds the schema current.
    RETURN_IF_ERROR(
        c.Exec("SELECT pg_advisory_xact_lock($1::int8)", {PgParam::Int(kMigrationLock)}).status());
    RETURN_IF_ERROR(c.Exec("CREATE TABLE IF NOT EXISTS schema_version ("
                           "  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),"
                           "  version integer NOT NULL CHECK (version >= 0))")
                        .status());
    ASSIGN_OR_RETURN(version, CatalogSchemaVersion(c));
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "catalog: the database's schema is at version ", version, ", newer than this "
          "binary's ", kSchemaVersion, "; run a newer capture_server"));
    }
    for (const Migration& m : Migrations()) {
      if (m.version <= version) continue;
      for (const char* statement : m.statements) RETURN_IF_ERROR(c.Exec(statement).status());
    }
    return c.Exec("INSERT INTO schema_version (singleton, version) VALUES (true, $1::int4) "
                  "ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version",
                  {PgParam::Int(kSchemaVersion)})
        .status();
  });
  if (!migrated.ok()) return migrated;
  return catalog;
}

Catalog::~Catalog() = default;

absl::Status Catalog::Run(bool transaction,
                          const std::function<absl::Status(PgConnection&)>& body) {
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<PgConnection> connection;
    {
      std::unique_lock<std::mutex> lock(mu_);
      released_.wait(lock, [&] {
        return !idle_.empty() || open_connections_ < options_.max_connections;
      });
      if (!idle_.empty()) {
        connection = std::move(idle_.back());
        idle_.pop_back();
      } else {
        ++open_connections_;
      }
    }
    if (connection == nullptr) {
      absl::StatusOr<std::unique_ptr<PgConnection>> opened = PgConnection::Connect(options_.pg);
      if (!opened.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        --open_connections_;
        released_.notify_one();
        return opened.status();
      }
      connection = *std::move(opened);
    }
    absl::Status status;
    if (transaction) {
      status = connection->Exec("BEGIN").status();
      if (status.ok()) status = body(*connection);
      if (status.ok()) status = connection->Exec("COMMIT").status();
      if (!status.ok()) {
        if (connection->in_transaction()) {
          (void)connection->Exec("ROLLBACK");
        } else {
          connection->ForgetLostTransaction();  // it died with the connection
        }
      }
    } else {
      status = body(*connection);
    }
    {
      // A broken connection goes back too: its next Exec reconnects.
      std::lock_guard<std::mutex> lock(mu_);
      idle_.push_back(std::move(connection));
      released_.notify_one();
    }
    // Serialization failures and deadlocks: the one place they are retried,
    // after a short random pause so the transaction that won goes first
    // (run again at once, this one could take the same locks in the same
    // order and lose again).
    if (absl::IsAborted(status) && attempt < kMaxAttempts) {
      std::uniform_int_distribution<int> jitter_ms(10 * attempt, 40 * attempt);
      int pause_ms;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pause_ms = jitter_ms(random_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      continue;
    }
    return status;
  }
}

absl::StatusOr<CatalogCapture> Catalog::CreateCapture(const v1::CaptureInfo& info,
                                                      const std::string& object_prefix) {
  RETURN_IF_ERROR(CheckName("capture name", info.name()));
  RETURN_IF_ERROR(CheckName("object prefix", object_prefix));
  const bool in_job = !info.job().job().empty();
  if (in_job) RETURN_IF_ERROR(CheckName("job", info.job().job()));
  if (info.job().rank() > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()) ||
      info.job().world_size() > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("catalog: rank or world size over 2^31 - 1");
  }
  std::map<std::string, std::string> labels(info.labels().begin(), info.labels().end());
  const std::string sql = absl::StrCat(
      "INSERT INTO captures (name, state, epoch, info, counters, labels, job, rank, world_size, "
      "level, object_prefix) VALUES ($1, 1, 1, $2, $3, $4::jsonb, $5, $6::int4, $7::int4, "
      "$8::int4, $9) RETURNING ", kCaptureColumns);
  std::vector<PgParam> params = {
      PgParam::Text(info.name()),
      PgParam::Bytes(info.SerializeAsString()),
      PgParam::Bytes(v1::CaptureCounters().SerializeAsString()),
      PgParam::Text(LabelsJson(labels)),
      in_job ? PgParam::Text(info.job().job()) : PgParam::Null(),
      in_job ? PgParam::Int(info.job().rank()) : PgParam::Null(),
      PgParam::Int(info.job().world_size()),
      PgParam::Int(static_cast<int64_t>(info.level())),
      PgParam::Text(object_prefix),
  };
  CatalogCapture created;
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    absl::StatusOr<PgResult> result = c.Exec(sql, params);
    if (absl::IsAlreadyExists(result.status())) {
      if (absl::StrContains(result.status().message(), "captures_job_rank")) {
        return absl::AlreadyExistsError(absl::StrCat(
            "catalog: job ", Quoted(info.job().job()), " already has a capture for rank ",
            info.job().rank()));
      }
      return absl::AlreadyExistsError(
          absl::StrCat("catalog: capture ", Quoted(info.name()), " exists"));
    }
    if (!result.ok()) return result.status();
    if (result->rows() != 1) return absl::DataLossError("catalog: INSERT returned no row");
    ASSIGN_OR_RETURN(row, DecodeCaptureRow(RowCells(*result, 0), 0));
    created = std::move(row);
    return absl::OkStatus();
  }));
  return created;
}

absl::StatusOr<int64_t> Catalog::AdvanceEpoch(const std::string& name) {
  int64_t epoch = 0;
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(result, c.Exec("UPDATE captures SET epoch = epoch + 1 "
                                    "WHERE name = $1 AND state = 1 RETURNING epoch",
                                    {PgParam::Text(name)}));
    if (result.rows() == 1) {
      ASSIGN_OR_RETURN(e, DecodeInt8(result.cell(0, 0), {"captures", "epoch", Quoted(name)}));
      epoch = e;
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(found, c.Exec("SELECT 1 FROM captures WHERE name = $1", {PgParam::Text(name)}));
    if (found.rows() == 0) return absl::NotFoundError(absl::StrCat("catalog: no capture ", Quoted(name)));
    return absl::FailedPreconditionError(absl::StrCat("catalog: capture ", Quoted(name), " is finished"));
  }));
  return epoch;
}

absl::Status Catalog::CommitSegment(const std::string& name, int64_t epoch,
                                    const CatalogSegment& segment, uint64_t committed_records,
                                    uint64_t committed_bytes,
                                    const v1::CaptureCounters& counters) {
  RETURN_IF_ERROR(CheckName("object key", segment.object_key));
  RETURN_IF_ERROR(CheckInt64("segment seq", segment.seq));
  RETURN_IF_ERROR(CheckInt64("segment bytes", segment.bytes));
  RETURN_IF_ERROR(CheckInt64("committed records", committed_records));
  RETURN_IF_ERROR(CheckInt64("committed bytes", committed_bytes));
  if (segment.first_record > committed_records ||
      committed_records - segment.first_record != segment.record_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "catalog: a segment of records [", segment.first_record, ", +", segment.record_count,
        ") cannot end at the watermark ", committed_records));
  }
  // One statement: the fenced UPDATE, and the segment's row only if it
  // matched. The watermark check is in the WHERE, so a stale writer or a
  // step back changes nothing.
  static constexpr char kSql[] =
      "WITH moved AS ("
      "  UPDATE captures SET committed_records = $3::int8, committed_bytes = $4::int8,"
      "    stored_bytes = stored_bytes + $9::int8, counters = $10"
      "  WHERE name = $1 AND epoch = $2::int8 AND state = 1"
      "    AND committed_records <= $3::int8 AND committed_bytes <= $4::int8"
      "  RETURNING name)"
      " INSERT INTO segments (capture, seq, object_key, first_record, record_count, bytes)"
      " SELECT name, $5::int8, $6, $7::int8, $8::int8, $9::int8 FROM moved";
  std::vector<PgParam> params = {
      PgParam::Text(name),           PgParam::Int(epoch),
      Count(committed_records),      Count(committed_bytes),
      Count(segment.seq),            PgParam::Text(segment.object_key),
      Count(segment.first_record),   Count(segment.record_count),
      Count(segment.bytes),          PgParam::Bytes(counters.SerializeAsString()),
  };
  return Run(false, [&](PgConnection& c) -> absl::Status {
    absl::StatusOr<PgResult> result = c.Exec(kSql, params);
    if (absl::IsAlreadyExists(result.status())) {
      return absl::AlreadyExistsError(absl::StrCat("catalog: capture ", Quoted(name),
                                                   " already has segment ", segment.seq));
    }
    if (!result.ok()) return result.status();
    if (result->affected() == 1) return absl::OkStatus();
    return ExplainFencedMiss(c, name, epoch, committed_records, committed_bytes, true);
  });
}

absl::StatusOr<std::vector<std::string>> Catalog::Finish(const std::string& name, int64_t epoch,
                                                         const CaptureObjects& objects,
                                                         const v1::CaptureCounters& counters,
                                                         uint64_t bin_bytes,
                                                         uint64_t stored_bytes,
                                                         const v1::CaptureInfo* final_info) {
  RETURN_IF_ERROR(CheckName("manifest key", objects.manifest_key));
  if (!objects.bin_key.empty()) RETURN_IF_ERROR(CheckName("bin key", objects.bin_key));
  RETURN_IF_ERROR(CheckName("index key", objects.index_key));
  RETURN_IF_ERROR(CheckInt64("bin bytes", bin_bytes));
  RETURN_IF_ERROR(CheckInt64("stored bytes", stored_bytes));
  std::map<std::string, std::string> final_labels;
  if (final_info != nullptr) {
    if (final_info->name() != name) {
      return absl::InvalidArgumentError("catalog: the final info names another capture");
    }
    final_labels.insert(final_info->labels().begin(), final_info->labels().end());
  }
  std::vector<std::string> segment_keys;
  RETURN_IF_ERROR(Run(true, [&](PgConnection& c) -> absl::Status {
    segment_keys.clear();
    ASSIGN_OR_RETURN(updated, c.Exec(
        "UPDATE captures SET state = 2, finished_at = now(), counters = $3, bin_bytes = $4::int8,"
        " stored_bytes = $5::int8, manifest_key = $6, bin_key = $7, index_key = $8,"
        " info = COALESCE($9, info), labels = COALESCE($10::jsonb, labels),"
        " level = COALESCE($11::int4, level)"
        " WHERE name = $1 AND epoch = $2::int8 AND state = 1",
        {PgParam::Text(name), PgParam::Int(epoch), PgParam::Bytes(counters.SerializeAsString()),
         Count(bin_bytes), Count(stored_bytes), PgParam::Text(objects.manifest_key),
         objects.bin_key.empty() ? PgParam::Null() : PgParam::Text(objects.bin_key),
         PgParam::Text(objects.index_key),
         final_info ? PgParam::Bytes(final_info->SerializeAsString()) : PgParam::Null(),
         final_info ? PgParam::Text(LabelsJson(final_labels)) : PgParam::Null(),
         final_info ? PgParam::Int(static_cast<int64_t>(final_info->level())) : PgParam::Null()}));
    if (updated.affected() != 1) return ExplainFencedMiss(c, name, epoch, 0, 0, false);
    ASSIGN_OR_RETURN(deleted, c.Exec("DELETE FROM segments WHERE capture = $1 RETURNING object_key",
                                     {PgParam::Text(name)}));
    for (int r = 0; r < deleted.rows(); ++r) {
      ASSIGN_OR_RETURN(key, DecodeText(deleted.cell(r, 0),
                                       {"segments", "object_key", Quoted(name)}, kMaxNameBytes));
      segment_keys.push_back(std::move(key));
    }
    return absl::OkStatus();
  }));
  return segment_keys;
}

absl::StatusOr<CatalogCapture> Catalog::Get(const std::string& name) {
  CatalogCapture capture;
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(result, c.Exec(absl::StrCat("SELECT ", kCaptureColumns,
                                                 " FROM captures WHERE name = $1"),
                                    {PgParam::Text(name)}));
    if (result.rows() == 0) return absl::NotFoundError(absl::StrCat("catalog: no capture ", Quoted(name)));
    ASSIGN_OR_RETURN(row, DecodeCaptureRow(RowCells(result, 0), 0));
    if (row.info.name() != name) return absl::DataLossError("catalog: Get answered another capture");
    capture = std::move(row);
    return absl::OkStatus();
  }));
  return capture;
}

absl::StatusOr<std::vector<CatalogSegment>> Catalog::Segments(const std::string& name) {
  std::vector<CatalogSegment> segments;
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    segments.clear();
    ASSIGN_OR_RETURN(result, c.Exec(absl::StrCat("SELECT ", kSegmentColumns,
                                                 " FROM segments WHERE capture = $1 ORDER BY seq"),
                                    {PgParam::Text(name)}));
    for (int r = 0; r < result.rows(); ++r) {
      ASSIGN_OR_RETURN(s, DecodeSegmentRow(RowCells(result, r), name, static_cast<size_t>(r)));
      segments.push_back(std::move(s));
    }
    return absl::OkStatus();
  }));
  return segments;
}

absl::StatusOr<CapturePage> Catalog::List(const CaptureQuery& query) {
  const uint32_t page_size = query.page_size == 0 ? 100 : query.page_size;
  if (page_size > 1000) return absl::InvalidArgumentError("catalog: page_size is over 1000");
  // The SQL's shape follows which filters are set; every value is a
  // parameter.
  std::vector<PgParam> params = {PgParam::Text(query.page_token)};
  std::string where = "name > $1";
  auto add = [&](const std::string& condition, PgParam param) {
    params.push_back(std::move(param));
    absl::StrAppend(&where, " AND ", absl::StrReplaceAll(condition, {{"$N", absl::StrCat("$", params.size())}}));
  };
  if (!query.labels.empty()) add("labels @> $N::jsonb", PgParam::Text(LabelsJson(query.labels)));
  if (query.state != v1::CAPTURE_STATE_UNSPECIFIED) {
    add("state = $N::int2", PgParam::Int(static_cast<int64_t>(query.state)));
  }
  if (!query.job.empty()) add("job = $N", PgParam::Text(query.job));
  if (!query.name_prefix.empty()) {
    add("name >= $N", PgParam::Text(query.name_prefix));
    // The prefix's upper bound (bytewise): its last byte below 0xff, plus one.
    std::string upper = query.name_prefix;
    while (!upper.empty() && static_cast<unsigned char>(upper.back()) == 0xff) upper.pop_back();
    if (!upper.empty()) {
      upper.back() = static_cast<char>(static_cast<unsigned char>(upper.back()) + 1);
      add("name < $N", PgParam::Text(upper));
    } else {
      add("starts_with(name, $N)", PgParam::Text(query.name_prefix));
    }
  }
  params.push_back(PgParam::Int(static_cast<int64_t>(page_size) + 1));
  const std::string sql = absl::StrCat("SELECT ", kCaptureColumns, " FROM captures WHERE ", where,
                                       " ORDER BY name LIMIT $", params.size(), "::int8");
  CapturePage page;
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    page = CapturePage();
    ASSIGN_OR_RETURN(result, c.Exec(sql, params));
    const int rows = std::min<int>(result.rows(), static_cast<int>(page_size));
    for (int r = 0; r < rows; ++r) {
      ASSIGN_OR_RETURN(row, DecodeCaptureRow(RowCells(result, r), static_cast<size_t>(r)));
      page.captures.push_back(std::move(row));
    }
    if (result.rows() > rows && !page.captures.empty()) {
      page.next_page_token = page.captures.back().info.name();
    }
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<std::vector<CatalogJob>> Catalog::ListJobs(uint32_t page_size,
                                                          const std::string& page_token,
                                                          std::string* next_page_token) {
  if (page_size == 0) page_size = 100;
  if (page_size > 1000) return absl::InvalidArgumentError("catalog: page_size is over 1000");
  std::vector<CatalogJob> jobs;
  std::string next;
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    jobs.clear();
    next.clear();
    ASSIGN_OR_RETURN(result, c.Exec(absl::StrCat("SELECT ", kJobColumns,
                                                 " FROM captures WHERE job IS NOT NULL AND job > $1"
                                                 " GROUP BY job ORDER BY job LIMIT $2::int8"),
                                    {PgParam::Text(page_token), PgParam::Int(page_size + 1)}));
    const int rows = std::min<int>(result.rows(), static_cast<int>(page_size));
    for (int r = 0; r < rows; ++r) {
      ASSIGN_OR_RETURN(job, DecodeJobRow(RowCells(result, r), static_cast<size_t>(r)));
      jobs.push_back(std::move(job));
    }
    if (result.rows() > rows && !jobs.empty()) next = jobs.back().job;
    return absl::OkStatus();
  }));
  if (next_page_token != nullptr) *next_page_token = next;
  return jobs;
}

absl::StatusOr<DeletedCapture> Catalog::Delete(const std::string& name) {
  DeletedCapture deleted;
  RETURN_IF_ERROR(Run(true, [&](PgConnection& c) -> absl::Status {
    deleted = DeletedCapture();
    const std::string row = Quoted(name);
    // The row lock first: a segment committing now waits, and is either
    // listed here or refused after.
    ASSIGN_OR_RETURN(locked, c.Exec("SELECT object_prefix, manifest_key, bin_key, index_key,"
                                    " stored_bytes FROM captures WHERE name = $1 FOR UPDATE",
                                    {PgParam::Text(name)}));
    if (locked.rows() == 0) return absl::NotFoundError(absl::StrCat("catalog: no capture ", row));
    if (locked.columns() != 5) return absl::DataLossError("catalog: unexpected columns reading captures");
    ASSIGN_OR_RETURN(prefix, DecodeText(locked.cell(0, 0), {"captures", "object_prefix", row}, kMaxNameBytes));
    deleted.object_prefix = std::move(prefix);
    const char* key_columns[] = {"manifest_key", "bin_key", "index_key"};
    for (int k = 0; k < 3; ++k) {
      const PgCell cell = locked.cell(0, k + 1);
      if (cell.is_null) continue;
      ASSIGN_OR_RETURN(key, DecodeText(cell, {"captures", key_columns[k], row}, kMaxNameBytes));
      if (!key.empty()) deleted.object_keys.push_back(std::move(key));
    }
    ASSIGN_OR_RETURN(stored, DecodeCount(locked.cell(0, 4), {"captures", "stored_bytes", row}));
    deleted.stored_bytes = stored;
    ASSIGN_OR_RETURN(segments, c.Exec("SELECT object_key FROM segments WHERE capture = $1 ORDER BY seq",
                                      {PgParam::Text(name)}));
    for (int r = 0; r < segments.rows(); ++r) {
      ASSIGN_OR_RETURN(key, DecodeText(segments.cell(r, 0), {"segments", "object_key", row}, kMaxNameBytes));
      deleted.object_keys.push_back(std::move(key));
    }
    return c.Exec("DELETE FROM captures WHERE name = $1", {PgParam::Text(name)}).status();
  }));
  return deleted;
}

absl::StatusOr<std::vector<std::string>> Catalog::ListOrphanCandidates(
    const std::vector<std::string>& object_keys) {
  std::vector<std::string> orphans;
  if (object_keys.empty()) return orphans;
  for (const std::string& key : object_keys) RETURN_IF_ERROR(CheckName("object key", key));
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    orphans.clear();
    ASSIGN_OR_RETURN(result, c.Exec(
        "SELECT k FROM unnest($1::text[]) AS k WHERE"
        " NOT EXISTS (SELECT 1 FROM segments WHERE object_key = k) AND"
        " NOT EXISTS (SELECT 1 FROM captures WHERE manifest_key = k) AND"
        " NOT EXISTS (SELECT 1 FROM captures WHERE bin_key = k) AND"
        " NOT EXISTS (SELECT 1 FROM captures WHERE index_key = k) ORDER BY k",
        {PgParam::Text(TextArrayLiteral(object_keys))}));
    for (int r = 0; r < result.rows(); ++r) {
      ASSIGN_OR_RETURN(key, DecodeText(result.cell(r, 0), {"(keys)", "k", absl::StrCat("#", r)}, kMaxNameBytes));
      orphans.push_back(std::move(key));
    }
    return absl::OkStatus();
  }));
  return orphans;
}

absl::StatusOr<CatalogTotals> Catalog::Totals() {
  CatalogTotals totals;
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(result, c.Exec("SELECT count(*), COALESCE(sum(stored_bytes), 0)::int8 FROM captures"));
    if (result.rows() != 1 || result.columns() != 2) return absl::DataLossError("catalog: totals answered no row");
    ASSIGN_OR_RETURN(count, DecodeCount(result.cell(0, 0), {"captures", "count", "(all)"}));
    ASSIGN_OR_RETURN(bytes, DecodeCount(result.cell(0, 1), {"captures", "sum(stored_bytes)", "(all)"}));
    totals = {count, bytes};
    return absl::OkStatus();
  }));
  return totals;
}

absl::StatusOr<std::vector<RetentionCandidate>> Catalog::OldestFinished(uint32_t limit) {
  std::vector<RetentionCandidate> oldest;
  RETURN_IF_ERROR(Run(false, [&](PgConnection& c) -> absl::Status {
    oldest.clear();
    ASSIGN_OR_RETURN(result, c.Exec("SELECT name, stored_bytes, created_at FROM captures"
                                    " WHERE state = 2 ORDER BY created_at, name LIMIT $1::int8",
                                    {PgParam::Int(limit)}));
    for (int r = 0; r < result.rows(); ++r) {
      const std::string at = absl::StrCat("#", r);
      ASSIGN_OR_RETURN(name, DecodeText(result.cell(r, 0), {"captures", "name", at}, kMaxNameBytes));
      ASSIGN_OR_RETURN(bytes, DecodeCount(result.cell(r, 1), {"captures", "stored_bytes", Quoted(name)}));
      ASSIGN_OR_RETURN(created, DecodeTimestamp(result.cell(r, 2), {"captures", "created_at", Quoted(name)}));
      oldest.push_back({std::move(name), bytes, created});
    }
    return absl::OkStatus();
  }));
  return oldest;
}

}  // namespace argsdump
