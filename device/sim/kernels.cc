#include "device/sim/kernels.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <vector>

#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {

using D = ArgDirection;

#define ASSIGN_OR_RETURN_KERNEL(lhs, expr) \
  auto lhs##_or = (expr);                  \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

absl::Status RequireF32(const Tensor& t, const char* kernel, const char* what) {
  if (t.dtype() != DataType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, ": ", what, " must be FLOAT32, is ", std::string(DataTypeName(t.dtype()))));
  }
  return absl::OkStatus();
}

absl::Status RequireSameNumel(const Tensor& a, const Tensor& b, const char* kernel) {
  if (a.numel() != b.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, ": element counts differ (", a.numel(), " vs ", b.numel(), ")"));
  }
  return absl::OkStatus();
}

// out[i] = f(a[i], b[i]) over slots (a, b, out) = (0, 1, out_slot).
template <typename F>
absl::Status Binary(KernelContext& ctx, const char* name, uint32_t out_slot, F f) {
  ASSIGN_OR_RETURN_KERNEL(a, ctx.tensor(0));
  ASSIGN_OR_RETURN_KERNEL(b, ctx.tensor(1));
  ASSIGN_OR_RETURN_KERNEL(out, ctx.tensor(out_slot));
  for (const Tensor* t : {&a, &b, &out}) {
    if (auto s = RequireF32(*t, name, "every tensor"); !s.ok()) return s;
  }
  if (auto s = RequireSameNumel(a, b, name); !s.ok()) return s;
  if (auto s = RequireSameNumel(a, out, name); !s.ok()) return s;
  for (uint64_t i = 0; i < a.numel(); ++i) {
    out.Set<float>(i, f(a.Get<float>(i), b.Get<float>(i)));
  }
  return absl::OkStatus();
}

// out[i] = f(x[i], s) over slots (x, out) = (0, 1) and f32 scalar 0 (or 0 when
// the kernel takes no scalar).
template <typename F>
absl::Status Unary(KernelContext& ctx, const char* name, bool takes_scalar, F f) {
  ASSIGN_OR_RETURN_KERNEL(x, ctx.tensor(0));
  ASSIGN_OR_RETURN_KERNEL(out, ctx.tensor(1));
  float s = 0.0f;
  if (takes_scalar) {
    ASSIGN_OR_RETURN_KERNEL(value, ctx.scalar<float>(0));
    s = value;
  }
  if (auto st = RequireF32(x, name, "input"); !st.ok()) return st;
  if (auto st = RequireF32(out, name, "output"); !st.ok()) return st;
  if (auto st = RequireSameNumel(x, out, name); !st.ok()) return st;
  for (uint64_t i = 0; i < x.numel(); ++i) out.Set<float>(i, f(x.Get<float>(i), s));
  return absl::OkStatus();
}

absl::Status Add(KernelContext& ctx) {
  return Binary(ctx, "add", 2, [](float a, float b) { return a + b; });
}
absl::Status Mul(KernelContext& ctx) {
  return Binary(ctx, "mul", 2, [](float a, float b) { return a * b; });
}
absl::Status AddScalar(KernelContext& ctx) {
  return Unary(ctx, "add_scalar", true, [](float x, float s) { return x + s; });
}
absl::Status Scale(KernelContext& ctx) {
  return Unary(ctx, "scale", true, [](float x, float s) { return x * s; });
}
absl::Status Relu(KernelContext& ctx) {
  return Unary(ctx, "relu", false, [](float x, float) { return x > 0.0f ? x : 0.0f; });
}
absl::Status MixSum(KernelContext& ctx) {
  return Binary(ctx, "mix_sum", 2, [](float a, float b) { return a + b; });
}
absl::Status MixProd(KernelContext& ctx) {
  return Binary(ctx, "mix_prod", 3, [](float a, float b) { return a * b; });
}
absl::Status MixMax(KernelContext& ctx) {
  return Binary(ctx, "mix_max", 4, [](float a, float b) { return std::max(a, b); });
}

