// Test-only: a small capture with what the HTTP face and the web view
// draw (a 2-D float tensor with NaN and +-Inf, an inout pair, a 3-D tensor,
// a truncated payload, a scalar), streamed through a real Ingest call.
#ifndef ARGSDUMP_SERVER_HTTP_HTTP_TEST_CAPTURE_H_
#define ARGSDUMP_SERVER_HTTP_HTTP_TEST_CAPTURE_H_

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "tests/testing/arg_records.h"

namespace argsdump {

inline constexpr uint64_t kSceneTask = 0x100000000ull;

struct SceneRecords {
  std::vector<v1::ArgRecord> records;
  std::vector<std::string> payloads;

  void Add(v1::ArgRecord r, const std::vector<float>& values) {
    std::string bytes(values.size() * 4, '\0');
    if (!values.empty()) std::memcpy(&bytes[0], values.data(), bytes.size());
    bytes.resize(std::min<size_t>(bytes.size(), r.bin_size()));
    records.push_back(std::move(r));
    payloads.push_back(std::move(bytes));
  }
};

inline std::vector<float> Ramp(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale) + shift;
  return v;
}

// Tasks kSceneTask + 0..4.
inline SceneRecords SceneCapture() {
  SceneRecords s;
  std::vector<float> hot = Ramp(16 * 32, 0.05f, 0);
  hot[3 * 32 + 5] = std::numeric_limits<float>::quiet_NaN();
  hot[7 * 32 + 7] = std::numeric_limits<float>::infinity();
  hot[10 * 32 + 20] = -std::numeric_limits<float>::infinity();
  s.Add(TensorRecord(kSceneTask).FuncIds({1}).Arg(0).Shape({16, 32}).Contiguous(), hot);
  s.Add(TensorRecord(kSceneTask).FuncIds({1}).Arg(1).Role(v1::ROLE_OUTPUT)
            .Stage(v1::STAGE_AFTER_COMPLETION).Shape({16, 32}).Contiguous(),
        Ramp(16 * 32, 0.01f, 1));
  std::vector<float> before = Ramp(64, 0.2f, 0), after = before;
  for (size_t i = 0; i < 32; ++i) after[i] += 1;
  s.Add(TensorRecord(kSceneTask + 1).FuncIds({2}).Arg(0).Role(v1::ROLE_INOUT).Shape({8, 8})
            .Contiguous(),
        before);
  s.Add(TensorRecord(kSceneTask + 1).FuncIds({2}).Arg(0).Role(v1::ROLE_INOUT)
            .Stage(v1::STAGE_AFTER_COMPLETION).Shape({8, 8}).Contiguous(),
        after);
  s.Add(ScalarRecord(kSceneTask + 2).FuncIds({3}).Arg(1).ScalarBits(42), {});
  s.Add(TensorRecord(kSceneTask + 3).FuncIds({4}).Arg(0).Shape({2, 4, 8}).Contiguous(),
        Ramp(64, 0.3f, 0));
  s.Add(TensorRecord(kSceneTask + 4).FuncIds({4}).Arg(0).Shape({64}).Contiguous().Truncated()
            .BinSize(100),
        Ramp(64, 0.1f, 0));
  // Offsets: consecutive, as a collector sends them.
  uint64_t offset = 0;
  for (v1::ArgRecord& r : s.records) {
    r.set_bin_offset(offset);
    offset += r.bin_size();
  }
  return s;
}

inline constexpr uint64_t kGeometryTask = 0x200000000ull;

// The view's geometry and typed scalars. Records, in order:
//   0  a 3x4 FLOAT32 view with strides (20, 2) from element 3 of its base
//      (it touches offsets 3..49: a base of at least 50 elements);
//   1  a 2x3x4 view with strides (40, 10, 2) from element 5 (5..71);
//   2.. scalars, one per entry of GeometryScalars();
//   then two views of large bases (below).
struct GeometryScalar {
  v1::DType dtype;
  uint64_t bits;
  const char* json;  // the scalar_value the HTTP face prints
};

inline std::vector<GeometryScalar> GeometryScalars() {
  return {
      {v1::DTYPE_FLOAT32, 0x3dcccccdull, "0.1"},                        // 0.1f
      {v1::DTYPE_FLOAT64, 0x3fb999999999999aull, "0.1"},                // 0.1
      {v1::DTYPE_FLOAT16, 0xc100ull, "-2.5"},                           // -2.5 in binary16
      {v1::DTYPE_BFLOAT16, 0x3fc0ull, "1.5"},                           // 1.5 in bfloat16
      {v1::DTYPE_BOOL, 1, "true"},
      {v1::DTYPE_INT32, 0xfffffffdull, "-3"},
      {v1::DTYPE_INT8, 0x80ull, "-128"},
      {v1::DTYPE_UINT16, 0xffffull, "65535"},
      {v1::DTYPE_INT64, 0xffdfffffffffffffull, "-9007199254740993"},   // -(2^53 + 1)
      {v1::DTYPE_UINT64, 0xffffffffffffffffull, "18446744073709551615"},
      {v1::DTYPE_FLOAT64, 0x7ff8000000000000ull, "\"NaN\""},
      {v1::DTYPE_FLOAT32, 0xff800000ull, "\"-Infinity\""},
      {v1::DTYPE_FLOAT16, 0x7c00ull, "\"Infinity\""},
  };
}

