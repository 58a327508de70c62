// Sim workloads: a description of buffers, views and tasks (the
// argsdump.v1.WorkloadSpec schema, read from JSON files or built in) and the
// code that validates one against the kernel registry and submits it to a
// SimRuntime. Every error names the field ("tasks[2].args[0].tensor: ...").
#ifndef ARGSDUMP_DEVICE_WORKLOAD_H_
#define ARGSDUMP_DEVICE_WORKLOAD_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/sim/kernel.h"
#include "device/sim/sim_runtime.h"
#include "device/sim/tensor.h"
#include "proto/argsdump/v1/workload.pb.h"

namespace argsdump {

// Built-ins: "vector_example" (f = (a + b) + 1 over 16384 FLOAT32, a = 2,
// b = 3; the a+b output and the whole second task are marked for level 1/3),
// "mixed_example" (matmul, relu, softmax, accumulate, a transposed view, a
// 3-kernel mix, a scaled strided window), "hang_example" (a kernel that never
// finishes after an add), and "crash_example" (8 tasks over 1024 FLOAT32:
//   0 c = add(a, b)      [c marked]      4 g = relu(f)          [g marked]
//   1 d = scale(c, 0.5)  [scalar marked] 5 h = add(a, a)
//   2 e = mul(c, d)                      6 k = add_scalar(h, 1) [task marked]
//   3 f = crash_segv(e)  [task marked]   7 out = add(g, k)      [out marked]
// task 3 crashes the process; 4 and 7 wait for it, 5 and 6 do not), with
// "crash_example_<abort|terminate|exit|fpe|wait>" running crash_<that> as
// task 3 and "crash_example_none" running copy there (f = e, no crash): the
// same tasks and task ids, so a crashed run's records compare with the
// none run's.
std::vector<std::string> BuiltinWorkloadNames();
absl::StatusOr<v1::WorkloadSpec> BuiltinWorkload(const std::string& name);

// Reads and validates a JSON workload file. Errors start with "workload
// file <path>"; a file ReadFileToString refuses (missing, a directory,
// FIFO or device, over its bound) keeps that error's code.
absl::StatusOr<v1::WorkloadSpec> LoadWorkloadFile(const std::string& path,
                                                  const KernelRegistry& kernels);
// The same for a file's text: errors start with `source` ("workload file
// <path>"); a workload without a name gets `default_name`.
absl::StatusOr<v1::WorkloadSpec> ParseWorkloadJson(const std::string& text,
                                                   const std::string& source,
                                                   const std::string& default_name,
                                                   const KernelRegistry& kernels);

// Checks names, dtypes, shapes, view bounds, kernels and roles.
absl::Status ValidateWorkload(const v1::WorkloadSpec& spec, const KernelRegistry& kernels);

// Allocates and initialises the buffers on `runtime`, then submits every
// task in order. Returns the tensors by buffer/view name.
absl::StatusOr<std::map<std::string, Tensor>> SubmitWorkload(const v1::WorkloadSpec& spec,
                                                             const KernelRegistry& kernels,
                                                             SimRuntime* runtime);

// A workload made ready to run step after step on one runtime: validated,
// its buffers allocated, its views made and each task's kernels and
// arguments resolved, once. Every Submit() after the first puts each
// buffer back as a new allocation and its init leave it, then submits the
// tasks: the same tasks, arguments and records as SubmitWorkload on new
// buffers, without the validation, allocations and name look-ups.
// SubmitWorkload is Prepare and one Submit, so both fail alike.
class PreparedWorkload {
 public:
  // SubmitWorkload's errors up to its first task (validation, buffers,
  // views). `runtime` is not owned and must outlive the result.
  static absl::StatusOr<PreparedWorkload> Prepare(const v1::WorkloadSpec& spec,
                                                  const KernelRegistry& kernels,
                                                  SimRuntime* runtime);
  PreparedWorkload(PreparedWorkload&&);
  PreparedWorkload& operator=(PreparedWorkload&&);
  ~PreparedWorkload();

  // Submits every task in order; on an error, the tasks before the failing
  // one stay submitted (SubmitWorkload's errors from its first task on).
  // The buffers are reset first, so the runtime must have completed every
  // task submitted before (the end of a step): FailedPrecondition if not.
  absl::Status Submit();

  // The tensors by buffer/view name (the same ones on every step).
  const std::map<std::string, Tensor>& tensors() const;

 private:
  struct Plan;
  explicit PreparedWorkload(std::unique_ptr<Plan> plan);
  std::unique_ptr<Plan> plan_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_WORKLOAD_H_
