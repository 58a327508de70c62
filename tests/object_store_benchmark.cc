// The capture service over an object store with a catalog (a real Ceph RGW
// and a real PostgreSQL, booted by the benchmark), each number beside its
// limit measured in the same run:
//   bazel run -c opt //tests:object_store_benchmark   [--smoke: small sizes]
// BM_IngestVsPut/K     a GrpcSink streaming to the service, until the last
//                      batch is acknowledged, against the same S3Client
//                      PUTting the capture's own segment objects again as
//                      plain objects, one after the other (as the service
//                      commits them). K 0: metadata-only records, K 1: 1 MiB
//                      payloads. ratio = plain PUT time / ingest time.
// BM_AckLatency/K/D    p50/p99 from a batch's send to its acknowledgment
//                      with the group commit's delay at D ms.
// BM_QueryByTask/C     QueryArgs by task_id on a finished capture in the
//                      store; C 1: each query on a fresh server (scratch
//                      disk, index cache empty), C 0: on one warm server
//                      (its cache holds the index blocks queries read).
// BM_QueryByTaskWarming  the same on a server that has answered one query:
//                      the first query to touch a block fetches it.
//                      fetching_pct: the queries that fetched a block;
//                      in_memory_p99_us / fetching_p50_us: each kind.
// BM_ReadPayload       ReadPayload of a 1 MiB record against a ranged GET
//                      of the same bytes of args.bin with an S3Client;
//                      ratio = GET time / ReadPayload time. Beside them:
//                      the same ReadPayload from a capture on a local disk
//                      (the service's own cost), and each way's CPU time
//                      in this process.
// Ratios are medians of pairs measured back to back, never thresholds.
#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/files.h"
#include "benchmark/benchmark.h"
#include "catalog/catalog.h"
#include "collector/grpc_sink.h"
#include "grpcpp/grpcpp.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "s3/s3_client.h"
#include "server/capture_service.h"
#include "store/remote_captures.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/ceph_rgw.h"
#include "tests/testing/postgres_server.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

// --smoke: workloads small enough for a CI run (the numbers mean little).
bool g_smoke = false;

[[noreturn]] void Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "object_store_benchmark: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}
void Must(const absl::Status& s, const std::string& what) {
  if (!s.ok()) Die(what, s);
}
template <typename T>
T Must(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Die(what, v.status());
  return *std::move(v);
}

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// CPU seconds spent so far by this process (the client and the service),
// by Ceph's daemons under the RGW's folder and by the PostgreSQL server and
// its backends: other work on a shared machine is left out.
struct StackCpu {
  double self = 0, ceph = 0, pg = 0;
  double total() const { return self + ceph + pg; }
  StackCpu operator-(const StackCpu& o) const { return {self - o.self, ceph - o.ceph, pg - o.pg}; }
};

StackCpu StackCpuSeconds() {
  StackCpu cpu;
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  cpu.self = self.ru_utime.tv_sec + self.ru_utime.tv_usec / 1e6 + self.ru_stime.tv_sec +
             self.ru_stime.tv_usec / 1e6;
  const std::string rgw_dir = Must(SharedCephRgw(), "Ceph RGW")->dir();
  const pid_t pg = Must(SharedPostgresServer(), "PostgreSQL")->pid();
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return cpu;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    const std::string base = absl::StrCat("/proc/", pid);
    auto stat = ReadFileToString(base + "/stat", 4096);
    if (!stat.ok()) continue;
    // "pid (comm) state ppid ... utime stime": fields after the comm's ')'.
    const size_t close = stat->rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat->substr(close + 2), ' ');
    if (f.size() < 13) continue;
    const double seconds = (std::atof(f[11].c_str()) + std::atof(f[12].c_str())) / tick;
    const pid_t ppid = static_cast<pid_t>(std::atoi(f[1].c_str()));
    if (pid == pg || ppid == pg) {
      cpu.pg += seconds;
      continue;
    }
    auto cmdline = ReadFileToString(base + "/cmdline", 1 << 16);
    if (cmdline.ok() && absl::StrContains(*cmdline, rgw_dir)) cpu.ceph += seconds;
  }
  ::closedir(proc);
  return cpu;
}

