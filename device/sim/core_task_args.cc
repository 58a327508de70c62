#include "device/sim/core_task_args.h"

#include "absl/strings/str_cat.h"

namespace argsdump {

absl::Status CoreTaskArgs::AddTensor(const Tensor& t, abi::ArgRole role) {
  absl::Status s;
  if (!t.valid()) {
    s = absl::InvalidArgumentError(absl::StrCat(
        "CoreTaskArgs: tensor arg ", tensors_.size(), " has no buffer"));
  } else if (tensors_.size() >= kMaxTensors) {
    s = absl::ResourceExhaustedError(
        absl::StrCat("CoreTaskArgs: more than ", kMaxTensors, " tensor args"));
  }
  if (!s.ok()) {
    if (status_.ok()) status_ = s;
    return s;
  }
  tensors_.push_back(TensorSlot{t, role});
  return absl::OkStatus();
}

absl::Status CoreTaskArgs::AddScalar(DataType dtype, uint64_t bits,
                                     const void* identity) {
  if (scalars_.size() >= kMaxScalars) {
    absl::Status s = absl::ResourceExhaustedError(
        absl::StrCat("CoreTaskArgs: more than ", kMaxScalars, " scalar args"));
    if (status_.ok()) status_ = s;
    return s;
  }
  ScalarSlot slot;
  slot.dtype = dtype;
  slot.bits = bits;
  slot.identity = identity;
  scalars_.push_back(slot);
  return absl::OkStatus();
}

namespace {

// Marks the first slot that `matches`; a second match makes it ambiguous.
// Returns false when no slot matches.
template <typename Slot, typename Match>
bool MarkFirstMatch(std::vector<Slot>& slots, Match matches) {
  Slot* first = nullptr;
  bool repeated = false;
  for (Slot& slot : slots) {
    if (!matches(slot)) continue;
    if (first == nullptr) {
      first = &slot;
    } else {
      repeated = true;
    }
  }
  if (first == nullptr) return false;
  first->marked = true;
  first->ambiguous = first->ambiguous || repeated;
  return true;
}

}  // namespace

void CoreTaskArgs::MarkTensor(const Tensor& t, uint32_t position,
                              absl::Status* status) {
  if (MarkFirstMatch(tensors_, [&](const TensorSlot& s) { return s.tensor.SameView(t); })) {
    any_marked_ = true;
  } else if (status->ok()) {
    *status = absl::InvalidArgumentError(absl::StrCat(
        "CoreTaskArgs::dump: argument ", position,
        " is a tensor that was not added to this task (add_input/add_output/"
        "add_inout it first)"));
  }
}

void CoreTaskArgs::MarkScalar(const void* identity, uint32_t position,
                              absl::Status* status) {
  if (MarkFirstMatch(scalars_, [&](const ScalarSlot& s) { return s.identity == identity; })) {
    any_marked_ = true;
  } else if (status->ok()) {
    *status = absl::InvalidArgumentError(absl::StrCat(
        "CoreTaskArgs::dump: argument ", position,
        " is not a scalar lvalue passed to add_scalar on this task (scalars "
        "are selected by the variable added, not by value)"));
  }
}

}  // namespace argsdump
