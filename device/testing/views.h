// Builds a TensorView from vectors in one call (tests and benchmarks).
#ifndef ARGSDUMP_DEVICE_TESTING_VIEWS_H_
#define ARGSDUMP_DEVICE_TESTING_VIEWS_H_

#include <cstdint>
#include <vector>

#include "device/tensor_view.h"

namespace argsdump {

inline TensorView MakeView(DataType dtype, const std::vector<uint32_t>& shape,
                           const std::vector<uint32_t>& strides, uint64_t start,
                           const void* data) {
  TensorView v;
  v.dtype = dtype;
  v.ndims = static_cast<uint32_t>(shape.size());
  for (size_t d = 0; d < shape.size() && d < abi::kMaxDims; ++d) {
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
  }
  v.start_offset = start;
  v.data = static_cast<const uint8_t*>(data);
  return v;
}

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_TESTING_VIEWS_H_
