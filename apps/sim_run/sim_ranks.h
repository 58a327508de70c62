// sim_run --ranks N: a job of N simulated ranks on this machine. This
// process is the launcher: it starts N sim_run processes of its own binary
// at once (each with its own device process, its own local capture or
// stream), as a job launcher would, and waits for them all.
#ifndef ARGSDUMP_APPS_SIM_RUN_SIM_RANKS_H_
#define ARGSDUMP_APPS_SIM_RUN_SIM_RANKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace argsdump {

struct RankLaunch {
  std::string job;
  uint32_t ranks = 0;
  // This process's command line (argv[1..]): every rank gets it, followed
  // by --job=<job> --rank=<k> --world-size=<ranks> --ranks=0 (the last of a
  // flag given twice wins).
  std::vector<std::string> args;
};

struct RankExit {
  uint32_t rank = 0;
  int exit_status = 0;  // sim_run's exit status, or 128 + signal
  int pid = 0;
};

// Starts every rank, then waits for each; one line per rank that did not
// exit 0 goes to stderr. ResourceExhausted when a rank cannot be started
// (the ranks already started are waited for first).
absl::StatusOr<std::vector<RankExit>> LaunchRanks(const RankLaunch& launch);

// The launcher's exit status: 0 when every rank exited 0, else the first
// failing rank's (in rank order).
int JobExitStatus(const std::vector<RankExit>& exits);

}  // namespace argsdump

#endif  // ARGSDUMP_APPS_SIM_RUN_SIM_RANKS_H_
