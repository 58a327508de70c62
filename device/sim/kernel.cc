#include "device/sim/kernel.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

namespace argsdump {

absl::StatusOr<Tensor> KernelContext::tensor(uint32_t slot) const {
  if (slot >= tensor_count()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel: tensor slot ", slot, " requested, task has ", tensor_count()));
  }
  return args_.tensors()[slot].tensor;
}

absl::Status KernelContext::MissingScalar(uint32_t slot) const {
  return absl::FailedPreconditionError(absl::StrCat(
      "kernel: scalar slot ", slot, " requested, task has ", scalar_count()));
}

absl::Status KernelContext::WrongScalar(uint32_t slot) const {
  return absl::FailedPreconditionError(absl::StrCat(
      "kernel: scalar slot ", slot, " has dtype ",
      std::string(DataTypeName(args_.scalars()[slot].dtype))));
}

void KernelContext::WaitUntilCancelled() const {
  // The runtime sets the flag from another thread and never signals; a stuck
  // kernel is by definition idle, so a slow poll is what it should cost.
  while (!cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

absl::StatusOr<uint16_t> KernelRegistry::Register(std::string name,
                                                  std::vector<ArgDirection> signature,
                                                  KernelFn fn, std::string type) {
  if (fn == nullptr) return absl::InvalidArgumentError("kernel " + name + ": no function");
  if (kernels_.size() >= abi::kUnknownFuncId) {
    return absl::ResourceExhaustedError("kernel registry is full");
  }
  for (const KernelInfo& k : kernels_) {
    if (k.name == name) {
      return absl::InvalidArgumentError("kernel " + name + " is already registered");
    }
  }
  bool seen_scalar = false;
  for (ArgDirection d : signature) {
    if (d == ArgDirection::kScalar) {
      seen_scalar = true;
    } else if (seen_scalar) {
      return absl::InvalidArgumentError(
          "kernel " + name + ": SCALAR signature entries must follow every tensor entry");
    }
  }
  KernelInfo info;
  info.func_id = static_cast<uint16_t>(kernels_.size());
  info.name = std::move(name);
  info.type = std::move(type);
  info.dtypes.resize(signature.size());
  info.signature = std::move(signature);
  info.fn = fn;
  kernels_.push_back(std::move(info));
  return kernels_.back().func_id;
}

absl::StatusOr<uint16_t> KernelRegistry::RegisterTyped(std::string name,
                                                       std::vector<KernelArgSpec> signature,
                                                       KernelFn fn, std::string type) {
  std::vector<ArgDirection> directions;
  std::vector<std::optional<DataType>> dtypes;
  for (const KernelArgSpec& a : signature) {
    directions.push_back(a.direction);
    dtypes.push_back(a.dtype);
  }
  absl::StatusOr<uint16_t> id =
      Register(std::move(name), std::move(directions), fn, std::move(type));
  if (id.ok()) kernels_.back().dtypes = std::move(dtypes);
  return id;
}

const KernelInfo* KernelRegistry::Find(uint16_t func_id) const {
  return func_id < kernels_.size() ? &kernels_[func_id] : nullptr;
}

absl::StatusOr<uint16_t> KernelRegistry::IdOf(const std::string& name) const {
  for (const KernelInfo& k : kernels_) {
    if (k.name == name) return k.func_id;
  }
  return absl::NotFoundError("no kernel named " + name);
}

}  // namespace argsdump