inline SceneRecords GeometryCapture() {
  SceneRecords s;
  s.Add(TensorRecord(kGeometryTask).FuncIds({7}).Arg(0).Shape({3, 4}).Strides({20, 2})
            .StartOffset(3).Contiguous(false),
        Ramp(12, 0.5f, 0));
  s.Add(TensorRecord(kGeometryTask + 1).FuncIds({7}).Arg(0).Shape({2, 3, 4})
            .Strides({40, 10, 2}).StartOffset(5).Contiguous(false),
        Ramp(24, 0.25f, 0));
  uint32_t arg = 1;
  for (const GeometryScalar& g : GeometryScalars()) {
    s.Add(ScalarRecord(kGeometryTask + 1).FuncIds({7}).Arg(arg++).Dtype(g.dtype)
              .ScalarBits(g.bits),
          {});
  }
  // Bases too large to draw an element a cell, metadata only (no payload):
  // 100 rows of 10 elements 10000 apart (record 15), and 2048x2048
  // elements, every other one (record 16).
  s.Add(TensorRecord(kGeometryTask + 2).FuncIds({7}).Arg(0).Shape({100, 10}).Strides({10000, 1})
            .Contiguous(false).BinSize(0),
        {});
  s.Add(TensorRecord(kGeometryTask + 3).FuncIds({7}).Arg(0).Shape({2048, 2048})
            .Strides({4096, 2}).Contiguous(false).BinSize(0),
        {});
  uint64_t offset = 0;
  for (v1::ArgRecord& r : s.records) {
    r.set_bin_offset(offset);
    offset += r.bin_size();
  }
  return s;
}

// One Ingest call: open, batches, acks, finish (or not: the capture stays
// live while the caller holds the stream).
class SceneIngest {
 public:
  SceneIngest(v1::CaptureService::Stub* stub, const std::string& name,
              const std::string& token = "",
              const std::map<std::string, std::string>& labels = {{"case", "http"}}) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!token.empty()) context_.AddMetadata("authorization", "Bearer " + token);
    stream_ = stub->Ingest(&context_);
    v1::IngestRequest open;
    open.mutable_open()->set_capture(name);
    open.mutable_open()->set_level(v1::DUMP_LEVEL_FULL);
    open.mutable_open()->set_platform("a2a3sim");
    for (const auto& [k, v] : labels) (*open.mutable_open()->mutable_labels())[k] = v;
    // The scene's kernels (func ids 1-4), as the SDK names them.
    const char* const kernels[][2] = {{"softmax_rows", "activation"},
                                      {"accumulate", "elementwise"},
                                      {"scale", "elementwise"},
                                      {"copy_3d", ""}};
    for (uint32_t id = 1; id <= 4; ++id) {
      v1::Kernel* k = open.mutable_open()->add_kernels();
      k->set_func_id(id);
      k->set_name(kernels[id - 1][0]);
      k->set_type(kernels[id - 1][1]);
      k->add_signature()->set_direction(v1::ARG_DIRECTION_IN);
      k->add_signature()->set_direction(v1::ARG_DIRECTION_OUT);
    }
    ok_ = stream_->Write(open) && stream_->Read(&response_) && response_.has_opened();
  }
  ~SceneIngest() {
    if (!done_) {
      context_.TryCancel();
      stream_->Finish();
    }
  }

  // Sends records [from, to) of `s` and waits for their ack.
  bool Send(const SceneRecords& s, size_t from, size_t to) {
    if (!ok_) return false;
    v1::IngestRequest batch;
    batch.mutable_batch()->set_first_record(from);
    batch.mutable_batch()->set_payload_offset(from < s.records.size() ? s.records[from].bin_offset() : 0);
    for (size_t i = from; i < to; ++i) {
      *batch.mutable_batch()->add_records() = s.records[i];
      batch.mutable_batch()->mutable_payload()->append(s.payloads[i]);
    }
    if (!stream_->Write(batch)) return false;
    while (stream_->Read(&response_)) {
      if (response_.has_ack() && response_.ack().durable_records() >= to) return true;
    }
    return false;
  }

  bool Finish() {
    v1::IngestRequest finish;
    finish.mutable_finish();
    if (!stream_->Write(finish)) return false;
    while (stream_->Read(&response_)) {
      if (response_.has_finished()) break;
    }
    stream_->WritesDone();
    done_ = true;
    return stream_->Finish().ok() && response_.has_finished();
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::IngestRequest, v1::IngestResponse>> stream_;
  v1::IngestResponse response_;
  bool ok_ = false;
  bool done_ = false;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_HTTP_TEST_CAPTURE_H_
