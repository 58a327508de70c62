// The capture catalog in PostgreSQL: a row per capture (what it is, its
// state, its objects, the watermark of what is durable) and a row per
// committed segment of a live capture. Invariants held by the SQL: a (job,
// rank) is taken once; a segment commits only under the capture's current
// epoch and never moves the watermark back; a capture turns finished in the
// transaction that records its final objects. Rows read back are checked
// (DataLoss naming table, column, row). Thread-safe (a pool of connections,
// each reconnecting after a server restart). Unavailable from a write leaves
// it unknown whether it applied: Get tells; asked again it is refused.
#ifndef ARGSDUMP_CATALOG_CATALOG_H_
#define ARGSDUMP_CATALOG_CATALOG_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/argsdump/v1/capture.pb.h"
#include "proto/argsdump/v1/record.pb.h"
#include "catalog/pg_connection.h"

namespace argsdump {

// A finished capture's objects (keys in the store).
struct CaptureObjects {
  std::string manifest_key;  // args_dump.json
  std::string bin_key;       // args.bin ("": none, a level 3 capture without payloads)
  std::string index_key;     // args.index
};

// One capture's row.
struct CatalogCapture {
  v1::CaptureInfo info;  // as created: name, level, labels, job, kernels ...
  v1::CaptureState state = v1::CAPTURE_STATE_UNSPECIFIED;
  // Live: as of the last commit; finished: the manifest's.
  v1::CaptureCounters counters;
  // The watermark: records and journal bytes durable in the store.
  uint64_t committed_records = 0;
  uint64_t committed_bytes = 0;
  uint64_t bin_bytes = 0;     // args.bin's size, once finished
  uint64_t stored_bytes = 0;  // what its objects take in the store
  // The fencing token: a writer commits only under the current epoch.
  int64_t epoch = 0;
  std::string object_prefix;  // every object of the capture is below it
  CaptureObjects objects;     // empty while live
  absl::Time created;
  std::optional<absl::Time> finished;
};

// A committed piece of a live capture's journal (and payload bytes).
struct CatalogSegment {
  uint64_t seq = 0;  // unique per capture
  std::string object_key;
  uint64_t first_record = 0;
  uint64_t record_count = 0;
  uint64_t bytes = 0;  // the object's size
  absl::Time committed;
};

// A job: its ranks' captures, counted.
struct CatalogJob {
  std::string job;
  uint32_t world_size = 0;  // the largest any rank gave
  uint64_t ranks_present = 0;
  uint64_t ranks_live = 0;
  uint64_t ranks_finished = 0;
};

struct CaptureQuery {
  std::map<std::string, std::string> labels;  // every one must match
  v1::CaptureState state = v1::CAPTURE_STATE_UNSPECIFIED;  // UNSPECIFIED: all
  std::string name_prefix;
  std::string job;  // "": any
  uint32_t page_size = 100;  // 1..1000 (0: 100)
  std::string page_token;    // a previous page's next_page_token
};

struct CapturePage {
  std::vector<CatalogCapture> captures;  // by name (bytewise)
  std::string next_page_token;           // empty on the last page
};

// What Delete removed: the objects the caller now deletes from the store.
struct DeletedCapture {
  std::string object_prefix;
  std::vector<std::string> object_keys;  // final objects and segments
  uint64_t stored_bytes = 0;
};

struct RetentionCandidate {
  std::string name;
  uint64_t stored_bytes = 0;
  absl::Time created;
};

struct CatalogTotals {
  uint64_t captures = 0;
  uint64_t stored_bytes = 0;
};

class Catalog {
 public:
  // The schema version this binary writes; a database at a newer version
  // is refused (FailedPrecondition).
  static constexpr int kSchemaVersion = 1;

  struct Options {
    PgOptions pg;
    int max_connections = 4;  // the pool's bound, >= 1
  };

