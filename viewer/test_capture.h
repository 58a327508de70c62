// Tests: a capture built record by record (payload offsets assigned in
// order), written through the real CaptureStore or streamed to a capture
// service by the caller with the same records and payloads.
#ifndef ARGSDUMP_VIEWER_TEST_CAPTURE_H_
#define ARGSDUMP_VIEWER_TEST_CAPTURE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/argsdump/v1/record.pb.h"
#include "store/capture_store.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/record_batch.h"

namespace argsdump {

class TestCapture {
 public:
  // A tensor of `shape` (row-major strides unless given) whose payload is
  // `bytes` (bin_size = bytes.size(); logical_bytes from `logical`, which
  // defaults to bytes.size()).
  v1::ArgRecord& Tensor(uint64_t task, uint32_t arg, v1::Role role, v1::Stage stage,
                        v1::DType dtype, const std::vector<uint32_t>& shape, std::string bytes,
                        uint64_t logical = UINT64_MAX) {
    const uint64_t logical_bytes = logical == UINT64_MAX ? bytes.size() : logical;
    const v1::ArgRecord r = TensorRecord(task)
                                .FuncIds({FuncOf(task)})
                                .Arg(arg)
                                .Role(role)
                                .Stage(stage)
                                .Dtype(dtype)
                                .Shape(shape)
                                .Contiguous()
                                .LogicalBytes(logical_bytes)
                                .Truncated(!bytes.empty() && bytes.size() < logical_bytes);
    return Add(r, std::move(bytes));
  }

  v1::ArgRecord& Scalar(uint64_t task, uint32_t arg, v1::DType dtype, uint64_t bits) {
    return Add(ScalarRecord(task).FuncIds({FuncOf(task)}).Arg(arg).Dtype(dtype).ScalarBits(bits));
  }

  // Any record, with its payload placed after the last one.
  v1::ArgRecord& Add(v1::ArgRecord record, std::string payload = "") {
    return batch_.Add(std::move(record), std::move(payload));
  }

  template <typename T>
  static std::string Bytes(const std::vector<T>& values) {
    return BytesOf(values);
  }

  // The capture's kernel table (CaptureInfo.kernels; a stream sends it in
  // IngestOpen).
  void SetKernels(google::protobuf::RepeatedPtrField<v1::Kernel> kernels) {
    kernels_ = std::move(kernels);
  }
  const google::protobuf::RepeatedPtrField<v1::Kernel>& kernels() const { return kernels_; }

  // What the records' times count from (CaptureInfo.clock).
  void SetClock(v1::CaptureClock clock) { clock_ = std::move(clock); }

  // How the device process died, stored with Amend before Finish.
  void SetDeviceCrash(v1::DeviceCrash crash) { *end_.mutable_device_crash() = std::move(crash); }
  // What a sink's Amend gets before Finish (empty unless SetDeviceCrash).
  const v1::CaptureInfo& end() const { return end_; }

  // Through the real CaptureStore, one Append per record, then Amend (a
  // device crash) and Finish with `counters`.
  absl::Status WriteTo(const std::string& dir, const std::string& name = "test",
                       const v1::CaptureCounters& counters = v1::CaptureCounters()) const {
    v1::CaptureInfo info;
    info.set_name(name);
    info.set_level(v1::DUMP_LEVEL_FULL);
    *info.mutable_kernels() = kernels_;
    if (clock_) *info.mutable_clock() = *clock_;
    auto store = CaptureStore::Create(dir, info);
    if (!store.ok()) return store.status();
    for (size_t i = 0; i < batch_.size(); ++i) {
      absl::Status s = (*store)->Append(batch_.records()[i], batch_.payload(i));
      if (!s.ok()) return s;
    }
    if (absl::Status s = (*store)->Amend(end_); !s.ok()) return s;
    return (*store)->Finish(counters);
  }

  std::vector<const v1::ArgRecord*> RecordPtrs() const { return batch_.RecordPtrs(); }
  std::vector<absl::string_view> PayloadViews() const { return batch_.PayloadViews(); }
  std::deque<v1::ArgRecord>& records() { return batch_.records(); }

 private:
  // The kernel a task ran: 5, 6 or 7, by task id.
  static uint32_t FuncOf(uint64_t task) {
    return static_cast<uint32_t>(5 + (task & 0xFFFFFFFF) % 3);
  }

  RecordBatch batch_;
  v1::CaptureInfo end_;  // what Amend adds
  google::protobuf::RepeatedPtrField<v1::Kernel> kernels_;
  std::optional<v1::CaptureClock> clock_;
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
  // Task 3 arrives first (another device thread ran ahead).
  c.Tensor(t3, 0, R::ROLE_OUTPUT, after, v1::DTYPE_FP8E4M3FN, {1, 1, 2, 1, 2},
           std::string("\x38\x40\xb8\x7f", 4));  // 1, 2, -1, NaN
  c.Tensor(t3, 2, R::ROLE_OUTPUT, after, v1::DTYPE_FLOAT32, {8},
           Bytes(std::vector<float>{1, 2, 3, 4}), 32);  // truncated: 4 of 8
  c.Tensor(t3, 3, R::ROLE_OUTPUT, after, v1::DTYPE_INT8, {4}, "", 4);  // metadata only
  c.Tensor(t0, 0, R::ROLE_INPUT, before, v1::DTYPE_FLOAT32, {2, 3},
           Bytes(std::vector<float>{1, 2, 3, 4, 5, 6}));
  c.Scalar(t0, 2, v1::DTYPE_FLOAT32, BitsOf(0.5f));
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

// A device that died in task 1's kernel while task 2's ran too
// (SegvCrash): task 0 completed; tasks 1 and 2 have their inputs and
// in-flight snapshots of their outputs.
// The kernels of MakeCapture-like captures (func ids 5, 6, 7 by task):
// names, types, directions and a declared dtype.
inline google::protobuf::RepeatedPtrField<v1::Kernel> SceneKernels() {
  google::protobuf::RepeatedPtrField<v1::Kernel> t;
  const struct {
    uint32_t id;
    const char* name;
    const char* type;
  } kernels[] = {{5, "layer_norm", "norm"}, {6, "saxpy", "elementwise"},
                 {7, "strided_affine", "elementwise"}};
  for (const auto& k : kernels) {
    v1::Kernel* out = t.Add();
    out->set_func_id(k.id);
    out->set_name(k.name);
    out->set_type(k.type);
    v1::KernelArg* in = out->add_signature();
    in->set_direction(v1::ARG_DIRECTION_IN);
    in->set_dtype(v1::DTYPE_FLOAT32);
    out->add_signature()->set_direction(v1::ARG_DIRECTION_OUT);
    out->add_signature()->set_direction(v1::ARG_DIRECTION_SCALAR);
  }
  return t;
}

inline TestCapture CrashScene() {
  TestCapture c;
  for (uint64_t t = 0; t < 3; ++t) {
    const uint64_t task = 0x100000000ull + t;
    c.Tensor(task, 0, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_FLOAT32, {2},
             std::string(8, 'a'));
    c.Tensor(task, 1, v1::ROLE_OUTPUT, v1::STAGE_AFTER_COMPLETION, v1::DTYPE_FLOAT32, {2},
             std::string(8, 'b'))
        .set_in_flight_snapshot(t > 0);
  }
  c.SetDeviceCrash(SegvCrash(0x100000001, 0x100000002));
  return c;
}

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_TEST_CAPTURE_H_
