#include "device/sim/timeouts.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace argsdump {
namespace {

// A positive integer that fits, or nullopt (with a warning) for anything else.
std::optional<uint64_t> ParsePositive(const char* name, const char* raw,
                                      std::vector<std::string>* warnings) {
  if (raw == nullptr) return std::nullopt;
  uint64_t value = 0;
  absl::string_view text(raw);
  if (!absl::SimpleAtoi(text, &value) || value == 0 ||
      value > uint64_t{1} << 40 || text.empty() || text[0] == '+' || text[0] == ' ') {
    warnings->push_back(absl::StrCat("ignoring ", name, "=\"", raw,
                                     "\": expected a positive integer"));
    return std::nullopt;
  }
  return value;
}

}  // namespace

SimTimeouts TimeoutsFromEnvironment(
    std::vector<std::string>* warnings,
    const std::function<const char*(const char*)>& getenv) {
  auto get = [&](const char* name) -> const char* {
    return getenv ? getenv(name) : std::getenv(name);
  };
  const SimTimeouts defaults;
  SimTimeouts t;
  if (auto v = ParsePositive("SIMPLER_SCHEDULER_TIMEOUT_MS",
                             get("SIMPLER_SCHEDULER_TIMEOUT_MS"), warnings)) {
    t.scheduler = std::chrono::milliseconds(*v);
  }
  if (auto v = ParsePositive("SIMPLER_OP_EXECUTE_TIMEOUT_US",
                             get("SIMPLER_OP_EXECUTE_TIMEOUT_US"), warnings)) {
    t.op_execute = std::chrono::microseconds(*v);
  }
  if (auto v = ParsePositive("SIMPLER_STREAM_SYNC_TIMEOUT_MS",
                             get("SIMPLER_STREAM_SYNC_TIMEOUT_MS"), warnings)) {
    t.stream_sync = std::chrono::milliseconds(*v);
  }
  if (!(t.scheduler < t.op_execute && t.op_execute < t.stream_sync)) {
    warnings->push_back(absl::StrCat(
        "ignoring timeout overrides: scheduler ", t.scheduler.count(),
        " us < op-execute ", t.op_execute.count(), " us < stream-sync ",
        t.stream_sync.count(), " us does not hold; using the defaults 20 s < 45 s < 50 s"));
    return defaults;
  }
  return t;
}

}  // namespace argsdump
