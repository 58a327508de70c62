// The capture service on loopback, next to the limit measured in the same
// run: the same GrpcSink streaming the same messages to a null service that
// acknowledges every batch without storing it.
//   bazel run -c opt //tests:capture_service_benchmark
// BM_IngestRatios/0        metadata-only records: real / null, paired per iteration
// BM_IngestRatios/1        1 MiB tensors: real / null, and bytes/s
// BM_QueryByTask/N/F       QueryArgs by task_id on a finished N-record capture
//                          (p50/p99 latency) and the server's resident memory;
//                          F: 0 gRPC, 1 gRPC with the HTTP face on, 2 HTTP/JSON
#include <malloc.h>
#include <unistd.h>

#include <deque>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "collector/grpc_sink.h"
#include "httplib.h"
#include "server/http/proto_json.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/capture_service_fixture.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

std::string Scratch(const std::string& name) {
  return ProcessTempPath("argsdump_svc_bench_" + name);
}

// A line of /proc/self/status ("RssAnon", "RssFile"), MiB.
double StatusMiB(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atof(line.c_str() + key.size() + 1) / 1024;
  }
  return -1;
}

// ---- The null service: acks every batch, stores nothing ------------------

class NullIngest : public grpc::ServerBidiReactor<v1::IngestRequest, v1::IngestResponse> {
 public:
  NullIngest() { StartRead(&req_); }
  void OnReadDone(bool ok) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!ok) {
      done_ = true;
      MaybeFinish();
      return;
    }
    v1::IngestResponse r;
    if (req_.has_open()) {
      r.mutable_opened()->set_capture(req_.open().capture());
    } else if (req_.has_batch()) {
      records_ = req_.batch().first_record() + req_.batch().records_size();
      bytes_ = req_.batch().payload_offset() + req_.batch().payload().size();
      r.mutable_ack()->set_durable_records(records_);
      r.mutable_ack()->set_durable_bin_bytes(bytes_);
    } else {
      r.mutable_finished()->set_records(records_);
    }
    Queue(std::move(r));
    StartRead(&req_);
  }
  void OnWriteDone(bool) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    writing_ = false;
    WriteNext();
    MaybeFinish();
  }
  void OnDone() override { delete this; }

 private:
  void Queue(v1::IngestResponse r) {
    // Consecutive acks coalesce into the newest, as the real service's do.
    if (r.has_ack() && !out_.empty() && out_.back().has_ack()) {
      out_.back() = std::move(r);
    } else {
      out_.push_back(std::move(r));
    }
    WriteNext();
  }
  void WriteNext() {
    if (writing_ || out_.empty()) return;
    current_ = std::move(out_.front());
    out_.pop_front();
    writing_ = true;
    StartWrite(&current_);
  }
  void MaybeFinish() {
    if (done_ && !writing_ && out_.empty() && !finished_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }
  std::recursive_mutex mu_;
  v1::IngestRequest req_;
  v1::IngestResponse current_;
  std::deque<v1::IngestResponse> out_;
  bool writing_ = false, done_ = false, finished_ = false;
  uint64_t records_ = 0, bytes_ = 0;
};

class NullService final : public v1::CaptureService::CallbackService {
  grpc::ServerBidiReactor<v1::IngestRequest, v1::IngestResponse>* Ingest(
      grpc::CallbackServerContext*) override {
    return new NullIngest();
  }
};

struct NullServer {
  NullService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  NullServer() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~NullServer() { server->Shutdown(std::chrono::system_clock::now()); }
};

// ---- Workloads ------------------------------------------------------------

struct Workload {
  std::vector<v1::ArgRecord> records;
  std::string bytes;  // every payload, back to back
  std::vector<absl::string_view> payloads;
  uint64_t total_bytes = 0;
};

// kind 0: 16 int32 scalars per task; kind 1: one 1 MiB float32 tensor per task.
Workload MakeWorkload(int kind, int tasks) {
  Workload w;
  uint64_t offset = 0;
  for (int t = 0; t < tasks; ++t) {
    if (kind == 0) {
      for (uint32_t a = 0; a < 16; ++a) {
        w.records.push_back(
            ScalarRecord(0x100000000ull + t).FuncIds({1}).Arg(a).Contiguous().ScalarBits(a));
      }
    } else {
      w.records.push_back(TensorRecord(0x100000000ull + t).FuncIds({1}).Shape({1 << 18})
                              .Contiguous().BinOffset(offset));
      offset += 1 << 20;
    }
  }
  w.bytes.assign(offset, '\x3c');
  w.total_bytes = offset;
  uint64_t at = 0;
  for (const auto& r : w.records) {
    w.payloads.emplace_back(w.bytes.data() + at, r.bin_size());
    at += r.bin_size();
  }
  return w;
}

