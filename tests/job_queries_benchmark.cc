// The capture service's job questions on finished jobs of many ranks, over
// gRPC on loopback: wall time per answer and the process's memory (the
// server runs in it).
//   bazel run -c opt //tests:job_queries_benchmark
// BM_FirstNonfinite/R/T   FirstNonfinite on a job of R ranks x T tasks (3
//                         records a task), the NaN on the last rank's last task
// BM_CompareJobs/R/T      CompareJobs of two such jobs that agree everywhere
//                         (every payload read and compared)
// Counters: cores (CPU time over wall time while comparing), peak_rss_mib (VmHWM from the server's start: the writing of the
// jobs before it is not counted; it includes the ranks' mapped args.index
// pages, which the server checks at load), anon_mib (the process's heap at
// the end) and anon_growth_mib (heap the answers added).
#include <malloc.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "client/capture_client.h"
#include "store/capture_store.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/capture_service_fixture.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

// The process's CPU time (user + system), seconds.
double ProcessCpuSeconds() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// A line of /proc/self/status ("VmHWM", "RssAnon"), MiB.
double StatusMiB(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atof(line.c_str() + key.size() + 1) / 1024;
  }
  return -1;
}

// One finished rank capture: per task an input and an output of 16 floats
// and a scalar; `nan_last` puts a NaN in the last task's output.
void WriteRank(const std::string& root, const std::string& job, uint32_t rank, uint32_t ranks,
               uint32_t tasks, bool nan_last) {
  v1::CaptureInfo info;
  info.set_name(absl::StrCat(job, ".rank", rank));
  info.set_level(v1::DUMP_LEVEL_FULL);
  v1::JobMember* m = info.mutable_job();
  m->set_job(job);
  m->set_rank(rank);
  m->set_world_size(ranks);
  auto store =
      std::move(CaptureStore::Create(root + "/" + info.name() + "/args_dump", info)).value();
  constexpr uint32_t kTasksPerBatch = 1024;
  uint64_t offset = 0;
  for (uint32_t first = 0; first < tasks; first += kTasksPerBatch) {
    std::vector<v1::ArgRecord> records;
    std::vector<std::string> payloads;
    for (uint32_t t = first; t < std::min(tasks, first + kTasksPerBatch); ++t) {
      std::vector<float> in(16, 1.0f * t), out(16, 2.0f * t);
      const bool nan = nan_last && t + 1 == tasks;
      if (nan) out[3] = std::numeric_limits<float>::quiet_NaN();
      const uint64_t task = 0x100000000ull + t;
      const uint32_t step = t / 100;
      records.push_back(TensorRecord(task).Step(step).Shape({16}).BinOffset(offset));
      payloads.push_back(BytesOf(in));
      offset += 64;
      v1::ArgRecord o = TensorRecord(task)
                            .Step(step)
                            .Arg(1)
                            .Role(v1::ROLE_OUTPUT)
                            .Stage(v1::STAGE_AFTER_COMPLETION)
                            .Shape({16})
                            .BinOffset(offset);
      o.set_nonfinite(nan);
      records.push_back(o);
      payloads.push_back(BytesOf(out));
      offset += 64;
      records.push_back(ScalarRecord(task).Step(step).Arg(2).ScalarBits(t));
      payloads.emplace_back();
    }
    std::vector<const v1::ArgRecord*> ptrs;
    std::vector<absl::string_view> views;
    for (size_t i = 0; i < records.size(); ++i) {
      ptrs.push_back(&records[i]);
      views.push_back(payloads[i]);
    }
    if (!store->AppendBatch(ptrs, views).ok()) std::abort();
  }
  if (!store->Finish(v1::CaptureCounters()).ok()) std::abort();
}

