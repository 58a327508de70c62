// CaptureStore: one capture directory (<output_prefix>/args_dump/) written
// from (record, payload) pairs that arrive in args.bin order:
//   args.bin        payloads, appended; eager at levels 1/2 (created with the
//                   first record), lazy at level 3 (created with the first
//                   payload; absent and bin_file null when there is none).
//                   Equal payloads are stored once (payload_dedup.h): a
//                   record arrives with its stream offset (the capture's
//                   payload bytes before it) and is stored with the offset
//                   of its bytes in args.bin, which may be shared
//   args.journal    every record after its payload is written (journal.h)
//   args.index      rows in manifest order for queries (capture_index.h),
//                   written by Finish() just before
//   args_dump.json  the manifest, written by Finish()
// Nothing is created before the first record: a run that captured nothing
// leaves no directory. Append() returns once the pair would survive a crash
// of this process (written to the OS); Recover() rebuilds the manifest of a
// directory whose writer died. Durable means "survives a crash of this
// process": nothing is fsynced (a power loss may lose the page cache).
// Plain C++: no gRPC here.
#ifndef ARGSDUMP_STORE_CAPTURE_STORE_H_
#define ARGSDUMP_STORE_CAPTURE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/argsdump/v1/record.pb.h"
#include "absl/container/flat_hash_map.h"
#include "store/live_query.h"
#include "store/journal.h"
#include "store/manifest.h"
#include "store/payload_dedup.h"
#include "format/record.h"

namespace argsdump {


inline constexpr char kManifestName[] = "args_dump.json";
inline constexpr char kBinName[] = "args.bin";
inline constexpr char kJournalName[] = "args.journal";

// What a recovery kept, and what it could not keep and why.
struct RecoveryReport {
  bool wrote_files = false;         // manifest and args.index were written
  uint64_t records = 0;             // kept
  uint64_t journal_bytes = 0;
  std::vector<JournalReader::Damage> damage;  // journal regions not read
  uint64_t records_without_payload = 0;  // dropped: args.bin does not hold them
  // Dropped: the journal's map of where their batch's payloads went was in
  // a damaged region (captures that share equal payloads).
  uint64_t records_unplaced = 0;
  uint64_t bin_bytes = 0;           // args.bin as found
  bool bin_missing = false;
  bool bin_cut = false;             // args.bin was cut back to the last kept payload
  // Lost something acknowledged: damage before the tail, or payloads.
  bool lossy() const;
  // One line for people ("kept 5334 records; dropped 120 journal bytes at
  // byte 4096 (checksum mismatch); ...").
  std::string Describe() const;
};

// Records checked (RowFromRecord, the journal's entry size) and encoded as
// journal entries ahead of the store, so that appending them is writing:
// the ingest stream prepares a batch on its own thread while the capture's
// writer appends the one before. Holds no message: what the store keeps of
// a record is its row, its stats and its journal entry.
class PreparedRecords {
 public:
  // Journal bytes of a typical record's entry, to reserve by.
  static constexpr size_t kRecordEntryGuess = kJournalHeaderBytes + 96;

  // Checks `record` and adds it; InvalidArgument ("record of task ...:
  // why"), and nothing added, for a record the store would refuse.
  absl::Status Add(const v1::ArgRecord& record);
  size_t size() const { return rows_.size(); }
  bool empty() const { return rows_.empty(); }
  const std::vector<ManifestRow>& rows() const { return rows_; }
  // Moves the first `n` records to the end of `out`.
  void MoveFront(size_t n, PreparedRecords* out);
  // Moves every record to the end of `out`.
  void MoveAll(PreparedRecords* out) { MoveFront(size(), out); }
  void Clear();
  // Room for `records` more records of about `bytes` journal bytes.
  void Reserve(size_t records, size_t bytes);

 private:
  friend class CaptureStore;
  std::vector<ManifestRow> rows_;
  std::vector<std::pair<size_t, StatsRow>> stats_;  // (index, stats) of those that carry stats
  std::string journal_;       // one framed kRecord entry per record
  std::vector<size_t> ends_;  // where each record's entry ends in journal_
};

class CaptureStore {
 public:
  // `dir` is the args_dump directory; its parents are created as needed.
  static absl::StatusOr<std::unique_ptr<CaptureStore>> Create(std::string dir,
                                                              v1::CaptureInfo info);
  // A capture whose writer went away before it finished (a server
  // restart), opened to go on appending: its records and payloads from the
  // journal and args.bin, a torn last entry and unjournaled payload bytes
  // cut off (nothing acknowledged is in them). FailedPrecondition when it
  // cannot go on safely -- a damaged journal, a version 1 journal, payloads
  // args.bin does not hold, a capture that had finished -- then Recover it.
  static absl::StatusOr<std::unique_ptr<CaptureStore>> Reopen(const std::string& dir);
  ~CaptureStore();
  CaptureStore(const CaptureStore&) = delete;
  CaptureStore& operator=(const CaptureStore&) = delete;

