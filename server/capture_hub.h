// CaptureHub: the captures under one root folder, live and finished, for the
// capture service (plain C++, no gRPC: the service is a thin layer over it).
//
//   <root>/<name>/args_dump/   one capture (CaptureStore's files)
//
// A live capture has a writer thread that owns its CaptureStore: appends and
// the final export run there, never on the caller's thread; callers get a
// callback when their work is durable. Finishing swaps the store for its
// args.index (IndexFile), so a finished capture costs no memory per record.
// Opening a hub lists the captures already under the root: live ones (a
// server restart) are reopened live and detached for their clients to
// resume (CaptureStore::Reopen); ones that cannot go on are recovered
// (CaptureStore::Recover). Only a finish message, FinishCapture or the idle
// timeout seals a live capture. The server's log (stderr) gets a line per
// capture opened, resumed, dropped or live again after a restart, and one per
// capture sealed, with its counters and what sealed it (SealCause).
//
// With an object store (Options::remote), the root is a scratch disk: a
// live capture is written there as above, and an append is acknowledged
// only once a segment holding it is committed in the store and the catalog
// (group commit: a committer thread per live capture uploads one segment
// while the writer goes on appending; the next segment is what was
// appended meanwhile, at most group_commit_bytes of it). A commit that
// fails fails its appends (and those after it: Unavailable) and the capture's scratch files
// are rebuilt from what was committed before anything else is done with
// it (a resume waits for that). Sealing uploads the finished files and
// lets go of the scratch copy; finished captures are served from the store
// (the index through RemoteCaptures' cache, payloads by ranged GETs), and
// opening the hub lists them from the catalog and rebuilds the live ones.
#ifndef ARGSDUMP_SERVER_CAPTURE_HUB_H_
#define ARGSDUMP_SERVER_CAPTURE_HUB_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "format/names.h"  // ValidateCaptureName
#include "proto/argsdump/v1/capture.pb.h"
#include "proto/argsdump/v1/record.pb.h"
#include "store/live_query.h"
#include "store/capture_store.h"
#include "store/remote_captures.h"

namespace argsdump {

// Records, checked and encoded (PreparedRecords), and their payload bytes
// in args.bin order, ready to append: the bytes are `chunks` back to back,
// the first from byte `skip` on, each moved in from a message as it came
// (cut where a record ends only when that copies less than half a chunk).
// Payload buffers the writer hands back once written, for the stream's next
// messages to be parsed into: a buffer freed and allocated again per 1 MiB
// message costs fresh pages (twice the page faults), more than the copies
// it saves. Any thread; bounded.
class ChunkPool {
 public:
  static constexpr size_t kMaxChunks = 16;
  void Put(std::string chunk);
  // A cleared buffer that keeps its capacity; false when there is none.
  bool Take(std::string* chunk);

 private:
  std::mutex mu_;
  std::vector<std::string> free_;  // guarded by mu_
};

struct AppendJob {
  uint64_t first_record = 0;  // the id the first record gets: refused unless next
  PreparedRecords records;
  std::vector<std::string> chunks;
  size_t skip = 0;
  std::shared_ptr<ChunkPool> pool;  // where `chunks` go once written (null: freed)

  // The payload bytes, as views of `chunks`.
  std::vector<absl::string_view> Payload() const;
  uint64_t bytes() const;
};

// Where a live capture's durable data ends.
struct Watermark {
  uint64_t records = 0;
  uint64_t bin_bytes = 0;
};

// How a live capture came to be sealed (the server's log says which).
enum class SealCause {
  kFinishMessage,  // its ingest stream sent `finish`
  kFinishCapture,  // the FinishCapture rpc
  kIdleTimeout,    // no stream came back within --live_idle_timeout_ms
  kRecovery,       // found unfinishable at start (CaptureStore::Recover)
};
const char* SealCauseName(SealCause cause);

class HubCapture : public std::enable_shared_from_this<HubCapture> {
 public:
  using DoneCallback = std::function<void(absl::Status, Watermark)>;

  const std::string& name() const { return name_; }
  v1::CaptureSummary Summary() const;
  // The job it is a rank of (CaptureInfo.job; unset: none).
  v1::JobMember job() const;
  // The capture's kernel table (GetCapture sends it; ListCaptures' pages
  // do not).
  google::protobuf::RepeatedPtrField<v1::Kernel> Kernels() const;
  // The capture's time base (CaptureInfo.clock), with the server's offset
  // when the client sent its wall clock.
  v1::CaptureClock Clock() const;
  // Turns `query`'s kernel name and type into func ids through the
  // capture's kernel table (format/kernel_table.h); InvalidArgument naming
  // the capture's kernels when it has no such kernel.
  absl::Status ResolveKernels(ArgFilter* query) const;
  bool finished() const;
  Watermark durable() const;

