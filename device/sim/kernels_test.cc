#include "device/sim/kernels.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/crash_status.h"

namespace argsdump {
namespace {

Tensor F32(uint64_t id, std::vector<uint32_t> shape, std::vector<float> values = {}) {
  uint64_t n = 1;
  for (uint32_t s : shape) n *= s;
  Tensor t = *Tensor::Whole(std::make_shared<DeviceBuffer>(id, DataType::kFloat32, n), shape);
  for (uint64_t i = 0; i < values.size(); ++i) t.Set<float>(i, values[i]);
  return t;
}

std::vector<float> Values(const Tensor& t) {
  std::vector<float> out(t.numel());
  for (uint64_t i = 0; i < out.size(); ++i) out[i] = t.Get<float>(i);
  return out;
}

absl::Status RunKernel(const char* name, const CoreTaskArgs& args, uint32_t subtask = 0) {
  const KernelInfo* k = BuiltinKernels().Find(*BuiltinKernels().IdOf(name));
  std::atomic<bool> cancel{false};
  std::atomic<uint64_t> drained{0};
  KernelContext ctx(args, subtask, &cancel, &drained);
  return k->fn(ctx);
}

TEST(KernelsTest, ElementwiseWithScalars) {
  Tensor a = F32(1, {4}, {1, -2, 3, -4}), b = F32(2, {4}, {10, 20, 30, 40});
  Tensor out = F32(3, {4});
  CoreTaskArgs add;
  ASSERT_TRUE(add.add_input(a).ok());
  ASSERT_TRUE(add.add_input(b).ok());
  ASSERT_TRUE(add.add_output(out).ok());
  ASSERT_TRUE(RunKernel("add", add).ok());
  EXPECT_EQ(Values(out), (std::vector<float>{11, 18, 33, 36}));
  ASSERT_TRUE(RunKernel("mul", add).ok());
  EXPECT_EQ(Values(out), (std::vector<float>{10, -40, 90, -160}));

  CoreTaskArgs scale;
  ASSERT_TRUE(scale.add_input(a).ok());
  ASSERT_TRUE(scale.add_output(out).ok());
  ASSERT_TRUE(scale.add_scalar(0.5f).ok());
  ASSERT_TRUE(RunKernel("scale", scale).ok());
  EXPECT_EQ(Values(out), (std::vector<float>{0.5f, -1, 1.5f, -2}));
  ASSERT_TRUE(RunKernel("add_scalar", scale).ok());
  EXPECT_EQ(Values(out), (std::vector<float>{1.5f, -1.5f, 3.5f, -3.5f}));
  ASSERT_TRUE(RunKernel("relu", scale).ok());
  EXPECT_EQ(Values(out), (std::vector<float>{1, 0, 3, 0}));

  CoreTaskArgs wrong_scalar;  // a double where the kernel reads a float
  ASSERT_TRUE(wrong_scalar.add_input(a).ok());
  ASSERT_TRUE(wrong_scalar.add_output(out).ok());
  ASSERT_TRUE(wrong_scalar.add_scalar(0.5).ok());
  EXPECT_EQ(RunKernel("scale", wrong_scalar).code(), absl::StatusCode::kFailedPrecondition);
  CoreTaskArgs missing;
  ASSERT_TRUE(missing.add_input(a).ok());
  EXPECT_EQ(RunKernel("relu", missing).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(KernelsTest, MatmulSoftmaxAccumulateNonFinite) {
  Tensor a = F32(1, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = F32(2, {3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor c = F32(3, {2, 2});
  CoreTaskArgs mm;
  ASSERT_TRUE(mm.add_input(a).ok());
  ASSERT_TRUE(mm.add_input(b).ok());
  ASSERT_TRUE(mm.add_output(c).ok());
  ASSERT_TRUE(RunKernel("matmul", mm).ok());
  EXPECT_EQ(Values(c), (std::vector<float>{58, 64, 139, 154}));
  CoreTaskArgs bad_mm;
  ASSERT_TRUE(bad_mm.add_input(a).ok());
  ASSERT_TRUE(bad_mm.add_input(a).ok());
  ASSERT_TRUE(bad_mm.add_output(c).ok());
  EXPECT_EQ(RunKernel("matmul", bad_mm).code(), absl::StatusCode::kInvalidArgument);

  Tensor x = F32(4, {2, 2}, {0, 0, 1, 1000});
  Tensor y = F32(5, {2, 2});
  CoreTaskArgs sm;
  ASSERT_TRUE(sm.add_input(x).ok());
  ASSERT_TRUE(sm.add_output(y).ok());
  ASSERT_TRUE(RunKernel("softmax", sm).ok());
  std::vector<float> p = Values(y);
  EXPECT_FLOAT_EQ(p[0], 0.5f);
  EXPECT_FLOAT_EQ(p[1], 0.5f);
  EXPECT_FLOAT_EQ(p[3], 1.0f);  // large logits do not overflow
  EXPECT_FLOAT_EQ(p[2] + p[3], 1.0f);

  Tensor acc = F32(6, {3}, {1, 1, 1}), inc = F32(7, {3}, {1, 2, 3});
  CoreTaskArgs accumulate;
  ASSERT_TRUE(accumulate.add_inout(acc).ok());
  ASSERT_TRUE(accumulate.add_input(inc).ok());
  ASSERT_TRUE(RunKernel("accumulate", accumulate).ok());
  EXPECT_EQ(Values(acc), (std::vector<float>{2, 3, 4}));

  Tensor out = F32(8, {3});
  CoreTaskArgs nf;
  ASSERT_TRUE(nf.add_input(inc).ok());
  ASSERT_TRUE(nf.add_output(out).ok());
  ASSERT_TRUE(RunKernel("nonfinite", nf).ok());
  EXPECT_TRUE(std::isnan(out.Get<float>(0)));
  EXPECT_EQ(out.Get<float>(1), std::numeric_limits<float>::infinity());
  EXPECT_EQ(out.Get<float>(2), 3.0f);
}

TEST(KernelsTest, CopyBetweenViewsOfAnyWidth) {
  auto buf = std::make_shared<DeviceBuffer>(1, DataType::kInt16, 16);
  Tensor whole = *Tensor::Whole(buf, {4, 4});
  for (uint64_t i = 0; i < 16; ++i) whole.Set<int16_t>(i, static_cast<int16_t>(i));
  Tensor transposed = *whole.View({4, 4}, {1, 4}, 0);
  Tensor out = *Tensor::Whole(std::make_shared<DeviceBuffer>(2, DataType::kInt16, 16), {16});
  CoreTaskArgs copy;
  ASSERT_TRUE(copy.add_input(transposed).ok());
  ASSERT_TRUE(copy.add_output(out).ok());
  ASSERT_TRUE(RunKernel("copy", copy).ok());
  for (uint64_t i = 0; i < 16; ++i) EXPECT_EQ(out.Get<int16_t>(i), (i % 4) * 4 + i / 4);
}

TEST(KernelsTest, HangWritesHalfDrainsAndReturnsWhenReaped) {
  Tensor x = F32(1, {4}, {1, 2, 3, 4}), y = F32(2, {4});
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(x).ok());
  ASSERT_TRUE(args.add_output(y).ok());
  const KernelInfo* k = BuiltinKernels().Find(*BuiltinKernels().IdOf("hang"));
  std::atomic<bool> cancel{false};
  std::atomic<uint64_t> drained{0};
  absl::Status status;
  std::thread worker([&] {
    KernelContext ctx(args, 0, &cancel, &drained);
    status = k->fn(ctx);
  });
  while (drained.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  EXPECT_EQ(Values(y), (std::vector<float>{1, 2, 0, 0}));
  cancel.store(true, std::memory_order_release);
  worker.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(KernelsTest, CrashKernelsAreRegisteredAfterEveryOtherKernel) {
  const KernelRegistry& k = BuiltinKernels();
  const char* const crash[] = {"crash_segv", "crash_abort", "crash_terminate",
                               "crash_exit", "crash_fpe",   "crash_wait"};
  // Appended: the func ids of the kernels before them did not move.
  EXPECT_EQ(*k.IdOf("mix_max"), 15);
  for (uint16_t i = 0; i < 6; ++i) {
    auto id = k.IdOf(crash[i]);
    ASSERT_TRUE(id.ok()) << crash[i];
    EXPECT_EQ(*id, 16 + i) << crash[i];
    const KernelInfo* info = k.Find(*id);
    EXPECT_EQ(info->name, crash[i]);
    EXPECT_EQ(info->type, "test");
    EXPECT_EQ(info->signature, (std::vector<ArgDirection>{ArgDirection::kIn, ArgDirection::kOut}));
  }
  EXPECT_EQ(k.size(), 22u);
}

TEST(KernelsTest, CrashKernelsRejectBadArgsWithoutCrashing) {
  Tensor x = F32(1, {4}, {1, 2, 3, 4}), short_out = F32(2, {3});
  CoreTaskArgs mismatched;
  ASSERT_TRUE(mismatched.add_input(x).ok());
  ASSERT_TRUE(mismatched.add_output(short_out).ok());
  CoreTaskArgs missing;
  ASSERT_TRUE(missing.add_input(x).ok());
  for (const char* name : {"crash_segv", "crash_abort", "crash_terminate", "crash_exit",
                           "crash_fpe", "crash_wait"}) {
    EXPECT_EQ(RunKernel(name, mismatched).code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(RunKernel(name, missing).code(), absl::StatusCode::kFailedPrecondition) << name;
  }
}

// The crash kernels end the (death test's child) process the way they say
// (tests/testing/crash_status.h: how a sanitizer build differs).
void RunCrashKernel(const char* name) {
  Tensor x = F32(1, {4}, {1, 2, 3, 4}), y = F32(2, {4});
  CoreTaskArgs args;
  if (!args.add_input(x).ok() || !args.add_output(y).ok()) return;
  const absl::Status s = RunKernel(name, args);
  std::fprintf(stderr, "%s returned: %s\n", name, s.ToString().c_str());
  std::exit(0);  // a kernel that came back: the death test fails
}

TEST(KernelsDeathTest, CrashKernelsEndTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunCrashKernel("crash_segv"), [](int st) { return DiedOfFault(SIGSEGV, st); }, "");
  EXPECT_EXIT(RunCrashKernel("crash_fpe"), [](int st) { return DiedOfFault(SIGFPE, st); }, "");
  EXPECT_EXIT(RunCrashKernel("crash_abort"), testing::KilledBySignal(SIGABRT), "");
  EXPECT_EXIT(RunCrashKernel("crash_terminate"), testing::KilledBySignal(SIGABRT),
              "an exception escaped a noexcept function");
  EXPECT_EXIT(RunCrashKernel("crash_exit"), testing::ExitedWithCode(3), "");
}

TEST(KernelsDeathTest, CrashExitDoesNotFlushStdio) {
  // ThreadSanitizer's _exit flushes stdio.
  if (kSanitizerBuild) GTEST_SKIP() << "a sanitizer runtime's _exit";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // A line left in stdout's buffer (stdout redirected to stderr, fully
  // buffered) is lost by _exit.
  EXPECT_EXIT(
      {
        ::dup2(2, 1);
        static char buffer[4096];
        std::setvbuf(stdout, buffer, _IOFBF, sizeof buffer);
        std::printf("buffered line before the crash\n");
        RunCrashKernel("crash_exit");
      },
      testing::ExitedWithCode(3), testing::Not(testing::HasSubstr("buffered line")));
}

TEST(KernelsTest, CrashWaitWritesHalfSaysItWaitsAndReturnsWhenCancelled) {
  Tensor x = F32(1, {4}, {1, 2, 3, 4}), y = F32(2, {4});
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(x).ok());
  ASSERT_TRUE(args.add_output(y).ok());
  const KernelInfo* k = BuiltinKernels().Find(*BuiltinKernels().IdOf("crash_wait"));
  // Its stderr goes into a pipe for the length of the test.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ASSERT_GE(saved, 0);
  ASSERT_GE(::dup2(pipe_fds[1], 2), 0);
  ::close(pipe_fds[1]);
  std::atomic<bool> cancel{false};
  std::atomic<uint64_t> drained{0};
  absl::Status status;
  std::thread worker([&] {
    KernelContext ctx(args, 0, &cancel, &drained);
    status = k->fn(ctx);
  });
  while (drained.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  EXPECT_EQ(Values(y), (std::vector<float>{1, 2, 0, 0}));
  cancel.store(true, std::memory_order_release);
  worker.join();
  std::fflush(stderr);
  ::dup2(saved, 2);  // the pipe's last write end goes: the read below ends
  ::close(saved);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  std::string text;
  char chunk[256];
  for (ssize_t n; (n = ::read(pipe_fds[0], chunk, sizeof chunk)) > 0;) text.append(chunk, n);
  ::close(pipe_fds[0]);
  EXPECT_EQ(text, absl::StrCat("crash_wait: waiting to be killed (pid ", ::getpid(), ")\n"));
}

TEST(KernelsTest, RegistryRejectsBadSignaturesAndDuplicates) {
  KernelRegistry r;
  ASSERT_TRUE(RegisterBuiltinKernels(&r).ok());
  EXPECT_FALSE(RegisterBuiltinKernels(&r).ok());  // duplicate names
  using D = ArgDirection;
  auto fn = [](KernelContext&) { return absl::OkStatus(); };
  EXPECT_EQ(r.Register("scalar_first", {D::kScalar, D::kIn}, fn).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Register("null", {D::kIn}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto id = r.Register("fine", {D::kIn, D::kOut, D::kScalar}, fn);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(r.Find(*id)->name, "fine");
  EXPECT_EQ(r.IdOf("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.Find(9999), nullptr);
}

}  // namespace
}  // namespace argsdump
