// The local capture pipeline, device threads -> collector -> CaptureStore ->
// files, next to the limit measured in the same run: a raw sequential write
// of the same bytes, in the same chunk sizes, to the same disk.
//   bazel run -c opt //apps/sim_run:pipeline_benchmark
// BM_PipelineMetadata  records/s of metadata-only records (scalars)
// BM_PipelinePayload   payload bytes/s of 64 KiB tensors (never equal: stamped
//                      per task, so that none is shared)
// BM_RawWrite          write() of the same payload sizes to one file
// BM_PayloadRatios     pipeline / raw write and pipeline / two-copy bound,
//                      paired per iteration (the numbers the goal is in)
// BM_DeviceProcessRatios  the same pipelines with the device threads in a
//                      forked process over the shared region,
//                      paired per iteration with the in-process run
// BM_DedupRatios       sharing equal payloads on vs off, paired per iteration
// BM_NonfiniteRatios   the collector's NaN/Inf look at each payload on vs off,
//                      paired per iteration
// BM_SimJob*           a whole sim workload run at a level (for reference)
#include <fcntl.h>
#include <sys/resource.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "collector/collector.h"
#include "collector/local_sink.h"
#include "apps/sim_run/sim_job.h"
#include "device/recorder.h"
#include "format/element_stats.h"
#include "device/sim/kernels.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

std::string Scratch(const std::string& name) { return ProcessTempPath("argsdump_bench_" + name); }

constexpr uint64_t kArenaBytes = 16 << 20;  // per device thread

// CPU seconds (user + system) so far of this process and of the children
// it waited for (a forked device).
double ProcessCpuSeconds() {
  auto seconds = [](int who) {
    struct rusage u;
    ::getrusage(who, &u);
    auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
    return s(u.ru_utime) + s(u.ru_stime);
  };
  return seconds(RUSAGE_SELF) + seconds(RUSAGE_CHILDREN);
}

// Minor page faults of this process and its waited-for children so far.
uint64_t MinorFaults() {
  struct rusage self, children;
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  return self.ru_minflt + children.ru_minflt;
}

struct PipelineRun {
  double streaming_seconds = 0;  // Start .. Stop + Reconcile
  double export_seconds = 0;     // Export (sort + manifest)
  double streaming_cpu = 0;      // CPU seconds of all threads in each phase
  double export_cpu = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t gate_waits = 0;
  uint64_t arena_waits = 0;
  uint64_t minor_faults = 0;
  bool ok = false;
};

constexpr uint32_t kDeviceThreads = 2;

// kDeviceThreads device threads each record `per_thread` tasks of `task`
// into a fresh capture directory (removed and synced afterwards, untimed).
// `device_process`: the device threads run in a child forked before the
// collector starts (the region is shared memory), as sim_run runs them.
// `unique` (the default): each device thread records its tensors from a
// copy of its own, stamped with the task's number every 4 KiB before the
// task is recorded, so that no two payloads are equal (data that never
// repeats; with a constant tensor the store would share them all);
// otherwise every task records the same bytes. `dedup`: the store shares
// equal payloads (the default).
struct PipelineKnobs {
  bool device_process = false;
  bool unique = true;
  bool dedup = true;
  bool flag_nonfinite = true;  // CollectorOptions::flag_nonfinite
};

