// sim_run: runs a sim workload with the args dump and writes the capture.
//   bazel run //apps/sim_run:sim_run -- --dump-args 2
//   bazel run //apps/sim_run:sim_run -- --workload path/to/workload.json --dump-args 3
//   bazel run //apps/sim_run:sim_run -- --dump-args 2 --capture-server 127.0.0.1:50051
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "apps/sim_run/sim_job.h"
#include "apps/sim_run/planted_fault.h"
#include "apps/sim_run/sim_progress.h"
#include "apps/sim_run/sim_ranks.h"
#include "store/capture_store.h"
#include "device/dump_config.h"
#include "device/sim/kernels.h"
#include "device/workload.h"
#include "format/job.h"
#include "format/names.h"
#include "tools/cli_flags.h"
#include "tools/progress.h"

ABSL_FLAG(std::string, workload, "vector_example",
          "a built-in workload name (see --list-workloads) or a workload .json file");
ABSL_FLAG(std::string, dump_args, "",
          "dump level: 0 off, 1 marked args only, 2 everything, 3 metadata for everything "
          "and payload for marked tensors (a bare --dump-args means 1; not given: "
          "ARGSDUMP_LEVEL, the config file, else 0)");
ABSL_FLAG(std::string, output_prefix, "",
          "where the capture goes (<prefix>/args_dump/); default "
          "outputs/<workload>_<YYYYMMDD_HHMMSS>");
ABSL_FLAG(std::string, platform, "a2a3sim",
          "host transport: a2a3sim (shared region) or a5sim (host shadow + copies)");
ABSL_FLAG(std::string, schedulers, "4", "scheduler (AICPU) threads = recording threads");
ABSL_FLAG(std::string, workers, "4", "worker (AICore) threads");
ABSL_FLAG(std::string, records_per_buffer, "256", "records per metadata buffer");
ABSL_FLAG(std::string, buffers_per_thread, "8", "metadata buffers per recording thread");
ABSL_FLAG(std::string, ready_queue_depth, "8", "ready queue depth per recording thread");
ABSL_FLAG(std::string, arena_bytes, "128MiB",
          "payload arena bytes per recording thread (such as 134217728 or 128MiB)");
ABSL_FLAG(std::string, wait_bound_ms, "30000",
          "how long the device waits for the host before dropping records, in ms or with a "
          "unit (30s)");
ABSL_FLAG(std::string, drain_threads, "1", "collector drain threads");
ABSL_FLAG(std::string, collector_shards, "2", "collector shard threads");
ABSL_FLAG(bool, list_workloads, false, "print the built-in workloads and exit");
ABSL_FLAG(std::string, capture_server, "",
          "host:port of a capture service: stream the capture there instead of writing "
          "<output-prefix>/args_dump (ARGSDUMP_CAPTURE_SERVER, the config file's "
          "\"capture_server\"); one that cannot be reached is a WARNING and the capture is "
          "written locally");
ABSL_FLAG(std::string, capture_connect_timeout_ms, "30000",
          "with a capture service: how long to wait for it at startup before the capture "
          "is written locally instead, in ms or with a unit (30s)");
ABSL_FLAG(std::string, capture_name, "",
          "the capture's name on the capture service (default: the output prefix's last "
          "part, <workload>_<YYYYMMDD_HHMMSS>); one the service refuses is a WARNING and a "
          "name it takes is used, one already taken gets _2, _3, ...");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding the capture service's bearer token");
ABSL_FLAG(std::vector<std::string>, labels, {},
          "key=value labels for the capture on the service, comma separated");
ABSL_FLAG(std::string, dump_config, "",
          "a JSON dump config file (level, path, mode, funcs, block_funcs, steps, ...); "
          "the environment (ARGSDUMP_*) overrides it and the flags override both; with "
          "--steps it is read again between steps, so editing it switches the dump");
ABSL_FLAG(std::string, capture_retry_deadline_ms, "60000",
          "with --capture-server: how long a broken stream is retried (with backoff) through "
          "a service restart before the run gives up, in ms or with a unit (2m); acknowledged "
          "records stay either way");
ABSL_FLAG(std::string, steps, "1", "run the workload this many times (steps) in one process");
ABSL_FLAG(std::string, recover, "",
          "rebuild the manifest of a capture directory (.../args_dump) whose run died: "
          "every record in its journal is kept");
ABSL_FLAG(bool, in_process, false,
          "run the simulated device in this process (by default it runs in a child process "
          "over shared memory, so a kernel that crashes it loses nothing recorded before)");
