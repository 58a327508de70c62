#include "tools/quantity.h"

#include <cctype>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {

constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

struct Unit {
  const char* name;
  uint64_t size;  // in the base unit
};

// Largest first (FormatQuantity picks the first that divides).
constexpr Unit kDurationUnits[] = {
    {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
constexpr Unit kByteUnits[] = {{"PiB", uint64_t{1} << 50}, {"TiB", uint64_t{1} << 40},
                               {"GiB", uint64_t{1} << 30}, {"MiB", uint64_t{1} << 20},
                               {"KiB", uint64_t{1} << 10}, {"B", 1}};

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > kSaturated / a) return kSaturated;
  return a * b;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return b > kSaturated - a ? kSaturated : a + b; }

const char* KindName(Quantity::Kind kind) {
  switch (kind) {
    case Quantity::kDuration:
      return "a duration";
    case Quantity::kBytes:
      return "a byte size";
    case Quantity::kCount:
      return "a whole number";
  }
  return "?";
}

// How a value of the kind is written, for errors.
std::string Grammar(const Quantity& q) {
  switch (q.kind) {
    case Quantity::kDuration:
      return q.plain_unit_ms == 1
                 ? "milliseconds, or a whole number with a unit: ms, s, m, h, d, such as 30s"
                 : "a whole number with a unit: ms, s, m, h, d, such as 30m or 168h";
    case Quantity::kBytes:
      return "bytes, or a whole number with a unit: KiB, MiB, GiB, TiB, PiB, such as 4GiB";
    case Quantity::kCount:
      return "digits only";
  }
  return "";
}

// The value of one "<digits><unit>" term, saturated, and the unit's size in
// *unit_size; false when `unit` is not one of the kind's (or is missing
// where one is needed).
bool Term(uint64_t number, absl::string_view unit, const Quantity& q, uint64_t* out,
          uint64_t* unit_size) {
  *unit_size = 0;
  if (unit.empty()) {
    if (q.kind == Quantity::kDuration) {
      if (q.plain_unit_ms == 0) return number == 0 && (*out = 0, true);
      *out = SaturatingMul(number, static_cast<uint64_t>(q.plain_unit_ms));
      return true;
    }
    *out = number;
    return true;
  }
  if (q.kind == Quantity::kDuration) {
    for (const Unit& u : kDurationUnits) {
      if (unit == u.name) return *unit_size = u.size, *out = SaturatingMul(number, u.size), true;
    }
  } else if (q.kind == Quantity::kBytes) {
    for (const Unit& u : kByteUnits) {
      if (unit == u.name) return *out = SaturatingMul(number, u.size), true;
    }
  }
  return false;
}

}  // namespace

std::string FormatQuantity(int64_t value, Quantity::Kind kind) {
  const uint64_t v = static_cast<uint64_t>(value);
  if (kind == Quantity::kCount || value <= 0) return absl::StrCat(value);
  if (kind == Quantity::kDuration) {
    for (const Unit& u : kDurationUnits) {
      if (v % u.size == 0) return absl::StrCat(v / u.size, u.name);
    }
  }
  for (const Unit& u : kByteUnits) {
    if (v % u.size == 0) return absl::StrCat(v / u.size, u.name);
  }
  return absl::StrCat(value);
}

std::string DescribeRange(const Quantity& q) {
  std::string range =
      absl::StrCat(FormatQuantity(q.min, q.kind), "..", FormatQuantity(q.max, q.kind));
  if (q.kind == Quantity::kDuration && q.max % 1000 == 0 && q.max >= kMillisecondsPerDay) {
    absl::StrAppend(&range, " (", q.max, "ms)");
  }
  if (q.min == 0 && !q.zero_means.empty()) absl::StrAppend(&range, "; 0: ", q.zero_means);
  return range;
}

const char* QuantityPlaceholder(Quantity::Kind kind) {
  switch (kind) {
    case Quantity::kDuration:
      return "DURATION";
    case Quantity::kBytes:
      return "BYTES";
    case Quantity::kCount:
      return "COUNT";
  }
  return "VALUE";
}

absl::StatusOr<int64_t> ParseQuantity(absl::string_view text, const Quantity& q) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' ", why, "; it takes ", DescribeRange(q)));
  };
  if (text.empty()) return bad(absl::StrCat("is empty: expected ", KindName(q.kind)));
  if (text[0] == '-') return bad("is negative");
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "nan") {
    return bad(absl::StrCat("is not a number: give the maximum, ",
                            FormatQuantity(q.max, q.kind), ", for the longest or largest"));
  }
  // One or more "<digits><unit>" terms (durations only take several, each
  // unit smaller than the one before: 1h30m, not 30m1h or 1h1h).
  uint64_t total = 0, previous_unit = 0;
  size_t i = 0, terms = 0;
  while (i < text.size()) {
    const size_t digits_start = i;
    uint64_t number = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      number = SaturatingAdd(SaturatingMul(number, 10), static_cast<uint64_t>(text[i] - '0'));
      ++i;
    }
    const size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    const absl::string_view unit = text.substr(unit_start, i - unit_start);
    uint64_t value = 0, unit_size = 0;
    ++terms;
    const bool several_allowed = q.kind == Quantity::kDuration;
    if (unit_start == digits_start || (terms > 1 && (!several_allowed || unit.empty())) ||
        !Term(number, unit, q, &value, &unit_size) ||
        (terms > 1 && unit_size >= previous_unit)) {
      return bad(absl::StrCat("is not ", KindName(q.kind), " (", Grammar(q), ")"));
    }
    previous_unit = unit_size;
    total = SaturatingAdd(total, value);
  }
  if (total > static_cast<uint64_t>(q.max)) {
    return bad(absl::StrCat("is over the maximum of ", FormatQuantity(q.max, q.kind)));
  }
  const int64_t v = static_cast<int64_t>(total);
  if (v < q.min) {
    return bad(absl::StrCat("is under the minimum of ", FormatQuantity(q.min, q.kind)));
  }
  return v;
}

}  // namespace argsdump
