// How a process ended by a crash kernel (device/sim/kernels.h) exits, for
// death tests and crash tests: killed by the signal - or, in a sanitizer
// build, whose runtime catches SIGSEGV and SIGFPE, reports them and exits
// (AddressSanitizer 1, ThreadSanitizer 66), with a non-zero exit status.
// SIGABRT and _exit(3) come through as they are in every build.
#ifndef ARGSDUMP_TESTS_TESTING_CRASH_STATUS_H_
#define ARGSDUMP_TESTS_TESTING_CRASH_STATUS_H_

#include <sys/wait.h>

namespace argsdump {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

// `status` (as from waitpid) is a death by the fault `signal` (SIGSEGV,
// SIGFPE, SIGBUS, SIGILL) in this build.
inline bool DiedOfFault(int signal, int status) {
  if (WIFSIGNALED(status)) return WTERMSIG(status) == signal;
  return kSanitizerBuild && WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_CRASH_STATUS_H_