  // Connects and brings the schema to kSchemaVersion: the migrations run in
  // one transaction under an advisory lock, so servers starting together
  // do not race.
  static absl::StatusOr<std::unique_ptr<Catalog>> Open(const Options& options);
  ~Catalog();

  // A new live capture at epoch 1 with counters and watermark zero.
  // AlreadyExists when the name, or info.job's (job, rank), is taken.
  absl::StatusOr<CatalogCapture> CreateCapture(const v1::CaptureInfo& info,
                                               const std::string& object_prefix);

  // Takes the capture over: its epoch + 1 (a lease's new fencing token);
  // every commit under an older epoch is refused from now on. NotFound, or
  // FailedPrecondition when it is finished.
  absl::StatusOr<int64_t> AdvanceEpoch(const std::string& name);

  // Records a segment and moves the watermark to (records, bytes), only if
  // `epoch` is the capture's, it is live and the watermark does not go back
  // (the check is the UPDATE's WHERE). FailedPrecondition saying which
  // check failed; AlreadyExists for a segment seq already committed;
  // InvalidArgument when records != first_record + record_count.
  absl::Status CommitSegment(const std::string& name, int64_t epoch,
                             const CatalogSegment& segment, uint64_t committed_records,
                             uint64_t committed_bytes, const v1::CaptureCounters& counters);

  // Turns the capture finished with its final objects, counters and sizes,
  // and forgets its segments (returned: the caller deletes those objects).
  // `final_info` (when given: what the capture's end amended, its labels
  // and level) replaces the info it was created with. Fenced like
  // CommitSegment.
  absl::StatusOr<std::vector<std::string>> Finish(const std::string& name, int64_t epoch,
                                                  const CaptureObjects& objects,
                                                  const v1::CaptureCounters& counters,
                                                  uint64_t bin_bytes, uint64_t stored_bytes,
                                                  const v1::CaptureInfo* final_info = nullptr);

  absl::StatusOr<CatalogCapture> Get(const std::string& name);
  // A live capture's segments by seq (to resume it).
  absl::StatusOr<std::vector<CatalogSegment>> Segments(const std::string& name);
  absl::StatusOr<CapturePage> List(const CaptureQuery& query);
  // Jobs by name, `page_size` (1..1000) after `page_token`.
  absl::StatusOr<std::vector<CatalogJob>> ListJobs(uint32_t page_size,
                                                   const std::string& page_token,
                                                   std::string* next_page_token);
  // Removes the row (and its segments' rows). NotFound when absent.
  absl::StatusOr<DeletedCapture> Delete(const std::string& name);

  // For garbage collection: those of `object_keys` (listed from the store)
  // no row refers to. Candidates only: an object uploaded and not yet
  // committed looks the same, so the caller also checks its age.
  absl::StatusOr<std::vector<std::string>> ListOrphanCandidates(
      const std::vector<std::string>& object_keys);

  // For retention: all captures' stored bytes, and finished captures
  // oldest first.
  absl::StatusOr<CatalogTotals> Totals();
  absl::StatusOr<std::vector<RetentionCandidate>> OldestFinished(uint32_t limit);

 private:
  explicit Catalog(Options options) : options_(std::move(options)) {}
  // Runs `body` on a pooled connection; once more on Aborted when
  // `transaction` (BEGIN ... COMMIT around it, serialization failures and
  // deadlocks retried here, in one place).
  absl::Status Run(bool transaction, const std::function<absl::Status(PgConnection&)>& body);

  const Options options_;
  std::mutex mu_;
  std::condition_variable released_;
  std::vector<std::unique_ptr<PgConnection>> idle_;  // guarded by mu_
  int open_connections_ = 0;                          // guarded by mu_
  std::minstd_rand random_{std::random_device{}()};  // guarded by mu_
};

// Schema work exposed for tests: the database's schema version (0 when
// there is no schema yet).
absl::StatusOr<int> CatalogSchemaVersion(PgConnection& connection);

}  // namespace argsdump

#endif  // ARGSDUMP_CATALOG_CATALOG_H_