double Percentile(std::vector<double> v, int pct) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, v.size() * pct / 100)];
}
double Median(std::vector<double> v) { return Percentile(std::move(v), 50); }

// CPU time of every thread of this process so far.
double ProcessCpuSeconds() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// ---- The object store -----------------------------------------------------

std::unique_ptr<s3::S3Client> NewClient() {
  CephRgw* rgw = Must(SharedCephRgw(), "Ceph RGW");
  return Must(s3::S3Client::Create(rgw->ClientOptions()), "S3 client");
}

constexpr char kPrefix[] = "captures/";

// The key of a sealed capture's file: <prefix><name>/<epoch>/args_dump/<file>.
std::string SealedKey(s3::S3Client& client, const std::string& bucket, const std::string& name,
                      const std::string& file) {
  auto listed = Must(client.ListObjectsV2(bucket, absl::StrCat(kPrefix, name, "/")), "listing");
  for (const s3::ObjectEntry& o : listed.objects) {
    if (absl::EndsWith(o.key, "/args_dump/" + file)) return o.key;
  }
  return "";
}

// A bucket and a catalog database: where one benchmark's captures go.
struct Home {
  std::string bucket;
  std::string catalog;
};

Home NewHome(const std::string& name) {
  PostgresServer* pg = Must(SharedPostgresServer(), "PostgreSQL");
  Home home;
  home.bucket = absl::StrCat("osbench-", ::getpid(), "-", absl::StrReplaceAll(name, {{"_", "-"}}));
  home.catalog = Must(pg->CreateDatabase(absl::StrCat("osbench_", name)), "catalog database");
  auto client = NewClient();
  Must(client->CreateBucket(home.bucket), "bucket");
  // The first writes into a fresh bucket take seconds on RGW (its index
  // and data pools' first objects): not what is measured.
  const std::string warm(1 << 20, 'w');
  for (int i = 0; i < 3; ++i) Must(client->PutObject(home.bucket, "warmup", warm).status(), "warm-up");
  Must(client->DeleteObject(home.bucket, "warmup"), "warm-up");
  return home;
}

