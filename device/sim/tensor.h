// Sim device memory and tensors. A DeviceBuffer is one allocation of device
// memory (64-byte aligned); a Tensor is a view of one: dtype, shape (up to 5
// dims), element strides and a start offset. Views share their buffer, so the
// runtime tracks dependencies per buffer.
#ifndef ARGSDUMP_DEVICE_SIM_TENSOR_H_
#define ARGSDUMP_DEVICE_SIM_TENSOR_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "device/abi.h"
#include "format/dtype.h"
#include "device/tensor_view.h"

namespace argsdump {

class DeviceMemory;

class DeviceBuffer {
 public:
  // Aborts when the memory cannot be had; Create says so instead.
  DeviceBuffer(uint64_t id, DataType dtype, uint64_t elements);
  // ResourceExhausted when `elements` of `dtype` cannot be allocated.
  // `owner` names who allocated it (a runtime), for Submit's check.
  // `memory` set: the storage comes from that shared device memory (the
  // device in its own process), else from this process's heap.
  static absl::StatusOr<std::shared_ptr<DeviceBuffer>> Create(uint64_t id, DataType dtype,
                                                              uint64_t elements,
                                                              const void* owner,
                                                              DeviceMemory* memory = nullptr);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  uint64_t id() const { return id_; }
  DataType dtype() const { return dtype_; }
  uint64_t elements() const { return elements_; }
  uint64_t bytes() const { return PayloadBytes(dtype_, elements_); }
  uint8_t* data() const { return data_; }
  const void* owner() const { return owner_; }
  // Zero-fills the storage as a new buffer's is: a large one's pages go
  // back (they read as zero and cost nothing until touched), a small one
  // is written over. Nothing may read or write the buffer meanwhile.
  void Zero();

 private:
  struct NoAbort {};
  DeviceBuffer(uint64_t id, DataType dtype, uint64_t elements, NoAbort);
  uint64_t id_;
  DataType dtype_;
  uint64_t elements_;
  uint8_t* data_;
  const void* owner_ = nullptr;
  uint64_t mapped_bytes_ = 0;  // mmap'd (Create, large buffers), else malloc'd
  DeviceMemory* memory_ = nullptr;  // set: the storage is shared device memory
  uint64_t memory_bytes_ = 0;
  static constexpr uint64_t kMappedBytes = 1 << 20;
};

class Tensor {
 public:
  Tensor() = default;

  // A compact row-major view of the whole of `buffer` with `shape`.
  static absl::StatusOr<Tensor> Whole(std::shared_ptr<DeviceBuffer> buffer,
                                      const std::vector<uint32_t>& shape);
  // Another view of the same buffer; OutOfRange if it leaves the buffer.
  absl::StatusOr<Tensor> View(const std::vector<uint32_t>& shape,
                              const std::vector<uint32_t>& strides,
                              uint64_t start_offset) const;

  bool valid() const { return buffer_ != nullptr; }
  const std::shared_ptr<DeviceBuffer>& buffer() const { return buffer_; }
  DataType dtype() const { return view_.dtype; }
  uint32_t ndims() const { return view_.ndims; }
  uint32_t shape(uint32_t d) const { return view_.shape[d]; }
  uint32_t stride(uint32_t d) const { return view_.strides[d]; }
  uint64_t start_offset() const { return view_.start_offset; }
  uint64_t numel() const { return view_.numel(); }
  bool is_contiguous() const { return view_.is_contiguous(); }
  const TensorView& view() const { return view_; }

  // Buffer element index of the view's logical (row-major) element `i`.
  uint64_t ElementIndex(uint64_t logical) const;

  // Typed access for kernels and tests (T must match the element width).
  template <typename T>
  T Get(uint64_t logical) const {
    T value;
    std::memcpy(&value, view_.data + ElementIndex(logical) * sizeof(T), sizeof(T));
    return value;
  }
  template <typename T>
  void Set(uint64_t logical, T value) const {
    std::memcpy(const_cast<uint8_t*>(view_.data) + ElementIndex(logical) * sizeof(T),
                &value, sizeof(T));
  }

  // The view's elements in logical (row-major) order, copied in or out.
  // T is the element type: float/double for FLOAT32/FLOAT64, otherwise an
  // integer of the element's width (its bits: uint16_t for FLOAT16 and
  // BFLOAT16, uint8_t for FP8 and BOOL). InvalidArgument for another T, a
  // count other than numel(), or FP4E2M1 (two elements per byte: use
  // WriteBytes on a compact tensor).
  template <typename T>
  absl::Status Write(const std::vector<T>& values) const {
    if (absl::Status s = CheckElementType(sizeof(T), std::is_floating_point_v<T>,
                                          ScalarTypeOf<T>(), values.size());
        !s.ok()) {
      return s;
    }
    for (uint64_t i = 0; i < values.size(); ++i) Set<T>(i, values[i]);
    return absl::OkStatus();
  }
  template <typename T>
  absl::StatusOr<std::vector<T>> Read() const {
    if (absl::Status s = CheckElementType(sizeof(T), std::is_floating_point_v<T>,
                                          ScalarTypeOf<T>(), numel());
        !s.ok()) {
      return s;
    }
    std::vector<T> out(numel());
    for (uint64_t i = 0; i < out.size(); ++i) out[i] = Get<T>(i);
    return out;
  }
  // Raw little-endian bytes of a compact (contiguous, start 0, whole
  // buffer) tensor: PayloadBytes(dtype, numel) of them.
  absl::Status WriteBytes(const std::string& bytes) const;

  // Same buffer and same geometry.
  bool SameView(const Tensor& other) const;

 private:
  template <typename T>
  static std::optional<DataType> ScalarTypeOf() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      return ScalarDataType<T>::value;
    } else {
      return std::nullopt;
    }
  }
  // `bytes` wide elements (floating: of dtype `as`), `count` of them.
  absl::Status CheckElementType(size_t bytes, bool floating, std::optional<DataType> as,
                                uint64_t count) const;

  std::shared_ptr<DeviceBuffer> buffer_;
  TensorView view_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_TENSOR_H_
