// An environment variable set (or unset) for a test's scope, and what it
// was put back when the scope ends: tests of configuration read from the
// environment leave it as they found it.
#ifndef ARGSDUMP_TESTS_TESTING_SCOPED_ENV_H_
#define ARGSDUMP_TESTS_TESTING_SCOPED_ENV_H_

#include <stdlib.h>

#include <optional>
#include <string>

namespace argsdump {

class ScopedEnv {
 public:
  // `value` null: unset for the scope.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_SCOPED_ENV_H_
