// Kernels of the sim device: C++ functions registered under a name with a
// signature (one direction per tensor slot, in payload order; SCALAR entries,
// if any, come after every tensor entry). A task names up to three kernels
// (a mix task); each runs as one subtask on a worker over the same args.
// The dump walks the widest active subtask's signature positionally.
#ifndef ARGSDUMP_DEVICE_SIM_KERNEL_H_
#define ARGSDUMP_DEVICE_SIM_KERNEL_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/sim/core_task_args.h"
#include "device/sim/tensor.h"

namespace argsdump {

enum class ArgDirection : uint8_t { kIn, kOut, kInOut, kScalar };

// What a running kernel sees.
class KernelContext {
 public:
  KernelContext(const CoreTaskArgs& args, uint32_t subtask,
                const std::atomic<bool>* cancel, std::atomic<uint64_t>* drained)
      : args_(args), subtask_(subtask), cancel_(cancel), drained_(drained) {}

  uint32_t tensor_count() const { return static_cast<uint32_t>(args_.tensors().size()); }
  uint32_t scalar_count() const { return static_cast<uint32_t>(args_.scalars().size()); }
  // FailedPrecondition when the task has no such slot.
  absl::StatusOr<Tensor> tensor(uint32_t slot) const;
  // The scalar's raw bits reinterpreted as T (its registered dtype must be T's).
  template <typename T>
  absl::StatusOr<T> scalar(uint32_t slot) const {
    if (slot >= scalar_count()) return MissingScalar(slot);
    if (args_.scalars()[slot].dtype != ScalarDataType<T>::value) return WrongScalar(slot);
    T value;
    std::memcpy(&value, &args_.scalars()[slot].bits, sizeof(T));
    return value;
  }
  uint32_t subtask() const { return subtask_; }

  // True once the runtime reaped this op (timeout or shutdown): return soon.
  bool cancelled() const { return cancel_->load(std::memory_order_acquire); }
  // Blocks until cancelled() (a kernel that never finishes by itself).
  void WaitUntilCancelled() const;
  // Makes the writes so far visible to the scheduler before completion (the
  // sim's counterpart of draining a core's writes to global memory); a hang
  // snapshot sees exactly the drained writes.
  void Drain() { drained_->fetch_add(1, std::memory_order_release); }

 private:
  absl::Status MissingScalar(uint32_t slot) const;
  absl::Status WrongScalar(uint32_t slot) const;

  const CoreTaskArgs& args_;
  uint32_t subtask_;
  const std::atomic<bool>* cancel_;
  std::atomic<uint64_t>* drained_;
};

using KernelFn = absl::Status (*)(KernelContext& ctx);

// A signature entry with the dtype the kernel takes there, for
// RegisterTyped: {ArgDirection::kIn, DataType::kBfloat16}, or just a
// direction (any dtype).
struct KernelArgSpec {
  KernelArgSpec(ArgDirection d) : direction(d) {}  // NOLINT: a direction alone
  KernelArgSpec(ArgDirection d, DataType t) : direction(d), dtype(t) {}
  ArgDirection direction;
  std::optional<DataType> dtype;
};

struct KernelInfo {
  uint16_t func_id = 0;
  std::string name;
  // What kind of kernel it is ("elementwise", "matmul", ...), for dump
  // filters that select kernels by type; empty when not given.
  std::string type;
  std::vector<ArgDirection> signature;
  // Per signature entry, the dtype the kernel declared it takes (nullopt:
  // not declared); as long as `signature`. It describes the kernel in the
  // capture's kernel table; the runtime does not check it (the kernel does).
  std::vector<std::optional<DataType>> dtypes;
  KernelFn fn = nullptr;
};

// Kernels by func_id. Register everything before the runtime starts; lookups
// afterwards are read-only and thread-safe.
class KernelRegistry {
 public:
  // InvalidArgument for a duplicate name, a null fn, a SCALAR entry before a
  // tensor entry, or a full table (func_id 0xFFFF means "unknown").
  absl::StatusOr<uint16_t> Register(std::string name,
                                    std::vector<ArgDirection> signature, KernelFn fn,
                                    std::string type = "");
  // The same with the dtypes the kernel takes, where it declares them.
  absl::StatusOr<uint16_t> RegisterTyped(std::string name, std::vector<KernelArgSpec> signature,
                                         KernelFn fn, std::string type = "");
  const KernelInfo* Find(uint16_t func_id) const;
  absl::StatusOr<uint16_t> IdOf(const std::string& name) const;
  size_t size() const { return kernels_.size(); }

 private:
  std::vector<KernelInfo> kernels_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_KERNEL_H_