absl::Status Copy(KernelContext& ctx) {
  ASSIGN_OR_RETURN_KERNEL(x, ctx.tensor(0));
  ASSIGN_OR_RETURN_KERNEL(out, ctx.tensor(1));
  if (x.dtype() != out.dtype()) {
    return absl::InvalidArgumentError("copy: dtypes differ");
  }
  if (auto s = RequireSameNumel(x, out, "copy"); !s.ok()) return s;
  switch (ElementBits(x.dtype())) {
    case 8: for (uint64_t i = 0; i < x.numel(); ++i) out.Set<uint8_t>(i, x.Get<uint8_t>(i)); break;
    case 16: for (uint64_t i = 0; i < x.numel(); ++i) out.Set<uint16_t>(i, x.Get<uint16_t>(i)); break;
    case 32: for (uint64_t i = 0; i < x.numel(); ++i) out.Set<uint32_t>(i, x.Get<uint32_t>(i)); break;
    case 64: for (uint64_t i = 0; i < x.numel(); ++i) out.Set<uint64_t>(i, x.Get<uint64_t>(i)); break;
    default: return absl::InvalidArgumentError("copy: sub-byte dtypes are not supported");
  }
  return absl::OkStatus();
}

absl::Status Matmul(KernelContext& ctx) {
  ASSIGN_OR_RETURN_KERNEL(a, ctx.tensor(0));
  ASSIGN_OR_RETURN_KERNEL(b, ctx.tensor(1));
  ASSIGN_OR_RETURN_KERNEL(out, ctx.tensor(2));
  for (const Tensor* t : {&a, &b, &out}) {
    if (auto s = RequireF32(*t, "matmul", "every tensor"); !s.ok()) return s;
  }
  if (a.ndims() != 2 || b.ndims() != 2 || out.ndims() != 2 ||
      a.shape(1) != b.shape(0) || out.shape(0) != a.shape(0) ||
      out.shape(1) != b.shape(1)) {
    return absl::InvalidArgumentError("matmul: shapes must be [m,k] x [k,n] -> [m,n]");
  }
  const uint32_t m = a.shape(0), k = a.shape(1), n = b.shape(1);
  for (uint32_t i = 0; i < m; ++i) {
    for (uint32_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (uint32_t p = 0; p < k; ++p) {
        sum += a.Get<float>(uint64_t{i} * k + p) * b.Get<float>(uint64_t{p} * n + j);
      }
      out.Set<float>(uint64_t{i} * n + j, sum);
    }
  }
  return absl::OkStatus();
}

absl::Status Softmax(KernelContext& ctx) {
  ASSIGN_OR_RETURN_KERNEL(x, ctx.tensor(0));
  ASSIGN_OR_RETURN_KERNEL(out, ctx.tensor(1));
  if (auto s = RequireF32(x, "softmax", "input"); !s.ok()) return s;
  if (auto s = RequireF32(out, "softmax", "output"); !s.ok()) return s;
  if (auto s = RequireSameNumel(x, out, "softmax"); !s.ok()) return s;
  const uint64_t row = x.ndims() == 0 ? 1 : x.shape(x.ndims() - 1);
  if (row == 0) return absl::OkStatus();
  for (uint64_t base = 0; base < x.numel(); base += row) {
    float max = -std::numeric_limits<float>::infinity();
    for (uint64_t i = 0; i < row; ++i) max = std::max(max, x.Get<float>(base + i));
    float sum = 0.0f;
    for (uint64_t i = 0; i < row; ++i) sum += std::exp(x.Get<float>(base + i) - max);
    for (uint64_t i = 0; i < row; ++i) {
      out.Set<float>(base + i, std::exp(x.Get<float>(base + i) - max) / sum);
    }
  }
  return absl::OkStatus();
}

absl::Status Accumulate(KernelContext& ctx) {
  ASSIGN_OR_RETURN_KERNEL(acc, ctx.tensor(0));
  ASSIGN_OR_RETURN_KERNEL(x, ctx.tensor(1));
  if (auto s = RequireF32(acc, "accumulate", "acc"); !s.ok()) return s;
  if (auto s = RequireF32(x, "accumulate", "x"); !s.ok()) return s;
  if (auto s = RequireSameNumel(acc, x, "accumulate"); !s.ok()) return s;
  for (uint64_t i = 0; i < acc.numel(); ++i) {
    acc.Set<float>(i, acc.Get<float>(i) + x.Get<float>(i));
  }
  return absl::OkStatus();
}

