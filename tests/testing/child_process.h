// A program the test runs as a real process: argv, its stdout in a file,
// its stderr read through a pipe (so a test can wait for a line it prints,
// instead of sleeping), signals, and its end. Test-only.
#ifndef ARGSDUMP_TESTS_TESTING_CHILD_PROCESS_H_
#define ARGSDUMP_TESTS_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace argsdump {

class ChildProcess {
 public:
  // Starts argv[0] with argv; `stdout_path` receives its stdout.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& argv, const std::string& stdout_path);
  // Kills it (SIGKILL) if it still runs, and reaps it.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Reads stderr until a line holding `text` came, or was there (true), or stderr ended
  // or `bound` passed (false: a hang guard, not a timing assertion). The
  // line itself is returned in *line.
  bool WaitForLine(const std::string& text, std::chrono::milliseconds bound,
                   std::string* line = nullptr);
  // Waits for its end (stderr read to its end first); the waitpid status.
  // nullopt when it did not end within `bound`.
  std::optional<int> Wait(std::chrono::milliseconds bound);
  void Signal(int signal);
  // What it printed on stderr so far.
  const std::string& stderr_text() const { return stderr_; }
  // Reads stderr to its end (every writer closed it) within `bound`.
  bool ReadStderrToEnd(std::chrono::milliseconds bound);

 private:
  ChildProcess() = default;
  // One read (bounded by `until`); false at end of stream or the deadline.
  bool ReadSome(std::chrono::steady_clock::time_point until);
  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  bool stderr_ended_ = false;
  bool reaped_ = false;
  std::string stderr_;
};

// Waits, without being its parent, until process `pid` ended (pidfd).
// False when it still runs after `bound`, or cannot be watched.
bool WaitForProcessEnd(pid_t pid, std::chrono::milliseconds bound);

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_CHILD_PROCESS_H_