  // Reads, from any thread, live or finished (see CaptureStore/IndexFile).
  // `live` (if given) says which answered: the live store (arrival order,
  // or a task's rows) or the finished capture's index (manifest order).
  QueryPage Query(const ArgFilter& query, uint64_t from, size_t limit, size_t budget,
                  bool* live = nullptr) const;
  // A capture in an object store may fail to read its index: `error` (if
  // given) gets why (Query: QueryPage::error), and the answer is empty.
  std::optional<ManifestRow> RecordById(uint64_t record_id, absl::Status* error = nullptr) const;
  // GetArg: the record with its stats and (finished) manifest index;
  // NotFound past the durable records, DataLoss for a damaged index row.
  absl::StatusOr<QueryHit> HitById(uint64_t record_id) const;
  std::vector<QueryHit> ByArrival(const ArgFilter& query, uint64_t from, uint64_t to,
                                  absl::Status* error = nullptr) const;
  // args.bin on the scratch disk (local captures, live ones in an object
  // store); empty for a capture whose bytes are in the object store.
  std::string bin_path() const;
  // Finished and kept in the object store (its bytes are read from there).
  bool InStore() const;
  // Bytes [offset, offset + size) of args.bin, wherever it is, streamed to
  // `on_chunk` (ranged GETs from an object store, reads of the local file
  // otherwise). DataLoss naming the file or key and byte when it ends
  // before them.
  absl::Status ReadBin(uint64_t offset, uint64_t size, const s3::ChunkCallback& on_chunk) const;
  // The finished capture's index (opened with IndexChecks::kEveryRow);
  // null while the capture is live.
  std::shared_ptr<const IndexFile> index() const;

  // Live captures: queue work for the writer thread; `done` runs on it.
  // Append: InvalidArgument / ResourceExhausted (quota) leave the capture
  // as it was. Finish writes the manifest and index and ends the writer.
  void Append(AppendJob job, DoneCallback done);
  // `end` (labels, step levels, device_crash) amends the capture's info first
  // (CaptureStore::Amend). Once sealed, the server logs the capture's
  // counters and `cause`.
  void Finish(v1::CaptureCounters device_counters, DoneCallback done,
              v1::CaptureInfo end = {}, SealCause cause = SealCause::kFinishMessage);
  // Runs `done` once every job queued before it is done.
  void Barrier(DoneCallback done);

  // One ingest stream at a time: Attach fails with Aborted while another is
  // attached (retry), FailedPrecondition when finished or being sealed.
  absl::Status Attach();
  void Detach();
  bool attached() const;
  // When a stream last attached or detached (the idle timeout counts from
  // the later).
  std::chrono::steady_clock::time_point last_activity() const;
  // Finishes the capture if no stream is attached - and, with `idle_for`,
  // none was for that long - checked and sealed at once, so a resume that
  // comes in between is refused instead of attaching to a capture being
  // finished. FailedPrecondition (attached, not idle, finished) otherwise.
  // `idle_for` may be any duration (InfiniteDuration: never idle).
  absl::Status SealIfDetached(DoneCallback done,
                              std::optional<absl::Duration> idle_for = std::nullopt);

  // Watchers: `poke` runs (on the writer thread) after records become
  // durable and when the capture finishes. Returns an id for RemoveWatcher.
  uint64_t AddWatcher(std::function<void()> poke);
  void RemoveWatcher(uint64_t id);

  ~HubCapture();

