// How the simulated device process died (v1::DeviceCrash): the bounds every
// reader of an untrusted one checks (the store, the ingest stream, the gRPC
// sink), and its one-line summary for people (the viewer;
// the host's crash report may use it too).
#ifndef ARGSDUMP_FORMAT_DEVICE_CRASH_H_
#define ARGSDUMP_FORMAT_DEVICE_CRASH_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

// The bounds of a DeviceCrash: entries of `executing`, bytes of each string,
// func_ids per task (kMaxRecordFuncIds, as a record's), the serialized
// whole (it travels in one IngestFinish and is kept in the journal's and
// args.index's capture header).
inline constexpr int kMaxCrashedTasks = 4096;
inline constexpr size_t kMaxCrashTextBytes = 4096;
inline constexpr int kMaxCrashedTaskFuncIds = 3;
inline constexpr size_t kMaxDeviceCrashBytes = 1 << 20;

// InvalidArgument naming the field ("device_crash.executing[3].func: 5000
// bytes, at most 4096") for a signal outside 0..127, a signal name without
// a signal, more than one crashing task, or anything over the bounds.
absl::Status CheckDeviceCrash(const v1::DeviceCrash& crash);

// A fault address as the manifest spells it: "0x" and lowercase hex
// digits, no leading zeros ("0x0", "0x7f12ab340000"); read back with
// ParseTaskIdHex (format/names.h).
std::string FaultAddressHex(uint64_t address);

// The task whose kernel raised the signal; null when none is marked.
const v1::CrashedTask* CrashingTask(const v1::DeviceCrash& crash);

// One line: how it died, where, and what was running:
//   SIGSEGV at 0x0 (task 0x0000000100000003, func crash_segv, worker 2,
//   thread 1, step 0); 3 tasks in flight
//   exit status 3 (task ..., ...); 1 task in flight
//   SIGKILL; 2 tasks in flight, 2 executing (task ..., ...; task ..., ...)
// Without a crashing task, the executing tasks (the first 4) are named.
std::string DescribeDeviceCrash(const v1::DeviceCrash& crash);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_DEVICE_CRASH_H_
