// Our orchestration: host code that allocates tensors and submits tasks,
// step by step, with data-dependent control.
//
// Each step: h = layer_norm(x, gamma, beta) over x[rows, cols], then
// y = a * h^T + b, where h^T is a transposed view of h ([cols, rows],
// strides [1, cols]: not contiguous). The next step's x is y seen
// transposed back. After each step the host reads y: when its largest
// magnitude passes `limit`, a is halved for the next step.
#ifndef CUSTOM_KERNELS_KERNELS_MODEL_H_
#define CUSTOM_KERNELS_KERNELS_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernels.h"
#include "sdk/argsdump.h"

namespace custom_kernels {

struct ModelOptions {
  uint32_t rows = 4, cols = 8;
  uint32_t steps = 3;
  float a = 1.5f, b = 0.25f, eps = 1e-5f, limit = 2.0f;
  // Mark args for level 1 (and their payloads for level 3): the
  // normalised h and the scalar a.
  bool mark = false;
};

struct ModelRun {
  std::vector<float> x0;             // the first input, row-major [rows, cols]
  std::vector<float> gamma, beta;
  std::vector<float> a_per_step;     // a as each step's axpb got it
  std::vector<uint64_t> layer_norm_tasks, axpb_tasks;  // by step
  std::vector<float> y;              // the last output, [cols, rows]
};

absl::StatusOr<ModelRun> RunModel(argsdump::SimSession& session, const KernelIds& ids,
                                  const ModelOptions& options);

}  // namespace custom_kernels

#endif  // CUSTOM_KERNELS_KERNELS_MODEL_H_