 private:
  friend class CaptureHub;
  struct Job {
    enum Kind { kAppend, kFinish, kBarrier } kind;
    AppendJob append;
    v1::CaptureCounters counters;
    DoneCallback done;
    v1::CaptureInfo end{};  // kFinish: what amends the capture's info
    SealCause cause = SealCause::kFinishMessage;  // kFinish
  };
  HubCapture(std::string name, std::string dir, uint64_t max_bytes)
      : name_(std::move(name)), dir_(std::move(dir)), max_bytes_(max_bytes) {}
  // Object store: how group commits are cut.
  struct GroupCommit {
    absl::Duration delay = absl::ZeroDuration();  // the least time between two commits' starts
    uint64_t bytes = 8 << 20;  // the most appended bytes one segment holds (unless one append is more)
  };
  // What the capture takes where it is kept (disk, or the object store),
  // and when it finished (for retention).
  uint64_t StoredBytes() const;
  absl::Time FinishedTime() const;
  // The finished capture's index from the store (through the cache):
  // DataLoss naming the key and byte for a damaged one.
  absl::StatusOr<std::shared_ptr<IndexFile>> StoreIndex() const;
  // Object store, writer thread: waits until every append is committed
  // and answers them; false when a commit failed (the appends not
  // committed are answered with its error and the capture needs a
  // restore).
  bool CommitPending(CaptureStore& store);
  // Object store, writer thread, after an append: where a commit may end
  // (the store's files and counters as they are now), for the committer.
  void PublishCut(const CaptureStore& store);
  // Object store, writer thread: answers the appends the committer made
  // durable; after a failed commit fails the rest (a restore takes them
  // back) and marks the capture for a restore.
  void AnswerCommitted();
  // The committer thread: commits the appends published so far as one
  // segment (at most group_.bytes of them, at least one append), as soon
  // as the previous commit ended and at least group_.delay after it
  // started, so that appends go on while a segment uploads.
  void CommitterLoop();
  // Writer thread: the scratch files rebuilt from the committed segments.
  absl::Status RestoreFromStore();
  // Writer thread, sealing: the finished files uploaded, the scratch copy let go.
  absl::Status SealToStore(CaptureStore& store);
  // The durable watermark, moved to `store`'s end first when `advance`.
  Watermark Durable(const CaptureStore& store, bool advance);
  bool payload_dedup_ = true;  // what a capture rebuilt with no record is created with
  // What reads go to: the live store, or the finished capture's index (a
  // reader keeps its copy alive across the switch).
  // `unreadable` (if given) gets why a capture in the store has no index to
  // read, once: the answer is then empty.
  std::pair<std::shared_ptr<CaptureStore>, std::shared_ptr<IndexFile>> Sources(
      absl::Status* unreadable = nullptr) const;
  // ResourceExhausted when the system refuses the thread.
  absl::Status StartWriter();
  void WriterLoop(std::weak_ptr<HubCapture> weak);
  // One job; false when it sealed the capture (the writer ends).
  bool RunJob(Job job, std::shared_ptr<CaptureStore> store);
  void RunAppend(Job job, CaptureStore& store);
  bool RunFinish(Job job, CaptureStore& store);  // true: sealed
  // Ends the writer thread (after the jobs queued) and joins it; the hub
  // calls it before letting go of its captures. When the last reference
  // goes on the writer thread itself (a job's callback held it), the thread
  // is let go instead, and ends once back in WriterLoop.
  void JoinWriter();
  void Enqueue(Job job);
  void NotifyWatchers();

  const std::string name_;
  const std::string dir_;  // .../<name>/args_dump
  const uint64_t max_bytes_;  // args.bin quota, 0: none

  mutable std::mutex mu_;
  std::shared_ptr<CaptureStore> store_;  // live
  std::shared_ptr<IndexFile> index_;     // finished
  v1::CaptureInfo info_;
  bool attached_ = false;
  bool sealing_ = false;  // SealIfDetached's finish is on its way
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
  // Not OK: a finished capture whose files cannot be served (its index
  // failed validation and could not be rebuilt); every read answers this.
  absl::Status damage_;
  Watermark durable_;
  std::deque<Job> jobs_;
  bool writer_done_ = false;
  std::condition_variable jobs_cv_;
  std::thread writer_;
  bool* destroyed_on_writer_ = nullptr;  // WriterLoop's; the writer thread's only
  std::map<uint64_t, std::function<void()>> watchers_;
  uint64_t next_watcher_ = 1;

