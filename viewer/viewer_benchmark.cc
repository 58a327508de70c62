// dump_viewer on large manifests: listing with a task filter over N
// entries (the 10 M: <= 10 s, bounded memory), paired in every
// iteration with a raw read() of the same file, the limit for a streaming
// reader on this machine; a task query (BM_Task) answered from args.index
// and by streaming a copy without it; and one text export of a large
// tensor, paired with the bare element formatting it needs.
//
//   bazel run -c opt //viewer:viewer_benchmark
//
// The capture is written once per size by the real CaptureStore in a child
// process (so this process's peak RSS is the viewer's alone) and kept in
// $TEST_TMPDIR or /tmp/argsdump_viewer_bench/<N>/ for later runs.
// Counters: entries/s, list_s, read_s, ratio (read_s / list_s: the share of
// raw read speed the listing reaches), manifest_MB, rss_growth_MiB (the
// peak resident set over the listing minus before it), peak_rss_MiB (the
// process's peak, everything included).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "benchmark/benchmark.h"
#include "store/capture_store.h"
#include "viewer/text_export.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/temp_dir.h"
#include "viewer/viewer.h"

namespace argsdump {
namespace {

constexpr uint64_t kRecordsPerTask = 4;

std::string CaptureDir(uint64_t entries) {
  return TempPath(absl::StrCat("argsdump_viewer_bench/", entries, "/args_dump"));
}

// Metadata-only records (hybrid level without marked tensors): per task an
// input tensor and a scalar before, an output and an inout after.
bool WriteCapture(const std::string& dir, uint64_t entries) {
  v1::CaptureInfo info;
  info.set_name("viewer_bench");
  info.set_level(v1::DUMP_LEVEL_HYBRID);
  auto store = CaptureStore::Create(dir, info);
  if (!store.ok()) return false;
  std::vector<v1::ArgRecord> batch(kRecordsPerTask * 1024);
  std::vector<const v1::ArgRecord*> ptrs;
  std::vector<absl::string_view> payloads;
  for (uint64_t done = 0; done < entries;) {
    ptrs.clear();
    payloads.clear();
    for (size_t i = 0; i < batch.size() && done < entries; ++i, ++done) {
      const uint64_t task = done / kRecordsPerTask, slot = done % kRecordsPerTask;
      const uint64_t task_id = 0x100000000ull + task;
      const std::vector<uint32_t> func_ids = {static_cast<uint32_t>(task % 7)};
      const auto thread = static_cast<uint32_t>(task % 2);
      if (slot == 1) {
        batch[i] = ScalarRecord(task_id).FuncIds(func_ids).Arg(1).DeviceThread(thread)
                       .Dtype(v1::DTYPE_FLOAT32).ScalarBits(0x3F000000u + task % 1000);
      } else {
        // Metadata only: no bin_size.
        batch[i] = TensorRecord(task_id).FuncIds(func_ids).Arg(static_cast<uint32_t>(slot))
                       .DeviceThread(thread)
                       .Role(slot == 0 ? v1::ROLE_INPUT : slot == 2 ? v1::ROLE_OUTPUT
                                                                    : v1::ROLE_INOUT)
                       .Stage(slot == 0 ? v1::STAGE_BEFORE_DISPATCH : v1::STAGE_AFTER_COMPLETION)
                       .Dtype(v1::DTYPE_FLOAT16).Shape({64, 128}).Contiguous().BinSize(0);
      }
      ptrs.push_back(&batch[i]);
      payloads.emplace_back();
    }
    if (!(*store)->AppendBatch(ptrs, payloads).ok()) return false;
  }
  return (*store)->Finish(v1::CaptureCounters()).ok();
}

// The capture for `entries`, written by a child process when absent.
std::string EnsureCapture(uint64_t entries) {
  const std::string dir = CaptureDir(entries);
  struct stat st;
  if (::stat((dir + "/args_dump.json").c_str(), &st) == 0) return dir;
  RemoveTree(dir);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(WriteCapture(dir, entries) ? 0 : 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  return dir;
}

long PeakRssKiB() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

double RawRead(const std::string& path, uint64_t* bytes) {
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  std::vector<char> buffer(1 << 20);
  *bytes = 0;
  for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) *bytes += n;
  ::close(fd);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

// range(0): entries; range(1): what is listed - 0: everything, 1: one
// task (-t), 2: one index (-i), 3: a filter every entry is parsed for
// (-s after -r output: a quarter of the entries).
void BM_List(benchmark::State& state) {
  const uint64_t entries = state.range(0);
  const int64_t mode = state.range(1);
  const std::string dir = EnsureCapture(entries);
  if (dir.empty()) {
    state.SkipWithError("could not write the capture");
    return;
  }
  // A task in the last quarter: the reader goes through nearly everything.
  const std::string task = absl::StrCat(
      "0x", absl::Hex(0x100000000ull + entries / kRecordsPerTask * 3 / 4, absl::kZeroPad16));
  std::vector<std::string> args = {dir};
  if (mode == 1) args.insert(args.end(), {"-t", task});
  if (mode == 2) args.insert(args.end(), {"-i", std::to_string(entries * 3 / 4)});
  if (mode == 3) args.insert(args.end(), {"-s", "after", "-r", "output"});
  NullBuffer null_buffer;
  std::ostream null(&null_buffer);
  uint64_t bytes = 0;
  double list_s = 0, read_s = 0;
  std::vector<double> ratios;
  const long rss_before = PeakRssKiB();
  for (auto _ : state) {
    read_s = RawRead(dir + "/args_dump.json", &bytes);
    const auto start = std::chrono::steady_clock::now();
    const int code = RunViewer(args, null, null);
    list_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (code != 0) {
      state.SkipWithError("dump_viewer failed");
      return;
    }
    ratios.push_back(read_s / list_s);
    state.SetIterationTime(list_s);
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["entries_per_s"] = benchmark::Counter(
      static_cast<double>(entries) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["list_s"] = list_s;
  state.counters["read_s"] = read_s;
  state.counters["ratio"] = ratios[ratios.size() / 2];
  state.counters["manifest_MB"] = bytes / 1e6;
  state.counters["rss_growth_MiB"] = (PeakRssKiB() - rss_before) / 1024.0;
  state.counters["peak_rss_MiB"] = PeakRssKiB() / 1024.0;
}

BENCHMARK(BM_List)
    ->ArgsProduct({{10000, 750000, 1000000, 10000000}, {1, 2, 3, 0}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kSecond);

// The capture for `entries` without its args.index (the manifest linked):
// what the viewer streams.
std::string EnsureCaptureWithoutIndex(uint64_t entries) {
  const std::string dir = EnsureCapture(entries);
  if (dir.empty()) return "";
  const std::string bare = TempPath(absl::StrCat("argsdump_viewer_bench/", entries,
                                                 "_noindex/args_dump"));
  struct stat st;
  if (::stat((bare + "/args_dump.json").c_str(), &st) == 0) return bare;
  if (!CreateDirectories(bare).ok()) return "";
  if (::link((dir + "/args_dump.json").c_str(), (bare + "/args_dump.json").c_str()) != 0) {
    return "";
  }
  return bare;
}

// dump_viewer DIR -t T, one task of 4 entries near the end (range(0):
// entries), answered from args.index (range(1) = 1) or by streaming the
// manifest (0). Counters: list_s (the median), peak_rss_MiB.
void BM_Task(benchmark::State& state) {
  const uint64_t entries = state.range(0);
  const bool with_index = state.range(1) == 1;
  const std::string dir = with_index ? EnsureCapture(entries) : EnsureCaptureWithoutIndex(entries);
  if (dir.empty()) {
    state.SkipWithError("could not write the capture");
    return;
  }
  const std::string task = absl::StrCat(
      "0x", absl::Hex(0x100000000ull + entries / kRecordsPerTask * 3 / 4, absl::kZeroPad16));
  const std::vector<std::string> args = {dir, "-t", task};
  NullBuffer null_buffer;
  std::ostream null(&null_buffer);
  std::vector<double> times;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const int code = RunViewer(args, null, null);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (code != 0) {
      state.SkipWithError("dump_viewer failed");
      return;
    }
    times.push_back(s);
    state.SetIterationTime(s);
  }
  std::sort(times.begin(), times.end());
  state.counters["list_s"] = times[times.size() / 2];
  state.counters["peak_rss_MiB"] = PeakRssKiB() / 1024.0;
}

BENCHMARK(BM_Task)
    ->ArgsProduct({{10000, 750000, 1000000, 10000000}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// One --export text file of a 256 x 256 tensor (range(0): 0 FLOAT32, 1
// INT32), paired in every iteration with the limit: printing the same
// elements with the formatter the reference's text needs (%.6g, decimal)
// into one buffer, nothing else. Counters: elements/s, ratio (limit_s /
// export_s: the share of the bare formatting speed the export reaches).
void BM_TextExport(benchmark::State& state) {
  const bool is_float = state.range(0) == 0;
  constexpr uint64_t kSide = 256, kElements = kSide * kSide;
  ManifestEntry e;
  e.task_id = 0x100000003ull;
  e.role = v1::ROLE_OUTPUT;
  e.stage = v1::STAGE_AFTER_COMPLETION;
  e.kind = v1::KIND_TENSOR;
  e.dtype = is_float ? DataType::kFloat32 : DataType::kInt32;
  e.shape = {kSide, kSide};
  e.strides = {kSide, 1};
  e.is_contiguous = true;
  std::string payload(kElements * 4, '\0');
  uint32_t x = 12345;
  for (uint64_t i = 0; i < kElements; ++i) {
    x = x * 1664525u + 1013904223u;  // values of every magnitude and sign
    const float f = static_cast<float>(static_cast<int32_t>(x)) / static_cast<float>(1 + (x >> 20));
    std::memcpy(&payload[i * 4], is_float ? static_cast<const void*>(&f) : &x, 4);
  }
  e.bin_size = payload.size();
  std::vector<double> ratios;
  size_t bytes = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    std::string limit;
    limit.reserve(kElements * 16);
    char buf[32];
    for (uint64_t i = 0; i < kElements; ++i) {
      int32_t v;
      std::memcpy(&v, &payload[i * 4], 4);
      float f;
      std::memcpy(&f, &v, 4);
      const int n = is_float ? std::snprintf(buf, sizeof(buf), "%.6g", f)
                             : static_cast<int>(absl::numbers_internal::FastIntToBuffer(v, buf) - buf);
      limit.append(buf, static_cast<size_t>(n));
    }
    benchmark::DoNotOptimize(limit.data());
    const double limit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    start = std::chrono::steady_clock::now();
    const std::string text = FormatArgText(e, payload);
    benchmark::DoNotOptimize(text.data());
    const double export_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bytes = text.size();
    ratios.push_back(limit_s / export_s);
    state.SetIterationTime(export_s);
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["elements_per_s"] = benchmark::Counter(
      static_cast<double>(kElements) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["ratio"] = ratios[ratios.size() / 2];
  state.counters["text_MB"] = bytes / 1e6;
}

BENCHMARK(BM_TextExport)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace argsdump

BENCHMARK_MAIN();