PipelineRun PipelineOnce(const DumpTask& task, uint64_t records_per_task, abi::DumpLevel level,
                         uint64_t per_thread, PipelineKnobs knobs = {}) {
  const bool device_process = knobs.device_process;
  PipelineRun run;
  const std::string dir = Scratch("pipeline");
  RemoveTreeAndSync(dir);
  CollectorOptions collector_options;
  collector_options.flag_nonfinite = knobs.flag_nonfinite;
  Collector collector(collector_options);
  DumpRegionConfig rc;
  rc.level = level;
  rc.num_threads = kDeviceThreads;
  rc.arena_bytes = kArenaBytes;
  const DumpRegion* region = *collector.Initialize(rc);
  v1::CaptureInfo info;
  info.set_name("bench");
  info.set_level(static_cast<v1::DumpLevel>(level));
  LocalSinkOptions sink_options;
  sink_options.payload_dedup = knobs.dedup;
  auto sink = *LocalSink::Create(dir + "/args_dump", info, sink_options);
  DumpRecorder recorder(*region);
  const uint64_t f0 = MinorFaults();
  const double c0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto run_device = [&] {
    std::vector<std::thread> device;
    for (uint32_t t = 0; t < kDeviceThreads; ++t) {
      device.emplace_back([&, t] {
        ::pthread_setname_np(::pthread_self(), "ad-device");
        DumpTask mine = task;
        std::vector<DumpTensorArg> tensors(task.tensors, task.tensors + task.tensor_count);
        std::vector<std::vector<uint8_t>> own;
        if (knobs.unique) {
          for (DumpTensorArg& a : tensors) {
            const auto* from = static_cast<const uint8_t*>(a.view.data);
            own.emplace_back(from, from + a.view.shape[0] * 4);
            a.view.data = own.back().data();
          }
          mine.tensors = tensors.data();
        }
        for (uint64_t i = 0; i < per_thread; ++i) {
          mine.task_id = (uint64_t{t} << 40) | i;
          for (std::vector<uint8_t>& bytes : own) {
            for (size_t at = 0; at + 8 <= bytes.size(); at += 4096) {
              std::memcpy(bytes.data() + at, &mine.task_id, 8);
            }
          }
          recorder.thread(t).RecordTask(mine, abi::Stage::kBeforeDispatch);
        }
        recorder.thread(t).Flush();
      });
    }
    for (auto& d : device) d.join();
  };
  pid_t child = -1;
  if (device_process) {
    child = ::fork();  // no thread runs yet: the collector starts below
    if (child < 0) std::abort();
    if (child == 0) {
      run_device();
      ::_exit(0);
    }
  }
  if (!collector.Start(sink.get()).ok()) std::abort();
  if (device_process) {
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::abort();
    }
  } else {
    run_device();
  }
  run.ok = collector.Stop().ok() && collector.Reconcile().ok();
  const auto t1 = std::chrono::steady_clock::now();
  const double c1 = ProcessCpuSeconds();
  run.minor_faults = MinorFaults() - f0;
  run.ok = collector.Export().ok() && run.ok;
  const auto t2 = std::chrono::steady_clock::now();
  const double c2 = ProcessCpuSeconds();
  run.streaming_cpu = c1 - c0;
  run.export_cpu = c2 - c1;
  run.streaming_seconds = std::chrono::duration<double>(t1 - t0).count();
  run.export_seconds = std::chrono::duration<double>(t2 - t1).count();
  run.records = collector.stats().records;
  run.bytes = collector.stats().payload_bytes;
  run.gate_waits = collector.losses().gate_waits();
  run.arena_waits = collector.losses().arena_waits();
  run.ok = run.ok && run.records == kDeviceThreads * per_thread * records_per_task;
  collector.Finalize();
  RemoveTreeAndSync(dir);
  return run;
}

void RunPipeline(benchmark::State& state, const DumpTask& task, uint64_t records_per_task,
                 abi::DumpLevel level) {
  const uint64_t per_thread = state.range(0);
  uint64_t records = 0, bytes = 0, gate_waits = 0, arena_waits = 0;
  double streaming_seconds = 0, export_seconds = 0, seconds = 0, cpu = 0, export_cpu = 0;
  for (auto _ : state) {
    const PipelineRun run = PipelineOnce(task, records_per_task, level, per_thread);
    if (!run.ok) state.SkipWithError("pipeline failed or lost records");
    state.SetIterationTime(run.streaming_seconds + run.export_seconds);
    seconds += run.streaming_seconds + run.export_seconds;
    streaming_seconds += run.streaming_seconds;
    export_seconds += run.export_seconds;
    cpu += run.streaming_cpu + run.export_cpu;
    export_cpu += run.export_cpu;
    records += run.records;
    bytes += run.bytes;
    gate_waits += run.gate_waits;
    arena_waits += run.arena_waits;
  }
  state.SetItemsProcessed(records);
  // The two phases: records made durable while the device runs, and the
  // export (sort + manifest) after it stopped.
  state.counters["streaming_per_s"] = benchmark::Counter(records / streaming_seconds);
  state.counters["export_s"] = benchmark::Counter(export_seconds, benchmark::Counter::kAvgIterations);
  // CPU of every thread (device included) per record: what two cores bound.
  state.counters["cpu_us_per_rec"] = benchmark::Counter(cpu * 1e6 / records);
  state.counters["export_cpu_us_per_rec"] = benchmark::Counter(export_cpu * 1e6 / records);
  // Device waits per run: how often the host was the bottleneck.
  state.counters["gate_waits"] = benchmark::Counter(gate_waits, benchmark::Counter::kAvgIterations);
  state.counters["arena_waits"] = benchmark::Counter(arena_waits, benchmark::Counter::kAvgIterations);
  state.SetBytesProcessed(bytes);
}

