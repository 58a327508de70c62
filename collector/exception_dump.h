// The exception dump (seed 003, "Exception Dump"): when a kernel fails, the
// failing task's inputs, outputs and scalars as they are after the failure,
// and its context, are saved under <root>/exception_dump/ in a folder named
//   exception_<workload>_<func>_<step>_<thread>_<task_id>
// ([scenario]_[workload]_[func]_[step]_[thread]_[task_id]) that holds a
// capture (args_dump.json + args.bin: dump_viewer reads it) and
// context.json (scenario, workload, func name/type/ids, task_id, step,
// thread, error).
#ifndef ARGSDUMP_COLLECTOR_EXCEPTION_DUMP_H_
#define ARGSDUMP_COLLECTOR_EXCEPTION_DUMP_H_

#include <string>

#include "absl/status/statusor.h"
#include "device/sim/sim_runtime.h"

namespace argsdump {

// `s` as a file name: letters, digits, '-' and '.' kept, the rest '_'
// ("unnamed" for an empty one).
std::string SafeFileName(const std::string& s);

// The folder's name for a failed task.
std::string ExceptionDumpName(const std::string& workload, const FailedTask& failed);

// Writes the folder under <root>/exception_dump/; returns its path.
absl::StatusOr<std::string> WriteExceptionDump(const std::string& root,
                                               const std::string& workload,
                                               const FailedTask& failed);

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_EXCEPTION_DUMP_H_
