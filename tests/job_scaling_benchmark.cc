// How a job of many ranks scales on one machine: N sim_run processes at
// once (each with its own device process) streaming to one capture_server,
// N against a baseline of 8 in the same iteration, paired so the machine's
// load hits both alike. Reports, per N:
//   throughput_ratio    records/s with N runs / records/s with 8 (1: linear)
//   cpu_per_record_ratio  the runs' CPU per record with N / with 8 (1: CPU
//                         per record independent of how many run at once)
//   marginal_cpu_per_record_ratio  the same for the CPU a record adds: each
//                       side's CPU less that of as many one-step runs (a
//                       run's start: loading, the device process, the
//                       channel), over the records past the first step
//   start_cpu_ms, baseline_start_cpu_ms  a one-step run's CPU with N and
//                       with 8 at once
//   failed_runs         runs that did not exit 0 (a lost or unacknowledged
//                       record makes sim_run exit non-zero): must be 0
// Usage: job_scaling_benchmark --sim_run=PATH --capture_server=PATH
//        [benchmark flags]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"

extern char** environ;

namespace {

std::string g_sim_run;
std::string g_capture_server;
constexpr int kBaseline = 8;

pid_t Spawn(const std::vector<std::string>& args, int stdout_fd) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  const int devnull = ::open("/dev/null", O_WRONLY);
  posix_spawn_file_actions_adddup2(&actions, devnull, STDERR_FILENO);
  pid_t pid = -1;
  if (::posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  ::close(devnull);
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A capture_server on 127.0.0.1, port 0; its "listening on host:port" line
// says where.
struct Server {
  pid_t pid = -1;
  std::string target;
  std::string root;
  bool Start() {
    char dir[] = "/tmp/job_scaling_XXXXXX";
    if (::mkdtemp(dir) == nullptr) return false;
    root = dir;
    int fds[2];
    if (::pipe(fds) != 0) return false;
    pid = Spawn({g_capture_server, "--listen=127.0.0.1:0", "--root=" + root + "/srv"}, fds[1]);
    ::close(fds[1]);
    FILE* f = ::fdopen(fds[0], "r");
    char line[512] = {0};
    const bool got = pid > 0 && std::fgets(line, sizeof(line), f) != nullptr;
    std::fclose(f);
    const char* at = std::strstr(line, "listening on ");
    if (!got || at == nullptr) return false;
    target = std::string(at + 13, std::strcspn(at + 13, " \n"));
    return true;
  }
  ~Server() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      Wait(pid);
    }
    if (!root.empty()) std::system(("rm -rf '" + root + "'").c_str());
  }
};

double ChildCpuSeconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_CHILDREN, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct JobRun {
  double wall = 0, cpu = 0;
  int failed = 0;
};

// N runs of mixed_example (20 records a step) for `steps` steps at once.
JobRun RunJob(const Server& server, int n, int steps, const std::string& round) {
  const double cpu0 = ChildCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  const int devnull = ::open("/dev/null", O_WRONLY);
  for (int i = 0; i < n; ++i) {
    pids.push_back(Spawn({g_sim_run, "--workload=mixed_example", "--dump-args=2",
                          absl::StrCat("--steps=", steps), "--capture-server=" + server.target,
                          absl::StrCat("--capture-name=r", round, "_n", n, "_", i)},
                         devnull));
  }
  ::close(devnull);
  JobRun r;
  for (pid_t p : pids) r.failed += p <= 0 || Wait(p) != 0;
  r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu = ChildCpuSeconds() - cpu0;
  return r;
}

void BM_JobScaling(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int steps = static_cast<int>(state.range(1));
  Server server;
  if (!server.Start()) {
    state.SkipWithError("capture_server did not start (give --capture_server=PATH)");
    return;
  }
  const double records_per_run = 20.0 * steps;
  const double added_per_run = 20.0 * (steps - 1);
  double throughput = 0, cpu = 0, marginal = 0, start = 0, base_start = 0, wall_n = 0,
         wall_base = 0;
  int failed = 0, round = 0;
  for (auto _ : state) {
    const JobRun base = RunJob(server, kBaseline, steps, absl::StrCat(round));
    const JobRun big = RunJob(server, n, steps, absl::StrCat(round));
    const JobRun base_one = RunJob(server, kBaseline, 1, absl::StrCat("one", round));
    const JobRun big_one = RunJob(server, n, 1, absl::StrCat("one", round));
    ++round;
    failed += base.failed + big.failed + base_one.failed + big_one.failed;
    throughput += (n * records_per_run / big.wall) / (kBaseline * records_per_run / base.wall);
    cpu += (big.cpu / (n * records_per_run)) / (base.cpu / (kBaseline * records_per_run));
    if (steps > 1) {
      marginal += ((big.cpu - big_one.cpu) / (n * added_per_run)) /
                  ((base.cpu - base_one.cpu) / (kBaseline * added_per_run));
    }
    start += big_one.cpu / n * 1000;
    base_start += base_one.cpu / kBaseline * 1000;
    wall_n += big.wall;
    wall_base += base.wall;
  }
  state.counters["throughput_ratio"] = throughput / round;
  state.counters["cpu_per_record_ratio"] = cpu / round;
  state.counters["marginal_cpu_per_record_ratio"] = marginal / round;
  state.counters["start_cpu_ms"] = start / round;
  state.counters["baseline_start_cpu_ms"] = base_start / round;
  state.counters["wall_s"] = wall_n / round;
  state.counters["baseline_wall_s"] = wall_base / round;
  state.counters["failed_runs"] = failed;
  if (failed > 0) state.SkipWithError("a run did not exit 0: records were lost or unacknowledged");
}
BENCHMARK(BM_JobScaling)
    ->ArgNames({"runs", "steps"})
    ->Args({8, 50})
    ->Args({16, 50})
    ->Args({32, 50})
    ->Args({64, 50})
    ->Args({64, 500})
    ->Args({2, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (absl::StartsWith(argv[i], "--sim_run=")) {
      g_sim_run = argv[i] + 10;
    } else if (absl::StartsWith(argv[i], "--capture_server=")) {
      g_capture_server = argv[i] + 17;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