// 16 int32 scalars per task: metadata-only records.
struct MetadataTask {
  std::vector<DumpScalarArg> scalars = std::vector<DumpScalarArg>(16);
  DumpTask task;
  MetadataTask() {
    for (uint32_t i = 0; i < scalars.size(); ++i) {
      scalars[i].dtype = DataType::kInt32;
      scalars[i].bits = i;
      scalars[i].arg_index = i;
    }
    task.func_count = 1;
    task.scalars = scalars.data();
    task.scalar_count = static_cast<uint32_t>(scalars.size());
  }
  MetadataTask(const MetadataTask&) = delete;
};

void BM_PipelineMetadata(benchmark::State& state) {
  const MetadataTask metadata;
  RunPipeline(state, metadata.task, metadata.scalars.size(), abi::DumpLevel::kFull);
}
BENCHMARK(BM_PipelineMetadata)->Arg(1024)->Arg(32768)->Unit(benchmark::kMillisecond)->UseManualTime();

constexpr uint32_t kPayload = 64 << 10;

// One contiguous float32 tensor of kPayload bytes per task, viewing `data`.
struct PayloadTask {
  std::vector<uint8_t> data = std::vector<uint8_t>(kPayload, 0x3C);
  DumpTensorArg arg;
  DumpTask task;
  PayloadTask() {
    arg.view.dtype = DataType::kFloat32;
    arg.view.ndims = 1;
    arg.view.shape[0] = kPayload / 4;
    arg.view.strides[0] = 1;
    arg.view.data = data.data();
    task.func_count = 1;
    task.tensors = &arg;
    task.tensor_count = 1;
  }
  PayloadTask(const PayloadTask&) = delete;
};

void BM_PipelinePayload(benchmark::State& state) {
  const PayloadTask payload;
  RunPipeline(state, payload.task, 1, abi::DumpLevel::kFull);
}
BENCHMARK(BM_PipelinePayload)->Arg(64)->Arg(4096)->Unit(benchmark::kMillisecond)->UseManualTime();

