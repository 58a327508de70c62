// Tests: a capture built record by record (payload offsets assigned in
// order), written through the real CaptureStore or streamed to a capture
// service by the caller with the same records and payloads.
#ifndef ARGSDUMP_VIEWER_TEST_CAPTURE_H_
#define ARGSDUMP_VIEWER_TEST_CAPTURE_H_

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/argsdump/v1/record.pb.h"
#include "server/capture_store.h"

namespace argsdump {

class TestCapture {
 public:
  // A tensor of `shape` (row-major strides unless given) whose payload is
  // `bytes` (bin_size = bytes.size(); logical_bytes from `logical`, which
  // defaults to bytes.size()).
  v1::ArgRecord& Tensor(uint64_t task, uint32_t arg, v1::Role role, v1::Stage stage,
                        v1::DType dtype, const std::vector<uint32_t>& shape, std::string bytes,
                        uint64_t logical = UINT64_MAX) {
    v1::ArgRecord r;
    r.set_task_id(task);
    r.add_func_ids(static_cast<uint32_t>(5 + (task & 0xFFFFFFFF) % 3));
    r.set_arg_index(arg);
    r.set_role(role);
    r.set_stage(stage);
    r.set_kind(v1::KIND_TENSOR);
    r.set_dtype(dtype);
    uint64_t numel = 1, stride = 1;
    std::vector<uint32_t> strides(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = static_cast<uint32_t>(stride);
      stride *= shape[d];
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      r.add_shape(shape[d]);
      r.add_strides(strides[d]);
      numel *= shape[d];
    }
    r.set_numel(numel);
    r.set_is_contiguous(true);
    r.set_logical_bytes(logical == UINT64_MAX ? bytes.size() : logical);
    r.set_truncated(!bytes.empty() && bytes.size() < r.logical_bytes());
    r.set_bin_offset(bytes.empty() ? 0 : offset_);
    r.set_bin_size(bytes.size());
    offset_ += bytes.size();
    records_.push_back(r);
    payloads_.push_back(std::move(bytes));
    return records_.back();
  }

  v1::ArgRecord& Scalar(uint64_t task, uint32_t arg, v1::DType dtype, uint64_t bits) {
    v1::ArgRecord r;
    r.set_task_id(task);
    r.add_func_ids(static_cast<uint32_t>(5 + (task & 0xFFFFFFFF) % 3));
    r.set_arg_index(arg);
    r.set_role(v1::ROLE_INPUT);
    r.set_stage(v1::STAGE_BEFORE_DISPATCH);
    r.set_kind(v1::KIND_SCALAR);
    r.set_dtype(dtype);
    r.set_numel(1);
    r.set_scalar_bits(bits);
    records_.push_back(r);
    payloads_.emplace_back();
    return records_.back();
  }

  template <typename T>
  static std::string Bytes(const std::vector<T>& values) {
    std::string b(values.size() * sizeof(T), '\0');
    if (!b.empty()) std::memcpy(&b[0], values.data(), b.size());
    return b;
  }

  absl::Status WriteTo(const std::string& dir, const std::string& name = "test") const {
    v1::CaptureInfo info;
    info.set_name(name);
    info.set_level(v1::DUMP_LEVEL_FULL);
    auto store = CaptureStore::Create(dir, info);
    if (!store.ok()) return store.status();
    for (size_t i = 0; i < records_.size(); ++i) {
      if (absl::Status s = (*store)->Append(records_[i], payloads_[i]); !s.ok()) return s;
    }
    return (*store)->Finish(v1::CaptureCounters());
  }

  std::vector<const v1::ArgRecord*> RecordPtrs() const {
    std::vector<const v1::ArgRecord*> out;
    for (const v1::ArgRecord& r : records_) out.push_back(&r);
    return out;
  }
  std::vector<absl::string_view> PayloadViews() const {
    return std::vector<absl::string_view>(payloads_.begin(), payloads_.end());
  }
  std::deque<v1::ArgRecord>& records() { return records_; }

 private:
  std::deque<v1::ArgRecord> records_;  // a deque: references stay valid
  std::deque<std::string> payloads_;
  uint64_t offset_ = 0;
};

// Four tasks that exercise every command: float32, float16, bfloat16, fp8,
// float64 (0-d) and 5-d tensors, scalars, an inout pair whose after-state
// holds a NaN and an Inf (task 2), a truncated and a payload-less tensor,
// in an arrival order that is not the manifest's. `variant` changes task
// 1's bfloat16 output element [1, 0] from 2 to 2.5 (a compare target).
inline TestCapture ViewerScene(bool variant) {
  using R = v1::Role;
  auto Bytes = [](const auto& v) { return TestCapture::Bytes(v); };
  TestCapture c;
  const uint64_t t0 = 0x100000000, t1 = t0 + 1, t2 = t0 + 2, t3 = t0 + 3;
  const auto before = v1::STAGE_BEFORE_DISPATCH, after = v1::STAGE_AFTER_COMPLETION;
  float half_value = 0.5f;
  uint32_t half_bits;
  std::memcpy(&half_bits, &half_value, 4);
  // Task 3 arrives first (another device thread ran ahead).
  c.Tensor(t3, 0, R::ROLE_OUTPUT, after, v1::DTYPE_FP8E4M3FN, {1, 1, 2, 1, 2},
           std::string("\x38\x40\xb8\x7f", 4));  // 1, 2, -1, NaN
  c.Tensor(t3, 2, R::ROLE_OUTPUT, after, v1::DTYPE_FLOAT32, {8},
           Bytes(std::vector<float>{1, 2, 3, 4}), 32);  // truncated: 4 of 8
  c.Tensor(t3, 3, R::ROLE_OUTPUT, after, v1::DTYPE_INT8, {4}, "", 4);  // metadata only
  c.Tensor(t0, 0, R::ROLE_INPUT, before, v1::DTYPE_FLOAT32, {2, 3},
           Bytes(std::vector<float>{1, 2, 3, 4, 5, 6}));
  c.Scalar(t0, 2, v1::DTYPE_FLOAT32, half_bits);
  c.Tensor(t1, 0, R::ROLE_INPUT, before, v1::DTYPE_FLOAT16, {4},
           Bytes(std::vector<uint16_t>{0x3C00, 0x4000, 0x4200, 0x4400}));  // 1 2 3 4
  c.Scalar(t1, 2, v1::DTYPE_INT64, static_cast<uint64_t>(int64_t{-7}));
  c.Tensor(t0, 1, R::ROLE_OUTPUT, after, v1::DTYPE_FLOAT32, {2, 3},
           Bytes(std::vector<float>{2, 4, 6, 8, 10, 12}));
  // bfloat16 1, 3, 2 (2.5 in the variant), 4.
  c.Tensor(t1, 1, R::ROLE_OUTPUT, after, v1::DTYPE_BFLOAT16, {2, 2},
           Bytes(std::vector<uint16_t>{0x3F80, 0x4040, variant ? uint16_t{0x4020} : uint16_t{0x4000},
                                       0x4080}));
  c.Tensor(t2, 0, R::ROLE_INOUT, before, v1::DTYPE_FLOAT32, {3},
           Bytes(std::vector<float>{1, 2, 3}));
  c.Tensor(t2, 1, R::ROLE_INPUT, before, v1::DTYPE_FLOAT64, {}, Bytes(std::vector<double>{3.25}));
  c.Tensor(t2, 0, R::ROLE_INOUT, after, v1::DTYPE_FLOAT32, {3},
           Bytes(std::vector<float>{1, __builtin_nanf(""), __builtin_inff()}));
  return c;
}

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_TEST_CAPTURE_H_
