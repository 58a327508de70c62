// PUT and GET throughput of the S3 client against a real Ceph RGW (booted
// by the benchmark, as the tests do), beside baselines measured in the same
// run: the same bytes through the `curl` command line (the same store, the
// same signing), and a memcpy of them. At the end, the ratios.
//   bazel run -c opt //s3:s3_client_benchmark
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "s3/s3_client.h"
#include "tests/testing/ceph_rgw.h"

namespace argsdump::s3 {

S3Client& Client();

namespace {

constexpr char kBucket[] = "argsdump-s3-benchmark";

CephRgw* Rgw() {
  auto rgw = SharedCephRgw();
  if (!rgw.ok()) {
    std::fprintf(stderr, "no RGW: %s\n", std::string(rgw.status().message()).c_str());
    std::exit(1);
  }
  return *rgw;
}

}  // namespace

S3Client& Client() {
  static std::unique_ptr<S3Client> client = [] {
    CephRgw* rgw = Rgw();
    S3ClientOptions options;
    options.endpoint = rgw->endpoint();
    options.region = rgw->region();
    options.credentials = Credentials{rgw->access_key(), rgw->secret_key(), ""};
    auto made = S3Client::Create(options);
    if (!made.ok() || !(*made)->CreateBucket(kBucket).ok()) std::exit(1);
    // Warm up: the first writes into a fresh bucket take seconds on RGW
    // (its index and data pools' first objects), which is not throughput.
    for (int i = 0; i < 3; ++i) {
      if (!(*made)->PutObject(kBucket, "bench/warmup", std::string(1 << 20, 'w')).ok()) std::exit(1);
    }
    return std::move(*made);
  }();
  return *client;
}

namespace {

const std::string& Bytes(size_t size) {
  static std::map<size_t, std::string> cache;
  std::string& bytes = cache[size];
  if (bytes.size() != size) {
    bytes.resize(size);
    uint32_t x = 12345;
    for (size_t i = 0; i < size; ++i) {
      x = x * 1664525u + 1013904223u;
      bytes[i] = static_cast<char>(x >> 24);
    }
  }
  return bytes;
}

std::string Key(size_t size) { return absl::StrCat("bench/", size >> 20, "MiB"); }

void BM_ClientPut(benchmark::State& state, PutOptions::BodyCheck check) {
  const size_t size = static_cast<size_t>(state.range(0));
  const std::string& body = Bytes(size);
  PutOptions options;
  options.body_check = check;
  for (auto _ : state) {
    auto etag = Client().PutObject(kBucket, Key(size), body, options);
    if (!etag.ok()) state.SkipWithError(std::string(etag.status().message()).c_str());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_ClientGet(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  if (!Client().PutObject(kBucket, Key(size), Bytes(size)).ok()) state.SkipWithError("put");
  for (auto _ : state) {
    uint64_t got = 0;
    auto info = Client().GetObject(kBucket, Key(size), {}, [&](std::string_view chunk) {
      got += chunk.size();
      benchmark::DoNotOptimize(chunk.data());
      return absl::OkStatus();
    });
    if (!info.ok() || got != size) state.SkipWithError("get");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// The curl command line (7.88) with its own SigV4: RGW needs the payload
// hash header, which curl does not add by itself.
int RunCurl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"curl", "-sS", "-f", "-o", "/dev/null", "--aws-sigv4",
                                   "aws:amz:us-east-1:s3", "--user",
                                   Rgw()->access_key() + ":" + Rgw()->secret_key(), "-H",
                                   "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execvp("curl", raw.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string CurlFile(size_t size) {
  const std::string path = absl::StrCat("/dev/shm/argsdump_s3_bench_", ::getpid(), "_", size);
  std::ofstream(path, std::ios::binary) << Bytes(size);
  return path;
}

void BM_CurlCliPut(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const std::string file = CurlFile(size);
  const std::string url = absl::StrCat(Rgw()->endpoint(), "/", kBucket, "/curl", size >> 20);
  for (auto _ : state) {
    if (RunCurl({"-T", file, url}) != 0) state.SkipWithError("curl PUT failed");
  }
  ::unlink(file.c_str());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_CurlCliGet(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  if (!Client().PutObject(kBucket, Key(size), Bytes(size)).ok()) state.SkipWithError("put");
  const std::string url = absl::StrCat(Rgw()->endpoint(), "/", kBucket, "/", Key(size));
  for (auto _ : state) {
    if (RunCurl({url}) != 0) state.SkipWithError("curl GET failed");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_Memcpy(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const std::string& from = Bytes(size);
  std::string to(size, '\0');
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), size);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void Sizes(benchmark::internal::Benchmark* b) {
  // At least 3 s each: the 64 MiB cases then run a few iterations.
  b->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
}

BENCHMARK_CAPTURE(BM_ClientPut, signed_sha256, PutOptions::BodyCheck::kSignedSha256)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_ClientPut, content_md5, PutOptions::BodyCheck::kContentMd5)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_ClientPut, unsigned, PutOptions::BodyCheck::kNone)->Apply(Sizes);
BENCHMARK(BM_CurlCliPut)->Apply(Sizes);
BENCHMARK(BM_ClientGet)->Apply(Sizes);
BENCHMARK(BM_CurlCliGet)->Apply(Sizes);
BENCHMARK(BM_Memcpy)->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

// Keeps each run's bytes per second and prints the ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      auto it = run.counters.find("bytes_per_second");
      if (it != run.counters.end() && !run.error_occurred) {
        rates_[run.benchmark_name()] = it->second.value;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nRatios (same run, MiB/s):\n");
    for (const char* size : {"1048576", "67108864"}) {
      Ratio("PUT client (signed sha256) / curl CLI", "BM_ClientPut/signed_sha256", "BM_CurlCliPut", size);
      Ratio("PUT client (unsigned) / curl CLI (unsigned)", "BM_ClientPut/unsigned", "BM_CurlCliPut", size);
      Ratio("PUT client (content md5) / curl CLI", "BM_ClientPut/content_md5", "BM_CurlCliPut", size);
      Ratio("GET client / curl CLI", "BM_ClientGet", "BM_CurlCliGet", size);
      Ratio("GET client / memcpy", "BM_ClientGet", "BM_Memcpy", size);
    }
  }

 private:
  void Ratio(const char* what, const std::string& a, const std::string& b, const std::string& size) {
    const double ra = Rate(a + "/" + size + "/");
    const double rb = Rate(b + "/" + size + "/");
    if (ra == 0 || rb == 0) return;
    std::printf("  %-46s %3s MiB: %8.1f / %8.1f = %.2f\n", what, size == "1048576" ? "1" : "64",
                ra / (1 << 20), rb / (1 << 20), ra / rb);
  }
  // The rate of the run whose name starts with `prefix` (0: none).
  double Rate(const std::string& prefix) const {
    for (const auto& [name, rate] : rates_) {
      if (name.compare(0, prefix.size(), prefix) == 0) return rate;
    }
    return 0;
  }
  std::map<std::string, double> rates_;
};

}  // namespace
}  // namespace argsdump::s3

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Boot the RGW and warm up before the clock runs (not inside the first
  // benchmark's first iteration).
  argsdump::s3::Client();
  argsdump::s3::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
