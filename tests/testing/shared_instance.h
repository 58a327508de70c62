// The one instance of a test server type a test binary shares: started
// (T::Start()) on first use, by one thread however many ask at once, and
// destroyed at exit, which stops it. Its start's error is every caller's.
// Test-only.
#ifndef ARGSDUMP_TESTS_TESTING_SHARED_INSTANCE_H_
#define ARGSDUMP_TESTS_TESTING_SHARED_INSTANCE_H_

#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argsdump {

template <typename T>
absl::StatusOr<T*> SharedInstance() {
  static std::once_flag once;
  static std::unique_ptr<T> shared;
  static absl::Status failure;
  std::call_once(once, [] {
    auto started = T::Start();
    if (started.ok()) {
      shared = std::move(*started);
    } else {
      failure = started.status();
    }
  });
  if (shared == nullptr) return failure;
  return shared.get();
}

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_SHARED_INSTANCE_H_
