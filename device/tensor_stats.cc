#include "device/tensor_stats.h"

#include <cstring>

namespace argsdump {
namespace {

// One element into the running statistics.
inline void Add(ElementStats& s, double v) {
  ++s.count;
  if (std::isnan(v)) {
    ++s.nan;
    return;
  }
  if (std::isinf(v)) {
    ++(v > 0 ? s.pos_inf : s.neg_inf);
    return;
  }
  if (v == 0) ++s.zeros;
  if (s.finite == 0) {
    s.min = s.max = v;
  } else {
    s.min = v < s.min ? v : s.min;
    s.max = v > s.max ? v : s.max;
  }
  ++s.finite;
  s.running_mean += (v - s.running_mean) / static_cast<double>(s.finite);
  const double a = std::fabs(v);
  if (a > s.abs_max) {
    const double r = s.abs_max / a;
    s.scaled_squares = 1 + s.scaled_squares * r * r;
    s.abs_max = a;
  } else if (a > 0) {
    const double r = a / s.abs_max;
    s.scaled_squares += r * r;
  }
}

}  // namespace

ElementStats ComputeElementStats(DataType dtype, const uint8_t* payload, uint64_t count) {
  ElementStats s;
  if (dtype == DataType::kFloat32) {  // the common case, without a call per element
    for (uint64_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, payload + i * 4, 4);
      Add(s, v);
    }
    return s;
  }
  for (uint64_t i = 0; i < count; ++i) Add(s, ElementAsDouble(dtype, payload, i));
  return s;
}

}  // namespace argsdump
