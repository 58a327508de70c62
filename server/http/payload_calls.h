// The /v1/ endpoints that read a record's payload: its bytes (whole, one
// Range, or ?offset=&length=, streamed as they are read) and a tensor
// slice reduced to JSON as it is read. What they hold in flight comes out
// of one ByteBudget; past it a request waits, then gets 503.
#ifndef ARGSDUMP_SERVER_HTTP_PAYLOAD_CALLS_H_
#define ARGSDUMP_SERVER_HTTP_PAYLOAD_CALLS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "server/http/byte_budget.h"
#include "server/http/service_calls.h"
#include "server/http/tensor_view.h"

namespace argsdump {

class PayloadCalls {
 public:
  PayloadCalls(ServiceCalls* calls, uint64_t inflight_budget_bytes,
               std::chrono::milliseconds budget_wait, const TensorViewLimits& tensor)
      : calls_(calls), budget_(inflight_budget_bytes), budget_wait_(budget_wait),
        tensor_(tensor) {}

  // GET .../args/ID/payload: the payload's bytes.
  void Payload(const httplib::Request& req, httplib::Response& res);
  // GET .../args/ID/tensor[?index=&fit=]: a slice as JSON.
  void Tensor(const httplib::Request& req, httplib::Response& res);

 private:
  // Bytes [plan.read_offset, + read_length) of the record's payload, chunk
  // by chunk, in order.
  grpc::Status ReadSlice(const httplib::Request& req, const v1::CapturedArg& arg,
                         const TensorSlicePlan& plan,
                         const std::function<void(v1::PayloadChunk&)>& take);
  // Reads the slice into `reducer` (twice when its histogram needs it).
  grpc::Status ReduceSlice(const httplib::Request& req, const v1::CapturedArg& arg,
                           const TensorSlicePlan& plan, TensorSliceReducer* reducer);
  // `bytes` of the in-flight budget, or a 503 with Retry-After sent.
  std::optional<ByteBudget::Reservation> Reserve(httplib::Response& res, uint64_t bytes);
  // Streams bytes [begin, + length) once the first chunk is read (an error
  // before it is a status); `shift`: the provider's offsets are of the
  // payload (a Range) or of the part.
  void StreamPayload(const httplib::Request& req, httplib::Response& res,
                     const v1::CapturedArg& arg, uint64_t begin, uint64_t length,
                     uint64_t provided, uint64_t shift, ByteBudget::Reservation held);

  ServiceCalls* const calls_;
  ByteBudget budget_;
  const std::chrono::milliseconds budget_wait_;
  const TensorViewLimits tensor_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_PAYLOAD_CALLS_H_
