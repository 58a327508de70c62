// One value of a PostgreSQL result row as the server sent it in binary
// format, and the decoders that turn it into C++ values. What a database
// sends back is untrusted: every decoder checks the column's type, NULL,
// length and range, and fails with DataLoss naming table, column and row;
// none of them can crash on any input (catalog_row_fuzzer feeds them bytes).
#ifndef ARGSDUMP_CATALOG_PG_CELL_H_
#define ARGSDUMP_CATALOG_PG_CELL_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace argsdump {

// Type OIDs of the built-in types the catalog reads (pg_type.oid; fixed
// since PostgreSQL 7 / 9.4 for jsonb).
enum class PgType : uint32_t {
  kBool = 16,
  kBytea = 17,
  kInt8 = 20,
  kInt2 = 21,
  kInt4 = 23,
  kText = 25,
  kTimestampTz = 1184,
  kJsonb = 3802,
};

// A cell: the column's type OID as the result described it, NULL or not,
// and the binary-format bytes (valid while the result lives).
struct PgCell {
  uint32_t type = 0;
  bool is_null = false;
  absl::string_view bytes;
};

// Where a cell came from, for error messages: "captures" / "counters" /
// the row's key (a capture name, or "#3" when the key itself is unreadable).
struct CellPlace {
  absl::string_view table;
  absl::string_view column;
  absl::string_view row;
};

// DataLoss: "catalog table <t> column <c> row <r>: <what>".
absl::Status CellError(const CellPlace& place, absl::string_view what);

// Decoders. A NULL cell is DataLoss unless the decoder is an *OrNull one
// (then it gives the default and sets *was_null).
absl::StatusOr<int64_t> DecodeInt8(const PgCell& cell, const CellPlace& place);
absl::StatusOr<int32_t> DecodeInt4(const PgCell& cell, const CellPlace& place);
absl::StatusOr<int16_t> DecodeInt2(const PgCell& cell, const CellPlace& place);
absl::StatusOr<bool> DecodeBool(const PgCell& cell, const CellPlace& place);
// text: the bytes, checked to be at most `max_bytes` long.
absl::StatusOr<std::string> DecodeText(const PgCell& cell, const CellPlace& place,
                                       size_t max_bytes);
absl::StatusOr<std::string> DecodeBytea(const PgCell& cell, const CellPlace& place,
                                        size_t max_bytes);
// timestamptz (integer datetimes: microseconds since 2000-01-01 UTC);
// +-infinity is DataLoss.
absl::StatusOr<absl::Time> DecodeTimestamp(const PgCell& cell, const CellPlace& place);

// A non-negative int8 (sizes, counts, epochs): a negative value is DataLoss.
absl::StatusOr<uint64_t> DecodeCount(const PgCell& cell, const CellPlace& place);

}  // namespace argsdump

#endif  // ARGSDUMP_CATALOG_PG_CELL_H_
