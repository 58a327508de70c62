// The exception dump: when a kernel fails, the failing task's inputs,
// outputs and scalars as they are after the failure (after_completion),
// with DumpConfig::snapshot_inputs its input and inout tensors as they were
// at dispatch too (before_dispatch), and its context,
// are saved under <root>/exception_dump/ in a folder named
//   [scenario]_[workload]_[func]_[func type]_[step]_[thread]_[task_id]
// e.g. exception_vector_example_add_elementwise_0_2_0x0000000100000003
// (each name part through SafeFileName; a kernel registered without a type
// is "untyped"), that holds a capture (args_dump.json + args.bin:
// dump_viewer reads it) and context.json (scenario, workload, func
// name/type/ids, task_id, step, thread, error).
#ifndef ARGSDUMP_SDK_EXCEPTION_DUMP_H_
#define ARGSDUMP_SDK_EXCEPTION_DUMP_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "device/sim/sim_runtime.h"
#include "store/capture_store.h"

namespace argsdump {

// `s` as a file name: letters, digits, '-' and '.' kept, the rest '_'
// ("unnamed" for an empty one).
std::string SafeFileName(const std::string& s);

// The folder's name for a task of `workload` that failed in `scenario`:
// "exception" (the kernel returned an error or threw: what
// WriteExceptionDump writes) or "crash" (the kernel took the device process
// down).
std::string ExceptionDumpName(const std::string& scenario, const std::string& workload,
                              const FailedTask& failed);
// The same for the "exception" scenario.
std::string ExceptionDumpName(const std::string& workload, const FailedTask& failed);

// What every record of a dumped task shares.
struct TaskRecordContext {
  uint64_t task_id = 0;
  std::vector<uint32_t> func_ids;  // sorted
  uint32_t thread = 0;             // the scheduler thread that dispatched it
  uint32_t step = 0;
};

// Appends `task` as it is now to `store`: every tensor view's elements
// (after_completion; flagged in-flight snapshot when `in_flight`), then its
// scalars (before_dispatch) but those in `skip_scalars`; payloads at
// *bin_offset on (advanced).
absl::Status AppendTaskAsItIs(const DumpTask& task, const TaskRecordContext& context,
                              bool in_flight, const std::set<uint32_t>* skip_scalars,
                              uint64_t* bin_offset, CaptureStore* store);

// Appends `inputs` (a task's tensors as dispatched) to `store` as
// before_dispatch records, but those whose arg_index is in `skip`;
// payloads at *bin_offset on (advanced). Returns how many it appended.
absl::StatusOr<uint32_t> AppendInputsAsDispatched(const std::vector<DispatchedInput>& inputs,
                                                  const TaskRecordContext& context,
                                                  const std::set<uint32_t>* skip,
                                                  uint64_t* bin_offset, CaptureStore* store);

// Writes the folder under <root>/exception_dump/; returns its path.
absl::StatusOr<std::string> WriteExceptionDump(const std::string& root,
                                               const std::string& workload,
                                               const FailedTask& failed);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_EXCEPTION_DUMP_H_