// A capture server over `home` on a fresh scratch disk with an empty index
// cache: to the store, a server restarted on another machine.
class StoreServer {
 public:
  StoreServer(const Home& home, absl::Duration group_commit_delay) : home_(home) {
    static int serial = 0;
    root_ = ProcessTempPath(absl::StrCat("argsdump_osbench_", ++serial));
    RemoveTreeAndSync(root_);
    Catalog::Options co;
    co.pg.uri = home.catalog;
    RemoteCaptures::Options ro;
    ro.location.bucket = home.bucket;
    ro.location.prefix = kPrefix;
    Must(CreateDirectories(root_), root_);
    remote_ = Must(RemoteCaptures::Open(NewClient(), Must(Catalog::Open(co), "catalog"), ro),
                   "object store");
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = root_;
    o.hub.remote = remote_.get();
    o.hub.gc_every = absl::ZeroDuration();
    o.hub.group_commit_delay = group_commit_delay;
    server_ = Must(CaptureServer::Start(std::move(o)), "capture server");
    target_ = absl::StrCat("127.0.0.1:", server_->port());
    stub_ = v1::CaptureService::NewStub(
        grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
  }
  ~StoreServer() {
    server_->Shutdown(std::chrono::milliseconds(1000));
    server_.reset();
    remote_.reset();
    RemoveTreeAndSync(root_);
  }

  const std::string& target() const { return target_; }
  v1::CaptureService::Stub& stub() { return *stub_; }
  CaptureHub& hub() { return server_->hub(); }
  RemoteCaptures& remote() { return *remote_; }
  const Home& home() const { return home_; }

 private:
  const Home home_;
  std::string root_;
  std::string target_;
  std::unique_ptr<RemoteCaptures> remote_;  // outlives the server
  std::unique_ptr<CaptureServer> server_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
};

std::vector<s3::ObjectEntry> ListAll(s3::S3Client& client, const std::string& bucket,
                                     const std::string& prefix) {
  std::vector<s3::ObjectEntry> all;
  std::string token;
  do {
    s3::ListObjectsPage page = Must(client.ListObjectsV2(bucket, prefix, token), "list");
    for (auto& o : page.objects) all.push_back(std::move(o));
    token = page.is_truncated ? page.next_continuation_token : "";
  } while (!token.empty());
  return all;
}

// ---- Workloads ------------------------------------------------------------

constexpr uint64_t kFirstTask = 0x100000000ull;

// A 1 MiB payload unlike every other (the service stores equal payloads
// once, which real tensors seldom are).
std::string DistinctPayload(uint64_t seed) {
  std::string bytes(1 << 20, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(&bytes[i], &x, 8);
  }
  return bytes;
}

struct Workload {
  std::vector<v1::ArgRecord> records;
  std::vector<std::string> payloads;  // one per record ("" for a scalar)
  uint64_t payload_bytes = 0;
};

// kind 0: 16 int32 scalars per task; kind 1: one 1 MiB float32 tensor per task.
Workload MakeWorkload(int kind, int tasks) {
  Workload w;
  for (int t = 0; t < tasks; ++t) {
    if (kind == 0) {
      for (uint32_t a = 0; a < 16; ++a) {
        w.records.push_back(
            ScalarRecord(kFirstTask + t).FuncIds({1}).Arg(a).Contiguous().ScalarBits(a + t));
        w.payloads.emplace_back();
      }
    } else {
      w.records.push_back(TensorRecord(kFirstTask + t).FuncIds({1}).Shape({1 << 18})
                              .Contiguous().BinOffset(w.payload_bytes));
      w.payloads.push_back(DistinctPayload(t));
      w.payload_bytes += 1 << 20;
    }
  }
  return w;
}

struct StreamTimes {
  double ingest = 0;  // connect .. the last batch acknowledged
  StackCpu ingest_cpu;  // the stack's CPU seconds meanwhile
  double total = 0;   // .. and the capture sealed (files uploaded)
  std::vector<double> batch_ack_ms;  // each WriteBatch: sent .. returned (acknowledged
                                     // when the window is 0)
};

// Streams `w` through a GrpcSink in batches of `batch` records (as the
// collector hands whole buffers over), with the sink's window of
// unacknowledged bytes (0: each batch waits for its acknowledgment);
// `before_finish` runs once every batch is acknowledged, outside the times;
// then the capture is finished.
StreamTimes Stream(const std::string& target, const std::string& capture, const Workload& w,
                   size_t batch, const std::function<void()>& before_finish = nullptr,
                   uint64_t window = GrpcSinkOptions().max_unacked_bytes) {
  GrpcSinkOptions o;
  o.target = target;
  o.capture = capture;
  o.info.set_level(v1::DUMP_LEVEL_FULL);
  o.max_unacked_bytes = window;
  const auto t0 = Clock::now();
  const StackCpu cpu0 = StackCpuSeconds();
  auto sink = Must(GrpcSink::Connect(o), "connect");
  StreamTimes t;
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
    const auto sent = Clock::now();
    Must(sink->WriteBatch(records, payloads), "write batch");
    t.batch_ack_ms.push_back(Seconds(sent) * 1e3);
  }
  Must(sink->Flush(), "flush");  // every batch acknowledged
  t.ingest = Seconds(t0);
  t.ingest_cpu = StackCpuSeconds() - cpu0;
  double aside = 0;
  if (before_finish) {
    const auto a0 = Clock::now();
    before_finish();
    aside = Seconds(a0);
  }
  Must(sink->Finish(v1::CaptureCounters()), "finish");
  t.total = Seconds(t0) - aside;
  return t;
}

std::string SegmentsPrefix(const std::string& capture) {
  return absl::StrCat(kPrefix, capture, "/segments/");
}

// ---- 1. Ingest against plain PUTs -----------------------------------------

