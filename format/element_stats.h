// Statistics of a tensor's elements, as the stats dump mode stores them
// with each record (computed on the host collector side from the captured
// payload) and as dump_viewer --stats prints them. NaN, +Inf and -Inf are
// counted apart and never folded into min, max, mean or the L2 norm;
// zeros (+0 and -0) are counted, and denormals are ordinary finite values.
#ifndef ARGSDUMP_FORMAT_ELEMENT_STATS_H_
#define ARGSDUMP_FORMAT_ELEMENT_STATS_H_

#include <cmath>
#include <cstdint>

#include "format/dtype.h"

namespace argsdump {

struct ElementStats {
  uint64_t count = 0;   // elements looked at
  uint64_t finite = 0;  // of them, neither NaN nor infinite
  uint64_t nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
  double min = 0, max = 0, abs_max = 0;  // over finite ones
  double mean_value = 0, l2_value = 0;    // over finite ones

  double mean() const { return mean_value; }
  double l2() const { return l2_value; }
  bool has_nonfinite() const { return nan + pos_inf + neg_inf > 0; }
};

// The first `count` elements of a densely packed payload of `dtype` (the
// caller checks the payload holds them: PayloadBytes(dtype, count)).
ElementStats ComputeElementStats(DataType dtype, const uint8_t* payload, uint64_t count);

// Whether any of the first `count` elements is a NaN or an infinity (what
// ComputeElementStats counts as nan + pos_inf + neg_inf > 0), looking only
// at the exponent bits: the collector asks it of every payload it captures,
// so it must cost little next to writing the bytes. False for integer and
// bool dtypes. Same contract on `payload` as ComputeElementStats.
bool HasNonFinite(DataType dtype, const uint8_t* payload, uint64_t count);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_ELEMENT_STATS_H_
