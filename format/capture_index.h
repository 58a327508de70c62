// args.index, the on-disk index a finished capture is queried from without
// loading it: its byte grammar, its writer and its reader. The capture
// service (server/) and dump_viewer both read it through IndexFile.
//
// args.index (little endian, written once, atomically, by Finish/Recover):
//   IndexHeader               64 bytes: magic "ADIX", version, sizes
//   CaptureInfo               info_bytes, serialized (with the kernel
//                             table, CaptureInfo.kernels, and the clock:
//                             fields older readers skip; Open checks the
//                             table, format/kernel_table.h)
//   CaptureCounters           counters_bytes, serialized, then zero padding
//                             to a multiple of 8
//   ManifestRow rows[n]       in manifest order (sorted by task_id first);
//                             row_bytes each: 136 in version 3, 120 in
//                             version 2 (no task times; read as 0)
//   uint32 record_id[n]       arrival sequence of each row
//   uint32 position[n]        row of each record id
//   uint64 task_id[n]         rows[i].task_id: the column binary searches
//                             read (17x denser than the rows); 8-aligned,
//                             as everything before it is a multiple of 8
// Opening it maps the file: a query touches O(log n) pages of the task_id
// column and the pages of the rows it returns; the process holds no
// per-record memory.
#ifndef ARGSDUMP_FORMAT_CAPTURE_INDEX_H_
#define ARGSDUMP_FORMAT_CAPTURE_INDEX_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/argsdump/v1/record.pb.h"
#include "format/arg_filter.h"
#include "format/record.h"

namespace argsdump {

inline constexpr char kIndexName[] = "args.index";

// One matching record and its id (arrival sequence).
struct QueryHit {
  uint64_t record_id = 0;
  ManifestRow row;
  // Its position in the manifest's args[] (finished captures only: a live
  // capture's order is fixed when it finishes).
  // (Initialised, so that QueryHit{id, row} says every member for -Wextra.)
  std::optional<uint64_t> manifest_index = std::nullopt;
  std::optional<StatsRow> stats = std::nullopt;  // when the capture stored some for it
};

// A page of results. `next` is where the next page starts (an opaque
// position for the caller's page token); nullopt when there is no more.
struct QueryPage {
  std::vector<QueryHit> hits;
  std::optional<uint64_t> next;
};

// Writes args.index for rows `records` in `order` (ManifestOrder).
// `recovered`: the manifest was rebuilt from the journal after a crash.
// `stats` (null: none): written as a section after the task_id column.
absl::Status WriteIndex(const std::string& path, const v1::CaptureInfo& info,
                        const v1::CaptureCounters& counters, bool recovered,
                        const RecordList& records, const std::vector<uint32_t>& order,
                        const StatsTable* stats = nullptr);

// What IndexFile::Open checks. kEveryRow (the service, which serves every
// row of a capture for its lifetime): every row, the record id permutation
// and the order of the task_id column, once, O(n). kRowsRead (dump_viewer,
// which answers one query and exits): the header, the sizes and the info
// and counters only, O(1); the rows a query reads are then checked as they
// are read, through TaskRows() and CheckedRow() (Query, RecordById and
// ByArrival are for indexes opened with kEveryRow).
enum class IndexChecks { kEveryRow, kRowsRead };

// Rows [begin, end) of args.index, in manifest order.
struct IndexRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};

class IndexFile {
 public:
  // DataLoss naming the file for anything that is not a whole index;
  // NotFound when there is no file.
  static absl::StatusOr<std::unique_ptr<IndexFile>> Open(
      const std::string& path, IndexChecks checks = IndexChecks::kEveryRow);
  ~IndexFile();
  IndexFile(const IndexFile&) = delete;
  IndexFile& operator=(const IndexFile&) = delete;

  const v1::CaptureInfo& info() const { return info_; }
  const v1::CaptureCounters& counters() const { return counters_; }
  bool recovered() const { return recovered_; }
  uint64_t size() const { return rows_; }

  // Matches in manifest order from position `from`, at most `limit` of them,
  // looking at no more than `budget` rows (then `next` says where to go on).
  // With a task_id, only that task's rows are looked at (binary search).
  QueryPage Query(const ArgFilter& query, uint64_t from, size_t limit, size_t budget) const;
  // The row of a record id; nullopt when out of range.
  std::optional<ManifestRow> RecordById(uint64_t record_id) const;
  // The record `record_id` with its manifest index and stats, its row
  // checked (CheckedRow); NotFound out of range, DataLoss naming the byte.
  absl::StatusOr<QueryHit> HitById(uint64_t record_id) const;
  // Record ids [from, to) in arrival order, filtered (WatchCapture replay).
  std::vector<QueryHit> ByArrival(const ArgFilter& query, uint64_t from, uint64_t to) const;
  // For walks over every row (kEveryRow: the rows were checked at Open):
  // the first row at or after `*position` that `query` matches, its
  // position put in `*position`; null (and size()) when there is none. The
  // row is read in place (valid while the IndexFile is), or from an older
  // index's shorter row into `scratch`.
  const ManifestRow* NextMatch(const ArgFilter& query, uint64_t* position,
                               ManifestRow* scratch) const;
  // The record id (arrival sequence) of row `i` (< size()).
  uint64_t RecordIdAt(uint64_t i) const { return record_id_[i]; }

  // The rows of `task_id` (empty when it has none, begin then where it
  // would be), found by binary search and checked as read: each row the
  // search looks at agrees with its task_id column entry, the rows around
  // the range belong to other tasks in order, and every row of the range
  // is one (CheckStoredRow). DataLoss naming the byte otherwise. O(log n)
  // pages plus the range's.
  absl::StatusOr<IndexRange> TaskRows(uint64_t task_id) const;
  // Row `i` (< size()), checked: a row (CheckStoredRow) that agrees with
  // the task_id column. DataLoss naming the byte otherwise.
  absl::StatusOr<ManifestRow> CheckedRow(uint64_t i) const;
  // Its stats row, when the capture stored some for it (i < size()).
  std::optional<StatsRow> StatsOf(uint64_t i) const;

 private:
  IndexFile() = default;
  // IndexChecks::kEverything's check of every row, its record id and task
  // column entry, and its stats row; DataLoss naming the byte.
  absl::Status CheckEveryRow() const;
  // The rows a query must look at from `from` on: those of its task (by
  // binary search of the task_id column) when it names one, else the rest.
  IndexRange RowsToLook(const ArgFilter& query, uint64_t from) const;
  // Row i, a version 2 row with its times 0; RawRow: its bytes, so padded.
  ManifestRow row(uint64_t i) const;
  std::array<char, sizeof(ManifestRow)> RawRow(uint64_t i) const;
  const StatsRow* stats(uint64_t i) const {
    return stats_at_ != nullptr && stats_at_[i].present ? &stats_at_[i] : nullptr;
  }
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint64_t rows_ = 0;
  const char* rows_at_ = nullptr;
  uint32_t row_bytes_ = sizeof(ManifestRow);  // kIndexRowBytesV2 in a version 2 file
  const uint32_t* record_id_ = nullptr;
  const uint32_t* position_ = nullptr;
  const uint64_t* task_ids_ = nullptr;
  const StatsRow* stats_at_ = nullptr;  // in manifest order; null: no stats
  std::string path_;  // for messages
  v1::CaptureInfo info_;
  v1::CaptureCounters counters_;
  bool recovered_ = false;
};

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_CAPTURE_INDEX_H_