void BM_IngestVsPut(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  // 256 K metadata records as 4096-record buffers, or 256 MiB of tensors
  // as 16 MiB arenas of 1 MiB tensors (smoke: a sixteenth).
  const int tasks = (kind == 0 ? 16384 : 256) / (g_smoke ? 16 : 1);
  const size_t batch = kind == 0 ? 4096 : 16;
  const Workload w = MakeWorkload(kind, tasks);
  const uint64_t stream_bytes = w.payload_bytes;
  const Home home = NewHome(absl::StrCat("ingest", kind));
  StoreServer server(home, absl::ZeroDuration());
  auto client = NewClient();
  s3::PutOptions put;  // as the service PUTs its segments
  put.body_check = s3::PutOptions::BodyCheck::kContentMd5;
  s3::PutOptions unchecked;
  unchecked.body_check = s3::PutOptions::BodyCheck::kNone;
  Stream(server.target(), "warmup", MakeWorkload(kind, 2), batch);
  // Deleting objects leaves RGW and the OSD work to do in the background
  // (the next ingest measured half as fast when the last iteration's plain
  // objects went just before it): nothing is deleted until the end.
  std::vector<std::string> captures;
  size_t plain_objects = 0;
  std::vector<double> ratio, ratio_seal, records_per_s, bytes_per_s, segment_bytes_per_s,
      put_bytes_per_s, unchecked_bytes_per_s, segments, segment_kib, ingest_cpu, ingest_cores,
      put_cpu, put_cores, ingest_cpu_self, ingest_cpu_ceph, ingest_cpu_pg;
  int n = 0;
  for (auto _ : state) {
    const std::string capture = absl::StrCat("run", n++);
    double put_s = 0, unchecked_s = 0, put_busy = 0;
    uint64_t seg_bytes = 0;
    size_t seg_count = 0;
    // The capture's segments, as the service cut them, PUT again as plain
    // objects: the same bytes, the same sizes, one after the other (all
    // fetched first, so that PUTs follow PUTs as in the service), then
    // once more with no body check: what Content-MD5 costs the limit.
    const StreamTimes t = Stream(server.target(), capture, w, batch, [&] {
      std::vector<std::string> objects;
      for (const s3::ObjectEntry& segment : ListAll(*client, home.bucket, SegmentsPrefix(capture))) {
        objects.push_back(Must(
            client->GetObjectToString(home.bucket, segment.key, {}, 1ull << 31), "get segment"));
        seg_bytes += objects.back().size();
      }
      seg_count = objects.size();
      for (const bool md5 : {true, false}) {
        const auto p0 = Clock::now();
        const StackCpu cpu0 = StackCpuSeconds();
        for (size_t i = 0; i < objects.size(); ++i) {
          Must(client->PutObject(home.bucket, absl::StrCat(capture, "-plain/", i, md5 ? "" : ".no-md5"),
                                 objects[i], md5 ? put : unchecked).status(),
               "plain put");
        }
        (md5 ? put_s : unchecked_s) = Seconds(p0);
        if (md5) put_busy = (StackCpuSeconds() - cpu0).total();
      }
    });
    captures.push_back(capture);
    plain_objects = std::max(plain_objects, seg_count);
    state.SetIterationTime(t.ingest);
    ratio.push_back(put_s / t.ingest);
    ratio_seal.push_back(put_s / t.total);
    records_per_s.push_back(w.records.size() / t.ingest);
    bytes_per_s.push_back(stream_bytes / t.ingest);
    segment_bytes_per_s.push_back(seg_bytes / t.ingest);
    put_bytes_per_s.push_back(seg_bytes / put_s);
    unchecked_bytes_per_s.push_back(seg_bytes / unchecked_s);
    segments.push_back(seg_count);
    segment_kib.push_back(seg_count == 0 ? 0 : seg_bytes / 1024.0 / seg_count);
    ingest_cpu.push_back(t.ingest_cpu.total());
    ingest_cpu_self.push_back(t.ingest_cpu.self);
    ingest_cpu_ceph.push_back(t.ingest_cpu.ceph);
    ingest_cpu_pg.push_back(t.ingest_cpu.pg);
    ingest_cores.push_back(t.ingest_cpu.total() / t.ingest);
    put_cpu.push_back(put_busy);
    put_cores.push_back(put_busy / put_s);
  }
  // ingest / plain PUT, as rates of the same bytes: until the last batch
  // is acknowledged, and with the seal (the finished files uploaded).
  state.counters["ratio"] = Median(ratio);
  state.counters["ratio_with_seal"] = Median(ratio_seal);
  state.counters["ingest_records_per_s"] = Median(records_per_s);
  if (kind == 1) state.counters["ingest_payload_bytes_per_s"] = Median(bytes_per_s);
  state.counters["ingest_segment_bytes_per_s"] = Median(segment_bytes_per_s);
  state.counters["plain_put_bytes_per_s"] = Median(put_bytes_per_s);
  state.counters["plain_put_no_md5_bytes_per_s"] = Median(unchecked_bytes_per_s);
  state.counters["segments"] = Median(segments);
  state.counters["segment_kib"] = Median(segment_kib);
  // What the stack spent (client and service, RGW, OSD, PostgreSQL): CPU
  // seconds, and cores busy on average. Ingest that needs both cores of a
  // 2-core machine cannot get faster by overlapping more.
  state.counters["ingest_cpu_s"] = Median(ingest_cpu);
  state.counters["ingest_busy_cores"] = Median(ingest_cores);
  state.counters["ingest_cpu_client_and_service_s"] = Median(ingest_cpu_self);
  state.counters["ingest_cpu_ceph_s"] = Median(ingest_cpu_ceph);
  state.counters["ingest_cpu_postgres_s"] = Median(ingest_cpu_pg);
  state.counters["plain_put_cpu_s"] = Median(put_cpu);
  state.counters["plain_put_busy_cores"] = Median(put_cores);
  for (const std::string& capture : captures) {
    Must(server.hub().Delete(capture, "benchmark").status(), "delete capture");
    for (size_t i = 0; i < plain_objects; ++i) {
      for (const char* suffix : {"", ".no-md5"}) {
        Must(client->DeleteObject(home.bucket, absl::StrCat(capture, "-plain/", i, suffix)),
             "delete");
      }
    }
  }
}

