#include "device/sim/tensor.h"

#include <cstdlib>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace argsdump {

DeviceBuffer::DeviceBuffer(uint64_t id, DataType dtype, uint64_t elements)
    : id_(id), dtype_(dtype), elements_(elements) {
  const uint64_t size = (bytes() + 63) / 64 * 64;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(64, size == 0 ? 64 : size));
  if (data_ == nullptr) {
    std::fprintf(stderr, "device buffer: out of memory for %llu bytes\n",
                 static_cast<unsigned long long>(size));
    std::abort();
  }
  std::memset(data_, 0, size == 0 ? 64 : size);
}

DeviceBuffer::~DeviceBuffer() { std::free(data_); }

absl::StatusOr<Tensor> Tensor::Whole(std::shared_ptr<DeviceBuffer> buffer,
                                     const std::vector<uint32_t>& shape) {
  if (buffer == nullptr) return absl::InvalidArgumentError("tensor: no buffer");
  if (shape.size() > abi::kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor: ", shape.size(), " dims, at most ", abi::kMaxDims));
  }
  std::vector<uint32_t> strides(shape.size());
  uint64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = static_cast<uint32_t>(stride);
    stride *= shape[d];
  }
  if (stride != buffer->elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor: shape has ", stride, " elements, buffer has ", buffer->elements()));
  }
  Tensor t;
  t.buffer_ = std::move(buffer);
  t.view_.data = t.buffer_->data();
  t.view_.dtype = t.buffer_->dtype();
  return t.View(shape, strides, 0);
}

absl::StatusOr<Tensor> Tensor::View(const std::vector<uint32_t>& shape,
                                    const std::vector<uint32_t>& strides,
                                    uint64_t start_offset) const {
  if (buffer_ == nullptr) return absl::InvalidArgumentError("tensor: no buffer");
  if (shape.size() != strides.size() || shape.size() > abi::kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor view: ", shape.size(), " dims with ", strides.size(),
        " strides (at most ", abi::kMaxDims, " dims)"));
  }
  Tensor t;
  t.buffer_ = buffer_;
  t.view_.dtype = buffer_->dtype();
  t.view_.data = buffer_->data();
  t.view_.ndims = static_cast<uint32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    t.view_.shape[d] = shape[d];
    t.view_.strides[d] = strides[d];
  }
  t.view_.start_offset = start_offset;
  if (absl::Status s = ValidateView(t.view_, buffer_->elements()); !s.ok()) return s;
  return t;
}

uint64_t Tensor::ElementIndex(uint64_t logical) const {
  uint64_t index = view_.start_offset;
  for (uint32_t d = view_.ndims; d-- > 0;) {
    index += (logical % view_.shape[d]) * view_.strides[d];
    logical /= view_.shape[d];
  }
  return index;
}

bool Tensor::SameView(const Tensor& other) const {
  if (buffer_ != other.buffer_ || view_.ndims != other.view_.ndims ||
      view_.start_offset != other.view_.start_offset) {
    return false;
  }
  for (uint32_t d = 0; d < view_.ndims; ++d) {
    if (view_.shape[d] != other.view_.shape[d] ||
        view_.strides[d] != other.view_.strides[d]) {
      return false;
    }
  }
  return true;
}

}  // namespace argsdump
