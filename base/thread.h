// Starting a thread as a status instead of an exception. std::thread's
// constructor throws std::system_error when the system refuses a thread (an
// address-space limit such as `ulimit -v` leaves no room for its stack, or a
// process or cgroup thread limit): every thread we start on a path that can
// meet such a limit goes through StartThread, so that refusal is an error
// the caller reports, never an exception that ends the process.
#ifndef ARGSDUMP_BASE_THREAD_H_
#define ARGSDUMP_BASE_THREAD_H_

#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace argsdump {

// Starts `fn` on a new thread into `*thread`. ResourceExhausted naming `what`
// (e.g. "the collector's writer thread") when the system refuses it;
// `*thread` is then left not joinable and `fn` never runs.
template <typename Fn>
absl::Status StartThread(absl::string_view what, std::thread* thread, Fn&& fn) {
  try {
    *thread = std::thread(std::forward<Fn>(fn));
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot start ", what, ": ", e.code().message(),
        " (the system refused a thread: an address-space limit such as ulimit -v, or a "
        "limit on threads)"));
  }
  return absl::OkStatus();
}

}  // namespace argsdump

#endif  // ARGSDUMP_BASE_THREAD_H_
