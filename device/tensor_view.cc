#include "device/tensor_view.h"

#include <cmath>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace argsdump {

uint64_t TensorView::numel() const {
  uint64_t n = 1;
  for (uint32_t d = 0; d < ndims; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  uint64_t expected = 1;
  for (uint32_t d = ndims; d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

uint64_t TensorView::extent_elements() const {
  if (numel() == 0) return 0;
  // 128-bit: five products of two u32 plus a u64 offset cannot overflow.
  unsigned __int128 last = start_offset;
  for (uint32_t d = 0; d < ndims && d < abi::kMaxDims; ++d) {
    last += static_cast<unsigned __int128>(shape[d] - 1) * strides[d];
  }
  const unsigned __int128 max = ~uint64_t{0};
  return last >= max ? ~uint64_t{0} : static_cast<uint64_t>(last + 1);
}

absl::Status ValidateView(const TensorView& view, uint64_t buffer_elements) {
  if (!IsValidDataType(static_cast<uint8_t>(view.dtype))) {
    return absl::InvalidArgumentError("tensor view: unknown dtype");
  }
  if (view.ndims > abi::kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor view: ", view.ndims, " dims, at most ", abi::kMaxDims));
  }
  unsigned __int128 numel = 1;
  for (uint32_t d = 0; d < view.ndims; ++d) numel *= view.shape[d];
  if (numel > (uint64_t{1} << 48)) {
    return absl::InvalidArgumentError("tensor view: more than 2^48 elements");
  }
  if (view.data == nullptr && view.numel() != 0) {
    return absl::InvalidArgumentError("tensor view: no buffer");
  }
  if (view.extent_elements() > buffer_elements) {
    return absl::OutOfRangeError(absl::StrCat(
        "tensor view: reaches element ", view.extent_elements() - 1,
        " of a buffer of ", buffer_elements, " elements"));
  }
  return absl::OkStatus();
}

namespace {

// Reads FP4 element `index` (low nibble first).
inline uint8_t Nibble(const uint8_t* base, uint64_t index) {
  const uint8_t byte = base[index / 2];
  return (index & 1) ? (byte >> 4) : (byte & 0xF);
}

// Sub-byte (FP4) gather: element by element, packing two per byte.
uint64_t GatherNibbles(const TensorView& v, uint8_t* dst, uint64_t max_bytes) {
  const uint64_t total = v.numel();
  const uint64_t max_elements = std::min<uint64_t>(total, max_bytes * 2);
  uint64_t index[abi::kMaxDims] = {};
  for (uint64_t i = 0; i < max_elements; ++i) {
    uint64_t src = v.start_offset;
    for (uint32_t d = 0; d < v.ndims; ++d) src += index[d] * v.strides[d];
    const uint8_t nib = Nibble(v.data, src);
    if (i & 1) {
      dst[i / 2] |= static_cast<uint8_t>(nib << 4);
    } else {
      dst[i / 2] = nib;
    }
    for (uint32_t d = v.ndims; d-- > 0;) {
      if (++index[d] < v.shape[d]) break;
      index[d] = 0;
    }
  }
  return (max_elements + 1) / 2;
}

template <size_t kBytes>
inline void CopyStrided(uint8_t* dst, const uint8_t* src, uint64_t count,
                        uint64_t stride_bytes) {
  for (uint64_t i = 0; i < count; ++i) {
    std::memcpy(dst + i * kBytes, src + i * stride_bytes, kBytes);
  }
}

// Copies `count` elements of `elem` bytes spaced `stride` elements apart.
inline void CopyRow(uint8_t* dst, const uint8_t* src, uint64_t count,
                    uint32_t stride, uint32_t elem) {
  if (stride == 1) {
    std::memcpy(dst, src, count * elem);
    return;
  }
  const uint64_t stride_bytes = uint64_t{stride} * elem;
  switch (elem) {
    case 1: CopyStrided<1>(dst, src, count, stride_bytes); break;
    case 2: CopyStrided<2>(dst, src, count, stride_bytes); break;
    case 4: CopyStrided<4>(dst, src, count, stride_bytes); break;
    case 8: CopyStrided<8>(dst, src, count, stride_bytes); break;
  }
}

}  // namespace

bool HasNonFinite(const TensorView& v) {
  switch (v.dtype) {
    case DataType::kFloat32: case DataType::kFloat16: case DataType::kBfloat16:
    case DataType::kFloat64: case DataType::kFp8E4M3Fn: case DataType::kFp8E8M0:
      break;
    default:
      return false;  // integers, bool, FP4E2M1 (no NaN or Inf encodings)
  }
  const uint64_t n = v.numel();
  uint32_t index[abi::kMaxDims] = {};
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t at = v.start_offset;
    for (uint32_t d = 0; d < v.ndims; ++d) at += uint64_t{index[d]} * v.strides[d];
    if (!std::isfinite(ElementAsDouble(v.dtype, v.data, at))) return true;
    for (uint32_t d = v.ndims; d-- > 0;) {
      if (++index[d] < v.shape[d]) break;
      index[d] = 0;
    }
  }
  return false;
}

uint64_t GatherLogical(const TensorView& v, uint8_t* dst, uint64_t max_bytes) {
  const uint64_t total_bytes = v.logical_bytes();
  const uint64_t limit = std::min(total_bytes, max_bytes);
  if (limit == 0) return 0;
  const uint32_t bits = ElementBits(v.dtype);
  if (bits < 8) {
    if (v.is_contiguous() && v.start_offset % 2 == 0) {
      std::memcpy(dst, v.data + v.start_offset / 2, limit);
      return limit;
    }
    return GatherNibbles(v, dst, limit);
  }
  const uint32_t elem = bits / 8;
  const uint8_t* base = v.data + v.start_offset * elem;
  if (v.is_contiguous()) {
    std::memcpy(dst, base, limit);
    return limit;
  }
  // Rows along the innermost dim; an index over the outer dims.
  const uint32_t inner = v.ndims == 0 ? 1 : v.shape[v.ndims - 1];
  const uint32_t inner_stride = v.ndims == 0 ? 1 : v.strides[v.ndims - 1];
  const uint32_t outer_dims = v.ndims == 0 ? 0 : v.ndims - 1;
  const uint64_t row_bytes = uint64_t{inner} * elem;
  uint64_t index[abi::kMaxDims] = {};
  uint64_t written = 0;
  while (written < limit) {
    uint64_t src = 0;
    for (uint32_t d = 0; d < outer_dims; ++d) src += index[d] * v.strides[d];
    const uint64_t want = std::min(row_bytes, limit - written);
    const uint64_t whole = want / elem;
    CopyRow(dst + written, base + src * elem, whole, inner_stride, elem);
    written += whole * elem;
    if (whole * elem < want) {  // a truncated payload ends mid-element
      uint8_t tail[8];
      CopyRow(tail, base + (src + whole * inner_stride) * elem, 1, 1, elem);
      std::memcpy(dst + written, tail, want - whole * elem);
      written = limit;
      break;
    }
    for (uint32_t d = outer_dims; d-- > 0;) {
      if (++index[d] < v.shape[d]) break;
      index[d] = 0;
    }
  }
  return written;
}

}  // namespace argsdump