// ---- 2. Ack latency under the group commit --------------------------------

void BM_AckLatency(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const absl::Duration delay = absl::Milliseconds(state.range(1));
  // kind 0: 1024 metadata records a batch; kind 1: four 1 MiB tensors.
  const size_t batch = kind == 0 ? 1024 : 4;
  const int batches = g_smoke ? 8 : (kind == 0 ? 200 : 64);
  const Workload w = MakeWorkload(kind, kind == 0 ? batches * batch / 16 : batches * batch);
  const Home home = NewHome(absl::StrCat("ack", kind, "_", state.range(1)));
  StoreServer server(home, delay);
  auto client = NewClient();
  Stream(server.target(), "warmup", MakeWorkload(kind, 2), batch);
  std::vector<double> acks;
  double segments = 0;
  int n = 0;
  for (auto _ : state) {
    const std::string capture = absl::StrCat("run", n++);
    // Each batch waits for its acknowledgment: the time is its latency.
    const StreamTimes t = Stream(
        server.target(), capture, w, batch,
        [&] { segments = ListAll(*client, home.bucket, SegmentsPrefix(capture)).size(); },
        /*window=*/0);
    // The first batch also makes the capture's catalog row.
    acks.insert(acks.end(), t.batch_ack_ms.begin() + 1, t.batch_ack_ms.end());
    state.SetIterationTime(t.ingest);
    Must(server.hub().Delete(capture, "benchmark").status(), "delete capture");
  }
  state.counters["ack_p50_ms"] = Percentile(acks, 50);
  state.counters["ack_p99_ms"] = Percentile(acks, 99);
  state.counters["segments_per_batch"] = segments / batches;
}

// ---- 3. Queries on a finished capture in the store ------------------------

// A finished capture "big" of kQueryRecords scalar records (8 per task),
// streamed through the service once and kept in its home for every query
// benchmark.
uint64_t QueryRecords() { return g_smoke ? 10000 : 1000000; }

