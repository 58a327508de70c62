// dump_viewer --trace FILE: a capture's or a job's task timeline written as
// the JSON trace Perfetto and chrome://tracing open (format/trace_json.h).
// A capture is one process; a job (--job) is one process per rank, each
// placed on the job-wide clock by its capture's clock. The selection's
// filters pick the records whose tasks become slices.
//
// Records come from the capture's args.index when it has one (its rows carry
// the device thread, so each thread is its own track), otherwise from the
// manifest (one track per rank); a remote capture's from QueryArgs.
#ifndef ARGSDUMP_VIEWER_TRACE_EXPORT_H_
#define ARGSDUMP_VIEWER_TRACE_EXPORT_H_

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "format/trace_json.h"
#include "viewer/viewer_options.h"

namespace argsdump {

// What one rank (or capture) of the trace is read from.
struct TraceSourcePlace {
  std::string label;    // the process's name in the trace
  std::string dir;      // a local capture directory (.../args_dump)
  std::string capture;  // or the capture's name on options.remote.target
};

// The rank's records (those the selection picks), its clock and kernels.
// The source's status (naming the file or the call) on failure.
absl::StatusOr<TraceRank> ReadTraceRank(const ViewerOptions& options,
                                        const TraceSourcePlace& place);

// Writes the trace of `places` (one process each, in order) to
// options.trace and a one-line summary to `out`. Exit status: 0, or 2
// naming the source or the file that could not be written.
int WriteTrace(const ViewerOptions& options, const std::vector<TraceSourcePlace>& places,
               std::ostream& out, std::ostream& err);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_TRACE_EXPORT_H_
