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
// per-record memory. An index in an object store opens ranged
// (IndexFile::OpenRanged): the same layout in an anonymous mapping, each
// kRangedBlockBytes block fetched through a reader function the first time
// something reads it, and every row checked as it is read.
#ifndef ARGSDUMP_FORMAT_CAPTURE_INDEX_H_
#define ARGSDUMP_FORMAT_CAPTURE_INDEX_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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
  // Not OK only from a ranged index whose bytes could not be read or are
  // damaged (the page is then empty): the reader's error, or DataLoss
  // naming the byte.
  absl::Status error;
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
// are read, through TaskRows() and CheckedRow() (on a local index, Query,
// RecordById and ByArrival are for indexes opened with kEveryRow; on a
// ranged one every method checks what it reads).
enum class IndexChecks { kEveryRow, kRowsRead };

// Rows [begin, end) of args.index, in manifest order.
struct IndexRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Bytes [offset, offset + size) of a ranged index into `out`, all of them
// or an error. Called from any thread that queries the index.
using IndexReader = std::function<absl::Status(uint64_t offset, uint64_t size, char* out)>;

class IndexFile {
 public:
  // A ranged index reads whole blocks of this size (the last one shorter).
  static constexpr uint64_t kRangedBlockBytes = 64 << 10;

  // DataLoss naming the file for anything that is not a whole index;
  // NotFound when there is no file.
  static absl::StatusOr<std::unique_ptr<IndexFile>> Open(
      const std::string& path, IndexChecks checks = IndexChecks::kEveryRow);
  // The index `name` (for messages) of `size` bytes, read through `read`.
  // Opening reads the header, info and counters only (a block or so) with
  // kRowsRead, everything with kEveryRow. Every method then works as on a
  // local index, fetching what it reads on first use and checking every
  // row it reads (CheckedRow, the record id in range); a failed read is
  // reported (the reader's error, prefixed with the name and the bytes),
  // as is damage (DataLoss naming the byte): never a wrong answer. Safe to
  // query from many threads; each block is fetched once.
  static absl::StatusOr<std::unique_ptr<IndexFile>> OpenRanged(
      std::string name, uint64_t size, IndexReader read,
      IndexChecks checks = IndexChecks::kRowsRead);
  ~IndexFile();
  IndexFile(const IndexFile&) = delete;
  IndexFile& operator=(const IndexFile&) = delete;

  const v1::CaptureInfo& info() const { return info_; }
  const v1::CaptureCounters& counters() const { return counters_; }
  bool recovered() const { return recovered_; }
  uint64_t size() const { return rows_; }
  // Bytes of a ranged index fetched so far (0 for a local one): what this
  // IndexFile holds in memory.
  uint64_t fetched_bytes() const { return fetched_bytes_.load(std::memory_order_relaxed); }

  // The methods below that cannot return a status take `error`: on a
  // ranged index a failed read or damage sets it (when given) and the
  // method answers as if there were nothing (nullopt, null, empty); it is
  // never set otherwise, nor ever on a local index.

  // Matches in manifest order from position `from`, at most `limit` of them,
  // looking at no more than `budget` rows (then `next` says where to go on).
  // With a task_id, only that task's rows are looked at (a search of the
  // task_id column; checked as TaskRows does on a ranged index). Failures
  // in page.error.
  QueryPage Query(const ArgFilter& query, uint64_t from, size_t limit, size_t budget) const;
  // The row of a record id; nullopt when out of range.
  std::optional<ManifestRow> RecordById(uint64_t record_id,
                                        absl::Status* error = nullptr) const;
  // The record `record_id` with its manifest index and stats, its row
  // checked (CheckedRow); NotFound out of range, DataLoss naming the byte.
  absl::StatusOr<QueryHit> HitById(uint64_t record_id) const;
  // Record ids [from, to) in arrival order, filtered (WatchCapture replay).
  std::vector<QueryHit> ByArrival(const ArgFilter& query, uint64_t from, uint64_t to,
                                  absl::Status* error = nullptr) const;
  // For walks over every row (kEveryRow: the rows were checked at Open; a
  // ranged index checks each as it reads it, TaskRows' way for a task):
  // the first row at or after `*position` that `query` matches, its
  // position put in `*position`; null (and size()) when there is none. The
  // row is read in place (valid while the IndexFile is), or from an older
  // index's shorter row (or any row of a ranged index) into `scratch`.
  const ManifestRow* NextMatch(const ArgFilter& query, uint64_t* position,
                               ManifestRow* scratch, absl::Status* error = nullptr) const {
    if (ranged_) return RangedNextMatch(query, position, scratch, error);
    return LocalNextMatch(query, position, scratch);
  }
  // The record id (arrival sequence) of row `i` (< size()). On a ranged
  // index, fetched and checked (< size()); size() on failure.
  uint64_t RecordIdAt(uint64_t i, absl::Status* error = nullptr) const {
    if (ranged_) return RangedRecordIdAt(i, error);
    return record_id_[i];
  }

