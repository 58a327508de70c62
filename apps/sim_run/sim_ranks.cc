#include "apps/sim_run/sim_ranks.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace argsdump {

absl::StatusOr<std::vector<RankExit>> LaunchRanks(const RankLaunch& launch) {
  std::vector<RankExit> exits;
  absl::Status failed;
  for (uint32_t k = 0; k < launch.ranks && failed.ok(); ++k) {
    std::vector<std::string> args = {"sim_run"};
    args.insert(args.end(), launch.args.begin(), launch.args.end());
    args.push_back(absl::StrCat("--job=", launch.job));
    args.push_back(absl::StrCat("--rank=", k));
    args.push_back(absl::StrCat("--world-size=", launch.ranks));
    args.push_back("--ranks=0");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
    if (rc != 0) {
      failed = absl::ResourceExhaustedError(
          absl::StrCat("rank ", k, " of job ", launch.job, " cannot be started: ", std::strerror(rc)));
      break;
    }
    exits.push_back({k, 0, pid});
  }
  for (RankExit& e : exits) {
    int status = 0;
    while (::waitpid(e.pid, &status, 0) < 0 && errno == EINTR) {
    }
    e.exit_status = WIFEXITED(status) ? WEXITSTATUS(status)
                    : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                          : 1;
    if (e.exit_status != 0) {
      std::fprintf(stderr, "sim_run: job %s rank %u (pid %d) exited with status %d\n",
                   launch.job.c_str(), e.rank, e.pid, e.exit_status);
    }
  }
  if (!failed.ok()) return failed;
  return exits;
}

int JobExitStatus(const std::vector<RankExit>& exits) {
  for (const RankExit& e : exits) {
    if (e.exit_status != 0) return e.exit_status;
  }
  return 0;
}

}  // namespace argsdump
