// TensorView: the geometry of one tensor argument over device memory (dtype,
// shape of up to 5 dims, element strides, start_offset in elements) and the
// gather that turns it into the logical row-major little-endian payload the
// capture stores (`logical_contiguous`).
#ifndef ARGSDUMP_DEVICE_TENSOR_VIEW_H_
#define ARGSDUMP_DEVICE_TENSOR_VIEW_H_

#include <cstdint>

#include "absl/status/status.h"
#include "device/abi.h"
#include "format/dtype.h"

namespace argsdump {

struct TensorView {
  DataType dtype = DataType::kFloat32;
  uint32_t ndims = 0;  // 0 = a single element
  uint32_t shape[abi::kMaxDims] = {};
  uint32_t strides[abi::kMaxDims] = {};  // elements
  uint64_t start_offset = 0;             // elements
  const uint8_t* data = nullptr;         // element 0 of the underlying buffer

  uint64_t numel() const;
  // Bytes of the gathered logical payload (numel x element size).
  uint64_t logical_bytes() const { return PayloadBytes(dtype, numel()); }
  // True when strides are the compact row-major strides of shape (dims of
  // extent 1 may carry any stride).
  bool is_contiguous() const;
  // Largest element index the view touches, plus one (0 when numel is 0).
  uint64_t extent_elements() const;
};

// Checks ndims, dtype, and that every element lies in [0, buffer_elements).
absl::Status ValidateView(const TensorView& view, uint64_t buffer_elements);

// Writes the first min(max_bytes, logical_bytes()) bytes of the logical
// row-major payload of `view` to `dst`; returns the bytes written.
// Contiguous views are one memcpy; others are gathered row by row (a memcpy
// per row when the innermost stride is 1).
uint64_t GatherLogical(const TensorView& view, uint8_t* dst, uint64_t max_bytes);

// Whether any element of the view is a NaN or an infinity (floating dtypes;
// integer and bool views never are).
bool HasNonFinite(const TensorView& view);

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_TENSOR_VIEW_H_
