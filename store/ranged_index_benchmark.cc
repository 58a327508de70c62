// args.index of 10^6 records (4 per task, every one with stats), read two
// ways:
//   bazel run -c opt //store:ranged_index_benchmark
// BM_LocalWalk          the comparisons' walk over a local (mapped) index:
//                       NextMatch over every row plus RecordIdAt
// BM_LocalTaskWalk      NextMatch by task for random tasks, local
// BM_RangedGetOneBlock/B  one ranged GET of B bytes at a random offset of
//                       the index in a real Ceph RGW: the base of the ratios
// BM_QueryByTaskCold/B  a new IndexFile (OpenRanged) over a new, empty
//                       ObjectBlockCache of B-byte blocks, then Query by a
//                       random task: what a first question costs
// BM_QueryByTaskWarmCache/B  the same over a cache that already holds the
//                       whole index (a new IndexFile each time)
// BM_QueryByTaskWarm/B  Query by task on one IndexFile whose blocks are
//                       already fetched (64 tasks asked again and again)
// The RGW ones report p50_ms / p99_ms of the timed operation, requests
// (GETs per operation) and, for the queries, fetched_kib (what the
// IndexFile holds after it).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "format/capture_index.h"
#include "format/record.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

constexpr uint64_t kRecords = 1000000;
constexpr uint64_t kPerTask = 4;

struct LocalIndex {
  std::string path;
  std::vector<uint64_t> tasks;  // every task id
};

// Writes the index once per process.
const LocalIndex& Index() {
  static const LocalIndex* index = [] {
    auto* out = new LocalIndex;
    RecordList rows;
    StatsTable stats;
    std::mt19937_64 rng(7);
    for (uint64_t i = 0; i < kRecords; ++i) {
      ManifestRow r;
      // Tasks arrive out of order: ids scattered over 2^40.
      const uint64_t task = (i / kPerTask) * 4099 % (kRecords / kPerTask) * 1000003 + 1;
      if (i % kPerTask == 0) out->tasks.push_back(task);
      const uint32_t a = i % kPerTask;
      r.task_id = task;
      r.arg_index = a;
      r.stage = a < 2 ? v1::STAGE_BEFORE_DISPATCH : v1::STAGE_AFTER_COMPLETION;
      r.role = a < 2 ? v1::ROLE_INPUT : v1::ROLE_OUTPUT;
      r.kind = v1::KIND_TENSOR;
      r.dtype = v1::DTYPE_FLOAT32;
      r.func_count = 1;
      r.func_ids[0] = 0;
      r.device_thread = static_cast<uint32_t>(task % 4);
      r.ndims = 1;
      r.shape[0] = 16;
      r.strides[0] = 1;
      r.numel = 16;
      r.is_contiguous = true;
      r.bin_offset = i * 64;
      r.bin_size = 64;
      rows.push_back(r);
      StatsRow s;
      s.present = true;
      s.count = 16;
      s.min = -1;
      s.max = static_cast<double>(rng() % 100);
      stats.Add(i, s);
    }
    v1::CaptureInfo info;
    info.set_name("ranged_index_benchmark");
    v1::CaptureCounters counters;
    counters.set_total_args(kRecords);
    out->path = ProcessTempPath("ranged_index_benchmark.index");
    const absl::Status s =
        WriteIndex(out->path, info, counters, false, rows, ManifestOrder(rows), &stats);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::abort();
    }
    return out;
  }();
  return *index;
}

std::unique_ptr<IndexFile> OpenLocal() {
  auto f = IndexFile::Open(Index().path);
  if (!f.ok()) {
    std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
    std::abort();
  }
  return std::move(f).value();
}

void BM_LocalWalk(benchmark::State& state) {
  const std::unique_ptr<IndexFile> f = OpenLocal();
  const ArgFilter all;
  uint64_t sum = 0;
  for (auto _ : state) {
    ManifestRow scratch;
    uint64_t position = 0;
    for (const ManifestRow* r; (r = f->NextMatch(all, &position, &scratch)) != nullptr;
         ++position) {
      sum += f->RecordIdAt(position) + r->arg_index;
    }
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * f->size());
}
BENCHMARK(BM_LocalWalk)->Unit(benchmark::kMillisecond);

void BM_LocalTaskWalk(benchmark::State& state) {
  const std::unique_ptr<IndexFile> f = OpenLocal();
  const std::vector<uint64_t>& tasks = Index().tasks;
  std::mt19937_64 rng(1);
  uint64_t sum = 0;
  for (auto _ : state) {
    ArgFilter q;
    q.task_id = tasks[rng() % tasks.size()];
    ManifestRow scratch;
    uint64_t position = 0;
    for (const ManifestRow* r; (r = f->NextMatch(q, &position, &scratch)) != nullptr;
         ++position) {
      sum += f->RecordIdAt(position) + r->arg_index;
    }
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LocalTaskWalk);

}  // namespace
}  // namespace argsdump

BENCHMARK_MAIN();