ABSL_FLAG(bool, keep_journal, false,
          "keep args.journal beside a finished local capture (by default it is removed once "
          "the manifest is in place: its only use is recovering a run that died)");
ABSL_FLAG(bool, dedup, true,
          "store a payload equal to one already in the capture once (its entries share the "
          "bytes in args.bin); --dedup=false writes every payload (the dump config's \"dedup\" "
          "item, ARGSDUMP_DEDUP)");
ABSL_FLAG(bool, dump_verbose, false,
          "the verbose log level: an INFO line per dumped task (its kernels, task id, step and "
          "each arg's device address) as it is dispatched (the dump config's \"verbose\" item, "
          "ARGSDUMP_VERBOSE)");
ABSL_FLAG(bool, snapshot_inputs, false,
          "copy every task's input and inout tensors before dispatch, so that an exception "
          "dump holds them as the kernel received them, at any level (level 0 too); costs a "
          "copy of each input (the dump config's \"snapshot_inputs\" item, "
          "ARGSDUMP_SNAPSHOT_INPUTS)");
ABSL_FLAG(std::string, job, "",
          "the job this run is a rank of (1-64 characters of [A-Za-z0-9._-]): the capture "
          "goes to <output-prefix, default outputs>/<job>/rank<k>/args_dump, or to the "
          "capture service as <job>.rank<k> (default: ARGSDUMP_JOB, a launcher's job id)");
ABSL_FLAG(std::string, rank, "",
          "this run's rank in --job (default: ARGSDUMP_RANK, a launcher's: RANK, "
          "OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID; else 0)");
ABSL_FLAG(std::string, world_size, "",
          "the number of ranks in --job (default: ARGSDUMP_WORLD_SIZE, a launcher's)");
ABSL_FLAG(std::string, ranks, "0",
          "run a job of this many simulated ranks at once, each its own sim_run process "
          "with its own device (--job names it; default <workload>_<YYYYMMDD_HHMMSS>); "
          "every other flag goes to every rank");
ABSL_FLAG(std::vector<std::string>, fault, {},
          "plant a fault for the job tools to find, RANK:STEP:TASK:KIND with KIND nan (a NaN "
          "in the task's first float input), scalar=V (its first scalar is V) or crash "
          "(the task crashes its device process); TASK is the task's index in the workload");
ABSL_FLAG(bool, progress, false,
          "show tasks done / submitted, records, payload bytes and rates on stderr while the "
          "workload runs, a few times a second (default: when stderr is a terminal, once the "
          "run outlasts a moment; --noprogress: never)");

