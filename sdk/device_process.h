// The simulated device in its own process (DESIGN.md §10, issue 14): fork
// from a process with no other thread, run the device side in the child,
// and let the host know at once when the child ended and how.
//
// The child: core dumps off (a crashing kernel is the expected case), a
// fault handler for SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT that stores the
// signal, the fault address and the faulting kernel into the flight table,
// then dies of the same signal; a watch on the parent that calls `host_gone`
// once when the host process ends. It writes one report (bytes) to the host
// and _exits: no atexit handler, static destructor or stdio buffer of the
// host's copy runs twice.
#ifndef ARGSDUMP_SDK_DEVICE_PROCESS_H_
#define ARGSDUMP_SDK_DEVICE_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
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
  // how). Call once.
  DeviceExit Wait();
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
