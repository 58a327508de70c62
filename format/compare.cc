#include "format/compare.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "format/dtype.h"

namespace argsdump {
namespace {

// Accumulates pairs one at a time.
class Accumulator {
 public:
  explicit Accumulator(const Tolerance& t) : t_(t) {}

  void Add(uint64_t i, double a, double g) {
    ++d_.compared;
    const bool a_finite = std::isfinite(a), g_finite = std::isfinite(g);
    bool match;
    if (a_finite && g_finite) {
      const double abs = std::fabs(a - g);
      const double rel = g != 0 ? abs / std::fabs(g) : (abs == 0 ? 0 : INFINITY);
      if (abs > d_.max_abs) d_.max_abs = abs;
      if (rel > d_.max_rel) d_.max_rel = rel;
      dot_ += a * g;
      aa_ += a * a;
      gg_ += g * g;
      match = abs <= t_.atol + t_.rtol * std::fabs(g);
    } else {
      match = (std::isnan(a) && std::isnan(g)) || (std::isinf(a) && a == g);
      if (!match) ++d_.nonfinite;
    }
    if (!match) {
      if (d_.mismatches == 0) {
        d_.first_mismatch = i;
        d_.first_actual = a;
        d_.first_golden = g;
      }
      ++d_.mismatches;
    }
  }

  ElementDiff Done() {
    if (aa_ == 0 && gg_ == 0) {
      d_.cosine = 1;
    } else if (aa_ == 0 || gg_ == 0) {
      d_.cosine = 0;
    } else {
      d_.cosine = dot_ / (std::sqrt(aa_) * std::sqrt(gg_));
    }
    return d_;
  }

 private:
  const Tolerance t_;
  ElementDiff d_;
  double dot_ = 0, aa_ = 0, gg_ = 0;
};

}  // namespace

ElementDiff CompareElements(DataType ad, absl::string_view actual, DataType gd,
                            absl::string_view golden, uint64_t count, const Tolerance& tolerance) {
  const auto* a = reinterpret_cast<const uint8_t*>(actual.data());
  const auto* g = reinterpret_cast<const uint8_t*>(golden.data());
  Accumulator acc(tolerance);
  for (uint64_t i = 0; i < count; ++i) acc.Add(i, ElementAsDouble(ad, a, i), ElementAsDouble(gd, g, i));
  return acc.Done();
}

ElementDiff CompareValues(double actual, double golden, const Tolerance& tolerance) {
  Accumulator acc(tolerance);
  acc.Add(0, actual, golden);
  return acc.Done();
}

ElementDiff CompareSequences(const std::vector<double>& actual, const std::vector<double>& golden,
                             const Tolerance& tolerance) {
  Accumulator acc(tolerance);
  const size_t n = std::min(actual.size(), golden.size());
  for (size_t i = 0; i < n; ++i) acc.Add(i, actual[i], golden[i]);
  return acc.Done();
}

bool ScalarAsDouble(const std::string& token, double* out) {
  if (token == "true" || token == "false") {
    *out = token == "true";
    return true;
  }
  if (token == "\"NaN\"") {
    *out = NAN;
    return true;
  }
  if (token == "\"Infinity\"" || token == "\"-Infinity\"") {
    *out = token[1] == '-' ? -INFINITY : INFINITY;
    return true;
  }
  return absl::SimpleAtod(token, out);
}

}  // namespace argsdump