namespace argsdump {
namespace {

CommandLineSpec SimRunSpec() {
  CommandLineSpec spec;
  spec.program = "sim_run";
  spec.synopsis =
      "sim_run: runs a sim workload with the args dump and writes the capture.\n"
      "  sim_run [--workload NAME|FILE.json] [--dump-args N] [--output-prefix DIR] [flags]\n"
      "  sim_run --recover DIR/args_dump\n"
      "Dump settings (--dump-args, --output-prefix, --dump-config, --capture-server,\n"
      "--capture-name, --auth-token-file, --labels, --dedup, ARGSDUMP_*, the config\n"
      "file) never stop a run: a value that cannot be taken is a WARNING naming it and\n"
      "its fallback (an output prefix that holds a capture: <prefix>_2; a service that\n"
      "cannot be reached: a local capture, named).\n"
      "Exit status: 0; 1 when the device hung or a kernel failed (the capture is still\n"
      "written), the capture is incomplete, or the system refused a thread or memory the\n"
      "run needs; 2 for a command line sim_run cannot read (an unknown flag, a value not\n"
      "of its flag's type) or a bad run flag (workload, platform, sizes, steps,\n"
      "--recover); 3 when the device process\n"
      "died (a kernel crashed it or it was killed: the capture, the running tasks'\n"
      "outputs and the crashing task's exception dump are still written); 4 when the\n"
      "capture service lost the capture (deleted while it was down: its resume was\n"
      "refused) and the records it had not acknowledged were kept locally (named).";
  spec.flags_file = __FILE__;
  spec.bare_values = {{"dump_args", "1"}};  // a bare --dump-args means level 1
  // Every number and its range (the one parser: tools/quantity.h).
  spec.quantities = {
      {"schedulers", Quantity::Count(1, 64)},
      {"workers", Quantity::Count(1, 256)},
      {"records_per_buffer", Quantity::Count(1, 1 << 20)},
      {"buffers_per_thread", Quantity::Count(1, 1 << 16)},
      {"ready_queue_depth", Quantity::Count(1, 1 << 16)},
      {"arena_bytes", Quantity::Bytes(64, int64_t{1} << 40)},
      {"wait_bound_ms", Quantity::Milliseconds(1, 7 * kMillisecondsPerDay)},
      {"drain_threads", Quantity::Count(1, 64)},
      {"collector_shards", Quantity::Count(1, 64)},
      {"steps", Quantity::Count(1, 1000000)},
      {"capture_connect_timeout_ms", Quantity::Milliseconds(1, kMillisecondsPerDay)},
      {"capture_retry_deadline_ms",
       Quantity::Milliseconds(0, kMillisecondsPerDay, "no retry")},
      {"ranks", Quantity::Count(0, 4096, "no job launch (one run)")},
  };
  return spec;
}

int Fail(absl::string_view message) {
  std::fprintf(stderr, "sim_run: %s\n", std::string(message).c_str());
  return 2;
}

std::string DefaultPrefix(const std::string& workload) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d_%H%M%S", std::localtime(&now));
  return absl::StrCat("outputs/", workload, "_", stamp);
}

bool IsFile(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

// Under `bazel run`, relative paths mean the user's directory, not runfiles.
std::string FromUserDir(const std::string& path) {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || dir == nullptr) return path;
  return absl::StrCat(dir, "/", path);
}

// --recover DIR. 0: nothing acknowledged was lost; 1: the capture was
// written without what the damage cost (named here and in its manifest);
// 2: nothing could be recovered.
int Recover(const std::string& dir) {
  RecoveryReport report;
  const absl::Status s = CaptureStore::Recover(dir, &report);
  if (!s.ok() && !report.wrote_files) {
    return Fail(absl::StrCat("--recover ", dir, ": ", s.message()));
  }
  if (!report.damage.empty() || report.records_without_payload > 0) {
    std::printf("recovery: %s\n", report.Describe().c_str());
  }
  std::printf("capture: %s/%s\n", dir.c_str(), kManifestName);
  if (!s.ok()) {
    std::fprintf(stderr, "sim_run: --recover %s: entries were lost: %s\n", dir.c_str(),
                 report.Describe().c_str());
    return 1;
  }
  return 0;
}

// Steps, platform and every size: each in its range.
absl::Status SetRunShape(const CommandLine& line, SimJobOptions* o) {
  auto bad = [&](absl::string_view flag, auto&&... what) {
    return absl::InvalidArgumentError(absl::StrCat(line.Spelling(flag), ": ", what...));
  };
  // The numbers were range-checked as they were parsed (spec.quantities).
  auto count = [&](absl::string_view flag) { return static_cast<uint32_t>(line.Quantity(flag)); };
  o->steps = count("steps");
  auto platform = PlatformFromName(absl::GetFlag(FLAGS_platform));
  if (!platform) {
    return bad("platform", "'", absl::GetFlag(FLAGS_platform), "' (expected a2a3sim or a5sim)");
  }
  o->platform = *platform;
  o->sim.scheduler_threads = count("schedulers");
  o->sim.worker_threads = count("workers");
  o->region.records_per_buffer = count("records_per_buffer");
  o->region.buffers_per_thread = count("buffers_per_thread");
  o->region.ready_queue_depth = count("ready_queue_depth");
  o->region.arena_bytes = static_cast<uint64_t>(line.Quantity("arena_bytes"));
  o->region.wait_bound_ms = count("wait_bound_ms");
  o->drain_threads = count("drain_threads");
  o->collector_shards = count("collector_shards");
  return absl::OkStatus();
}

void PrintDumpLogs(const std::vector<DumpLog>& logs) {
  for (const DumpLog& l : logs) std::fprintf(stderr, "%s\n", FormatDumpLog(l).c_str());
}

// The dump flags as the command line's entry. A value that cannot be
// taken is a warning naming the flag and its fallback (a dump setting
// never stops a run); the values that parse are checked with every other
// entry's by the one resolution.
DumpConfigEntry CommandLineEntry(const CommandLine& line, std::vector<std::string>* warnings) {
  DumpConfigEntry e;
  if (line.Given("dump_args")) {
    const std::string v = absl::GetFlag(FLAGS_dump_args);
    int level;
    if (absl::SimpleAtoi(v, &level) && level >= 0 && level <= 3 && !v.empty() &&
        v.find_first_not_of("0123456789") == std::string::npos) {
      e.level = level;
    } else {
      warnings->push_back(absl::StrCat(
          "the command line: ", line.Spelling("dump_args"), ": '", v,
          "' is not a dump level (0 off, 1 marked args, 2 everything, 3 metadata + marked "
          "payloads); the level falls back to the next entry (ARGSDUMP_LEVEL, the config "
          "file) or 0, off"));
    }
  }
  if (line.Given("dedup")) e.dedup = absl::GetFlag(FLAGS_dedup);
  if (line.Given("dump_verbose")) e.verbose = absl::GetFlag(FLAGS_dump_verbose);
  if (line.Given("snapshot_inputs")) e.snapshot_inputs = absl::GetFlag(FLAGS_snapshot_inputs);
  if (!absl::GetFlag(FLAGS_output_prefix).empty()) {
    e.path = FromUserDir(absl::GetFlag(FLAGS_output_prefix));
  }
  if (!absl::GetFlag(FLAGS_capture_server).empty()) {
    e.capture_server = absl::GetFlag(FLAGS_capture_server);
  }
  if (!absl::GetFlag(FLAGS_auth_token_file).empty()) {
    e.auth_token_file = FromUserDir(absl::GetFlag(FLAGS_auth_token_file));
  }
  if (!absl::GetFlag(FLAGS_labels).empty()) {
    auto labels = ParseLabels(absl::StrJoin(absl::GetFlag(FLAGS_labels), ","));
    if (labels.ok()) {
      e.labels = *std::move(labels);
    } else {
      warnings->push_back(absl::StrCat(
          "the command line: ", line.Spelling("labels"), ": ", labels.status().message(),
          " (expected key=value,...); labels fall back to the next entry (ARGSDUMP_LABELS, "
          "the config file) or none"));
    }
  }
  return e;
}

// The first of prefix, prefix_2, prefix_3, ... whose args_dump holds no
// capture (a manifest or a journal).
std::string FreePrefix(const std::string& prefix) {
  auto holds = [](const std::string& p) {
    struct stat st;
    return ::stat(absl::StrCat(p, "/args_dump/", kManifestName).c_str(), &st) == 0 ||
           ::stat(absl::StrCat(p, "/args_dump/", kJournalName).c_str(), &st) == 0;
  };
  for (int k = 1;; ++k) {
    const std::string candidate = k == 1 ? prefix : absl::StrCat(prefix, "_", k);
    if (!holds(candidate) || k >= 100000) return candidate;
  }
}

// A rank's place: <base>/<job>/rank<k>, or <base>/<job>_2/rank<k>, ... when
// a run before left a capture in that rank's folder (the ranks of a job run
// again meet in the same new folder).
std::string RankPrefix(const std::string& base, const v1::JobMember& job) {
  for (int k = 1;; ++k) {
    const std::string prefix = absl::StrCat(base, "/", job.job(), k == 1 ? "" : absl::StrCat("_", k),
                                            "/", JobRankFolder(job.rank()));
    if (FreePrefix(prefix) == prefix || k >= 100000) return prefix;
  }
}

// The dump configuration, by the one resolution the SDK uses too: these
// flags (the command line) > ARGSDUMP_* > --dump-config. Mistakes are
// warnings, never an abort. With a config file and several steps, editing
// the file switches the dump at the next step.
void SetDump(const CommandLine& line, const std::string& workload, SimJobOptions* o) {
  std::vector<DumpLog> logs;
  DumpEntryPoints points;
  points.command_line = CommandLineEntry(line, &points.command_line_warnings);
  points.environment = DumpEnvironment();
  if (!absl::GetFlag(FLAGS_dump_config).empty()) {
    points.config_file = FromUserDir(absl::GetFlag(FLAGS_dump_config));
  }
  DumpResolution resolved = ResolveDumpEntryPoints(points, &logs);
  const DumpConfig& config = resolved.config;
  o->dump_level = config.level;
  o->dump = config;
  o->output_prefix = config.path.empty() ? FromUserDir(DefaultPrefix(workload)) : config.path;
  o->default_prefix = config.path.empty();
  if (o->job) {
    // A rank of a job: <prefix, default outputs>/<job>/rank<k>.
    o->output_prefix = RankPrefix(config.path.empty() ? FromUserDir("outputs") : config.path, *o->job);
    o->default_prefix = false;
  } else if (!o->default_prefix && (config.level > 0 || config.overflow || !points.config_file.empty())) {
    // The user's prefix holds a capture already (from the flag,
    // ARGSDUMP_PATH or the file): a fresh sibling, never over it.
    const std::string free = FreePrefix(o->output_prefix);
    if (free != o->output_prefix) {
      logs.push_back({DumpLog::kWarning,
                      absl::StrCat("path: ", o->output_prefix, "/args_dump holds a capture "
                                   "already; this run's capture goes to ", free,
                                   "/args_dump instead")});
      o->output_prefix = free;
    }
  }
  PrintDumpLogs(logs);
  if (resolved.watcher != nullptr && o->steps > 1) {
    std::shared_ptr<DumpConfigWatcher> watcher = std::move(resolved.watcher);
    o->dynamic = true;
    o->before_step = [watcher](uint32_t step) -> std::optional<DumpConfig> {
      if (step == 0) return std::nullopt;
      std::vector<DumpLog> step_logs;
      std::optional<DumpConfig> next = watcher->Poll(&step_logs);
      PrintDumpLogs(step_logs);
      return next;
    };
  }
}

// What goes with a capture service: the capture's name, how long to wait
// for the service, retries. The service, token and labels are dump
// settings (SetDump).
void SetCaptureService(const CommandLine& line, SimJobOptions* o) {
  o->capture_connect_timeout =
      std::chrono::milliseconds(line.Quantity("capture_connect_timeout_ms"));
  o->capture_retry_deadline =
      std::chrono::milliseconds(line.Quantity("capture_retry_deadline_ms"));
  o->capture_name = absl::GetFlag(FLAGS_capture_name);
}

// The progress line on stderr, by the tools' one rule (tools/progress.h):
// --progress / --noprogress force it, else on a terminal once the run
// outlasts a moment; redrawn in place on a terminal, a line per update
// elsewhere. Null when off.
std::unique_ptr<SimProgressSampler> MakeProgress(const CommandLine& line) {
  std::optional<ProgressOptions> options = ProgressOptionsFor(
      ProgressModeFromFlag(line.Given("progress"), absl::GetFlag(FLAGS_progress)),
      IsTerminal(STDERR_FILENO));
  if (!options) return nullptr;
  options->label = "sim_run";
  const std::chrono::nanoseconds period = options->interval;
  return std::make_unique<SimProgressSampler>(&std::cerr, *std::move(options), period);
}

// The job identity: --job, --rank, --world-size, then the environment
// (format/job.h). A value that cannot be used names its flag or variable.
absl::StatusOr<std::optional<v1::JobMember>> JobIdentity(const CommandLine& line) {
  JobRequest flags;
  flags.source = "flag";
  flags.job = absl::GetFlag(FLAGS_job);
  if (!flags.job.empty()) {
    if (absl::Status s = ValidateJobName(flags.job); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(line.Spelling("job"), ": ", s.message()));
    }
  }
  if (!absl::GetFlag(FLAGS_rank).empty()) {
    absl::StatusOr<uint32_t> r = ParseRank(absl::GetFlag(FLAGS_rank));
    if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat(line.Spelling("rank"), ": ", r.status().message()));
    flags.rank = *r;
  }
  if (!absl::GetFlag(FLAGS_world_size).empty()) {
    absl::StatusOr<uint32_t> w = ParseWorldSize(absl::GetFlag(FLAGS_world_size));
    if (!w.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(line.Spelling("world_size"), ": ", w.status().message()));
    }
    flags.world_size = *w;
  }
  return ResolveJob({flags}, [](const char* name) { return std::getenv(name); });
}

