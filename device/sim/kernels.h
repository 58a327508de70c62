// The built-in kernel library of the sim device (float32 unless noted), with
// the types dump filters select by: elementwise (add, mul, add_scalar,
// scale, accumulate), copy, matmul, activation (relu, softmax), mix
// (mix_*), test (nonfinite, hang, fail, throw).
//   add, mul        [in, in, out]        out = a + b, a * b
//   add_scalar      [in, out] + f32 s    out = x + s
//   scale           [in, out] + f32 s    out = x * s
//   copy            [in, out]            any dtype, any views of equal numel
//   matmul          [in, in, out]        a[m,k] x b[k,n] -> out[m,n]
//   relu            [in, out]
//   softmax         [in, out]            over the last dim
//   accumulate      [inout, in]          acc += x
//   nonfinite       [in, out]            out = x, then out[0] = NaN, out[1] = +Inf
//   hang            [in, out]            writes the first half of out = x,
//                                        drains, then never finishes (until reaped)
//   fail, throw     [in, out]            write the first half of out = x, then
//                                        return an error / throw (exception dump)
//   mix_sum         [in, in, out]              } one mix task: each writes its
//   mix_prod        [in, in, out, out]         } own output slot (2, 3, 4);
//   mix_max         [in, in, out, out, out]    } mix_max declares the full width
#ifndef ARGSDUMP_DEVICE_SIM_KERNELS_H_
#define ARGSDUMP_DEVICE_SIM_KERNELS_H_

#include "absl/status/status.h"
#include "device/sim/kernel.h"

namespace argsdump {

absl::Status RegisterBuiltinKernels(KernelRegistry* registry);

// A registry holding just the built-in kernels (built once, read-only).
const KernelRegistry& BuiltinKernels();

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_KERNELS_H_
