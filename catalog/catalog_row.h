// The catalog's rows as C++ values, both ways: the select lists and the
// decoders of what PostgreSQL sends back (untrusted: every cell checked,
// the row's parts checked against each other, DataLoss naming the column),
// and the encoders of the few parameters that are not plain values (a
// label filter as jsonb, a text[] literal). Pure functions, no libpq:
// catalog_row_fuzzer feeds the decoders arbitrary cells.
#ifndef ARGSDUMP_CATALOG_CATALOG_ROW_H_
#define ARGSDUMP_CATALOG_CATALOG_ROW_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "catalog/catalog.h"
#include "catalog/pg_cell.h"

namespace argsdump {

// The captures columns Get and List select, in the order DecodeCaptureRow
// reads them.
inline constexpr char kCaptureColumns[] =
    "name, state, epoch, info, counters, committed_records, committed_bytes, "
    "bin_bytes, stored_bytes, object_prefix, manifest_key, bin_key, index_key, "
    "created_at, finished_at, job, rank";
inline constexpr size_t kCaptureColumnCount = 17;

inline constexpr char kSegmentColumns[] =
    "seq, object_key, first_record, record_count, bytes, committed_at";
inline constexpr size_t kSegmentColumnCount = 6;

inline constexpr char kJobColumns[] =
    "job, max(world_size), count(*), count(*) FILTER (WHERE state = 1), "
    "count(*) FILTER (WHERE state = 2)";
inline constexpr size_t kJobColumnCount = 5;

// Bounds on what a row may hold (beyond them the row is DataLoss).
inline constexpr size_t kMaxNameBytes = 1024;       // names, keys, prefixes
inline constexpr size_t kMaxInfoBytes = 64 << 20;   // a CaptureInfo (kernel table)
inline constexpr size_t kMaxCountersBytes = 4096;   // a CaptureCounters

// `row_index` names the row when its name cannot be read.
absl::StatusOr<CatalogCapture> DecodeCaptureRow(const std::vector<PgCell>& cells,
                                                size_t row_index);
absl::StatusOr<CatalogSegment> DecodeSegmentRow(const std::vector<PgCell>& cells,
                                                const std::string& capture, size_t row_index);
absl::StatusOr<CatalogJob> DecodeJobRow(const std::vector<PgCell>& cells, size_t row_index);

// {"key":"value",...}: a jsonb value for `labels @> $1::jsonb`.
std::string LabelsJson(const std::map<std::string, std::string>& labels);
// {"a","b"}: a text[] literal (quotes and backslashes escaped).
std::string TextArrayLiteral(const std::vector<std::string>& values);

}  // namespace argsdump

#endif  // ARGSDUMP_CATALOG_CATALOG_ROW_H_