  // Whether a payload equal to one already stored is shared instead of
  // written again (on by default). Before the first Append; a reopened
  // capture goes on as it began.
  void set_payload_dedup(bool on);

  // One pair, in order: record.bin_offset must be stream_bytes() when
  // record.bin_size > 0, and payload.size() == bin_size. InvalidArgument
  // otherwise, and nothing is written. The record is stored with the
  // offset of its bytes in args.bin (shared, or where they were written).
  absl::Status Append(const v1::ArgRecord& record, absl::string_view payload);

  // Many pairs at once, in order (payloads[i] belongs to records[i]): one
  // writev for the payloads and one write for the journal. All or nothing:
  // InvalidArgument for any bad pair, before anything is written.
  absl::Status AppendBatch(const std::vector<const v1::ArgRecord*>& records,
                           const std::vector<absl::string_view>& payloads);

  // The same for records prepared ahead: `payload` is their payloads back
  // to back, cut anywhere (exactly the sum of their bin_size bytes). One
  // writev for the payload and one write for the journal; all or nothing.
  absl::Status AppendPrepared(const PreparedRecords& records,
                              const std::vector<absl::string_view>& payload);

  // What is known only at the end, from `end`: its labels are added to the
  // capture's (a key already there is replaced), such as the SDK's step
  // count; its step_levels (the dynamic switch's levels per step) replace
  // the capture's, and the level becomes the last of them above 0; its
  // device_crash (how the device process died), when set, replaces the
  // capture's. InvalidArgument for step levels out of order or above 3, or
  // a device_crash over its bounds (format/device_crash.h). Journaled when
  // the journal exists; written into args.index and the manifest by Finish.
  absl::Status Amend(const v1::CaptureInfo& end);

  // Writes the manifest, sorted, with the device's loss counters merged in.
  // Once the manifest is in place, args.journal is removed unless
  // set_keep_journal(true) (the service keeps it: it rebuilds a damaged
  // args.index from it); its only other use is recovering a capture that
  // never finished. A journal that cannot be removed is left, not an error.
  absl::Status Finish(const v1::CaptureCounters& losses);
  void set_keep_journal(bool keep) { keep_journal_ = keep; }

  // For a directory with a journal and no manifest (or no args.index):
  // writes them from the journal. Keeps every intact journal entry (past
  // damaged regions too) whose payload args.bin holds; cuts args.bin back
  // to the last kept payload only when the journal was whole (a torn tail
  // is a crash mid-append: nothing acknowledged is in it); records what it
  // dropped in the manifest ("recovery") and in `report`.
  //   OK         nothing acknowledged was lost (clean, or a torn tail)
  //   DataLoss   the files were written, but a damaged journal region or
  //              payloads missing from args.bin cost entries (`report`
  //              says which), or nothing could be written (no header)
  //   NotFound   no journal
  // OK at once when manifest and index already exist.
  static absl::Status Recover(const std::string& dir, RecoveryReport* report = nullptr);

  const std::string& dir() const { return dir_; }
  const v1::CaptureInfo& info() const { return info_; }
  // Records appended so far (their ids are 0 .. records() - 1).
  uint64_t records() const;
  // The writer's: args.bin's size; the payload bytes appended, shared ones
  // included (the next record's bin_offset, and a stream's watermark).
  uint64_t bin_bytes() const { return bin_bytes_; }
  // args.journal's size (what the writer wrote of it); 0 before the files exist.
  uint64_t journal_bytes() const { return journal_ != nullptr ? journal_->bytes() : 0; }
  uint64_t stream_bytes() const { return stream_bytes_; }
  // The counters that follow from the records so far; after Finish, the
  // manifest's (device loss counters included).
  v1::CaptureCounters counters() const;

