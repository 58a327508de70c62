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
#include "s3/s3_client.h"
#include "store/object_block_cache.h"
#include "tests/testing/ceph_rgw.h"
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

[[noreturn]] void Die(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  std::abort();
}

// The index in the RGW, put once per process.
struct Remote {
  std::unique_ptr<s3::S3Client> client;
  StoredObject object;
};
constexpr char kBucket[] = "ranged-index-benchmark";

Remote& InRgw() {
  static Remote* remote = [] {
    auto rgw = SharedCephRgw();
    if (!rgw.ok()) Die(rgw.status());
    s3::S3ClientOptions o;
    o.endpoint = (*rgw)->endpoint();
    o.region = (*rgw)->region();
    o.credentials = s3::Credentials{(*rgw)->access_key(), (*rgw)->secret_key(), ""};
    auto client = s3::S3Client::Create(o);
    if (!client.ok()) Die(client.status());
    auto* out = new Remote{std::move(client).value(), {}};
    if (absl::Status s = out->client->CreateBucket(kBucket); !s.ok()) Die(s);
    const std::string bytes = ReadFileOrEmpty(Index().path);
    s3::PutOptions put;
    put.body_check = s3::PutOptions::BodyCheck::kNone;  // loopback; the size is checked
    auto etag = out->client->PutObject(kBucket, "bench/args.index", bytes, put);
    if (!etag.ok()) Die(etag.status());
    out->object = StoredObject{"bench/args.index", *etag, bytes.size()};
    return out;
  }();
  return *remote;
}

std::unique_ptr<ObjectBlockCache> NewCache(uint64_t block_bytes) {
  ObjectBlockCache::Options o;
  o.block_bytes = block_bytes;
  o.capacity_bytes = 512 << 20;  // the whole index fits
  return std::make_unique<ObjectBlockCache>(InRgw().client.get(), kBucket, o);
}

std::unique_ptr<IndexFile> OpenRanged(ObjectBlockCache* cache) {
  const StoredObject object = InRgw().object;
  auto f = IndexFile::OpenRanged(object.key, object.size,
                                 [cache, object](uint64_t offset, uint64_t size, char* out) {
                                   return cache->Read(object, offset, size, out);
                                 });
  if (!f.ok()) Die(f.status());
  return std::move(f).value();
}

// Latencies of the timed operations, reported as p50_ms and p99_ms.
class Latencies {
 public:
  template <typename F>
  void Time(benchmark::State& state, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(s);
    seconds_.push_back(s);
  }
  void Report(benchmark::State& state) {
    if (seconds_.empty()) return;
    std::sort(seconds_.begin(), seconds_.end());
    auto at = [&](double q) {
      return seconds_[std::min(seconds_.size() - 1, static_cast<size_t>(q * seconds_.size()))] *
             1e3;
    };
    state.counters["p50_ms"] = at(0.50);
    state.counters["p99_ms"] = at(0.99);
    state.counters["max_ms"] = seconds_.back() * 1e3;
  }

 private:
  std::vector<double> seconds_;
};

QueryPage QueryTask(const IndexFile& f, uint64_t task) {
  ArgFilter q;
  q.task_id = task;
  QueryPage page = f.Query(q, 0, 100, 1000);
  if (!page.error.ok()) Die(page.error);
  if (page.hits.size() != kPerTask) Die(absl::InternalError("a task's rows not found"));
  return page;
}

void BM_RangedGetOneBlock(benchmark::State& state) {
  const uint64_t block = state.range(0);
  Remote& remote = InRgw();
  std::mt19937_64 rng(3);
  Latencies latencies;
  for (auto _ : state) {
    const uint64_t offset = rng() % (remote.object.size / block) * block;
    latencies.Time(state, [&] {
      auto got = remote.client->GetObjectToString(kBucket, remote.object.key,
                                                  s3::ByteRange{offset, block}, block);
      if (!got.ok()) Die(got.status());
      if (got->size() != block) Die(absl::InternalError("short block"));
    });
  }
  latencies.Report(state);
}
BENCHMARK(BM_RangedGetOneBlock)
    ->Arg(64 << 10)
    ->Arg(1 << 20)
    ->Iterations(400)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_QueryByTaskCold(benchmark::State& state) {
  const std::vector<uint64_t>& tasks = Index().tasks;
  InRgw();
  std::mt19937_64 rng(5);
  Latencies latencies;
  uint64_t requests = 0, fetched = 0;
  for (auto _ : state) {
    std::unique_ptr<ObjectBlockCache> cache = NewCache(state.range(0));
    const uint64_t task = tasks[rng() % tasks.size()];
    std::unique_ptr<IndexFile> f;
    latencies.Time(state, [&] {
      f = OpenRanged(cache.get());
      QueryTask(*f, task);
    });
    requests += cache->counters().misses;
    fetched += f->fetched_bytes();
  }
  latencies.Report(state);
  state.counters["requests"] = static_cast<double>(requests) / state.iterations();
  state.counters["fetched_kib"] = static_cast<double>(fetched) / state.iterations() / 1024;
}
BENCHMARK(BM_QueryByTaskCold)
    ->Arg(64 << 10)
    ->Arg(1 << 20)
    ->Iterations(200)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_QueryByTaskWarmCache(benchmark::State& state) {
  const std::vector<uint64_t>& tasks = Index().tasks;
  std::unique_ptr<ObjectBlockCache> cache = NewCache(state.range(0));
  {
    // Every block into the cache.
    const StoredObject& object = InRgw().object;
    std::string block(state.range(0), '\0');
    for (uint64_t at = 0; at < object.size; at += block.size()) {
      const uint64_t n = std::min<uint64_t>(block.size(), object.size - at);
      if (absl::Status s = cache->Read(object, at, n, block.data()); !s.ok()) Die(s);
    }
  }
  const uint64_t misses = cache->counters().misses;
  std::mt19937_64 rng(5);
  Latencies latencies;
  for (auto _ : state) {
    const uint64_t task = tasks[rng() % tasks.size()];
    latencies.Time(state, [&] { QueryTask(*OpenRanged(cache.get()), task); });
  }
  latencies.Report(state);
  state.counters["requests"] =
      static_cast<double>(cache->counters().misses - misses) / state.iterations();
}
BENCHMARK(BM_QueryByTaskWarmCache)
    ->Arg(64 << 10)
    ->Arg(1 << 20)
    ->Iterations(2000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_QueryByTaskWarm(benchmark::State& state) {
  const std::vector<uint64_t>& tasks = Index().tasks;
  std::unique_ptr<ObjectBlockCache> cache = NewCache(state.range(0));
  std::unique_ptr<IndexFile> f = OpenRanged(cache.get());
  std::vector<uint64_t> asked;
  for (size_t i = 0; i < 64; ++i) asked.push_back(tasks[i * 3803 % tasks.size()]);
  for (uint64_t task : asked) QueryTask(*f, task);
  const uint64_t misses = cache->counters().misses;
  Latencies latencies;
  size_t i = 0;
  for (auto _ : state) {
    latencies.Time(state, [&] { QueryTask(*f, asked[i++ % asked.size()]); });
  }
  latencies.Report(state);
  state.counters["requests"] =
      static_cast<double>(cache->counters().misses - misses) / state.iterations();
  state.counters["fetched_kib"] = static_cast<double>(f->fetched_bytes()) / 1024;
}
BENCHMARK(BM_QueryByTaskWarm)
    ->Arg(64 << 10)
    ->Iterations(20000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace argsdump

BENCHMARK_MAIN();
