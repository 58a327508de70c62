#include "server/http/payload_calls.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/http/httplib_workarounds.h"
#include "server/http/params.h"
#include "server/http/payload_range.h"
#include "server/http/responses.h"

namespace argsdump {
namespace {

// ReadPayload of bytes [offset, offset + length) of record `id`.
v1::ReadPayloadRequest ReadPayloadRequestFor(const std::string& capture, uint64_t id,
                                             uint64_t offset, uint64_t length) {
  v1::ReadPayloadRequest request;
  request.set_capture(capture);
  request.set_record_id(id);
  request.set_offset(offset);
  request.set_length(length);
  return request;
}

// A JSON answer that holds its reservation until it is sent (or its
// connection is cut).
void SendJsonHolding(httplib::Response& res, std::string json, ByteBudget::Reservation held) {
  json.append("\n");
  struct Answer {
    std::string json;
    ByteBudget::Reservation held;
  };
  auto answer = std::make_shared<Answer>(Answer{std::move(json), std::move(held)});
  res.status = 200;
  res.set_content_provider(
      answer->json.size(), "application/json",
      [answer](size_t offset, size_t length, httplib::DataSink& sink) {
        return sink.write(answer->json.data() + offset, length);
      });
}

// A ReadPayload stream kept open across httplib's content-provider calls.
struct PayloadStream {
  explicit PayloadStream(ByteBudget::Reservation held) : held(std::move(held)) {}
  ByteBudget::Reservation held;  // its chunks' bytes, until the answer is gone
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::PayloadChunk>> reader;
  v1::PayloadChunk chunk;
  bool have_chunk = false;  // `chunk` read and not yet sent
  bool finished = false;
  ~PayloadStream() {
    if (reader != nullptr && !finished) {
      context.TryCancel();
      reader->Finish();
    }
  }
};

ByteRanges RangesOf(const httplib::Ranges& ranges) {
  ByteRanges out;
  for (const auto& [first, last] : ranges) out.emplace_back(first, last);
  return out;
}

}  // namespace

void PayloadCalls::Payload(const httplib::Request& req, httplib::Response& res) {
  httplib::Ranges& ranges = MutableRanges(req);
  Params p(req, {"offset", "length"});
  const std::optional<uint64_t> offset_param = p.Uint("offset", UINT64_MAX);
  const std::optional<uint64_t> length_param = p.Uint("length", UINT64_MAX);
  if (!p.Finish()) {
    ranges.clear();
    return BadRequest(res, p.error());
  }
  v1::CapturedArg arg;
  if (!calls_->FetchArg(req, res, &arg)) {
    ranges.clear();
    return;
  }
  const uint64_t size = arg.record().bin_size();
  const PayloadRange range = ResolvePayloadRange(size, offset_param, length_param, RangesOf(ranges));
  if (range.error_status != 0) {
    ranges.clear();
    if (range.error_status != 416) return BadRequest(res, range.error);
    res.set_header("Content-Range", absl::StrCat("bytes */", size));
    return SendError(res, 416, grpc::StatusCode::OUT_OF_RANGE, range.error);
  }
  if (range.serves_range) {
    // httplib cuts the provider's bytes by this (and answers 206).
    ranges[0] = {static_cast<ssize_t>(range.begin),
                 static_cast<ssize_t>(range.begin + range.length - 1)};
  }
  res.set_header("Accept-Ranges", "bytes");
  if (range.length == 0) {
    res.status = 200;
    res.set_content("", "application/octet-stream");
    return;
  }
  std::optional<ByteBudget::Reservation> held = Reserve(res, ChunkBytesFor(range.length));
  if (!held) {
    ranges.clear();
    return;
  }
  // Provider offsets: of the whole payload with a Range, else of the part.
  StreamPayload(req, res, arg, range.begin, range.length, range.provided,
                range.serves_range ? 0 : range.begin, *std::move(held));
}

void PayloadCalls::StreamPayload(const httplib::Request& req, httplib::Response& res,
                                 const v1::CapturedArg& arg, uint64_t begin, uint64_t length,
                                 uint64_t provided, uint64_t shift, ByteBudget::Reservation held) {
  // The stream starts here so that an error reading args.bin is a status,
  // not a connection cut after the headers.
  auto stream = std::make_shared<PayloadStream>(std::move(held));
  ServiceCalls::Prepare(req, &stream->context);
  // No deadline for the whole download (a slow client's 32 MiB was cut
  // after 60 s): a client that stops reading is cut by the listener's
  // write stall bound, and shutdown cuts the rest (HttpGateway::Shutdown).
  stream->context.set_deadline(std::chrono::system_clock::time_point::max());
  stream->reader = calls_->stub().ReadPayload(
      &stream->context, ReadPayloadRequestFor(PathGroup(req, 1), arg.record_id(), begin, length));
  if (!stream->reader->Read(&stream->chunk)) {
    stream->finished = true;
    const grpc::Status s = stream->reader->Finish();
    MutableRanges(req).clear();
    return SendStatus(res, s.ok() ? grpc::Status(grpc::StatusCode::DATA_LOSS,
                                                 "the payload ended before its first byte")
                                  : s);
  }
  stream->have_chunk = true;
  res.set_content_provider(
      provided, "application/octet-stream",
      [stream, shift](size_t offset, size_t, httplib::DataSink& sink) {
        if (!stream->have_chunk) {
          if (stream->finished || !stream->reader->Read(&stream->chunk)) {
            stream->finished = true;
            const grpc::Status s = stream->reader->Finish();
            std::fprintf(stderr, "capture_server: http payload: stream ended early: %s\n",
                         s.error_message().c_str());
            return false;  // the connection is cut: the length was promised
          }
        }
        stream->have_chunk = false;
        if (stream->chunk.offset() != offset + shift) return false;
        const std::string& data = stream->chunk.data();
        return sink.write(data.data(), data.size());
      },
      [stream](bool success) {
        if (!success) stream->context.TryCancel();
      });
}

void PayloadCalls::Tensor(const httplib::Request& req, httplib::Response& res) {
  Params p(req, {"index", "fit"});
  std::vector<uint64_t> index;
  if (auto v = p.Single("index"); v && !ParseIndexList(*v, &index)) {
    p.Fail(absl::StrCat("index=", *v, ": not a comma-separated list of indices"));
  }
  const uint64_t fit = p.Uint("fit", tensor_.max_elements).value_or(0);
  if (!p.Finish()) return BadRequest(res, p.error());
  if (req.has_param("fit") && fit == 0) return BadRequest(res, "fit=0: give at least 1 cell");
  v1::CapturedArg arg;
  if (!calls_->FetchArg(req, res, &arg)) return;
  absl::StatusOr<TensorSlicePlan> plan = PlanTensorSlice(arg.record(), index, fit, tensor_);
  if (!plan.ok()) {
    const bool too_big = absl::IsResourceExhausted(plan.status());
    return SendError(res, too_big ? 413 : 400,
                     too_big ? grpc::StatusCode::RESOURCE_EXHAUSTED
                             : grpc::StatusCode::INVALID_ARGUMENT,
                     plan.status().message());
  }
  // What the answer holds: the reducer's grid, the answer, the chunks
  // being read; never the slice.
  std::optional<ByteBudget::Reservation> held =
      Reserve(res, TensorSliceReducer::HeldBytes(*plan) + TensorSliceReducer::AnswerBytes(*plan) +
                       ChunkBytesFor(plan->read_length));
  if (!held) return;
  TensorSliceReducer reducer(*plan);
  if (plan->read_length > 0) {
    if (grpc::Status s = ReduceSlice(req, arg, *plan, &reducer); !s.ok()) {
      return SendStatus(res, s);
    }
  }
  SendJsonHolding(res, reducer.Json(arg.record_id(), arg.record()), *std::move(held));
}

grpc::Status PayloadCalls::ReduceSlice(const httplib::Request& req, const v1::CapturedArg& arg,
                                       const TensorSlicePlan& plan, TensorSliceReducer* reducer) {
  // One read of a single chunk serves both passes; a longer slice is
  // read twice (the histogram's bins need its min and max first).
  std::string only;  // the first chunk, while it is the only one
  uint64_t chunks = 0;
  grpc::Status s = ReadSlice(req, arg, plan, [&](v1::PayloadChunk& chunk) {
    reducer->AddValues(chunk.data());
    if (chunks++ == 0) {
      only.swap(*chunk.mutable_data());
    } else {
      std::string().swap(only);  // its memory too
    }
  });
  if (s.ok() && reducer->NeedsHistogramPass()) {
    if (chunks == 1) {
      reducer->AddHistogram(only);
    } else {
      s = ReadSlice(req, arg, plan,
                    [&](v1::PayloadChunk& chunk) { reducer->AddHistogram(chunk.data()); });
    }
  }
  if (s.ok() && !reducer->histogram_complete()) {
    s = grpc::Status(grpc::StatusCode::DATA_LOSS,
                     "the payload's second read ended before its first had");
  }
  return s;
}

grpc::Status PayloadCalls::ReadSlice(const httplib::Request& req, const v1::CapturedArg& arg,
                                     const TensorSlicePlan& plan,
                                     const std::function<void(v1::PayloadChunk&)>& take) {
  grpc::ClientContext context;
  ServiceCalls::Prepare(req, &context);
  auto reader = calls_->stub().ReadPayload(
      &context,
      ReadPayloadRequestFor(PathGroup(req, 1), arg.record_id(), plan.read_offset,
                            plan.read_length));
  v1::PayloadChunk chunk;
  uint64_t next = plan.read_offset;
  while (reader->Read(&chunk)) {
    if (chunk.offset() != next) {
      context.TryCancel();
      reader->Finish();
      return grpc::Status(grpc::StatusCode::DATA_LOSS,
                          absl::StrCat("the payload came out of order (byte ", chunk.offset(),
                                       " where ", next, " was due)"));
    }
    next += chunk.data().size();
    take(chunk);
  }
  return reader->Finish();
}

std::optional<ByteBudget::Reservation> PayloadCalls::Reserve(httplib::Response& res,
                                                             uint64_t bytes) {
  std::optional<ByteBudget::Reservation> held = budget_.Reserve(bytes, budget_wait_);
  if (!held) {
    res.set_header("Retry-After", "1");
    SendError(res, 503, grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("busy: payload and tensor answers in flight hold ", budget_.used(),
                           " of their ", budget_.total(), " bytes and this one needs ",
                           std::min(bytes, budget_.total()), "; retry"));
  }
  return held;
}

}  // namespace argsdump