const Home& QueryHome() {
  static const Home* home = [] {
    auto* h = new Home(NewHome("query"));
    StoreServer server(*h, absl::Milliseconds(50));
    Workload w;
    for (uint64_t id = 0; id < QueryRecords(); ++id) {
      w.records.push_back(ScalarRecord(kFirstTask + id / 8).Arg(static_cast<uint32_t>(id % 8))
                              .ScalarBits(id));
      w.payloads.emplace_back();
    }
    Stream(server.target(), "big", w, 8192);
    return h;
  }();
  return *home;
}

// One QueryArgs by task_id: its latency (us), or -1 for a wrong answer.
double QueryOnce(v1::CaptureService::Stub& stub, uint64_t task) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::QueryArgsRequest q;
  q.set_capture("big");
  q.set_task_id(task);
  v1::QueryArgsResponse resp;
  const auto t0 = Clock::now();
  const grpc::Status s = stub.QueryArgs(&ctx, q, &resp);
  const double us = Seconds(t0) * 1e6;
  if (!s.ok() || resp.args_size() != 8 || resp.args(0).record().task_id() != task) {
    std::fprintf(stderr, "QueryArgs: %s, %d args\n", s.error_message().c_str(), resp.args_size());
    return -1;
  }
  return us;
}

// mode kCold: each query on a fresh server; kWarm: on one server whose
// index cache holds every block a query by task reads (a query on every
// 16th task first: a 64 KiB block holds the rows of ~60 tasks and the
// task_id column of ~1000); kWarming: on one server that has answered
// one query, so that the measured queries fetch the blocks they touch
// first (what a server sees until its cache holds the index).
enum QueryMode { kWarm = 0, kCold = 1, kWarming = 2 };

void BM_QueryByTask(benchmark::State& state) {
  const bool cold = state.range(0) == kCold;
  const Home& home = QueryHome();
  std::mt19937_64 rng(1);
  const uint64_t tasks = QueryRecords() / 8;
  auto task = [&] { return kFirstTask + rng() % tasks; };
  std::unique_ptr<StoreServer> warm;
  if (!cold) {
    warm = std::make_unique<StoreServer>(home, absl::Milliseconds(50));
    if (QueryOnce(warm->stub(), task()) < 0) state.SkipWithError("wrong answer");
  }
  if (state.range(0) == kWarm) {
    const auto w0 = Clock::now();
    for (uint64_t t = 0; t < tasks; t += 16) {
      if (QueryOnce(warm->stub(), kFirstTask + t) < 0) state.SkipWithError("wrong answer");
    }
    state.counters["warm_up_s"] = Seconds(w0);
  }
  std::vector<double> latencies;
  // Queries that read only index blocks already in memory, apart from
  // those that fetched one from the store.
  std::vector<double> in_memory, fetching;
  for (auto _ : state) {
    std::unique_ptr<StoreServer> fresh;
    if (cold) fresh = std::make_unique<StoreServer>(home, absl::Milliseconds(50));
    StoreServer& server = cold ? *fresh : *warm;
    const uint64_t misses = server.remote().block_counters().misses;
    const double us = QueryOnce(server.stub(), task());
    if (us < 0) {
      state.SkipWithError("wrong answer");
      break;
    }
    latencies.push_back(us);
    (server.remote().block_counters().misses == misses ? in_memory : fetching).push_back(us);
    state.SetIterationTime(us / 1e6);
  }
  state.counters["p50_us"] = Percentile(latencies, 50);
  state.counters["p99_us"] = Percentile(latencies, 99);
  state.counters["fetching_pct"] = latencies.empty() ? 0 : 100.0 * fetching.size() / latencies.size();
  state.counters["in_memory_p50_us"] = Percentile(in_memory, 50);
  state.counters["in_memory_p99_us"] = Percentile(in_memory, 99);
  state.counters["fetching_p50_us"] = Percentile(fetching, 50);
  auto client = NewClient();
  const auto index = client->HeadObject(home.bucket, SealedKey(*client, home.bucket, "big", "args.index"));
  state.counters["index_mib"] = index.ok() ? index->size / 1048576.0 : -1;
}

