// One record's compact form and its rules: ManifestRow (what the store keeps
// per record and args.index holds raw), the conversions from and to
// v1::ArgRecord, the validation every record from outside the process passes
// (one rule for records, rows read back, and the collector's conversions),
// the stats table, and the manifest's total order of entries.
#ifndef ARGSDUMP_FORMAT_RECORD_H_
#define ARGSDUMP_FORMAT_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <type_traits>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "format/manifest_fields.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

// What a record can hold: the shared-memory ABI's limits (device/abi.h
// pins its arrays to these).
inline constexpr uint32_t kMaxRecordDims = 5;
inline constexpr uint32_t kMaxRecordFuncIds = 3;

// What the manifest needs of one record, fixed-size with no heap: the store
// keeps one of these per record (a proto per record cost allocations and
// moves that dominated the local pipeline).
struct ManifestRow {
  uint64_t task_id = 0;
  uint64_t start_offset = 0;
  uint64_t numel = 0;
  uint64_t scalar_bits = 0;
  uint64_t bin_offset = 0;
  uint64_t bin_size = 0;
  uint32_t arg_index = 0;
  uint32_t device_thread = 0;
  uint32_t shape[kMaxRecordDims] = {};
  uint32_t strides[kMaxRecordDims] = {};
  uint16_t func_ids[kMaxRecordFuncIds] = {};
  uint8_t func_count = 0;
  uint8_t ndims = 0;
  uint8_t role = 0;   // v1::Role
  uint8_t stage = 0;  // v1::Stage
  uint8_t kind = 0;   // v1::Kind
  uint8_t dtype = 0;  // v1::DType
  bool is_contiguous = false;
  bool truncated = false;
  bool overwritten = false;
  bool arg_index_ambiguous = false;
  bool in_flight_snapshot = false;
  bool overflow = false;
  bool nonfinite = false;
  uint8_t reserved[1] = {};  // explicit padding: rows are stored raw
  uint32_t step = 0;  // zero in args.index files from before steps existed
  // The task's times (v1::ArgRecord): 0 in args.index files of version 2,
  // whose rows end before them (kIndexRowBytesV2).
  uint64_t dispatch_ns = 0;
  uint64_t complete_ns = 0;
};

// An args.index row of version 2: a ManifestRow up to the task times.
inline constexpr size_t kIndexRowBytesV2 = 120;

// InvalidArgument (naming the field) for what a row cannot hold: more than
// 5 dims or 3 func ids, shape and strides of different lengths, enum values
// out of range.
absl::StatusOr<ManifestRow> RowFromRecord(const v1::ArgRecord& record);

// The record a row came from (logical_bytes recomputed from dtype and numel).
// RowFromRecord(RecordFromRow(row)) == row.
v1::ArgRecord RecordFromRow(const ManifestRow& row);

// Everything a record from outside the process (a gRPC client) must satisfy
// beyond RowFromRecord's checks: numel equals the shape's product (no
// overflow), logical_bytes is numel x element size for tensors, bin_size
// equals it unless truncated (then smaller and non-zero), scalars carry no
// payload, `nonfinite` only on float tensors. InvalidArgument naming the
// field.
absl::Status ValidateRecord(const v1::ArgRecord& record);

// A row read back raw from a file (args.index): enums in range, bools 0 or
// 1, at most 5 dims and 3 func ids, payload offset + size without
// overflow. InvalidArgument naming the field. `raw` is sizeof(ManifestRow)
// bytes (an older index's shorter row is first copied into a zeroed one),
// read as bytes: a bool holding 0x9f is never loaded as a bool.
absl::Status CheckStoredRow(const char* raw);

// The on-disk index (args.index) stores rows raw: pin their layout.
static_assert(sizeof(bool) == 1, "ManifestRow bools are one byte on disk");
static_assert(sizeof(ManifestRow) == 136, "ManifestRow is part of the args.index format");
static_assert(offsetof(ManifestRow, step) == 116, "ManifestRow is part of the args.index format");
static_assert(offsetof(ManifestRow, dispatch_ns) == kIndexRowBytesV2,
              "a version 2 row is a ManifestRow's prefix");

// The row's fields that are v1::ArgRecord's field of the same name:
// format/manifest_fields.h's simple fields (ARGSDUMP_SIMPLE_MANIFEST_FIELDS,
// each listed once, there), and these. RowFromRecord, RecordFromRow and
// CheckStoredRow expand the lists. shape/strides (ndims long) and func_ids
// (func_count long) are arrays, converted by hand.
#define ARGSDUMP_ROW_NUMBERS(X) X(task_id) X(scalar_bits) X(device_thread) X(step)
#define ARGSDUMP_ROW_ENUMS(X) X(role, Role) X(stage, Stage) X(kind, Kind) X(dtype, DType)

