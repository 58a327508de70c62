// The host's side of a device process that died: what the flight
// table says was running, the capture's device_crash, the records a task
// left in the capture, and the exception dump of the task that crashed.
// Project-internal (the session uses it; BUILD visibility keeps it there).
#ifndef ARGSDUMP_SDK_DEVICE_CRASH_H_
#define ARGSDUMP_SDK_DEVICE_CRASH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/grpc_sink.h"
#include "device/sim/device_memory.h"
#include "device/sim/flight.h"
#include "device/sim/kernel.h"
#include "format/arg_filter.h"
#include "proto/argsdump/v1/record.pb.h"
#include "sdk/device_process.h"

namespace argsdump {

struct DeviceCrashAnalysis {
  v1::DeviceCrash crash;  // for the capture (crash.description: one line)
  // Every task in flight when it died (dispatched, not completed).
  std::vector<std::unique_ptr<FlightTask>> in_flight;
  // The exception dumps to write: the task whose kernel raised the signal,
  // else every task whose kernel was executing (an _exit or a SIGKILL does
  // not say which one). Indexes into crash.executing.
  std::vector<int> dumps;
  uint64_t tasks_submitted = 0, tasks_completed = 0;
};

// Reads the flight table of a device process that ended as `exit` says.
DeviceCrashAnalysis AnalyzeDeviceCrash(const DeviceExit& exit, const FlightTable& flight,
                                       const DeviceMemory& memory,
                                       const KernelRegistry& kernels);

// The in-flight task of `executing` (its slot), or null.
const FlightTask* ExecutingTask(const DeviceCrashAnalysis& a, const v1::CrashedTask& executing);

struct TaskRecord {
  v1::ArgRecord record;
  std::string payload;
};

// The records `filter` selects in a finished local capture (its
// args.index and args.bin), in manifest order.
absl::StatusOr<std::vector<TaskRecord>> ReadLocalRecords(const std::string& dump_dir,
                                                         const ArgFilter& filter);
// Those of `task_id` at `stage`.
absl::StatusOr<std::vector<TaskRecord>> ReadLocalTaskRecords(const std::string& dump_dir,
                                                             uint64_t task_id, v1::Stage stage);
// The same from a capture service (QueryArgs + ReadPayload).
absl::StatusOr<std::vector<TaskRecord>> ReadRemoteTaskRecords(const std::string& server,
                                                              const std::string& capture,
                                                              const std::string& auth_token,
                                                              uint64_t task_id, v1::Stage stage);

// The folder's name: crash_<workload>_<func>_<func type>_<step>_<thread>_<task_id>,
// the exception dump's naming with "crash" as its scenario.
std::string CrashDumpName(const std::string& workload, const v1::CrashedTask& task);

// Writes <root>/exception_dump/<CrashDumpName>/: a capture holding the
// task's records as captured before dispatch (`before`), then every tensor
// as it is in device memory after the crash (after_completion, flagged
// in-flight snapshot) and its scalars; and context.json (scenario "crash",
// the signal, fault address, task, kernels, step, threads, the capture).
absl::StatusOr<std::string> WriteCrashDump(const std::string& root, const std::string& workload,
                                           const DeviceCrashAnalysis& a,
                                           const v1::CrashedTask& task,
                                           const std::vector<TaskRecord>& before,
                                           const std::string& capture);

// Streams the capture of an exception dump folder (WriteExceptionDump's or
// WriteCrashDump's: args.index, args.bin) to a capture service as a
// capture of its own: `sink` names the service and the capture and carries
// its labels; `device_crash`, when given, goes in as the capture's. Every
// record goes as the folder holds it (payloads laid out again in order).
absl::Status UploadExceptionDump(const std::string& dir, GrpcSinkOptions sink,
                                 const v1::DeviceCrash* device_crash);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_DEVICE_CRASH_H_
