// Project-internal side of the SDK: what sim_run (apps/sim_run/sim_job) asks
// of a SimSession beyond the public options, the process-wide command-line and
// test context the public functions fill, and the session's internals that
// sim_run reports. Not for users (BUILD visibility keeps it in the project).
#ifndef ARGSDUMP_SDK_WIRING_H_
#define ARGSDUMP_SDK_WIRING_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collector/collector.h"
#include "collector/transport.h"
#include "device/dump_config.h"
#include "device/region.h"
#include "device/sim/sim_runtime.h"
#include "format/job.h"
#include "proto/argsdump/v1/record.pb.h"
#include "sdk/argsdump.h"

namespace argsdump {

// What a session reports besides SessionResult (after Finish).
struct SessionReport {
  CollectorStats collected;
  v1::CaptureCounters losses;
  std::vector<std::string> dump_log;  // the INFO lines of dump state changes
  double seconds = 0;                 // Open to Finish
  // Streamed captures: records handed to the service, and those it
  // acknowledged as durable (equal unless the stream failed for good).
  uint64_t sent_records = 0, acked_records = 0;
  // The service lost the capture (its resume was refused: NOT_FOUND) and
  // the records it had not acknowledged went to this local capture instead
  // (empty: it did not); how many, and the one-line account of it.
  std::string kept_locally_dir;
  uint64_t kept_locally_records = 0;
  std::string kept_locally_message;
  // The folder the capture and exception dumps go to (<prefix>/args_dump).
  std::string prefix;
  // The level the dump ran at, from which step on (one entry, and one per
  // change of the dynamic switch).
  std::vector<StepLevel> step_levels;
  // Set when the dump was requested but could not run (an internal
  // failure, such as a region that could not be allocated): why.
  std::string dump_off_reason;
};

// What a session has done so far (SessionWiring::Progress).
struct SessionProgress {
  uint64_t tasks_submitted = 0, tasks_completed = 0;
  uint64_t records = 0, payload_bytes = 0;  // collected so far (0 with the dump off)
};

struct SessionWiring {
  // The configuration, resolved by the caller (sim_run's flags are its API
  // entry and it logs the resolution itself): the session resolves nothing.
  std::optional<DumpConfig> resolved;
  // The capture goes to exactly <output_prefix>/args_dump (no session
  // name, no _2), exception dumps under <output_prefix>/exception_dump.
  std::string output_prefix;
  // output_prefix is a default name (sim_run's outputs/<workload>_<stamp>):
  // the session claims it, or <output_prefix>_2, _3, ... when another run
  // (of this or another process, in the same second) holds it.
  bool claim_output_prefix = false;
  // The job identity, resolved by the caller (sim_run's --job, --rank,
  // --world-size and the environment): the session resolves none.
  std::optional<v1::JobMember> job;
  // The capture's exact name on a service, and the token to send.
  std::string capture_name;
  std::string auth_token;
  // What exception dump folders are named after (default: the session).
  std::string workload;
  Platform platform = Platform::kA2a3Sim;
  // Replace what SessionOptions would make of them.
  std::optional<SimConfig> sim;
  std::optional<DumpRegionConfig> region;
  // The level of the region built for the dynamic switch at level 0.
  int dynamic_level = 2;
  // Under `bazel test`: label the capture with the test's identity.
  bool test_labels = true;
  // The dump's own failures (a service that cannot be reached, a capture
  // that cannot be written) fail Open / Finish instead of being WARNINGs
  // in the result.
  bool strict = false;
  // Print where the capture went when the session finishes.
  bool print_summary = true;
  // Called once in Finish, as soon as the device finished its tasks and
  // before the flush lines are logged (sim_run ends its progress line).
  std::function<void()> device_finished;
  // device_process: called in this (the host) process once the device
  // process was forked and the collector started (sim_run starts its
  // progress line here: no thread may exist before the fork).
  std::function<void()> device_started;

  // The runtime under a session (sim_run submits workloads to it, holding
  // dispatch for a step), and the report of a finished one.
  // Null in the host process of a device_process session (the runtime is
  // the device process's).
  static SimRuntime* Runtime(SimSession& session);
  static const SessionReport& Report(const SimSession& session);
  // The counters so far: from any thread, between Open and the session's
  // destruction.
  static SessionProgress Progress(const SimSession& session);
};

// The dump flags of the command line (ConsumeDumpFlags, or read from
// /proc/self/cmdline when it was never called).
struct CommandLineDump {
  DumpConfigEntry entry;         // level, path, capture_server, verbose
  std::string config_file;       // --dump-config
  std::optional<int> default_level;  // --dump-args-default
  JobRequest job;                    // --job, --rank, --world-size
  // Flags whose value could not be taken: each names the flag, the value
  // and what the setting falls back to (the session prints them as
  // WARNINGs; a bad dump flag never fails a test).
  std::vector<std::string> warnings;
};
CommandLineDump CommandLineDumpFlags();
// Parses the flags out of `args` (argv without argv[0]); what is not a
// dump flag is left in `rest`. A bad value is a warning, never an error.
CommandLineDump ParseDumpFlags(const std::vector<std::string>& args,
                               std::vector<std::string>* rest);
// Tests: forgets what ConsumeDumpFlags set (the next session reads
// /proc/self/cmdline again).
void ResetCommandLineDumpForTest();

// Where `path` is for the person reading a message. Under `bazel test` a
// path below $TEST_UNDECLARED_OUTPUTS_DIR is gone once the test ends: Bazel
// zips that folder into outputs.zip ($TEST_UNDECLARED_OUTPUTS_ZIP when the
// runner exports it, else <that folder>/outputs.zip) and removes the rest.
// Such a path is named as the zip under bazel-testlogs and the folder in
// it, which is what dump_viewer opens, with the zip's absolute path outside
// the sandbox:
//   bazel-testlogs/pkg/t/test.outputs/outputs.zip/Suite.Case/args_dump
//   (in the zip /root/.cache/bazel/.../testlogs/pkg/t/test.outputs/outputs.zip)
// Any other path is returned as it is.
std::string CapturePlace(const std::string& path);

// The running test case ("Suite.Case"), set by //sdk:testing's gtest
// listener; empty outside a test case.
void SetRunningTestCase(const std::string& name);
std::string RunningTestCase();

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_WIRING_H_
