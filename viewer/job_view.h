// dump_viewer --job: a job of many ranks read as one thing. A job is a
// folder of rank captures (<folder>/rank<k>/args_dump, what a job's ranks
// write locally) or, with --server, the captures a capture service holds
// for the job's name. What it answers, over every rank (or --ranks):
//   (alone)              its ranks: records, non-finite records, overflow,
//                        crash, losses; ranks missing below the highest
//   --first-nonfinite    the earliest record holding a NaN or an Inf by
//                        (step, task, rank), with its kernel and its
//                        task's records on that rank
//   --compare-job OTHER  rank k against OTHER's rank k, args joined as
//                        --compare joins them: the first divergence by
//                        (step, task, rank, stage, arg, role)
//   --compare-ranks R    each rank against rank R of the same job
// Exit status as the viewer's: 0; 1 when a comparison found a difference
// (or nothing matched); 2 for bad input or a source that fails.
#ifndef ARGSDUMP_VIEWER_JOB_VIEW_H_
#define ARGSDUMP_VIEWER_JOB_VIEW_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "viewer/viewer_options.h"

namespace argsdump {

// One rank of a job and where its capture is: a local capture folder, or
// its capture's name on the service.
struct JobRankPlace {
  uint32_t rank = 0;
  std::string dir;      // local
  std::string capture;  // remote
};

// The ranks of a local job folder, by rank: its rank<k> subfolders that
// hold an args_dump/ (NotFound naming the folder when none does).
absl::StatusOr<std::vector<JobRankPlace>> LocalJobRanks(const std::string& folder);

int RunJobView(const ViewerOptions& options, std::ostream& out, std::ostream& err);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_JOB_VIEW_H_
