// CoreTaskArgs: the arguments of one task as orchestration code builds them:
// tensors with a direction (input / output / inout) and scalars with the dtype
// of their C++ type, plus dump markers:
//   args.dump(x, z, scale)  selects those args (level 1 dumps only these;
//                           level 3 gives only these tensors payload);
//   args.dump()             selects the whole task.
// dump(...) takes lvalues only: a temporary does not name an added argument
// and is rejected at compile time. Scalars are matched by the identity of the
// lvalue passed to add_scalar, tensors by view (same buffer and geometry).
// When several slots match, the first is selected and flagged
// arg_index_ambiguous. Misuse (an arg that was never added, too many args)
// returns an error from dump()/add_*() and makes Submit() fail with it.
//
// Built with the markers compiled out (ARGSDUMP_NO_DUMP_MARKERS, which the
// Bazel flag --//bazel:dump_markers=false defines for every target that
// includes this header), dump() and dump(...) keep their signatures and
// their compile-time checks but do nothing and return OK: no slot is ever
// marked, has_marker() is a constant false, and a call compiles to no code.
// Level 1 then dumps nothing and level 3 gives no tensor payload; the
// runtime says so when such a level is used. add_* errors still make
// Submit() fail.
#ifndef ARGSDUMP_DEVICE_SIM_CORE_TASK_ARGS_H_
#define ARGSDUMP_DEVICE_SIM_CORE_TASK_ARGS_H_

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "device/abi.h"
#include "format/dtype.h"
#include "device/sim/tensor.h"

namespace argsdump {

class CoreTaskArgs {
 public:
#ifdef ARGSDUMP_NO_DUMP_MARKERS
  static constexpr bool kDumpMarkers = false;
#else
  static constexpr bool kDumpMarkers = true;
#endif
  static constexpr uint32_t kMaxTensors = 16;
  static constexpr uint32_t kMaxScalars = 16;

  struct TensorSlot {
    Tensor tensor;
    abi::ArgRole role;
    bool marked = false;
    bool ambiguous = false;
  };
  struct ScalarSlot {
    DataType dtype;
    uint64_t bits = 0;
    const void* identity = nullptr;  // the lvalue added, null for a temporary
    bool marked = false;
    bool ambiguous = false;
  };

  absl::Status add_input(const Tensor& t) { return AddTensor(t, abi::ArgRole::kInput); }
  absl::Status add_output(const Tensor& t) { return AddTensor(t, abi::ArgRole::kOutput); }
  absl::Status add_inout(const Tensor& t) { return AddTensor(t, abi::ArgRole::kInOut); }

  // Any arithmetic type; its dtype is the C++ type's (double is FLOAT64).
  // Passing an lvalue lets dump(...) select it later.
  template <typename T>
  absl::Status add_scalar(T&& value) {
    using V = std::remove_cv_t<std::remove_reference_t<T>>;
    static_assert(std::is_arithmetic_v<V>, "add_scalar takes an arithmetic value");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(V));
    return AddScalar(ScalarDataType<V>::value, bits,
                     std::is_lvalue_reference_v<T> ? static_cast<const void*>(&value)
                                                   : nullptr);
  }

  // Selects the whole task.
  absl::Status dump() {
    if constexpr (!kDumpMarkers) {
      return absl::OkStatus();
    } else {
      whole_task_marked_ = true;
      return status_;
    }
  }

  // Selects these args. Lvalues only (temporaries do not compile).
  template <typename... A>
  absl::Status dump(A&... args) {
    static_assert(sizeof...(A) > 0);
    (CheckMarkable<A>(), ...);
    if constexpr (!kDumpMarkers) {
      ((void)args, ...);
      return absl::OkStatus();
    } else {
      uint32_t position = 0;
      absl::Status status;
      (MarkOne(args, ++position, &status), ...);
      if (!status.ok() && status_.ok()) status_ = status;
      return status;
    }
  }

  // The first error of any add_*/dump call, or OK.
  const absl::Status& status() const { return status_; }
  bool has_marker() const { return kDumpMarkers && (whole_task_marked_ || any_marked_); }
  bool whole_task_marked() const { return kDumpMarkers && whole_task_marked_; }
  const std::vector<TensorSlot>& tensors() const { return tensors_; }
  const std::vector<ScalarSlot>& scalars() const { return scalars_; }

 private:
  absl::Status AddTensor(const Tensor& t, abi::ArgRole role);
  absl::Status AddScalar(DataType dtype, uint64_t bits, const void* identity);
  void MarkTensor(const Tensor& t, uint32_t position, absl::Status* status);
  void MarkScalar(const void* identity, uint32_t position, absl::Status* status);

  // What dump(...) accepts, checked with or without the markers compiled.
  template <typename T>
  static constexpr void CheckMarkable() {
    using V = std::remove_cv_t<T>;
    static_assert(std::is_same_v<V, Tensor> || std::is_arithmetic_v<V>,
                  "dump(...) takes Tensors and scalar lvalues added to this task");
  }

  void MarkOne(const Tensor& t, uint32_t position, absl::Status* status) {
    MarkTensor(t, position, status);
  }
  template <typename T>
  void MarkOne(const T& value, uint32_t position, absl::Status* status) {
    MarkScalar(&value, position, status);
  }

  std::vector<TensorSlot> tensors_;
  std::vector<ScalarSlot> scalars_;
  bool whole_task_marked_ = false;
  bool any_marked_ = false;
  absl::Status status_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_CORE_TASK_ARGS_H_