absl::Status NonFinite(KernelContext& ctx) {
  if (auto s = Unary(ctx, "nonfinite", false, [](float x, float) { return x; }); !s.ok()) {
    return s;
  }
  ASSIGN_OR_RETURN_KERNEL(out, ctx.tensor(1));
  if (out.numel() > 0) out.Set<float>(0, std::numeric_limits<float>::quiet_NaN());
  if (out.numel() > 1) out.Set<float>(1, std::numeric_limits<float>::infinity());
  return absl::OkStatus();
}

// Writes the first half of out = x, then fails: an error (fail) or a C++
// exception (throw), for the exception dump.
absl::Status FailHalfway(KernelContext& ctx, const char* name) {
  ASSIGN_OR_RETURN_KERNEL(x, ctx.tensor(0));
  ASSIGN_OR_RETURN_KERNEL(out, ctx.tensor(1));
  if (auto s = RequireF32(x, name, "input"); !s.ok()) return s;
  if (auto s = RequireF32(out, name, "output"); !s.ok()) return s;
  if (auto s = RequireSameNumel(x, out, name); !s.ok()) return s;
  for (uint64_t i = 0; i < out.numel() / 2; ++i) out.Set<float>(i, x.Get<float>(i));
  return absl::OkStatus();
}

absl::Status Fail(KernelContext& ctx) {
  if (auto s = FailHalfway(ctx, "fail"); !s.ok()) return s;
  return absl::InternalError("injected failure after writing half of the output");
}

absl::Status Throw(KernelContext& ctx) {
  if (auto s = FailHalfway(ctx, "throw"); !s.ok()) return s;
  throw std::runtime_error("injected exception after writing half of the output");
}

absl::Status Hang(KernelContext& ctx) {
  ASSIGN_OR_RETURN_KERNEL(x, ctx.tensor(0));
  ASSIGN_OR_RETURN_KERNEL(out, ctx.tensor(1));
  if (auto s = RequireF32(x, "hang", "input"); !s.ok()) return s;
  if (auto s = RequireF32(out, "hang", "output"); !s.ok()) return s;
  if (auto s = RequireSameNumel(x, out, "hang"); !s.ok()) return s;
  for (uint64_t i = 0; i < out.numel() / 2; ++i) out.Set<float>(i, x.Get<float>(i));
  ctx.Drain();
  ctx.WaitUntilCancelled();
  return absl::DeadlineExceededError("hang: reaped while still running");
}

// The crash kernels: each checks its args, writes the first half of
// out = x, drains (so an in-flight snapshot sees those writes), then takes
// the whole process down its own way. Nothing after the crash runs.
absl::Status BeforeCrash(KernelContext& ctx, const char* name) {
  if (auto s = FailHalfway(ctx, name); !s.ok()) return s;
  ctx.Drain();
  return absl::OkStatus();
}

// UBSan (the asan config) would report the null store and the division
// before they happen; these two must reach the hardware.
#define ARGSDUMP_NO_UBSAN __attribute__((no_sanitize("undefined")))

ARGSDUMP_NO_UBSAN absl::Status CrashSegv(KernelContext& ctx) {
  if (auto s = BeforeCrash(ctx, "crash_segv"); !s.ok()) return s;
  ASSIGN_OR_RETURN_KERNEL(x, ctx.tensor(0));
  const float first = x.numel() > 0 ? x.Get<float>(0) : 0.0f;
  // The pointer is read from a volatile object, so the compiler cannot see
  // that it is null (and cannot turn the store into a trap or drop it): a
  // real store to address 0, SIGSEGV with si_addr 0.
  float* volatile target = nullptr;
  *static_cast<volatile float*>(target) = first;
  std::raise(SIGSEGV);  // only if address 0 was mapped
  return absl::InternalError("crash_segv: the null store did not fault");
}

absl::Status CrashAbort(KernelContext& ctx) {
  if (auto s = BeforeCrash(ctx, "crash_abort"); !s.ok()) return s;
  std::abort();
}

[[noreturn]] void ThrowFromKernel() {
  throw std::runtime_error("crash_terminate: an exception escaped a noexcept function");
}
// An exception leaving a noexcept function: std::terminate (SIGABRT).
void CallThrowingNoexcept() noexcept { ThrowFromKernel(); }