// The limit for the payload case: the same bytes, in the same chunk size,
// written sequentially to one file in the same place (no fsync, like the
// store: durable against a process crash once write() returned). The chunks
// are read from a buffer as large as the pipeline's two arenas, so the source
// is no more cache-resident than the arena bytes the pipeline writes.
// With `device_copy`, another thread meanwhile copies the same bytes between
// two such buffers, as the simulated device's snapshots do: the bound for a
// pipeline whose device shares this machine's cores and memory (two copies
// of every byte instead of one). Returns seconds until both are done.
double RawWriteOnce(uint64_t chunks, bool device_copy) {
  static std::vector<char> source(2 * kArenaBytes, 0x3C);
  static std::vector<char> device_from(2 * kArenaBytes, 0x3D);
  static std::vector<char> device_to(2 * kArenaBytes, 0x3E);
  const std::string dir = Scratch("raw");
  RemoveTreeAndSync(dir);
  if (std::system(("mkdir -p '" + dir + "'").c_str()) != 0) std::abort();
  const auto t0 = std::chrono::steady_clock::now();
  std::thread copier;
  if (device_copy) {
    copier = std::thread([chunks] {
      for (uint64_t i = 0; i < chunks; ++i) {
        const size_t at = (i * kPayload) % device_from.size();
        std::memcpy(device_to.data() + at, device_from.data() + at, kPayload);
      }
      benchmark::DoNotOptimize(device_to.data());
    });
  }
  const int fd = ::open((dir + "/raw.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (uint64_t i = 0; i < chunks; ++i) {
    const char* chunk = source.data() + (i * kPayload) % source.size();
    if (::write(fd, chunk, kPayload) != static_cast<ssize_t>(kPayload)) std::abort();
  }
  ::close(fd);
  if (copier.joinable()) copier.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RemoveTreeAndSync(dir);
  return seconds;
}

void BM_RawWrite(benchmark::State& state) {
  const uint64_t chunks = kDeviceThreads * state.range(0);
  for (auto _ : state) state.SetIterationTime(RawWriteOnce(chunks, false));
  state.SetBytesProcessed(state.iterations() * chunks * kPayload);
}
BENCHMARK(BM_RawWrite)->Arg(64)->Arg(4096)->Unit(benchmark::kMillisecond)->UseManualTime();

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

// The ratios the payload goal is stated in, measured in pairs: each
// iteration runs the raw write, the raw write with a concurrent device copy,
// and the pipeline, back to back on the same bytes, so that the machine's
// slow spells (page-cache writes here vary 10x between runs) land on all
// three. Reports the median of the per-iteration ratios.
void BM_PayloadRatios(benchmark::State& state) {
  const uint64_t per_thread = state.range(0);
  const uint64_t chunks = kDeviceThreads * per_thread;
  const PayloadTask payload;
  std::vector<double> to_raw, to_bound, bound_to_raw;
  for (auto _ : state) {
    const double raw = RawWriteOnce(chunks, false);
    const double bound = RawWriteOnce(chunks, true);
    const PipelineRun run = PipelineOnce(payload.task, 1, abi::DumpLevel::kFull, per_thread);
    if (!run.ok) state.SkipWithError("pipeline failed or lost records");
    const double pipeline = run.streaming_seconds + run.export_seconds;
    state.SetIterationTime(pipeline);
    to_raw.push_back(raw / pipeline);
    to_bound.push_back(bound / pipeline);
    bound_to_raw.push_back(raw / bound);
  }
  state.SetBytesProcessed(state.iterations() * chunks * kPayload);
  state.counters["pipeline_to_raw"] = Median(to_raw);
  state.counters["pipeline_to_bound"] = Median(to_bound);
  state.counters["bound_to_raw"] = Median(bound_to_raw);
}
BENCHMARK(BM_PayloadRatios)->Arg(64)->Arg(4096)->Iterations(7)->Unit(benchmark::kMillisecond)->UseManualTime();

// The cost of sharing equal payloads: the payload pipeline with
// the store's dedup on vs off, paired per iteration (alternating which
// runs first), on data that never repeats (every payload fingerprinted and
// remembered, none shared: the goal is >= 0.95x) and, for reference, on
// data that always repeats (every payload after the first shared).
void BM_DedupRatios(benchmark::State& state) {
  const uint64_t per_thread = state.range(0);
  const PayloadTask payload;
  std::vector<double> unique_ratio, repeating_ratio;
  uint64_t n = 0;
  for (auto _ : state) {
    double seconds[2][2];  // [unique][dedup]
    for (int unique = 1; unique >= 0; --unique) {
      for (int k = 0; k < 2; ++k) {
        const bool dedup = (k + n) % 2 == 0;
        PipelineKnobs knobs;
        knobs.unique = unique == 1;
        knobs.dedup = dedup;
        const PipelineRun run = PipelineOnce(payload.task, 1, abi::DumpLevel::kFull, per_thread, knobs);
        if (!run.ok) state.SkipWithError("pipeline failed or lost records");
        seconds[unique][dedup] = run.streaming_seconds + run.export_seconds;
      }
    }
    ++n;
    state.SetIterationTime(seconds[1][1]);
    unique_ratio.push_back(seconds[1][0] / seconds[1][1]);
    repeating_ratio.push_back(seconds[0][0] / seconds[0][1]);
  }
  state.SetBytesProcessed(state.iterations() * kDeviceThreads * per_thread * kPayload);
  state.counters["on_to_off_unique"] = Median(unique_ratio);
  state.counters["on_to_off_repeating"] = Median(repeating_ratio);
}
BENCHMARK(BM_DedupRatios)->Arg(64)->Arg(4096)->Iterations(7)->Unit(benchmark::kMillisecond)->UseManualTime();

// What flagging non-finite payloads costs: the payload pipeline with the
// collector's look at every payload on vs off (the records' nonfinite
// flag, what ArgFilter.has_nonfinite needs without stats), paired per
// iteration, alternating which runs first. on_to_off: the median ratio of
// the on run's time to the off run's (the goal: below 1.05).
void BM_NonfiniteRatios(benchmark::State& state) {
  const uint64_t per_thread = state.range(0);
  const PayloadTask payload;
  std::vector<double> ratio;
  uint64_t n = 0;
  for (auto _ : state) {
    double seconds[2];
    for (int k = 0; k < 2; ++k) {
      const bool on = (k + n) % 2 == 0;
      PipelineKnobs knobs;
      knobs.flag_nonfinite = on;
      const PipelineRun run = PipelineOnce(payload.task, 1, abi::DumpLevel::kFull, per_thread, knobs);
      if (!run.ok) state.SkipWithError("pipeline failed or lost records");
      seconds[on] = run.streaming_seconds + run.export_seconds;
    }
    ++n;
    state.SetIterationTime(seconds[1]);
    ratio.push_back(seconds[1] / seconds[0]);
  }
  state.SetBytesProcessed(state.iterations() * kDeviceThreads * per_thread * kPayload);
  state.counters["on_to_off"] = Median(ratio);
}
BENCHMARK(BM_NonfiniteRatios)->Arg(64)->Arg(4096)->Iterations(9)->Unit(benchmark::kMillisecond)->UseManualTime();

// The device in its own process: the same pipeline with the
// device threads forked off over the shared region, paired per iteration
// with the in-process run (alternating which goes first). Each run is a
// fresh process (this binary, --pipeline_run=...), as sim_run is: a fork
// from a process whose heap grew over earlier runs would pay copy-on-write
// faults (and TLB shootdowns) for every page of it the collector writes
// later, which is the benchmark's history, not the device process's cost.
// Reports the median of isolated / in-process throughput: records/s for
// the metadata case (arg 0 = 0: 16 scalars a task), payload bytes/s for the
// payload case (arg 0 = 1: one 64 KiB tensor a task). Goal >= 0.95.
PipelineRun PipelineInFreshProcess(bool payload_case, uint64_t per_thread, bool isolated) {
  PipelineRun run;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return run;
  self[n] = 0;
  const std::string out = Scratch("fresh_run.txt");
  const std::string command =
      absl::StrCat("'", self, "' --pipeline_run=", payload_case ? 1 : 0, ",", per_thread, ",",
                   isolated ? 1 : 0, " > '", out, "'");
  if (std::system(command.c_str()) != 0) return run;
  std::FILE* f = std::fopen(out.c_str(), "r");
  if (f == nullptr) return run;
  int ok = 0;
  unsigned long long records = 0, bytes = 0, faults = 0;
  if (std::fscanf(f, "%d %lf %lf %lf %lf %llu %llu %llu", &ok, &run.streaming_seconds,
                  &run.export_seconds, &run.streaming_cpu, &run.export_cpu, &records, &bytes,
                  &faults) == 8) {
    run.ok = ok != 0;
    run.records = records;
    run.bytes = bytes;
    run.minor_faults = faults;
  }
  std::fclose(f);
  std::remove(out.c_str());
  return run;
}

struct PipelineCase {
  MetadataTask metadata;
  PayloadTask payload;
};

// --pipeline_run=<payload 0|1>,<per_thread>,<isolated 0|1>: one run, its
// numbers on stdout.
int PipelineRunMain(const char* spec) {
  int payload_case = 0, isolated = 0;
  unsigned long long per_thread = 0;
  if (std::sscanf(spec, "%d,%llu,%d", &payload_case, &per_thread, &isolated) != 3) return 2;
  const PipelineCase c;
  PipelineKnobs knobs;
  knobs.device_process = isolated != 0;
  const PipelineRun run = PipelineOnce(payload_case ? c.payload.task : c.metadata.task,
                                       payload_case ? 1 : c.metadata.scalars.size(),
                                       abi::DumpLevel::kFull, per_thread, knobs);
  std::printf("%d %.9f %.9f %.9f %.9f %llu %llu %llu\n", run.ok ? 1 : 0, run.streaming_seconds,
              run.export_seconds, run.streaming_cpu, run.export_cpu,
              static_cast<unsigned long long>(run.records),
              static_cast<unsigned long long>(run.bytes),
              static_cast<unsigned long long>(run.minor_faults));
  return 0;
}

// arg 2 = 0: both runs in this benchmark process instead (the fork then
// comes from a grown heap: what a test process that forks late pays).
void BM_DeviceProcessRatios(benchmark::State& state) {
  const bool payload_case = state.range(0) == 1;
  const uint64_t per_thread = state.range(1);
  const bool fresh = state.range(2) == 1;
  const PipelineCase c;
  auto run = [&](bool isolated) {
    if (fresh) return PipelineInFreshProcess(payload_case, per_thread, isolated);
    PipelineKnobs knobs;
    knobs.device_process = isolated;
      return PipelineOnce(payload_case ? c.payload.task : c.metadata.task,
                        payload_case ? 1 : c.metadata.scalars.size(), abi::DumpLevel::kFull, per_thread,
                        knobs);
  };
  std::vector<double> ratios;
  double in_s = 0, out_s = 0, in_faults = 0, out_faults = 0, in_cpu = 0, out_cpu = 0;
  uint64_t n = 0;
  for (auto _ : state) {
    PipelineRun in, out;
    if (n++ % 2 == 0) {
      in = run(false);
      out = run(true);
    } else {
      out = run(true);
      in = run(false);
    }
    if (!in.ok || !out.ok) state.SkipWithError("pipeline failed or lost records");
    const double ti = in.streaming_seconds + in.export_seconds;
    const double to = out.streaming_seconds + out.export_seconds;
    state.SetIterationTime(to);
    in_s += ti;
    out_s += to;
    in_faults += in.minor_faults;
    out_faults += out.minor_faults;
    in_cpu += in.streaming_cpu + in.export_cpu;
    out_cpu += out.streaming_cpu + out.export_cpu;
    ratios.push_back(ti / to);  // throughput ratio: the same work in both
  }
  const uint64_t work = kDeviceThreads * per_thread * (payload_case ? kPayload : 16);
  state.counters["isolated_to_in_process"] = Median(ratios);
  state.counters[payload_case ? "in_process_MBps" : "in_process_rec_per_s"] =
      work * state.iterations() / in_s / (payload_case ? 1e6 : 1.0);
  state.counters[payload_case ? "isolated_MBps" : "isolated_rec_per_s"] =
      work * state.iterations() / out_s / (payload_case ? 1e6 : 1.0);
  // Where a difference would go: page faults while streaming, and CPU
  // seconds of both processes.
  state.counters["in_process_faults"] = in_faults / state.iterations();
  state.counters["isolated_faults"] = out_faults / state.iterations();
  state.counters["in_process_cpu_s"] = in_cpu / state.iterations();
  state.counters["isolated_cpu_s"] = out_cpu / state.iterations();
}
BENCHMARK(BM_DeviceProcessRatios)
    ->Args({0, 32768, 1})
    ->Args({1, 4096, 1})
    ->Args({0, 32768, 0})
    ->Args({1, 4096, 0})
    ->Args({0, 1024, 1})  // the smoke test's
    ->Iterations(9)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// The stats dump mode's cost on the host: the same payload pipeline without
// stats, with stats (one more pass over every payload on the shards), and
// stats-only (the pass, and no payload write), paired per iteration.
// Reports median time ratios to the run without stats (< 1: slower).
void BM_StatsRatios(benchmark::State& state) {
  const uint64_t per_thread = state.range(0);
  const PayloadTask payload;
  DumpTask with_stats = payload.task;
  with_stats.tensor_flags = abi::kFlagStats;
  DumpTask stats_only = payload.task;
  stats_only.tensor_flags = abi::kFlagStats | abi::kFlagStatsOnly;
  std::vector<double> on_to_off, only_to_off;
  for (auto _ : state) {
    const PipelineRun off = PipelineOnce(payload.task, 1, abi::DumpLevel::kFull, per_thread);
    const PipelineRun on = PipelineOnce(with_stats, 1, abi::DumpLevel::kFull, per_thread);
    const PipelineRun only = PipelineOnce(stats_only, 1, abi::DumpLevel::kFull, per_thread);
    if (!off.ok || !on.ok || !only.ok) state.SkipWithError("pipeline failed or lost records");
    auto seconds = [](const PipelineRun& r) { return r.streaming_seconds + r.export_seconds; };
    state.SetIterationTime(seconds(on));
    on_to_off.push_back(seconds(off) / seconds(on));
    only_to_off.push_back(seconds(off) / seconds(only));
  }
  state.counters["stats_on_to_off"] = Median(on_to_off);
  state.counters["stats_only_to_off"] = Median(only_to_off);
}
BENCHMARK(BM_StatsRatios)->Arg(64)->Arg(4096)->Iterations(5)->Unit(benchmark::kMillisecond)->UseManualTime();

// The stats pass alone on one 64 KiB float32 payload (cache-resident),
// paired with a memcpy of the same bytes: stats_to_memcpy is the pass's
// speed as a share of a copy's; nonfinite_* the same for the look every
// payload gets (HasNonFinite: a finite payload is read whole).
void BM_StatsPass(benchmark::State& state) {
  std::vector<float> values(kPayload / 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) - 488.5f;
  std::vector<uint8_t> bytes(kPayload), copy(kPayload);
  std::memcpy(bytes.data(), values.data(), kPayload);
  double stats_s = 0, copy_s = 0, nonfinite_s = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 64; ++r) {
      std::memcpy(copy.data(), bytes.data(), kPayload);
      benchmark::DoNotOptimize(copy.data());
      benchmark::ClobberMemory();
    }
    auto t1 = std::chrono::steady_clock::now();
    for (int r = 0; r < 64; ++r) {
      ElementStats st = ComputeElementStats(DataType::kFloat32, bytes.data(), values.size());
      benchmark::DoNotOptimize(st);
    }
    auto t2 = std::chrono::steady_clock::now();
    for (int r = 0; r < 64; ++r) {
      bool found = HasNonFinite(DataType::kFloat32, bytes.data(), values.size());
      benchmark::DoNotOptimize(found);
    }
    auto t3 = std::chrono::steady_clock::now();
    copy_s += std::chrono::duration<double>(t1 - t0).count();
    stats_s += std::chrono::duration<double>(t2 - t1).count();
    nonfinite_s += std::chrono::duration<double>(t3 - t2).count();
  }
  state.SetBytesProcessed(state.iterations() * 64 * kPayload);
  state.counters["stats_GBps"] = state.iterations() * 64.0 * kPayload / stats_s / 1e9;
  state.counters["memcpy_GBps"] = state.iterations() * 64.0 * kPayload / copy_s / 1e9;
  state.counters["stats_to_memcpy"] = copy_s / stats_s;
  state.counters["nonfinite_GBps"] = state.iterations() * 64.0 * kPayload / nonfinite_s / 1e9;
  state.counters["nonfinite_to_memcpy"] = copy_s / nonfinite_s;
}
BENCHMARK(BM_StatsPass);

