// The catalog's queries against a real PostgreSQL started here (loopback,
// durability off, as in the tests): ListCaptures by label over 10^5
// captures, Get, CommitSegment, each as p50/p99 per call and as a ratio to
// a bare `SELECT 1` round trip measured in the same run (the floor any
// catalog call pays). Run it optimized:
//   bazel run -c opt //catalog:catalog_benchmark            (10^5 captures)
//   bazel run -c opt //catalog:catalog_benchmark -- --captures=1000
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "catalog/catalog.h"
#include "catalog/pg_connection.h"
#include "tests/testing/postgres_server.h"

namespace argsdump {
namespace {

using Clock = std::chrono::steady_clock;

int g_captures = 100000;
std::unique_ptr<PostgresServer> g_server;
std::string g_uri;
std::unique_ptr<Catalog> g_catalog;
std::unique_ptr<PgConnection> g_raw;
double g_select1_p50_ms = 0;

[[noreturn]] void Die(const absl::Status& status) {
  std::fprintf(stderr, "catalog_benchmark: %s\n", status.ToString().c_str());
  std::exit(1);
}

// Per-call times of a benchmark's iterations, reported as p50/p99 (ms) and
// p50 against SELECT 1's.
class Latencies {
 public:
  void Add(Clock::duration d) { ms_.push_back(std::chrono::duration<double, std::milli>(d).count()); }
  double Percentile(double p) {
    if (ms_.empty()) return 0;
    std::sort(ms_.begin(), ms_.end());
    return ms_[std::min(ms_.size() - 1, static_cast<size_t>(p * static_cast<double>(ms_.size())))];
  }
  void Report(benchmark::State& state) {
    const double p50 = Percentile(0.5);
    state.counters["p50_ms"] = p50;
    state.counters["p99_ms"] = Percentile(0.99);
    if (g_select1_p50_ms > 0) state.counters["x_select1"] = p50 / g_select1_p50_ms;
  }

