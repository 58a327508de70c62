// The capture service's job questions over a CaptureHub (plain C++, no
// gRPC: the service only moves their messages). A job is the captures whose
// CaptureInfo.job names it, one per rank (CaptureHub::JobRanks).
//
// Every answer reads rows from each rank's index (finished) or live store;
// only a comparison reads payloads, two at a time, from the ranks'
// args.bin mapped for the comparison (ranks on up to 4 worker threads). A live rank answers with what is durable, and
// the answer says how far each rank had got (RankProgress).
#ifndef ARGSDUMP_SERVER_JOB_QUERIES_H_
#define ARGSDUMP_SERVER_JOB_QUERIES_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/argsdump/v1/capture.pb.h"
#include "server/capture_hub.h"

namespace argsdump {

// How far a rank's durable records went, now.
v1::RankProgress RankProgressOf(uint32_t rank, const HubCapture& c);

// `f` for one rank, its kernel names resolved through the rank's table;
// nullopt when the rank has no such kernel (none of its records match):
// `unresolved` (if given) keeps the first such error.
std::optional<ArgFilter> ResolvedFilter(const HubCapture& c, const v1::ArgFilter& f,
                                        absl::Status* unresolved);

// Calls `each` for every row of `c` that `q` matches, a page at a time. A
// capture that finishes during the scan (its positions change from arrival
// to manifest order) is scanned again from its index, `restart` first. An
// index that cannot be read (an object store's) ends the scan with its
// error.
absl::Status ScanRows(const HubCapture& c, const ArgFilter& q,
              const std::function<void(const QueryHit&)>& each,
              const std::function<void()>& restart);

class JobQueries {
 public:
  explicit JobQueries(const CaptureHub* hub) : hub_(hub) {}

  // The job's ranks, counters summed, missing and crashed ranks, the first
  // overflow and what does not add up. NotFound for a job no capture names.
  absl::StatusOr<v1::JobSummary> GetJob(const std::string& job) const;
  // Jobs by name, a page at a time (their ranks left out).
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request) const;
  // The filter over the job's ranks, ordered by (step, task_id, rank,
  // stage, arg_index, role); paged by a token naming the page's last arg.
  absl::StatusOr<v1::QueryJobResponse> QueryJob(const v1::QueryJobRequest& request) const;
  // The earliest record holding a NaN or an Inf over every rank, by (step,
  // task_id, rank), with its task's records and kernel names.
  absl::StatusOr<v1::FirstNonfiniteResponse> FirstNonfinite(
      const v1::FirstNonfiniteRequest& request) const;

  // The job as a ranks x steps grid (JobGrid): every rank's rows counted
  // by step from its index or live store, keeping the lowest
  // request.max_steps steps per rank; missing ranks as rows of their own.
  absl::StatusOr<v1::JobGrid> GetJobGrid(const v1::GetJobGridRequest& request) const;

  // Comparisons call `emit` once per rank whose comparison ended, then once
  // with done = true and the first divergence. `emit` returning false (the
  // client went away) or `cancelled` becoming true stops them (Cancelled).
  using Emit = std::function<bool(const v1::CompareProgress&)>;
  absl::Status CompareJobs(const v1::CompareJobsRequest& request, const Emit& emit,
                           const std::atomic<bool>* cancelled = nullptr) const;
  absl::Status CompareRanks(const v1::CompareRanksRequest& request, const Emit& emit,
                            const std::atomic<bool>* cancelled = nullptr) const;

 private:
  const CaptureHub* const hub_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_JOB_QUERIES_H_