// --ranks N: this process launches the job's ranks and waits for them.
int LaunchJob(const CommandLine& line, const std::string& workload, int argc, char** argv) {
  const uint32_t ranks = static_cast<uint32_t>(line.Quantity("ranks"));
  if (!absl::GetFlag(FLAGS_rank).empty()) {
    return Fail(absl::StrCat(line.Spelling("rank"), ": each rank of --ranks gets its own; "
                             "give one or the other"));
  }
  if (!absl::GetFlag(FLAGS_world_size).empty() &&
      absl::GetFlag(FLAGS_world_size) != absl::StrCat(ranks)) {
    return Fail(absl::StrCat(line.Spelling("world_size"), ": ", absl::GetFlag(FLAGS_world_size),
                             " is not --ranks ", ranks));
  }
  RankLaunch launch;
  launch.ranks = ranks;
  launch.job = absl::GetFlag(FLAGS_job);
  if (launch.job.empty()) {
    // A fresh name: no earlier job under the output folder has it.
    const std::string base = FromUserDir(absl::GetFlag(FLAGS_output_prefix).empty()
                                             ? "outputs" : absl::GetFlag(FLAGS_output_prefix));
    const std::string stamped = DefaultPrefix(workload).substr(std::string("outputs/").size());
    launch.job = stamped;
    struct stat st;
    for (int k = 2; ::stat(absl::StrCat(base, "/", launch.job).c_str(), &st) == 0; ++k) {
      launch.job = absl::StrCat(stamped, "_", k);
    }
  }
  if (absl::Status s = ValidateJobName(launch.job); !s.ok()) {
    return Fail(absl::StrCat(line.Spelling("job"), ": ", s.message()));
  }
  launch.args.assign(argv + 1, argv + argc);
  std::fflush(stdout);
  absl::StatusOr<std::vector<RankExit>> exits = LaunchRanks(launch);
  if (!exits.ok()) {
    std::fprintf(stderr, "sim_run: %s\n", std::string(exits.status().message()).c_str());
    return 1;
  }
  uint32_t failed = 0;
  for (const RankExit& e : *exits) failed += e.exit_status != 0 ? 1 : 0;
  std::printf("job: %s, %u ranks, %u exited 0%s\n", launch.job.c_str(), ranks, ranks - failed,
              failed > 0 ? absl::StrCat(", ", failed, " did not (above)").c_str() : "");
  return JobExitStatus(*exits);
}