  // The rows of `task_id` (empty when it has none, begin then where it
  // would be), found by a search of the task_id column (interpolating:
  // task ids are counters) and checked as read: the rows around the range
  // belong to other tasks in order, and every row of the range is one
  // (CheckStoredRow) of this task; each agrees with its column entry.
  // DataLoss naming the byte otherwise. O(log n) pages of the column (a
  // few when task ids are spread evenly) plus the range's.
  absl::StatusOr<IndexRange> TaskRows(uint64_t task_id) const;
  // Row `i` (< size()), checked: a row (CheckStoredRow) that agrees with
  // the task_id column. DataLoss naming the byte otherwise.
  absl::StatusOr<ManifestRow> CheckedRow(uint64_t i) const;
  // Its stats row, when the capture stored some for it (i < size()).
  std::optional<StatsRow> StatsOf(uint64_t i, absl::Status* error = nullptr) const;

 private:
  IndexFile() = default;
  // Reads the header, checks the sizes and parses the info and counters
  // from the bytes at map_ (map_bytes_ of them).
  absl::Status OpenMapped(IndexChecks checks);
  // Makes bytes [offset, offset + size) of the index readable: nothing for
  // a local index; for a ranged one, fetches the blocks not fetched yet
  // (the reader's error, named, when a fetch fails).
  absl::Status Need(uint64_t offset, uint64_t size) const {
    if (!ranged_) return absl::OkStatus();
    return Fetch(offset, size);
  }
  absl::Status Need(const void* p, uint64_t size) const {
    return Need(static_cast<uint64_t>(static_cast<const char*>(p) -
                                      static_cast<const char*>(map_)),
                size);
  }
  absl::Status Fetch(uint64_t offset, uint64_t size) const;
  absl::Status FetchBlock(uint64_t block) const;
  // Row i's bytes made readable and checked (CheckStoredRow, agreement
  // with the task_id column, i < size()); its stats row's `present` too
  // when `with_stats`. DataLoss naming the byte.
  absl::StatusOr<ManifestRow> ReadRow(uint64_t i, bool with_stats) const;
  // The record id at row i, made readable and checked (< size()).
  absl::StatusOr<uint64_t> ReadRecordId(uint64_t i) const;
  // The row of record `record_id` (< size()), from position[] made
  // readable, checked against record_id[] on a ranged index.
  absl::StatusOr<uint64_t> ReadPosition(uint64_t record_id) const;
  // TaskRows' search and its check of the rows around the range, without
  // the check of every row in it (its readers check those).
  absl::StatusOr<IndexRange> TaskBounds(uint64_t task_id) const;
  // Its stats row made readable (ranged) and read; nullopt when none.
  absl::StatusOr<std::optional<StatsRow>> ReadStats(uint64_t i) const;
  QueryPage RangedQuery(const ArgFilter& query, uint64_t from, size_t limit,
                        size_t budget) const;
  const ManifestRow* LocalNextMatch(const ArgFilter& query, uint64_t* position,
                                    ManifestRow* scratch) const;
  const ManifestRow* RangedNextMatch(const ArgFilter& query, uint64_t* position,
                                     ManifestRow* scratch, absl::Status* error) const;
  uint64_t RangedRecordIdAt(uint64_t i, absl::Status* error) const;
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
  bool ranged_ = false;  // read_ is set: the hot paths test this, next to what they read
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

  // A ranged index: map_ is anonymous, block b holds the index's bytes once
  // block_state_[b] is kFilled (stored with release after the bytes are
  // written, read with acquire before they are); one thread fills a block
  // (kLoading) while the others wait on filled_.
  enum BlockState : uint8_t { kEmpty, kLoading, kFilled };
  IndexReader read_;  // empty for a local index
  std::unique_ptr<std::atomic<uint8_t>[]> block_state_;
  mutable std::mutex fill_mu_;
  mutable std::condition_variable filled_;
  mutable std::atomic<uint64_t> fetched_bytes_{0};
};

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_CAPTURE_INDEX_H_