// A simple field's row member holds what its style says.
#define ARGSDUMP_ROW_TYPE_CHECK(id, style, member)                                        \
  static_assert(std::is_same<decltype(ManifestRow::member),                              \
                             FieldType<FieldStyle::style>::type>::value,                 \
                "ManifestRow::" #member " is not the type format/manifest_fields.h says");
ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_ROW_TYPE_CHECK)
#undef ARGSDUMP_ROW_TYPE_CHECK

// Every byte of the row is in a list above or one of the arrays: a member
// added to ManifestRow and not to a list does not build.
#define ARGSDUMP_ROW_SIZE(f, ...) +sizeof(ManifestRow::f)
#define ARGSDUMP_SIMPLE_ROW_SIZE(id, style, member) +sizeof(ManifestRow::member)
static_assert(0 ARGSDUMP_ROW_NUMBERS(ARGSDUMP_ROW_SIZE) ARGSDUMP_ROW_ENUMS(ARGSDUMP_ROW_SIZE)
                      ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_SIMPLE_ROW_SIZE) +
                  sizeof(ManifestRow::shape) + sizeof(ManifestRow::strides) +
                  sizeof(ManifestRow::ndims) + sizeof(ManifestRow::func_ids) +
                  sizeof(ManifestRow::func_count) + sizeof(ManifestRow::reserved) ==
              sizeof(ManifestRow),
              "a ManifestRow member is in none of the field lists");
#undef ARGSDUMP_ROW_SIZE
#undef ARGSDUMP_SIMPLE_ROW_SIZE

// A capture's records in arrival order. A deque: growing it never moves the
// rows already held.
using RecordList = std::deque<ManifestRow>;

// The stats dump mode's numbers of one record (v1::TensorStats, fixed size).
// Stored raw in args.index (after the task_id column) when a capture has
// stats.
struct StatsRow {
  uint64_t count = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
  double min = 0, max = 0, mean = 0, l2 = 0;
  bool present = false;
  uint8_t reserved[7] = {};  // explicit padding: rows are stored raw
  bool has_nonfinite() const { return present && nan + pos_inf + neg_inf > 0; }
};
static_assert(sizeof(StatsRow) == 80, "StatsRow is part of the args.index format");
#define ARGSDUMP_STATS_ROW_TYPE(member, type)                   \
  static_assert(std::is_same_v<decltype(StatsRow::member), type>, \
                "StatsRow holds each stats field as its type");
ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_STATS_ROW_TYPE)
#undef ARGSDUMP_STATS_ROW_TYPE
StatsRow StatsRowFromProto(const v1::TensorStats& stats);  // present = true
void StatsRowToProto(const StatsRow& row, v1::TensorStats* out);

// Stats by record id. Holds nothing until a record carries stats (most
// captures never do); then one row per record from there on.
class StatsTable {
 public:
  // Records in arrival order, every one of them (ids 0, 1, ...).
  void Add(uint64_t record_id, const v1::ArgRecord& record);
  // The same for a record that carries stats, as a row (present = true).
  void Add(uint64_t record_id, const StatsRow& row);
  const StatsRow* Get(uint64_t record_id) const {
    return record_id < rows_.size() && rows_[record_id].present ? &rows_[record_id] : nullptr;
  }
  bool empty() const { return rows_.empty(); }

 private:
  std::deque<StatsRow> rows_;
};

// Indices of `records` in the manifest's order: (task_id, stage, arg_index,
// role), then kind, device_thread and arrival, so that the order is total and
// the same for every run of a deterministic workload. At most 2^32 rows.
std::vector<uint32_t> ManifestOrder(const RecordList& records);

// That order as a key: a row `arrival`-th in its capture sorts by it
// (ManifestOrder sorts faster, to the same result).
inline auto ManifestOrderKey(const ManifestRow& r, uint64_t arrival) {
  return std::make_tuple(r.task_id, r.stage, r.arg_index, r.role, r.kind, r.device_thread,
                         arrival);
}

// Step levels (CaptureInfo.step_levels) in order: first_step increasing,
// level 0..3; InvalidArgument naming the entry otherwise.
absl::Status CheckStepLevels(const google::protobuf::RepeatedPtrField<v1::StepLevel>& levels);
// The level a reader is told (the manifest's dump_args_level): the level
// in effect (info.scope), which is 0 when only the overflow check was on;
// with levels per step, the last one above 0 of them (0 if none); for a
// capture without a scope (or one out of range), info.level.
uint32_t ReportedLevel(const v1::CaptureInfo& info);
// A DumpScope's level 0..3, stats "off"/"on"/"only" and mode
// "all"/"input"/"output" ("" for either: unset); InvalidArgument naming
// the field. The stats and mode words of a StepLevel are checked alike
// (CheckStepLevels).
absl::Status CheckDumpScope(const v1::DumpScope& scope);
absl::Status CheckScopeWords(const std::string& stats, const std::string& mode);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_RECORD_H_