// A finished capture "tensors" of 16 distinct 1 MiB payloads.
constexpr int kPayloadRecords = 16;
const Home& PayloadHome() {
  static const Home* home = [] {
    auto* h = new Home(NewHome("payload"));
    StoreServer server(*h, absl::Milliseconds(50));
    Stream(server.target(), "tensors", MakeWorkload(1, kPayloadRecords), kPayloadRecords);
    return h;
  }();
  return *home;
}

// ReadPayload of record `id` in full: how many bytes came (0 on an error),
// kept in `bytes` when given.
size_t ReadPayload(v1::CaptureService::Stub& stub, uint64_t id, std::string* bytes = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::ReadPayloadRequest r;
  r.set_capture("tensors");
  r.set_record_id(id);
  auto reader = stub.ReadPayload(&ctx, r);
  size_t got = 0;
  v1::PayloadChunk chunk;
  while (reader->Read(&chunk)) {
    got += chunk.data().size();
    if (bytes != nullptr) *bytes += chunk.data();
  }
  return reader->Finish().ok() ? got : 0;
}

// A capture server with no object store, its captures on a scratch disk.
class LocalServer {
 public:
  LocalServer() {
    static int serial = 0;
    root_ = ProcessTempPath(absl::StrCat("argsdump_osbench_local_", ++serial));
    RemoveTreeAndSync(root_);
    Must(CreateDirectories(root_), root_);
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = root_;
    server_ = Must(CaptureServer::Start(std::move(o)), "local capture server");
    target_ = absl::StrCat("127.0.0.1:", server_->port());
    stub_ = v1::CaptureService::NewStub(
        grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
  }
  ~LocalServer() {
    server_->Shutdown(std::chrono::milliseconds(1000));
    server_.reset();
    RemoveTreeAndSync(root_);
  }
  const std::string& target() const { return target_; }
  v1::CaptureService::Stub& stub() { return *stub_; }

 private:
  std::string root_;
  std::string target_;
  std::unique_ptr<CaptureServer> server_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
};

void BM_ReadPayload(benchmark::State& state) {
  const Home& home = PayloadHome();
  StoreServer server(home, absl::Milliseconds(50));
  // The same capture on a local disk: what the service costs without the
  // store (the call, and the bytes through gRPC).
  LocalServer local;
  Stream(local.target(), "tensors", MakeWorkload(1, kPayloadRecords), kPayloadRecords);
  auto client = NewClient();
  const std::string bin_key = SealedKey(*client, home.bucket, "tensors", "args.bin");
  // Where each record's bytes are in args.bin, and that both ways read
  // what was sent.
  std::vector<s3::ByteRange> ranges;
  for (int id = 0; id < kPayloadRecords; ++id) {
    grpc::ClientContext ctx;
    v1::GetArgRequest q;
    q.set_capture("tensors");
    q.set_record_id(id);
    v1::CapturedArg arg;
    const grpc::Status s = server.stub().GetArg(&ctx, q, &arg);
    if (!s.ok()) Die("GetArg", absl::InternalError(s.error_message()));
    ranges.push_back({arg.record().bin_offset(), arg.record().bin_size()});
    const std::string want = DistinctPayload(arg.record().task_id() - kFirstTask);
    const std::string got = Must(
        client->GetObjectToString(home.bucket, bin_key, ranges.back(), 1 << 21), "ranged get");
    std::string read, read_local;
    ReadPayload(server.stub(), id, &read);
    ReadPayload(local.stub(), id, &read_local);
    if (got != want || read != want || read_local != want) {
      state.SkipWithError("a payload read back differs from what was sent");
      return;
    }
  }
  std::vector<double> rpc_ms, get_ms, local_ms, ratio, rpc_cpu_us, get_cpu_us;
  int i = 0;
  for (auto _ : state) {
    const int id = i++ % kPayloadRecords;
    const double c0 = ProcessCpuSeconds();
    const auto r0 = Clock::now();
    const size_t rpc_bytes = ReadPayload(server.stub(), id);
    const double rpc = Seconds(r0);
    const double c1 = ProcessCpuSeconds();
    uint64_t get_bytes = 0;
    const auto g0 = Clock::now();
    const auto got = client->GetObject(home.bucket, bin_key, ranges[id], [&](std::string_view c) {
      get_bytes += c.size();
      benchmark::DoNotOptimize(c.data());
      return absl::OkStatus();
    });
    const double get = Seconds(g0);
    const double c2 = ProcessCpuSeconds();
    const auto l0 = Clock::now();
    const size_t local_bytes = ReadPayload(local.stub(), id);
    const double local_read = Seconds(l0);
    if (rpc_bytes != 1u << 20 || !got.ok() || get_bytes != 1u << 20 ||
        local_bytes != 1u << 20) {
      state.SkipWithError("short read");
      break;
    }
    state.SetIterationTime(rpc);
    rpc_ms.push_back(rpc * 1e3);
    get_ms.push_back(get * 1e3);
    local_ms.push_back(local_read * 1e3);
    ratio.push_back(get / rpc);
    rpc_cpu_us.push_back((c1 - c0) * 1e6);
    get_cpu_us.push_back((c2 - c1) * 1e6);
  }
  state.counters["read_payload_p50_ms"] = Percentile(rpc_ms, 50);
  state.counters["read_payload_p99_ms"] = Percentile(rpc_ms, 99);
  state.counters["ranged_get_p50_ms"] = Percentile(get_ms, 50);
  state.counters["ranged_get_p99_ms"] = Percentile(get_ms, 99);
  state.counters["local_read_payload_p50_ms"] = Percentile(local_ms, 50);
  state.counters["local_read_payload_p99_ms"] = Percentile(local_ms, 99);
  state.counters["ratio"] = Median(ratio);  // ReadPayload / ranged GET, as rates
  // CPU time of this process (client, server and S3 client) per read;
  // the store's own work (another process) is not in it.
  state.counters["read_payload_cpu_us"] = Median(rpc_cpu_us);
  state.counters["ranged_get_cpu_us"] = Median(get_cpu_us);
}

}  // namespace
}  // namespace argsdump

