#include "device/sim/tensor.h"

#include <cstdlib>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/sim/device_memory.h"

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

DeviceBuffer::DeviceBuffer(uint64_t id, DataType dtype, uint64_t elements, NoAbort)
    : id_(id), dtype_(dtype), elements_(elements), data_(nullptr) {}

absl::StatusOr<std::shared_ptr<DeviceBuffer>> DeviceBuffer::Create(uint64_t id, DataType dtype,
                                                                   uint64_t elements,
                                                                   const void* owner,
                                                                   DeviceMemory* memory) {
  // More than 2^48 bytes is no allocation this machine can make (and the
  // rounding below must not wrap).
  constexpr uint64_t kMaxBytes = uint64_t{1} << 48;
  if (!IsValidDataType(static_cast<uint8_t>(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat("device buffer: dtype ", static_cast<int>(dtype), " is not one"));
  }
  if (elements > kMaxBytes * 8 / ElementBits(dtype)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device buffer: ", elements, " elements of ", std::string(DataTypeName(dtype)), " is more than 2^48 bytes"));
  }
  std::shared_ptr<DeviceBuffer> b(new DeviceBuffer(id, dtype, elements, NoAbort{}));
  const uint64_t size = std::max<uint64_t>(64, (b->bytes() + 63) / 64 * 64);
  if (memory != nullptr) {
    auto data = memory->Allocate(size);
    if (!data.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat("device buffer: out of memory for ", size,
                                                       " bytes (", data.status().message(), ")"));
    }
    b->data_ = *data;
    b->memory_ = memory;
    b->memory_bytes_ = size;
  } else if (size >= kMappedBytes) {
    // Zero pages the kernel hands out when touched: a large buffer costs
    // nothing until the kernels write it, and one that cannot be had is
    // refused here instead of by the OOM killer in a memset.
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat("device buffer: out of memory for ", size,
                                                       " bytes: ", std::strerror(errno)));
    }
    b->data_ = static_cast<uint8_t*>(p);
    b->mapped_bytes_ = size;
  } else {
    b->data_ = static_cast<uint8_t*>(std::aligned_alloc(64, size));
    if (b->data_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("device buffer: out of memory for ", size, " bytes"));
    }
    std::memset(b->data_, 0, size);
  }
  b->owner_ = owner;
  return b;
}

void DeviceBuffer::Zero() {
  if (memory_ != nullptr) {
    memory_->Zero(data_, memory_bytes_);
  } else if (mapped_bytes_ > 0) {
    // Private anonymous pages read as zero again once dropped.
    ::madvise(data_, mapped_bytes_, MADV_DONTNEED);
  } else {
    std::memset(data_, 0, std::max<uint64_t>(64, (bytes() + 63) / 64 * 64));
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (memory_ != nullptr) {
    memory_->Free(data_, memory_bytes_);
  } else if (mapped_bytes_ > 0) {
    ::munmap(data_, mapped_bytes_);
  } else {
    std::free(data_);
  }
}

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
    if (stride > UINT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor: dim ", d, " would need a stride of ", stride,
          " elements; strides are 32-bit (make the inner dims smaller)"));
    }
    strides[d] = static_cast<uint32_t>(stride);
    if (shape[d] != 0 && stride > UINT64_MAX / shape[d]) {
      return absl::InvalidArgumentError("tensor: the shape's element count overflows 64 bits");
    }
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

absl::Status Tensor::CheckElementType(size_t bytes, bool floating, std::optional<DataType> as,
                                      uint64_t count) const {
  if (buffer_ == nullptr) return absl::FailedPreconditionError("tensor: no buffer");
  const DataType dtype = view_.dtype;
  if (dtype == DataType::kFp4E2M1) {
    return absl::InvalidArgumentError(
        "tensor: FP4E2M1 packs two elements per byte; use WriteBytes on a compact tensor");
  }
  const bool float_dtype = dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
  if (bytes * 8 != ElementBits(dtype) || (floating && as != dtype) || (!floating && float_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor: a ", std::string(DataTypeName(dtype)), " tensor is read and written as ",
        dtype == DataType::kFloat32   ? "float"
        : dtype == DataType::kFloat64 ? "double"
                                      : absl::StrCat("a ", ElementBits(dtype), "-bit integer (its bits)"),
        ", not as a ", bytes * 8, "-bit ", floating ? "floating type" : "integer"));
  }
  if (count != numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor: ", count, " values for a view of ", numel(), " elements"));
  }
  return absl::OkStatus();
}

absl::Status Tensor::WriteBytes(const std::string& bytes) const {
  if (buffer_ == nullptr) return absl::FailedPreconditionError("tensor: no buffer");
  if (!is_contiguous() || start_offset() != 0 || numel() != buffer_->elements()) {
    return absl::InvalidArgumentError(
        "tensor: WriteBytes needs a compact tensor (the whole buffer, row-major)");
  }
  if (bytes.size() != buffer_->bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor: ", bytes.size(), " bytes for a ",
                                                   std::string(DataTypeName(dtype())), " tensor of ",
                                                   buffer_->bytes()));
  }
  std::memcpy(buffer_->data(), bytes.data(), bytes.size());
  return absl::OkStatus();
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