 private:
  std::vector<double> ms_;
};

// team: t0..t99 (1 % of the captures each), run: r0..r9 (10 %), all: yes;
// every third capture finished.
// Rows go in as multi-row INSERTs of 1000 (every value a parameter).
void Populate() {
  constexpr int kBatch = 1000;
  for (int base = 0; base < g_captures; base += kBatch) {
    std::string sql =
        "INSERT INTO captures (name, state, epoch, info, counters, labels, world_size, level, "
        "object_prefix) VALUES ";
    std::vector<PgParam> params;
    for (int i = base; i < std::min(g_captures, base + kBatch); ++i) {
      v1::CaptureInfo info;
      info.set_name(absl::StrFormat("capture-%07d", i));
      info.set_platform("a2a3sim");
      (*info.mutable_labels())["team"] = absl::StrCat("t", i % 100);
      (*info.mutable_labels())["run"] = absl::StrCat("r", i % 10);
      (*info.mutable_labels())["all"] = "yes";
      const size_t n = params.size();
      absl::StrAppend(&sql, n == 0 ? "" : ",", "($", n + 1, ", 1, 1, $",
                      n + 2, ", $", n + 3, ", $", n + 4, "::jsonb, 0, 2, $", n + 5, ")");
      params.push_back(PgParam::Text(info.name()));
      params.push_back(PgParam::Bytes(info.SerializeAsString()));
      params.push_back(PgParam::Bytes(""));
      params.push_back(PgParam::Text(absl::StrCat("{\"team\":\"t", i % 100, "\",\"run\":\"r",
                                                  i % 10, "\",\"all\":\"yes\"}")));
      params.push_back(PgParam::Text("p/" + info.name()));
    }
    absl::StatusOr<PgResult> r = g_raw->Exec(sql, params);
    if (!r.ok()) Die(r.status());
  }
  for (const char* fix :
       {"UPDATE captures SET state = 2, finished_at = now(), manifest_key = name || '/m', "
        "bin_key = name || '/b', index_key = name || '/i' "
        "WHERE substring(name from 9)::int % 3 = 0",
        "ANALYZE captures"}) {
    if (absl::Status s = g_raw->Exec(fix).status(); !s.ok()) Die(s);
  }
}

void BM_SelectOne(benchmark::State& state) {
  Latencies latencies;
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<PgResult> r = g_raw->Exec("SELECT 1");
    latencies.Add(Clock::now() - t0);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
  }
  latencies.Report(state);
}
BENCHMARK(BM_SelectOne)->Unit(benchmark::kMicrosecond)->UseRealTime();

// range(0): 0 = team=t42 (1 %), 1 = run=r3 (10 %), 2 = all=yes (100 %),
// 3 = team=t42 and finished, 4 = team=t42 paged to its end (10 pages).
void BM_ListByLabel(benchmark::State& state) {
  CaptureQuery query;
  query.page_size = 100;
  switch (state.range(0)) {
    case 0: query.labels = {{"team", "t42"}}; break;
    case 1: query.labels = {{"run", "r3"}}; break;
    case 2: query.labels = {{"all", "yes"}}; break;
    case 3:
      query.labels = {{"team", "t42"}};
      query.state = v1::CAPTURE_STATE_FINISHED;
      break;
    default: query.labels = {{"team", "t42"}}; break;
  }
  Latencies latencies;
  size_t listed = 0;
  for (auto _ : state) {
    CaptureQuery q = query;
    const Clock::time_point t0 = Clock::now();
    do {
      absl::StatusOr<CapturePage> page = g_catalog->List(q);
      if (!page.ok()) {
        state.SkipWithError(page.status().ToString().c_str());
        return;
      }
      listed = page->captures.size();
      q.page_token = page->next_page_token;
    } while (state.range(0) == 4 && !q.page_token.empty());
    latencies.Add(Clock::now() - t0);
  }
  state.counters["last_page"] = static_cast<double>(listed);
  latencies.Report(state);
}
BENCHMARK(BM_ListByLabel)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Get(benchmark::State& state) {
  Latencies latencies;
  int i = 0;
  for (auto _ : state) {
    const std::string name = absl::StrFormat("capture-%07d", (i++ * 7919) % g_captures);
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<CatalogCapture> c = g_catalog->Get(name);
    latencies.Add(Clock::now() - t0);
    if (!c.ok()) state.SkipWithError(c.status().ToString().c_str());
  }
  latencies.Report(state);
}
BENCHMARK(BM_Get)->Unit(benchmark::kMicrosecond)->UseRealTime();

// One segment per call on a live capture (the group commit's catalog part).
void BM_CommitSegment(benchmark::State& state) {
  static int run = 0;
  v1::CaptureInfo info;
  info.set_name(absl::StrCat("commit-", run++));
  if (absl::Status s = g_catalog->CreateCapture(info, "p/" + info.name()).status(); !s.ok()) Die(s);
  Latencies latencies;
  uint64_t seq = 0;
  v1::CaptureCounters counters;
  for (auto _ : state) {
    CatalogSegment segment;
    segment.seq = seq;
    segment.first_record = seq * 1000;
    segment.record_count = 1000;
    segment.bytes = 8 << 20;
    segment.object_key = absl::StrCat("p/", info.name(), "/seg-", seq);
    counters.set_total_args((seq + 1) * 1000);
    const Clock::time_point t0 = Clock::now();
    absl::Status s = g_catalog->CommitSegment(info.name(), 1, segment, (seq + 1) * 1000,
                                              (seq + 1) * (8 << 20), counters);
    latencies.Add(Clock::now() - t0);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    ++seq;
  }
  latencies.Report(state);
}
BENCHMARK(BM_CommitSegment)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace argsdump

int main(int argc, char** argv) {
  using namespace argsdump;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (absl::StartsWith(argv[i], "--captures=")) {
      if (!absl::SimpleAtoi(argv[i] + 11, &g_captures) || g_captures < 1) {
        std::fprintf(stderr, "catalog_benchmark: --captures wants a positive number\n");
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;

  absl::StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
  if (!server.ok()) Die(server.status());
  g_server = *std::move(server);
  absl::StatusOr<std::string> uri = g_server->CreateDatabase("bench");
  if (!uri.ok()) Die(uri.status());
  g_uri = *uri;
  Catalog::Options options;
  options.pg.uri = g_uri;
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(options);
  if (!catalog.ok()) Die(catalog.status());
  g_catalog = *std::move(catalog);
  PgOptions raw;
  raw.uri = g_uri;
  absl::StatusOr<std::unique_ptr<PgConnection>> c = PgConnection::Connect(raw);
  if (!c.ok()) Die(c.status());
  g_raw = *std::move(c);
  const Clock::time_point t0 = Clock::now();
  Populate();
  std::fprintf(stderr, "catalog_benchmark: %d captures inserted in %.2f s\n", g_captures,
               std::chrono::duration<double>(Clock::now() - t0).count());
  // The floor for the ratios: SELECT 1's p50 over 2000 round trips.
  {
    Latencies select1;
    for (int i = 0; i < 2000; ++i) {
      const Clock::time_point s = Clock::now();
      if (absl::Status st = g_raw->Exec("SELECT 1").status(); !st.ok()) Die(st);
      select1.Add(Clock::now() - s);
    }
    g_select1_p50_ms = select1.Percentile(0.5);
  }
  benchmark::RunSpecifiedBenchmarks();
  g_catalog.reset();
  g_raw.reset();
  g_server.reset();
  return 0;
}