  // Object store (null: the capture is local).
  RemoteCaptures* remote_ = nullptr;
  GroupCommit group_;
  // The writer thread's: commits so far, appends waiting for one.
  RemoteCaptures::LiveState live_;
  struct Unacked {
    DoneCallback done;
    uint64_t end = 0;  // the records the capture holds with this append
  };
  std::deque<Unacked> unacked_;  // appended, not committed yet, in order
  Watermark published_;  // where the last cut published ends
  bool needs_restore_ = false;  // a commit failed: the scratch files are ahead
  // Shared with the committer thread (mu_): where commits may end, one per
  // append; what is committed; a failure (no commit follows it until a
  // restore).
  struct Cut {
    v1::CaptureCounters counters;
    uint64_t records = 0;
    uint64_t journal_end = 0;
    uint64_t bin_end = 0;
    uint64_t stream_bytes = 0;
    uint64_t bytes = 0;  // the append's size (group_.bytes counts these)
  };
  std::deque<Cut> cuts_;
  Watermark committed_;
  bool committing_ = false;   // the committer is in RemoteCaptures::Commit
  bool commit_news_ = false;  // committed_ or commit_error_ moved: the writer answers
  absl::Status commit_error_;
  bool commit_now_ = false;  // the writer waits for every append: no group_.delay
  bool committer_stop_ = false;
  std::condition_variable commit_cv_;  // wakes the committer
  std::thread committer_;  // started with the first commit
  // Finished in the store (guarded by mu_): its row, and its index while
  // the cache keeps it.
  std::optional<CatalogCapture> row_;
  mutable std::weak_ptr<IndexFile> store_index_;
};

// <root>/.capture_server.lock: held (flock) by the hub serving the root,
// holding its pid.
inline constexpr char kRootLockName[] = ".capture_server.lock";

class CaptureHub {
 public:
  struct Options {
    std::string root;
    uint64_t max_capture_bytes = 0;  // args.bin bytes per capture, 0: no limit
    // Equal payloads within a capture are stored once,
    // unless this is off or the client's IngestOpen asks for no sharing.
    bool payload_dedup = true;
    // A live capture no stream is attached to gets its manifest after this
    // long without activity (0 or InfiniteDuration: never). Restarts and
    // broken streams keep captures live; this is what ends the ones no
    // client comes back to. Any value: time arithmetic saturates.
    absl::Duration live_idle_timeout = absl::ZeroDuration();
    // Retention. When the captures under the root take this many bytes on
    // disk or more (0: no limit), opening a new capture first evicts the
    // finished ones, oldest manifest first, until they take less, one
    // opening at a time; a live capture is never evicted. When the live
    // ones alone take this much, evicting cannot make room: nothing is
    // evicted and the new capture is refused (ResourceExhausted with the
    // numbers).
    uint64_t max_total_bytes = 0;
    // Finished captures whose manifest is older than this are evicted (at
    // startup, when a capture is opened, and by the reaper); 0 or
    // InfiniteDuration: kept. Any value: time arithmetic saturates.
    absl::Duration retain_for = absl::ZeroDuration();
    // Captures in an object store with a catalog (null: under the root,
    // which is then only the live captures' scratch disk). Outlives the hub.
    RemoteCaptures* remote = nullptr;
    // A live capture's commits: at least group_commit_delay between two
    // starts unless group_commit_bytes wait; at most group_commit_bytes of
    // appends a segment (see GroupCommit).
    absl::Duration group_commit_delay = absl::ZeroDuration();
    uint64_t group_commit_bytes = 8 << 20;
    // Objects no catalog row names, older than gc_min_age, are deleted at
    // startup and every gc_every (0: at startup only).
    absl::Duration gc_every = absl::Hours(1);
    absl::Duration gc_min_age = absl::Hours(1);
  };
  // Creates the root if needed, locks it (FailedPrecondition naming the
  // holder's pid when another hub has it), lists its captures: finished
  // ones (their index rebuilt when damaged), live ones reopened live and
  // detached (a client resumes them from the durable watermark), broken
  // ones recovered.
  static absl::StatusOr<std::unique_ptr<CaptureHub>> Open(Options options);
  // Joins the writers after their queued work. Live captures stay live on
  // disk (resumable after a restart); nothing is sealed here.
  ~CaptureHub();