int Main(int argc, char** argv) {
  const CommandLine line = ParseMainCommandLine(SimRunSpec(), argc, argv);
  if (!line.positional.empty()) {
    return Fail(absl::StrCat("unexpected argument '", line.positional[0], "'"));
  }
  if (!absl::GetFlag(FLAGS_recover).empty()) {
    return Recover(FromUserDir(absl::GetFlag(FLAGS_recover)));
  }
  if (absl::GetFlag(FLAGS_list_workloads)) {
    std::printf("%s\n", absl::StrJoin(BuiltinWorkloadNames(), "\n").c_str());
    return 0;
  }
  SimJobOptions o;
  if (absl::Status s = SetRunShape(line, &o); !s.ok()) return Fail(s.message());
  const KernelRegistry& kernels = BuiltinKernels();
  const std::string name = absl::GetFlag(FLAGS_workload);
  absl::StatusOr<v1::WorkloadSpec> workload =
      IsFile(name) ? LoadWorkloadFile(FromUserDir(name), kernels) : BuiltinWorkload(name);
  if (!workload.ok()) return Fail(workload.status().message());
  for (const std::string& spec : absl::GetFlag(FLAGS_fault)) {
    absl::StatusOr<PlantedFault> fault = ParsePlantedFault(spec);
    if (!fault.ok()) return Fail(absl::StrCat(line.Spelling("fault"), ": ", fault.status().message()));
    if (o.fault) return Fail(absl::StrCat(line.Spelling("fault"), ": one fault per run"));
    if (absl::StatusOr<v1::WorkloadSpec> w = PlantFault(*workload, *fault); !w.ok()) {
      return Fail(absl::StrCat(line.Spelling("fault"), ": ", w.status().message()));
    }
    o.fault = *fault;
  }
  if (line.Quantity("ranks") > 0) return LaunchJob(line, workload->name(), argc, argv);
  absl::StatusOr<std::optional<v1::JobMember>> job = JobIdentity(line);
  if (!job.ok()) return Fail(job.status().message());
  o.job = *job;
  SetDump(line, workload->name(), &o);
  SetCaptureService(line, &o);
  const std::unique_ptr<SimProgressSampler> progress = MakeProgress(line);
  o.progress = progress.get();
  o.device_process = !absl::GetFlag(FLAGS_in_process);
  o.keep_journal = absl::GetFlag(FLAGS_keep_journal);
  auto result = RunSimJob(*workload, kernels, o);
  if (!result.ok() && result.status().code() == absl::StatusCode::kResourceExhausted) {
    // The system refused what the run needs (a thread, memory): not a bad flag.
    std::fprintf(stderr, "sim_run: %s\n", result.status().ToString().c_str());
    return 1;
  }
  if (!result.ok()) return Fail(result.status().ToString());
  std::printf("%s", SummarizeSimJob(*result, o).c_str());
  if (result->device_crashed) return 3;
  if (!result->kept_locally_dir.empty()) return 4;
  return result->run_status.ok() && result->dump_status.ok() ? 0 : 1;
}

}  // namespace
}  // namespace argsdump

int main(int argc, char** argv) { return argsdump::Main(argc, argv); }