struct StreamTimes {
  double ingest = 0;  // connect .. the last batch acknowledged
  double total = 0;   // .. and the capture finished (manifest and index)
};

// Streams `w` through a GrpcSink to `target` in batches of `batch` records
// (as the collector hands whole buffers over) and finishes.
StreamTimes Stream(const std::string& target, const std::string& capture, const Workload& w,
              size_t batch) {
  GrpcSinkOptions o;
  o.target = target;
  o.capture = capture;
  o.info.set_level(v1::DUMP_LEVEL_FULL);
  const auto t0 = std::chrono::steady_clock::now();
  auto sink = GrpcSink::Connect(o);
  if (!sink.ok()) std::abort();
  std::vector<const v1::ArgRecord*> records;
  std::vector<absl::string_view> payloads;
  for (size_t from = 0; from < w.records.size(); from += batch) {
    const size_t to = std::min(w.records.size(), from + batch);
    records.clear();
    payloads.clear();
    for (size_t i = from; i < to; ++i) {
      records.push_back(&w.records[i]);
      payloads.push_back(w.payloads[i]);
    }
    if (!(*sink)->WriteBatch(records, payloads).ok()) std::abort();
  }
  if (!(*sink)->Flush().ok()) std::abort();  // every batch acknowledged
  StreamTimes t;
  t.ingest = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!(*sink)->Finish(v1::CaptureCounters()).ok()) std::abort();
  t.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Each iteration: the null stream, then the real service, same workload.
void BM_IngestRatios(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  // 256 K metadata records (as 4096-record buffers), or 256 MiB of tensors
  // (16 per batch, as 16 MiB arenas of 1 MiB tensors).
  const Workload w = MakeWorkload(kind, kind == 0 ? 16384 : 256);
  const size_t batch = kind == 0 ? 4096 : 16;
  NullServer null_server;
  const std::string root = Scratch("ingest");
  TestCaptureServiceOptions o;
  o.root = root;
  RemoveTreeAndSync(root);
  auto server = std::move(TestCaptureService::Start(o)).value();
  const std::string real = server->target();
  const std::string null = absl::StrCat("127.0.0.1:", null_server.port);
  std::vector<double> ratio, ratio_total, real_rate, null_rate;
  int n = 0;
  for (auto _ : state) {
    const StreamTimes t_null = Stream(null, "null", w, batch);
    const StreamTimes t_real = Stream(real, absl::StrCat("run", n++), w, batch);
    state.SetIterationTime(t_real.ingest);
    ratio.push_back(t_null.ingest / t_real.ingest);
    ratio_total.push_back(t_null.total / t_real.total);
    const double units = kind == 0 ? w.records.size() : w.total_bytes;
    real_rate.push_back(units / t_real.ingest);
    null_rate.push_back(units / t_null.ingest);
  }
  // Ingest: until the last batch is acknowledged (durable). With finish:
  // the real service also writes the manifest and index at the end.
  state.counters["real_to_null"] = Median(ratio);
  state.counters["real_to_null_with_finish"] = Median(ratio_total);
  state.counters[kind == 0 ? "real_records_per_s" : "real_bytes_per_s"] = Median(real_rate);
  state.counters[kind == 0 ? "null_records_per_s" : "null_bytes_per_s"] = Median(null_rate);
  server->Shutdown(std::chrono::milliseconds(1000));
  server.reset();
  RemoveTreeAndSync(root);
}
BENCHMARK(BM_IngestRatios)->Arg(0)->Arg(1)->Iterations(5)->UseManualTime()->Unit(benchmark::kMillisecond);

// A finished capture of `records` scalar records (8 per task), written with
// the store directly once per size and kept for every benchmark that
// queries it (the 10 M one takes a while to write); removed at exit.
const std::string& QueryCapture(uint64_t records) {
  static std::map<uint64_t, std::string>* roots = new std::map<uint64_t, std::string>;
  auto it = roots->find(records);
  if (it != roots->end()) return it->second;
  const std::string root = Scratch(absl::StrCat("query_", records));
  RemoveTreeAndSync(root);
  {
    v1::CaptureInfo info;
    info.set_name("big");
    info.set_level(v1::DUMP_LEVEL_FULL);
    auto store = std::move(CaptureStore::Create(root + "/big/args_dump", info)).value();
    std::vector<v1::ArgRecord> chunk(8192);
    std::vector<const v1::ArgRecord*> ptrs(chunk.size());
    std::vector<absl::string_view> empty(chunk.size());
    for (uint64_t done = 0; done < records; done += chunk.size()) {
      for (size_t i = 0; i < chunk.size(); ++i) {
        const uint64_t id = done + i;
        chunk[i] = ScalarRecord(0x100000000ull + id / 8).Arg(static_cast<uint32_t>(id % 8))
                       .ScalarBits(id);
        ptrs[i] = &chunk[i];
      }
      if (!store->AppendBatch(ptrs, empty).ok()) std::abort();
    }
    if (!store->Finish(v1::CaptureCounters()).ok()) std::abort();
  }
  static const bool cleanup = [] {
    std::atexit([] {
      for (const auto& [records, root] : *roots) RemoveTreeAndSync(root);
    });
    return true;
  }();
  (void)cleanup;
  return roots->emplace(records, root).first->second;
}

