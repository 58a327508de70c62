// The host's side of a session whose device runs in its own process
// (SessionOptions::device_process): the shared device memory and flight
// table made before the fork, the fork itself, the host's watch over the
// running device (hung: killed), and how it ended - its report, or the
// crash read from the flight table. Also what the device side sends back:
// the report's status fields and the runtime's counters in it.
//
// One device process per IsolatedDevice; Run is called on the host's only
// thread (a fork needs a process with no other thread).
#ifndef ARGSDUMP_SDK_ISOLATED_DEVICE_H_
#define ARGSDUMP_SDK_ISOLATED_DEVICE_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/region.h"
#include "device/sim/device_memory.h"
#include "device/sim/flight.h"
#include "device/sim/kernel.h"
#include "device/sim/sim_runtime.h"
#include "proto/argsdump/v1/device_report.pb.h"
#include "sdk/device_crash.h"
#include "sdk/device_process.h"
#include "sdk/device_watch.h"

namespace argsdump {

class IsolatedDevice {
 public:
  // What Run does around the fork.
  struct Hooks {
    // The device process: runs the device, returns its report (bytes).
    std::function<std::string()> device;
    // The device process: its host ended (on the child's watch thread).
    std::function<void()> host_gone;
    // The host, once forked: starts collecting. An error stops the device
    // (killed and reaped) and is Run's answer.
    std::function<absl::Status()> forked;
    // The host, once the device runs and is collected (may be empty).
    std::function<void()> started;
    // What the host's watch samples besides the flight table: the region
    // being collected (null: none).
    const DumpRegion* collected_region = nullptr;
  };

  // Makes the device memory and the flight table for `sim` and points it at
  // them; `sim` is what the device process builds its runtime from.
  static absl::StatusOr<std::unique_ptr<IsolatedDevice>> Create(SimConfig sim,
                                                                const KernelRegistry& kernels);

  const SimConfig& sim() const { return sim_; }
  const FlightTable& flight() const { return *flight_; }
  // The host process (the child's getppid() is a reaper's once it is gone).
  pid_t host_pid() const { return host_pid_; }

  // Forks and waits for the device process to end. Returns the status the
  // device reported for its orchestration, ABORTED when it died (crash()
  // says how) or the host's watch killed it (hang() says why), or why it
  // could not start (error(); a failed fork may be tried again).
  absl::Status Run(const Hooks& hooks);

  // The device process was forked (it is one per IsolatedDevice).
  bool forked() const { return forked_; }
  const std::optional<v1::DeviceReport>& report() const { return report_; }
  const std::optional<DeviceCrashAnalysis>& crash() const { return crash_; }
  const std::optional<std::string>& hang() const { return hang_; }
  const absl::Status& error() const { return error_; }

 private:
  IsolatedDevice(SimConfig sim, const KernelRegistry& kernels) : sim_(sim), kernels_(kernels) {}
  // Reads how the device process ended.
  absl::Status Ended(const DeviceExit& exit);

  SimConfig sim_;
  const KernelRegistry& kernels_;
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<FlightTable> flight_;
  std::unique_ptr<DeviceProcess> process_;
  pid_t host_pid_ = 0;
  bool forked_ = false;
  std::optional<v1::DeviceReport> report_;
  std::optional<DeviceCrashAnalysis> crash_;
  std::optional<std::string> hang_;
  absl::Status error_;
};

// The device's progress counters now (what the host's watch samples):
// the flight table's, and the records of `collected` (null: none).
DeviceProgress SampleDevice(const FlightTable& flight, const DumpRegion* collected);

// A status as the report carries it, and back (a code out of range is
// INTERNAL naming it).
void SetDeviceStatus(const absl::Status& status, v1::DeviceStatus* out);
absl::Status DeviceStatusOf(const v1::DeviceStatus& status);

// The runtime's counters, dump log, warnings and levels into `report`.
void ReportRuntime(const SimRuntime& runtime, v1::DeviceReport* report);

// Records the threads of `region` dropped because the host was gone.
uint64_t HostGoneDrops(const DumpRegion& region);
// The device process's ERROR line once it stopped without its host: the
// tasks it completed and the records it dropped (none without a region).
void SayStoppedWithoutHost(const v1::DeviceReport& report, const DumpRegion* region);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_ISOLATED_DEVICE_H_
