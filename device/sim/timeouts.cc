#include "device/sim/timeouts.h"

#include <algorithm>
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
  const std::optional<uint64_t> scheduler = ParsePositive(
      "SIMPLER_SCHEDULER_TIMEOUT_MS", get("SIMPLER_SCHEDULER_TIMEOUT_MS"), warnings);
  std::optional<uint64_t> op = ParsePositive(
      "SIMPLER_OP_EXECUTE_TIMEOUT_US", get("SIMPLER_OP_EXECUTE_TIMEOUT_US"), warnings);
  std::optional<uint64_t> stream = ParsePositive(
      "SIMPLER_STREAM_SYNC_TIMEOUT_MS", get("SIMPLER_STREAM_SYNC_TIMEOUT_MS"), warnings);
  SimTimeouts t;
  // The scheduler budget applies on its own, whatever the others say.
  if (scheduler) t.scheduler = std::chrono::milliseconds(*scheduler);
  // The other two follow it where not set, keeping their default margins.
  auto derive = [&] {
    t.op_execute = op ? std::chrono::microseconds(*op)
                      : std::max(defaults.op_execute,
                                 t.scheduler + (defaults.op_execute - defaults.scheduler));
    t.stream_sync = stream ? std::chrono::microseconds(std::chrono::milliseconds(*stream))
                           : std::max(defaults.stream_sync,
                                      t.op_execute + (defaults.stream_sync - defaults.op_execute));
  };
  derive();
  if (!(t.scheduler < t.op_execute && t.op_execute < t.stream_sync)) {
    warnings->push_back(absl::StrCat(
        "ignoring SIMPLER_OP_EXECUTE_TIMEOUT_US / SIMPLER_STREAM_SYNC_TIMEOUT_MS: scheduler ",
        t.scheduler.count(), " us < op-execute ", t.op_execute.count(), " us < stream-sync ",
        t.stream_sync.count(), " us does not hold; the scheduler budget applies and the other "
        "two follow it (25 s and 30 s above it, at least 45 s and 50 s)"));
    op.reset();
    stream.reset();
    derive();
  }
  return t;
}

}  // namespace argsdump
