// A fault planted in one rank's workload at one step and task, so that the
// job tools (first non-finite, job and rank comparison, crash reports) can
// be exercised without a cluster or a broken kernel:
//   nan        the task's first floating-point input is, in that step, a
//              copy of its buffer as the workload initialises it with a
//              NaN at its first element: the task reads it, and its
//              outputs carry it on
//   scalar=V   the task's first scalar argument is V in that step
//   crash      the task runs crash_segv over its first float input and
//              output instead of its kernel: the device process dies there
// Spelled RANK:STEP:TASK:KIND on the command line (sim_run --fault), TASK
// being the task's index in the workload (0-based).
#ifndef ARGSDUMP_APPS_SIM_RUN_PLANTED_FAULT_H_
#define ARGSDUMP_APPS_SIM_RUN_PLANTED_FAULT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/argsdump/v1/workload.pb.h"

namespace argsdump {

struct PlantedFault {
  enum class Kind { kNan, kScalar, kCrash };
  uint32_t rank = 0;
  uint32_t step = 0;
  uint32_t task = 0;
  Kind kind = Kind::kNan;
  double value = 0;  // kScalar
};

// RANK:STEP:TASK:nan|crash|scalar=V; InvalidArgument saying which part is
// wrong.
absl::StatusOr<PlantedFault> ParsePlantedFault(absl::string_view text);
std::string DescribePlantedFault(const PlantedFault& fault);

// `workload` with `fault` planted (the step and rank are the caller's to
// match); InvalidArgument when the task does not exist or has no argument
// the fault needs (a float input, a scalar, a float input and output).
absl::StatusOr<v1::WorkloadSpec> PlantFault(const v1::WorkloadSpec& workload,
                                            const PlantedFault& fault);

}  // namespace argsdump

#endif  // ARGSDUMP_APPS_SIM_RUN_PLANTED_FAULT_H_
