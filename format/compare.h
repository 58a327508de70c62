// Element-wise comparison of a captured tensor (or scalar) against a golden
// one: what dump_viewer --compare reports per arg, and what the capture
// service's job comparisons report.
//
// An element matches when |actual - golden| <= atol + rtol * |golden|
// (NumPy's isclose), or both are NaN, or both are the same infinity. Max
// abs and max relative error ( |a - g| / |g|; inf when g is 0 and a is not)
// and the cosine similarity are taken over the pairs where both are finite;
// the pairs where only one side is finite are counted apart (nonfinite), as
// mismatches.
#ifndef ARGSDUMP_FORMAT_COMPARE_H_
#define ARGSDUMP_FORMAT_COMPARE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "format/dtype.h"

namespace argsdump {

struct Tolerance {
  double atol = 1e-8;  // NumPy's defaults
  double rtol = 1e-5;
};

struct ElementDiff {
  uint64_t compared = 0;    // element pairs looked at
  uint64_t mismatches = 0;  // beyond the tolerance, nonfinite included
  uint64_t nonfinite = 0;   // NaN or Inf on one side only (or opposite infinities)
  double max_abs = 0, max_rel = 0;
  double cosine = 1;  // 1 when both are all zeros, 0 when one is
  // The first mismatching element (flat, row-major), when there is one.
  uint64_t first_mismatch = std::numeric_limits<uint64_t>::max();
  double first_actual = 0, first_golden = 0;
};

// The first `count` elements of two payloads of these dtypes (the two may
// differ: values are compared, not bits). The caller checks that each
// payload holds `count` elements.
ElementDiff CompareElements(DataType actual_dtype, absl::string_view actual,
                            DataType golden_dtype, absl::string_view golden,
                            uint64_t count, const Tolerance& tolerance);

// Two scalar values as the manifest writes them (1, 0.5, "NaN", true).
// False when one is not a number.
bool ScalarAsDouble(const std::string& token, double* out);

// Both values through the same rule (one element).
ElementDiff CompareValues(double actual, double golden, const Tolerance& tolerance);

// Two sequences of values, element by element (the first
// min(actual.size(), golden.size()) of them).
ElementDiff CompareSequences(const std::vector<double>& actual, const std::vector<double>& golden,
                             const Tolerance& tolerance);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_COMPARE_H_
