// Our kernels, as the simulated device runs them.
//   layer_norm  [in x[r,c], in gamma[c], in beta[c], out y[r,c]] + f32 eps
//               y[i,:] = (x[i,:] - mean) / sqrt(var + eps) * gamma + beta
//   axpb        [in x, out y] + f32 a, f32 b      y = a * x + b (any views
//               of equal numel, read and written in logical order)
//   bf16_scale  [in x, out y] + f32 s            y = s * x, BFLOAT16 tensors
//               (computed in float, rounded to nearest even)
//   strided_affine [in x, out y] + f32 a, f32 b   y = a * x + b, x a 3-D view
//               (any strides and start offset)
#ifndef CUSTOM_KERNELS_KERNELS_KERNELS_H_
#define CUSTOM_KERNELS_KERNELS_KERNELS_H_

#include "absl/status/statusor.h"
#include "sdk/argsdump.h"

namespace custom_kernels {

struct KernelIds {
  uint16_t layer_norm = 0;
  uint16_t axpb = 0;
  uint16_t bf16_scale = 0;
  uint16_t strided_affine = 0;
};

// Registers the kernels ("norm" and "elementwise" types, for dump filters).
absl::StatusOr<KernelIds> RegisterKernels(argsdump::KernelRegistry* registry);

}  // namespace custom_kernels

#endif  // CUSTOM_KERNELS_KERNELS_KERNELS_H_