// Malloc thresholds fixed as in capture_service_benchmark: the client and
// the service share this process, and adaptive thresholds would let the
// server's 1 MiB frees change the client's page faults between builds.
int main(int argc, char** argv) {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--smoke") {
      argsdump::g_smoke = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  ::benchmark::Initialize(&rest_argc, rest.data());
  if (::benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  using argsdump::g_smoke;
  namespace bm = ::benchmark;
  const int runs = g_smoke ? 1 : 3;
  bm::RegisterBenchmark("BM_IngestVsPut", argsdump::BM_IngestVsPut)
      ->Arg(0)->Arg(1)->Iterations(runs)->UseManualTime()->Unit(bm::kMillisecond);
  bm::RegisterBenchmark("BM_AckLatency", argsdump::BM_AckLatency)
      ->ArgNames({"kind", "group_commit_ms"})
      ->ArgsProduct({{0, 1}, {50, 0}})
      ->Iterations(1)->UseManualTime()->Unit(bm::kMillisecond);
  bm::RegisterBenchmark("BM_QueryByTask", argsdump::BM_QueryByTask)
      ->ArgName("cold")->Arg(argsdump::kCold)->Iterations(g_smoke ? 2 : 20)
      ->UseManualTime()->Unit(bm::kMicrosecond);
  bm::RegisterBenchmark("BM_QueryByTask", argsdump::BM_QueryByTask)
      ->ArgName("cold")->Arg(argsdump::kWarm)->Iterations(g_smoke ? 50 : 5000)
      ->UseManualTime()->Unit(bm::kMicrosecond);
  bm::RegisterBenchmark("BM_QueryByTaskWarming", argsdump::BM_QueryByTask)
      ->Arg(argsdump::kWarming)->Iterations(g_smoke ? 50 : 5000)
      ->UseManualTime()->Unit(bm::kMicrosecond);
  bm::RegisterBenchmark("BM_ReadPayload", argsdump::BM_ReadPayload)
      ->Iterations(g_smoke ? 10 : 200)->UseManualTime()->Unit(bm::kMillisecond);
  bm::RunSpecifiedBenchmarks();
  bm::Shutdown();
  return 0;
}