absl::Status CrashTerminate(KernelContext& ctx) {
  if (auto s = BeforeCrash(ctx, "crash_terminate"); !s.ok()) return s;
  CallThrowingNoexcept();
  std::terminate();  // not reached
}

absl::Status CrashExit(KernelContext& ctx) {
  if (auto s = BeforeCrash(ctx, "crash_exit"); !s.ok()) return s;
  ::_exit(3);  // no atexit handlers, no stdio flush
}

ARGSDUMP_NO_UBSAN absl::Status CrashFpe(KernelContext& ctx) {
  if (auto s = BeforeCrash(ctx, "crash_fpe"); !s.ok()) return s;
  // A real integer division by zero (the operands are volatile, so it is
  // done at run time): x86 traps with SIGFPE (FPE_INTDIV).
  volatile int dividend = 1;
  volatile int divisor = 0;
  volatile int quotient = dividend / divisor;
  (void)quotient;
  std::raise(SIGFPE);  // where integer division by zero does not trap
  return absl::InternalError("crash_fpe: SIGFPE did not end the process");
}

// Waits to be killed from outside (SIGKILL): says so on stderr, with the
// process id, so a test knows when to kill; returns only when the runtime
// reaps the task (a hang, a timeout or shutdown).
absl::Status CrashWait(KernelContext& ctx) {
  if (auto s = BeforeCrash(ctx, "crash_wait"); !s.ok()) return s;
  std::fprintf(stderr, "crash_wait: waiting to be killed (pid %d)\n",
               static_cast<int>(::getpid()));
  std::fflush(stderr);
  ctx.WaitUntilCancelled();
  return absl::CancelledError("crash_wait: reaped while waiting to be killed");
}

}  // namespace

absl::Status RegisterBuiltinKernels(KernelRegistry* registry) {
  struct Entry {
    const char* name;
    std::vector<KernelArgSpec> signature;
    KernelFn fn;
    const char* type;
  };
  // The float32 kernels declare it for every entry (the table then says
  // so); copy takes any dtype.
  const KernelArgSpec in{D::kIn, DataType::kFloat32}, out{D::kOut, DataType::kFloat32},
      inout{D::kInOut, DataType::kFloat32}, scalar{D::kScalar, DataType::kFloat32};
  const Entry entries[] = {
      {"add", {in, in, out}, Add, "elementwise"},
      {"mul", {in, in, out}, Mul, "elementwise"},
      {"add_scalar", {in, out, scalar}, AddScalar, "elementwise"},
      {"scale", {in, out, scalar}, Scale, "elementwise"},
      {"copy", {D::kIn, D::kOut}, Copy, "copy"},
      {"matmul", {in, in, out}, Matmul, "matmul"},
      {"relu", {in, out}, Relu, "activation"},
      {"softmax", {in, out}, Softmax, "activation"},
      {"accumulate", {inout, in}, Accumulate, "elementwise"},
      {"nonfinite", {in, out}, NonFinite, "test"},
      {"hang", {in, out}, Hang, "test"},
      {"fail", {in, out}, Fail, "test"},
      {"throw", {in, out}, Throw, "test"},
      {"mix_sum", {in, in, out}, MixSum, "mix"},
      {"mix_prod", {in, in, out, out}, MixProd, "mix"},
      {"mix_max", {in, in, out, out, out}, MixMax, "mix"},
      // Appended after every other kernel so the func ids above stay as they were.
      {"crash_segv", {in, out}, CrashSegv, "test"},
      {"crash_abort", {in, out}, CrashAbort, "test"},
      {"crash_terminate", {in, out}, CrashTerminate, "test"},
      {"crash_exit", {in, out}, CrashExit, "test"},
      {"crash_fpe", {in, out}, CrashFpe, "test"},
      {"crash_wait", {in, out}, CrashWait, "test"},
  };
  for (const Entry& e : entries) {
    if (auto id = registry->RegisterTyped(e.name, e.signature, e.fn, e.type); !id.ok()) {
      return id.status();
    }
  }
  return absl::OkStatus();
}

const KernelRegistry& BuiltinKernels() {
  static const KernelRegistry* const registry = [] {
    auto* r = new KernelRegistry();
    if (absl::Status s = RegisterBuiltinKernels(r); !s.ok()) {
      std::fprintf(stderr, "built-in kernels: %s\n", s.ToString().c_str());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

}  // namespace argsdump
