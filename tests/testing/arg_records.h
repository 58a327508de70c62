// Records for tests: a v1::ArgRecord written as what is particular about
// it, e.g.
//   TensorRecord(task).Arg(1).Role(v1::ROLE_OUTPUT).Shape({2, 3}).Dtype(v1::DTYPE_FLOAT16)
// What follows from the shape and dtype (row-major strides, numel,
// logical_bytes, bin_size = the whole payload) is computed when the record
// is built, unless the test sets it: a test that needs an inconsistent
// record says so at the call site. Fields not named are left unset.
#ifndef ARGSDUMP_TESTS_TESTING_ARG_RECORDS_H_
#define ARGSDUMP_TESTS_TESTING_ARG_RECORDS_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

class ArgRecordBuilder {
 public:
  // Defaults: arg 0, an input before dispatch, no func ids; FLOAT32 for a
  // tensor (0-d until Shape), INT32 for a scalar.
  ArgRecordBuilder(v1::Kind kind, uint64_t task_id);

  ArgRecordBuilder& FuncIds(std::vector<uint32_t> func_ids);
  ArgRecordBuilder& Arg(uint32_t arg_index);
  ArgRecordBuilder& Role(v1::Role role);
  ArgRecordBuilder& Stage(v1::Stage stage);
  ArgRecordBuilder& Dtype(v1::DType dtype);
  ArgRecordBuilder& Shape(std::vector<uint32_t> shape);
  ArgRecordBuilder& Contiguous(bool is_contiguous = true);
  ArgRecordBuilder& StartOffset(uint64_t elements);
  ArgRecordBuilder& BinOffset(uint64_t bin_offset);
  ArgRecordBuilder& ScalarBits(uint64_t bits);  // see BitsOf
  ArgRecordBuilder& Truncated(bool truncated = true);
  ArgRecordBuilder& Overwritten(bool overwritten = true);
  ArgRecordBuilder& AmbiguousArgIndex(bool ambiguous = true);
  ArgRecordBuilder& InFlightSnapshot(bool in_flight = true);
  ArgRecordBuilder& Overflow(bool overflow = true);
  ArgRecordBuilder& DeviceThread(uint32_t thread);
  ArgRecordBuilder& Step(uint32_t step);

  // Computed unless set: row-major strides of the shape; numel, the
  // shape's product (1 for a scalar); logical_bytes, numel elements of the
  // dtype (0 for a scalar); bin_size, logical_bytes (0 for a scalar).
  ArgRecordBuilder& Strides(std::vector<uint32_t> strides);
  ArgRecordBuilder& Numel(uint64_t numel);
  ArgRecordBuilder& LogicalBytes(uint64_t logical_bytes);
  ArgRecordBuilder& BinSize(uint64_t bin_size);

  v1::ArgRecord Build() const;
  // Implicit on purpose: `v1::ArgRecord r = TensorRecord(1).Shape({4});`.
  operator v1::ArgRecord() const { return Build(); }  // NOLINT

 private:
  v1::ArgRecord record_;  // every field but the computed ones
  std::optional<std::vector<uint32_t>> strides_;
  std::optional<uint64_t> numel_, logical_bytes_, bin_size_;
};

inline ArgRecordBuilder TensorRecord(uint64_t task_id) {
  return ArgRecordBuilder(v1::KIND_TENSOR, task_id);
}
inline ArgRecordBuilder ScalarRecord(uint64_t task_id) {
  return ArgRecordBuilder(v1::KIND_SCALAR, task_id);
}

// A scalar's raw little-endian bits, zero-extended, as scalar_bits holds
// them: BitsOf(0.5f), BitsOf(int64_t{-7}).
template <typename T>
uint64_t BitsOf(T value) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "a scalar");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

// The bytes of `values` as a payload holds them.
template <typename T>
std::string BytesOf(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!bytes.empty()) std::memcpy(&bytes[0], values.data(), bytes.size());
  return bytes;
}

// A device that died of SIGSEGV at address 0 in `crashing_task`'s kernel
// (func crash_segv, func id 7, worker 2, thread 1, step 0) while
// `other_task`'s kernel (func add, func id 1, worker 0, thread 0) ran too;
// 3 tasks in flight.
v1::DeviceCrash SegvCrash(uint64_t crashing_task, uint64_t other_task);

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_ARG_RECORDS_H_