// A whole sim run of many small tasks: level 0 against level 2.
void BM_SimJob(benchmark::State& state) {
  v1::WorkloadSpec w;
  w.set_name("bench");
  for (int b = 0; b < 8; ++b) {
    auto* buf = w.add_buffers();
    buf->set_name(absl::StrCat("b", b));
    buf->set_dtype("FLOAT32");
    buf->add_shape(256);
    buf->mutable_init()->set_fill(b);
  }
  for (int i = 0; i < 4000; ++i) {
    auto* t = w.add_tasks();
    t->set_func("relu");
    auto* a = t->add_args();
    a->set_tensor(absl::StrCat("b", i % 4));
    a->set_role("input");
    a = t->add_args();
    a->set_tensor(absl::StrCat("b", 4 + i % 4));
    a->set_role("output");
  }
  SimJobOptions o;
  o.dump_level = static_cast<int>(state.range(0));
  o.sim.timeouts = SimTimeouts();
  o.region.arena_bytes = 16 << 20;
  for (auto _ : state) {
    o.output_prefix = Scratch("simjob");
    auto r = RunSimJob(w, BuiltinKernels(), o);
    if (!r.ok() || !r->run_status.ok()) state.SkipWithError("run failed");
    state.PauseTiming();
    RemoveTreeAndSync(o.output_prefix);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * 4000);
}
BENCHMARK(BM_SimJob)->Arg(0)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace argsdump

int main(int argc, char** argv) {
  if (argc == 2 && std::strncmp(argv[1], "--pipeline_run=", 15) == 0) {
    return argsdump::PipelineRunMain(argv[1] + 15);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