  // Reading while another thread appends (the capture service): these take
  // a shared lock; Append takes it exclusively only to publish new rows.
  // EnableTaskIndex keeps a task_id -> record ids map from now on, so that
  // Query by task_id does not scan.
  void EnableTaskIndex();
  QueryPage Query(const ArgFilter& query, uint64_t from, size_t limit, size_t budget) const;
  std::optional<ManifestRow> RecordById(uint64_t record_id) const;
  // The record with its stats (no manifest index: the order is not fixed).
  std::optional<QueryHit> HitById(uint64_t record_id) const;
  std::vector<QueryHit> ByArrival(const ArgFilter& query, uint64_t from, uint64_t to) const;
  bool created() const { return journal_ != nullptr; }

 private:
  CaptureStore(std::string dir, v1::CaptureInfo info)
      : dir_(std::move(dir)), info_(std::move(info)) {}
  absl::Status CreateFiles();
  absl::Status OpenBin();
  absl::Status WritePayloads(const std::vector<absl::string_view>& payloads);
  // For a journal with payload maps: where each payload of the batch goes
  // (stored_offsets_), the batch's map (map_frame_, framed), and the bytes
  // to write (`to_write`: `payload` itself unless something was shared).
  struct Placed {
    uint64_t stored_end;  // args.bin's size once the batch is written
    uint64_t shared;      // payloads of the batch that share stored bytes
  };
  Placed PlacePayloads(const PreparedRecords& prepared,
                       const std::vector<absl::string_view>& payload,
                       const std::vector<absl::string_view>** to_write);
  // Whether args.bin holds `pieces` at `offset`.
  bool StoredEquals(uint64_t offset, PayloadPieces pieces);
  // args.bin opened for reading (compares): the file being written, when
  // it is a regular file; -1 otherwise (nothing is compared with what was
  // stored before: a FIFO, a device).
  int ReadBin();
  PreparedRecords prepared_;  // AppendBatch's, kept for its capacity

  const std::string dir_;
  v1::CaptureInfo info_;
  std::unique_ptr<JournalWriter> journal_;
  int bin_fd_ = -1;
  int bin_read_fd_ = -1;
  bool bin_read_tried_ = false;
  uint64_t bin_bytes_ = 0;
  uint64_t stream_bytes_ = 0;
  // Sharing: maps_ says the journal places payloads with kPayloadMap
  // entries (set when the files are created with dedup on, or reopened
  // from such a journal); dedup_ whether this store shares.
  bool dedup_ = true;
  bool maps_ = false;
  PayloadIndex payload_index_;
  // PlacePayloads' scratch, kept for its capacity.
  std::vector<uint64_t> stored_offsets_;       // per row of the batch
  std::vector<absl::string_view> pieces_;      // the batch's payloads, per record
  std::vector<std::pair<size_t, size_t>> piece_range_;  // per row: [begin, end) of pieces_
  std::vector<std::pair<uint64_t, size_t>> written_;    // (stored offset, row) written by the batch
  std::vector<absl::string_view> to_write_;
  std::string map_frame_;
  std::string compare_;
  // The batch's Remembers, undone when it is not written after all (so the
  // index is what a reopened store rebuilds: the same sharing, the same files).
  std::vector<std::pair<PayloadIndex::Key, std::optional<uint64_t>>> remembered_;
  void ForgetBatch();
  mutable std::shared_mutex rows_mu_;  // records_, tally_, task_index_
  RecordList records_;
  RecordTally tally_;  // of records_
  uint64_t stored_bytes_ = 0;   // bin_bytes_, published with records_
  uint64_t deduplicated_ = 0;   // records whose payload is shared
  StatsTable stats_;   // by record id (the stats dump mode)
  // The live task index: each task's records as a chain through next_in_task_
  // (first and last id per task), no allocation per task.
  struct TaskChain {
    uint32_t first;
    uint32_t last;
  };
  void IndexRow(uint64_t task_id, uint32_t id);
  bool task_index_on_ = false;
  absl::flat_hash_map<uint64_t, TaskChain> task_chains_;
  std::vector<uint32_t> next_in_task_;
  uint64_t last_task_ = 0;        // the task of the last row indexed, whose
  TaskChain* last_chain_ = nullptr;  // chain is kept at hand (tasks arrive in runs)
  v1::CaptureCounters final_counters_;
  bool counters_final_ = false;
  bool finished_ = false;
  bool keep_journal_ = true;
};

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_CAPTURE_STORE_H_