// A root holding jobs "tonight" and "lastnight" of `ranks` x `tasks`,
// made once per shape and removed at exit.
const std::string& JobRoot(uint32_t ranks, uint32_t tasks) {
  static auto* roots = new std::map<std::pair<uint32_t, uint32_t>, std::string>;
  auto it = roots->find({ranks, tasks});
  if (it != roots->end()) return it->second;
  const std::string root = ProcessTempPath(absl::StrCat("argsdump_job_bench_", ranks, "_", tasks));
  RemoveTreeAndSync(root);
  for (uint32_t r = 0; r < ranks; ++r) {
    WriteRank(root, "tonight", r, ranks, tasks, r + 1 == ranks);
    WriteRank(root, "lastnight", r, ranks, tasks, r + 1 == ranks);
  }
  static const bool cleanup = [] {
    std::atexit([] {
      for (const auto& [shape, root] : *roots) RemoveTreeAndSync(root);
    });
    return true;
  }();
  (void)cleanup;
  return roots->emplace(std::make_pair(ranks, tasks), root).first->second;
}

struct Served {
  std::unique_ptr<TestCaptureService> server;
  std::unique_ptr<CaptureClient> client;
};

Served Serve(const std::string& root) {
  ::malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM from here on
  TestCaptureServiceOptions o;
  o.root = root;
  Served s;
  s.server = std::move(TestCaptureService::Start(o)).value();
  CaptureClientOptions c;
  c.target = s.server->target();
  c.call_timeout = std::chrono::minutes(10);
  s.client = std::move(CaptureClient::Create(c)).value();
  return s;
}

void BM_FirstNonfinite(benchmark::State& state) {
  const auto ranks = static_cast<uint32_t>(state.range(0));
  const auto tasks = static_cast<uint32_t>(state.range(1));
  Served s = Serve(JobRoot(ranks, tasks));
  ::malloc_trim(0);
  const double anon_before = StatusMiB("RssAnon");
  v1::FirstNonfiniteRequest request;
  request.set_job("tonight");
  for (auto _ : state) {
    auto answer = s.client->FirstNonfinite(request);
    if (!answer.ok() || answer->first().rank() != ranks - 1) {
      state.SkipWithError("wrong answer");
      break;
    }
  }
  state.counters["records"] = 3.0 * ranks * tasks;
  state.counters["anon_growth_mib"] = StatusMiB("RssAnon") - anon_before;
  state.counters["peak_rss_mib"] = StatusMiB("VmHWM");
  state.counters["anon_mib"] = StatusMiB("RssAnon");
  s.server->Shutdown(std::chrono::milliseconds(1000));
}

void BM_CompareJobs(benchmark::State& state) {
  const auto ranks = static_cast<uint32_t>(state.range(0));
  const auto tasks = static_cast<uint32_t>(state.range(1));
  Served s = Serve(JobRoot(ranks, tasks));
  ::malloc_trim(0);
  const double anon_before = StatusMiB("RssAnon");
  v1::CompareJobsRequest request;
  request.set_job("tonight");
  request.set_reference("lastnight");
  uint64_t bytes = 0;
  const double cpu_before = ProcessCpuSeconds();
  const auto wall_before = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto answer =
        s.client->CompareJobs(request, [](const v1::CompareProgress&) { return absl::OkStatus(); });
    if (!answer.ok() || answer->has_first() || answer->records_compared() != 3ull * ranks * tasks) {
      state.SkipWithError("wrong answer");
      break;
    }
    bytes += answer->bytes_compared();
  }
  // Cores busy while comparing (the server's threads included).
  state.counters["cores"] =
      (ProcessCpuSeconds() - cpu_before) /
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["records"] = 3.0 * ranks * tasks;
  state.counters["anon_growth_mib"] = StatusMiB("RssAnon") - anon_before;
  state.counters["peak_rss_mib"] = StatusMiB("VmHWM");
  state.counters["anon_mib"] = StatusMiB("RssAnon");
  s.server->Shutdown(std::chrono::milliseconds(1000));
}

BENCHMARK(BM_FirstNonfinite)
    ->Args({16, 10000})
    ->Args({64, 10000})
    ->Args({64, 100000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_CompareJobs)
    ->Args({16, 10000})
    ->Args({64, 10000})
    ->Args({64, 100000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace argsdump

BENCHMARK_MAIN();
