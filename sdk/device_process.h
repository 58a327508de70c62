// The simulated device in its own process: fork from a process with no
// other thread, run the device side in the child, and let the host know at
// once when the child ended and how.
//
// The child: core dumps off (a crashing kernel is the expected case), a
// fault handler for SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT that stores the
// signal, the fault address and the faulting kernel into the flight table,
// then dies of the same signal; a watch thread that bumps the flight table's
// heartbeat every 50 ms and calls `host_gone` once when the host process
// ends.
//
// The host: Wait reads the report and, given a watch, asks it at least every
// period whether the device is hung (the session's: no heartbeat, or no
// progress with work pending, for the hang budget); a hung device is killed
// (SIGKILL ends a stopped process too) and DeviceExit says why. It writes one report (bytes) to the host
// and _exits: no atexit handler, static destructor or stdio buffer of the
// host's copy runs twice.
#ifndef ARGSDUMP_SDK_DEVICE_PROCESS_H_
#define ARGSDUMP_SDK_DEVICE_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "device/sim/flight.h"

namespace argsdump {

// How the device process ended.
struct DeviceExit {
  bool signaled = false;
  int signal = 0;       // when signaled
  int exit_status = 0;  // when not
  std::string report;   // what it sent (empty when it died before sending)
  bool reported = false;  // the whole report arrived
  // Why the host's watch killed it (empty: it did not).
  std::string killed_by_host;
  // It could not start its watch thread (the system refused a thread) and
  // ran nothing.
  bool no_watch = false;
};

class DeviceProcess {
 public:
  // Threads of this process (1 when only the caller runs).
  static int ThreadCount();

  // Forks. The child runs `device` (its result is the report) and _exits 0
  // (5 when `device` threw: nothing unwinds past the fork);
  // `host_gone` runs on a child thread if the parent ends first. Fails
  // (FailedPrecondition) when this process has other threads: a forked
  // child would inherit their locks, not their threads.
  static absl::StatusOr<std::unique_ptr<DeviceProcess>> Start(
      FlightTable* flight, std::function<std::string()> device,
      std::function<void()> host_gone);
  // Kills a child still running, and reaps it.
  ~DeviceProcess();

  pid_t pid() const { return pid_; }
  // Blocks until the child ended (its report pipe closes and waitpid says
  // how). With `hung`, asks it at least every `period` while the child
  // runs: a reason means the child is hung, and it is killed
  // (DeviceExit::killed_by_host). Call once.
  DeviceExit Wait(const std::function<std::optional<std::string>()>& hung = nullptr,
                  std::chrono::milliseconds period = std::chrono::milliseconds(100));
  // The child's state letter from /proc/<pid>/stat ('T' stopped, 't'
  // traced, 'R', 'S', 'D', ...); 0 when it cannot be read.
  char State() const;
  // SIGKILL (a host that gives up on the device).
  void Kill();

 private:
  DeviceProcess(pid_t pid, int report_fd, int child_fd)
      : pid_(pid), report_fd_(report_fd), child_fd_(child_fd) {}
  pid_t pid_;
  int report_fd_;
  int child_fd_;  // a pidfd of the child (-1: none; Wait then reads to EOF)
  bool reaped_ = false;
};

// "SIGSEGV" for SIGSEGV, "signal 42" for one without a name.
std::string SignalName(int signal);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_DEVICE_PROCESS_H_
