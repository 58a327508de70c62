// Durations, byte sizes and counts typed on a command line: the one parser
// every binary's numeric flags go through (tools/cli_flags.h applies it).
// A value is a whole number, never negative, never "inf", never more than
// the flag's stated maximum; a number too large for any integer is "over the
// maximum", not wrapped. Parsed values fit an int64 in the flag's base unit
// (milliseconds, bytes, items), so adding one to a time cannot overflow
// when the maximum is a century or less.
//
//   duration  "250" (in the flag's plain unit, ms for *_ms flags), "30s",
//             "168h", "1h30m"; units ms, s, m, h, d, each term's smaller
//             than the one before
//   bytes     "4096", "64KiB", "4GiB"; units B, KiB, MiB, GiB, TiB, PiB
//   count     "16"
#ifndef ARGSDUMP_TOOLS_QUANTITY_H_
#define ARGSDUMP_TOOLS_QUANTITY_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argsdump {

struct Quantity {
  enum Kind { kDuration, kBytes, kCount };
  Kind kind = kCount;
  int64_t min = 0;  // in the base unit: milliseconds, bytes, items
  int64_t max = 0;
  // Durations: the milliseconds a number without a unit means (1 for *_ms
  // flags); 0: a unit is required (except for a bare 0).
  int64_t plain_unit_ms = 1;
  // What 0 means when it is allowed ("no limit", "never"), for --help.
  std::string zero_means;

  static Quantity Milliseconds(int64_t min_ms, int64_t max_ms, std::string zero_means = "") {
    return {kDuration, min_ms, max_ms, 1, std::move(zero_means)};
  }
  // A duration that needs its unit ("30m", "168h").
  static Quantity Duration(int64_t min_ms, int64_t max_ms, std::string zero_means = "") {
    return {kDuration, min_ms, max_ms, 0, std::move(zero_means)};
  }
  static Quantity Bytes(int64_t min, int64_t max, std::string zero_means = "") {
    return {kBytes, min, max, 1, std::move(zero_means)};
  }
  static Quantity Count(int64_t min, int64_t max, std::string zero_means = "") {
    return {kCount, min, max, 1, std::move(zero_means)};
  }
};

inline constexpr int64_t kMillisecondsPerDay = int64_t{86400} * 1000;

// `text` in the quantity's base unit, or InvalidArgument saying why and
// what the flag takes: "'inf' is not a duration ...; 0..36500d (0: keep)".
absl::StatusOr<int64_t> ParseQuantity(absl::string_view text, const Quantity& q);

// `value` (base unit) in the largest unit that states it exactly: "36500d",
// "1TiB", "64B", "65536".
std::string FormatQuantity(int64_t value, Quantity::Kind kind);

// The range the flag takes, for --help and errors: "0..36500d (0: keep them)".
std::string DescribeRange(const Quantity& q);

// The placeholder --help shows for the value: DURATION, BYTES, COUNT.
const char* QuantityPlaceholder(Quantity::Kind kind);

}  // namespace argsdump

#endif  // ARGSDUMP_TOOLS_QUANTITY_H_