  // A new live capture (AlreadyExists if the name is taken), or with
  // open.resume() the live capture of that name (NotFound / FailedPrecondition).
  // The caller is attached to it. A new capture's job (open.job) is checked
  // (format/job.h: InvalidArgument) and its rank must be free: AlreadyExists
  // naming the capture that holds it. A resume keeps the capture's job.
  absl::StatusOr<std::shared_ptr<HubCapture>> Open(const v1::IngestOpen& open);
  absl::StatusOr<std::shared_ptr<HubCapture>> Find(const std::string& name) const;
  // By name, from `after` (exclusive), matching labels and state.
  // `job` non-empty: only that job's ranks.
  std::vector<std::shared_ptr<HubCapture>> List(const std::map<std::string, std::string>& labels,
                                             v1::CaptureState state, const std::string& after,
                                             size_t limit, bool* more,
                                             const std::string& job = "") const;
  // Jobs: the captures whose CaptureInfo.job names them, rank by rank.
  // Job names after `after` (exclusive), at most `limit` (more: there are).
  std::vector<std::string> JobNames(const std::string& after, size_t limit, bool* more) const;
  // A job's ranks and their captures (damaged ones left out); NotFound when
  // no capture names the job.
  absl::StatusOr<std::map<uint32_t, std::shared_ptr<HubCapture>>> JobRanks(
      const std::string& job) const;
  // Drops `capture` when it is live, detached and holds no record (an
  // ingest stream opened it and ended without writing: no files exist).
  void Forget(const std::shared_ptr<HubCapture>& capture);
  // Seals a live capture no stream is attached to (the FinishCapture rpc):
  // FailedPrecondition when it is finished or attached. `done` runs once
  // its manifest is written.
  absl::Status FinishDetached(const std::string& name, HubCapture::DoneCallback done);
  const Options& options() const { return options_; }
  // Removes a finished capture and its files; what they took on disk.
  // NotFound, or FailedPrecondition for a live capture (FinishCapture it
  // first). Readers holding it finish what they are doing; later lookups
  // are NotFound. `why` goes into the log line. A new capture opened under
  // the same name while the files go is left whole: its own files are not
  // touched, and the answer is still what the deleted one took.
  absl::StatusOr<uint64_t> Delete(const std::string& name, const std::string& why);
  // What every capture under the root takes on disk, now.
  uint64_t RootDiskBytes() const;

 private:
  explicit CaptureHub(Options options) : options_(std::move(options)) {}
  absl::Status Load();
  // Load's steps: the root's capture folders (`folders`) and those holding
  // a capture (`names`); the files of deletions a stop interrupted, removed;
  // one capture listed, live again for a resume or finished (recovered,
  // its index rebuilt when damaged) or damaged.
  absl::Status ListRoot(std::vector<std::string>* names, std::vector<std::string>* folders) const;
  void RemoveInterruptedDeletions(const std::vector<std::string>& folders) const;
  absl::Status LoadCapture(const std::string& name);
  // Object store: every capture the catalog lists, finished ones served
  // from the store, live ones rebuilt on the scratch disk.
  absl::Status LoadFromCatalog();
  std::shared_ptr<HubCapture> NewCapture(const std::string& name) const;
  // List over an object store: a page of the catalog's, with the live
  // captures not committed yet (not in the catalog) merged in by name.
  std::vector<std::shared_ptr<HubCapture>> MergeListed(
      const CapturePage& page, const std::map<std::string, std::string>& labels,
      v1::CaptureState state, const std::string& after, size_t limit, bool* more,
      const std::string& job) const;
  // Object store: orphans deleted, counted in the log.
  void CollectGarbage();
  // Seals live captures idle past options_.live_idle_timeout; evicts
  // finished ones past options_.retain_for.
  void ReapLoop();
  // Evicts finished captures past retain_for, then (with for_room: at
  // startup and for a new capture), over max_total_bytes, the oldest
  // finished ones until the root takes less; ResourceExhausted, evicting
  // none for room, when the live captures alone take max_total_bytes or
  // more. The caller holds evict_mu_.
  absl::Status MakeRoom(bool for_room);
  bool Retains() const;  // retain_for is finite and not 0
  const Options options_;
  int lock_fd_ = -1;  // flock(LOCK_EX) on <root>/.capture_server.lock
  // Held while eviction decides and deletes, and by an Open that creates a
  // capture from its room check until the capture is listed: evictions see
  // every capture opened before them, one at a time (taken before mu_).
  std::mutex evict_mu_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<HubCapture>> captures_ ABSL_GUARDED_BY(mu_);
  // job -> rank -> the capture's name (in captures_): one capture per rank.
  std::map<std::string, std::map<uint32_t, std::string>> jobs_ ABSL_GUARDED_BY(mu_);
  // Lists `c` under its job's rank when it has a job; false when another
  // capture holds that rank.
  bool ListRankLocked(const HubCapture& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets go of `c`'s rank (when it is the one holding it).
  void UnlistRankLocked(const HubCapture& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK when open.job's rank is free; AlreadyExists naming its capture.
  absl::Status RankFreeLocked(const v1::IngestOpen& open) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::condition_variable reap_cv_;  // with mu_
  bool reap_stop_ = false;
  std::thread reaper_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_CAPTURE_HUB_H_
