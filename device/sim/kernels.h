// The built-in kernel library of the sim device (float32 unless noted: they
// declare FLOAT32 for every signature entry, which every capture's kernel
// table shows), with the types dump filters select by: elementwise (add, mul, add_scalar,
// scale, accumulate), copy, matmul, activation (relu, softmax), mix
// (mix_*), test (nonfinite, hang, fail, throw, crash_*).
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
//   crash_*         [in, out]            write the first half of out = x, drain,
//                                        then end the process (for crash tests):
//     crash_segv                           a store of x[0] to address 0 (SIGSEGV)
//     crash_abort                          std::abort() (SIGABRT)
//     crash_terminate                      an exception out of a noexcept function:
//                                          std::terminate (SIGABRT)
//     crash_exit                           _exit(3): status 3, no stdio flush
//     crash_fpe                            integer division by zero (SIGFPE)
//     crash_wait                           prints "crash_wait: waiting to be killed
//                                          (pid N)" to stderr and waits for a kill
//                                          from outside (Cancelled if reaped)
//   mix_sum         [in, in, out]              } one mix task: each writes its
//   mix_prod        [in, in, out, out]         } own output slot (2, 3, 4);
//   mix_max         [in, in, out, out, out]    } mix_max declares the full width
// Func ids are registration order: add = 0 ... mix_max = 15, then
// crash_segv = 16, crash_abort, crash_terminate, crash_exit, crash_fpe,
// crash_wait = 21.
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
