#include "tests/testing/arg_records.h"

#include <utility>

#include "format/dtype.h"
#include "format/names.h"

namespace argsdump {

ArgRecordBuilder::ArgRecordBuilder(v1::Kind kind, uint64_t task_id) {
  record_.set_task_id(task_id);
  record_.set_role(v1::ROLE_INPUT);
  record_.set_stage(v1::STAGE_BEFORE_DISPATCH);
  record_.set_kind(kind);
  record_.set_dtype(kind == v1::KIND_SCALAR ? v1::DTYPE_INT32 : v1::DTYPE_FLOAT32);
}

ArgRecordBuilder& ArgRecordBuilder::FuncIds(std::vector<uint32_t> func_ids) {
  record_.mutable_func_ids()->Assign(func_ids.begin(), func_ids.end());
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Arg(uint32_t arg_index) {
  record_.set_arg_index(arg_index);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Role(v1::Role role) {
  record_.set_role(role);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Stage(v1::Stage stage) {
  record_.set_stage(stage);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Dtype(v1::DType dtype) {
  record_.set_dtype(dtype);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Shape(std::vector<uint32_t> shape) {
  record_.mutable_shape()->Assign(shape.begin(), shape.end());
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Contiguous(bool is_contiguous) {
  record_.set_is_contiguous(is_contiguous);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::StartOffset(uint64_t elements) {
  record_.set_start_offset(elements);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::BinOffset(uint64_t bin_offset) {
  record_.set_bin_offset(bin_offset);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::ScalarBits(uint64_t bits) {
  record_.set_scalar_bits(bits);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Truncated(bool truncated) {
  record_.set_truncated(truncated);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Overwritten(bool overwritten) {
  record_.set_overwritten(overwritten);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::AmbiguousArgIndex(bool ambiguous) {
  record_.set_arg_index_ambiguous(ambiguous);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::InFlightSnapshot(bool in_flight) {
  record_.set_in_flight_snapshot(in_flight);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Overflow(bool overflow) {
  record_.set_overflow(overflow);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::DeviceThread(uint32_t thread) {
  record_.set_device_thread(thread);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Step(uint32_t step) {
  record_.set_step(step);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Strides(std::vector<uint32_t> strides) {
  strides_ = std::move(strides);
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::Numel(uint64_t numel) {
  numel_ = numel;
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::LogicalBytes(uint64_t logical_bytes) {
  logical_bytes_ = logical_bytes;
  return *this;
}
ArgRecordBuilder& ArgRecordBuilder::BinSize(uint64_t bin_size) {
  bin_size_ = bin_size;
  return *this;
}

v1::ArgRecord ArgRecordBuilder::Build() const {
  v1::ArgRecord r = record_;
  const bool tensor = r.kind() != v1::KIND_SCALAR;
  if (strides_) {
    r.mutable_strides()->Assign(strides_->begin(), strides_->end());
  } else {
    std::vector<uint32_t> row_major(r.shape_size());
    uint64_t stride = 1;
    for (int d = r.shape_size(); d-- > 0;) {
      row_major[d] = static_cast<uint32_t>(stride);
      stride *= r.shape(d);
    }
    r.mutable_strides()->Assign(row_major.begin(), row_major.end());
  }
  uint64_t numel = 1;
  for (uint32_t dim : r.shape()) numel *= dim;
  r.set_numel(numel_.value_or(numel));
  uint64_t logical = 0;
  if (const auto dtype = FromProtoDType(r.dtype()); tensor && dtype) {
    logical = PayloadBytes(*dtype, r.numel());
  }
  r.set_logical_bytes(logical_bytes_.value_or(logical));
  r.set_bin_size(bin_size_.value_or(tensor ? r.logical_bytes() : 0));
  return r;
}

v1::DeviceCrash SegvCrash(uint64_t crashing_task, uint64_t other_task) {
  v1::DeviceCrash c;
  c.set_signal(11);
  c.set_signal_name("SIGSEGV");
  c.set_has_fault_address(true);
  c.set_fault_address(0);
  c.set_tasks_in_flight(3);
  c.set_description("the device process died of SIGSEGV in kernel crash_segv");
  v1::CrashedTask* other = c.add_executing();
  other->set_task_id(other_task);
  other->add_func_ids(1);
  other->set_func("add");
  other->set_func_type("aiv");
  v1::CrashedTask* t = c.add_executing();
  t->set_task_id(crashing_task);
  t->add_func_ids(7);
  t->set_func("crash_segv");
  t->set_func_type("aiv");
  t->set_worker(2);
  t->set_thread(1);
  t->set_crashing(true);
  return c;
}

}  // namespace argsdump