// How BM_QueryByTask asks.
enum QueryFace : int64_t {
  kGrpc = 0,             // gRPC, the HTTP face off
  kGrpcWithHttpOn = 1,   // gRPC, the HTTP face listening (idle)
  kHttp = 2,             // GET /v1/captures/big/args?task_id=0x... (keep-alive),
                         // the JSON parsed back into a QueryArgsResponse
};

// QueryArgs by random task_ids on a finished capture: p50/p99 latency and
// the server's resident memory. Run the faces side by side: /0 against /1
// is what the HTTP face costs the gRPC path when it is merely on, /2
// against /0 what a dashboard pays for HTTP and JSON.
void BM_QueryByTask(benchmark::State& state) {
  const uint64_t records = state.range(0);
  const auto face = static_cast<QueryFace>(state.range(1));
  const std::string& root = QueryCapture(records);
  ::malloc_trim(0);  // hand the writer's freed rows back before measuring
  const double anon_before = StatusMiB("RssAnon");
  TestCaptureServiceOptions o;
  o.root = root;
  o.http = face != kGrpc;
  auto server = std::move(TestCaptureService::Start(o)).value();
  auto stub = server->NewStub();
  httplib::Client http("127.0.0.1", face == kGrpc ? 1 : server->http_port());
  http.set_keep_alive(true);
  std::mt19937_64 rng(1);
  std::vector<double> latencies;
  for (auto _ : state) {
    const uint64_t task = 0x100000000ull + rng() % (records / 8);
    v1::QueryArgsResponse resp;
    bool ok = false;
    const auto t0 = std::chrono::steady_clock::now();
    if (face == kHttp) {
      const auto got = http.Get(absl::StrCat("/v1/captures/big/args?task_id=0x",
                                             absl::Hex(task)).c_str());
      ok = got && got->status == 200 && ProtoFromJson(got->body, &resp).ok();
    } else {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::QueryArgsRequest q;
      q.set_capture("big");
      q.set_task_id(task);
      ok = stub->QueryArgs(&ctx, q, &resp).ok();
    }
    latencies.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!ok || resp.args_size() != 8 || resp.args(0).record().task_id() != task) {
      state.SkipWithError("wrong answer");
      break;
    }
  }
  std::sort(latencies.begin(), latencies.end());
  state.counters["p50_us"] = latencies[latencies.size() / 2];
  state.counters["p99_us"] = latencies[latencies.size() * 99 / 100];
  // Heap memory the server added (anonymous), and index pages mapped in
  // (file-backed: the on-disk index, reclaimable by the kernel).
  state.counters["anon_growth_mib"] = StatusMiB("RssAnon") - anon_before;
  state.counters["index_file_rss_mib"] = StatusMiB("RssFile");
  http.stop();
  server->Shutdown(std::chrono::milliseconds(1000));
  server.reset();
}
BENCHMARK(BM_QueryByTask)
    ->ArgNames({"records", "face"})
    ->ArgsProduct({{1 << 20, 10 << 20}, {kGrpc, kGrpcWithHttpOn, kHttp, kGrpc}})
    ->Iterations(20000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace argsdump

// The client, the null service and the real one share this process, and so
// glibc's malloc, whose mmap and trim thresholds adapt to the sizes freed: a
// server that frees 1 MiB blocks raised them for the client too, whose page
// faults then halved, so the ratios partly measured the client's faults
// (the same binary read 0.9 or 0.74 with the thresholds left to adapt or
// fixed). They are fixed here, as GLIBC_TUNABLES
// glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456
// would, so that every build is measured alike.
int main(int argc, char** argv) {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  ::benchmark::Initialize(&argc, argv);
  if (::benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ::benchmark::RunSpecifiedBenchmarks();
  ::benchmark::Shutdown();
  return 0;
}
