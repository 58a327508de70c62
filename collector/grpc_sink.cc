#include "collector/grpc_sink.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/thread.h"
#include "format/device_crash.h"
#include "format/record.h"
#include "proto/grpc_status.h"

namespace argsdump {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& target) {
  return FromGrpcStatus(s, absl::StrCat("capture service ", target));
}

// Worth reconnecting for: the network or the server went away, or the
// capture is still attached to the stream that just broke.
bool Retryable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcSink>> GrpcSink::Connect(GrpcSinkOptions options) {
  if (options.target.empty()) return absl::InvalidArgumentError("--capture-server is empty");
  std::unique_ptr<GrpcSink> sink(new GrpcSink(std::move(options)));
  auto creds = sink->options_.credentials ? sink->options_.credentials
                                          : grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(8 << 20);
  sink->channel_ = grpc::CreateCustomChannel(sink->options_.target, creds, args);
  sink->stub_ = v1::CaptureService::NewStub(sink->channel_);
  // The first open waits for the channel (the server may still be starting).
  const std::chrono::milliseconds wait = sink->options_.connect_timeout.count() > 0
                                             ? sink->options_.connect_timeout
                                             : sink->options_.ack_timeout;
  if (!sink->channel_->WaitForConnected(std::chrono::system_clock::now() + wait)) {
    return absl::UnavailableError(
        absl::StrCat("capture service ", sink->options_.target, ": cannot connect"));
  }
  if (absl::Status s = sink->OpenStream(sink->options_.resume); !s.ok()) return s;
  // A resumed capture goes on from its watermark.
  sink->sent_records_ = sink->durable_records();
  return sink;
}

uint64_t GrpcSink::durable_records() {
  std::lock_guard<std::mutex> lock(mu_);
  return acked_records_;
}

GrpcSink::~GrpcSink() { CloseStream(); }

absl::Status GrpcSink::OpenStream(bool resume) {
  CloseStream();
  auto context = std::make_unique<grpc::ClientContext>();
  if (!options_.auth_token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.auth_token);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    context_ = std::move(context);
    opened_ = false;
    broken_ = false;
    got_finished_ = false;
  }
  stream_ = stub_->Ingest(context_.get());
  if (absl::Status st = StartThread("the capture stream's reader thread", &reader_,
                                    [this] { ReaderLoop(); });
      !st.ok()) {
    context_->TryCancel();
    stream_->Finish().IgnoreError();
    stream_.reset();
    return st;
  }
  v1::IngestRequest req;
  v1::IngestOpen* open = req.mutable_open();
  open->set_capture(options_.capture);
  open->set_level(options_.info.level());
  open->set_platform(options_.info.platform());
  *open->mutable_labels() = options_.info.labels();
  if (options_.info.has_scope()) *open->mutable_scope() = options_.info.scope();
  *open->mutable_kernels() = options_.info.kernels();
  open->set_resume(resume);
  open->set_no_payload_dedup(!options_.payload_dedup);
  stream_->Write(req);
  std::unique_lock<std::mutex> lock(mu_);
  const bool got = cv_.wait_for(lock, options_.ack_timeout, [&] { return opened_ || broken_; });
  if (got && opened_) return absl::OkStatus();
  lock.unlock();
  if (!got) context_->TryCancel();
  reader_.join();
  const grpc::Status s = stream_->Finish();
  stream_.reset();
  if (!got) {
    return absl::DeadlineExceededError(
        absl::StrCat("capture service ", options_.target, ": no answer to open"));
  }
  return s.ok() ? absl::UnavailableError(absl::StrCat("capture service ", options_.target,
                                                      ": stream ended before opened"))
                : FromGrpc(s, options_.target);
}

void GrpcSink::CloseStream() {
  if (stream_ == nullptr) return;
  context_->TryCancel();
  reader_.join();
  stream_->Finish().IgnoreError();
  stream_.reset();
}

void GrpcSink::ReaderLoop() {
  v1::IngestResponse r;
  while (stream_->Read(&r)) {
    std::lock_guard<std::mutex> lock(mu_);
    switch (r.message_case()) {
      case v1::IngestResponse::kOpened:
        opened_ = true;
        acked_records_ = r.opened().durable_records();
        acked_bytes_ = r.opened().durable_bin_bytes();
        break;
      case v1::IngestResponse::kAck:
        acked_records_ = std::max(acked_records_, r.ack().durable_records());
        acked_bytes_ = std::max(acked_bytes_, r.ack().durable_bin_bytes());
        break;
      case v1::IngestResponse::kFinished:
        got_finished_ = true;
        finished_ = r.finished();
        break;
      default:
        break;
    }
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  broken_ = true;
  cv_.notify_all();
}

void GrpcSink::BreakStreamForTest() {
  std::lock_guard<std::mutex> lock(mu_);
  if (context_ != nullptr) context_->TryCancel();
}

bool GrpcSink::SendFrom(const std::vector<const v1::ArgRecord*>& records,
                        const std::vector<absl::string_view>& payloads, size_t from,
                        uint64_t first_id) {
  uint64_t offset;
  {
    std::lock_guard<std::mutex> lock(mu_);
    offset = acked_bytes_;  // the service has every byte before this
  }
  v1::IngestRequest req;
  v1::IngestBatch* batch = nullptr;
  size_t size = 0;
  auto start = [&](uint64_t next_id) {
    req.Clear();
    batch = req.mutable_batch();
    batch->set_first_record(next_id);
    batch->set_payload_offset(offset);
    size = 0;
  };
  auto flush = [&] {
    const bool ok = stream_->Write(req);
    if (++messages_sent_ == options_.break_after_messages) BreakStreamForTest();
    return ok;
  };
  start(first_id + from);
  for (size_t i = from; i < records.size(); ++i) {
    // A record's encoding is under ~200 bytes (fixed fields, at most 5
    // dims and 3 func ids); sizing by a bound skips a ByteSizeLong per record.
    constexpr size_t record_bytes = 256;
    if (size + record_bytes > options_.max_message_bytes && size > 0) {
      if (!flush()) return false;
      start(first_id + i);
    }
    *batch->add_records() = *records[i];
    size += record_bytes;
    absl::string_view p = payloads[i];
    while (!p.empty()) {
      if (size >= options_.max_message_bytes) {
        if (!flush()) return false;
        start(first_id + i + 1);
      }
      const size_t take = std::min(p.size(), options_.max_message_bytes - size);
      batch->mutable_payload()->append(p.data(), take);
      p.remove_prefix(take);
      offset += take;
      size += take;
    }
  }
  if (size > 0 && !flush()) return false;
  return true;
}

bool GrpcSink::WaitAcked(uint64_t records) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool done = cv_.wait_for(lock, options_.ack_timeout,
                                 [&] { return acked_records_ >= records || broken_; });
  if (done && acked_records_ >= records) return true;
  if (!done) context_->TryCancel();  // timed out: treat the stream as broken
  return false;
}

absl::Status GrpcSink::Write(const v1::ArgRecord& record, absl::string_view payload) {
  return WriteBatch({&record}, {payload});
}

bool GrpcSink::LostCapture(const absl::Status& why) const {
  return why.code() == absl::StatusCode::kNotFound && options_.fallback != nullptr;
}

absl::Status GrpcSink::StartFallback(const absl::Status& why) {
  auto sink = options_.fallback();
  if (!sink.ok()) {
    return absl::Status(why.code(),
                        absl::StrCat(why.message(), "; keeping the records not acknowledged "
                                     "locally failed too: ", sink.status().message()));
  }
  fallback_sink_ = std::move(sink).value();
  lost_capture_ = why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fallback_base_bytes_ = acked_bytes_;
  }
  return absl::OkStatus();
}

absl::Status GrpcSink::WriteFallback(const std::vector<const v1::ArgRecord*>& records,
                                     const std::vector<absl::string_view>& payloads,
                                     size_t from) {
  std::vector<v1::ArgRecord> rebased;
  rebased.reserve(records.size() - from);
  std::vector<const v1::ArgRecord*> pointers;
  std::vector<absl::string_view> bytes;
  for (size_t i = from; i < records.size(); ++i) {
    rebased.push_back(*records[i]);
    v1::ArgRecord& r = rebased.back();
    r.set_bin_offset(r.bin_offset() >= fallback_base_bytes_ ? r.bin_offset() - fallback_base_bytes_
                                                            : 0);
  }
  for (size_t i = 0; i < rebased.size(); ++i) {
    pointers.push_back(&rebased[i]);
    bytes.push_back(payloads[from + i]);
  }
  if (absl::Status s = fallback_sink_->WriteBatch(pointers, bytes); !s.ok()) return s;
  kept_locally_records_ += rebased.size();
  return absl::OkStatus();
}

absl::Status GrpcSink::WriteBatch(const std::vector<const v1::ArgRecord*>& records,
                                  const std::vector<absl::string_view>& payloads) {
  if (records.empty()) return absl::OkStatus();
  if (fallback_sink_ != nullptr) {
    sent_records_ += records.size();
    return WriteFallback(records, payloads, 0);
  }
  const uint64_t first_id = sent_records_;
  const uint64_t end_id = first_id + records.size();
  sent_records_ = end_id;
  size_t from = 0;
  int attempts = 0;
  for (;;) {
    if (stream_ != nullptr && SendFrom(records, payloads, from, first_id) && WaitAcked(end_id)) {
      return absl::OkStatus();
    }
    // The stream broke: find out why, then resume from the watermark.
    absl::Status why = absl::UnavailableError("stream broke");
    if (stream_ != nullptr) {
      // The stream is dead (a write failed, the reader saw its end, or the
      // ack wait timed out and cancelled it): its status says why.
      reader_.join();
      why = FromGrpc(stream_->Finish(), options_.target);
      stream_.reset();
      if (why.ok()) why = absl::UnavailableError("stream ended early");
    }
    if (absl::Status s = Reconnect(why, &attempts); !s.ok()) {
      if (!LostCapture(s)) return s;
      // The service lost the capture: what it had not acknowledged of this
      // batch (and everything after) is kept by the fallback.
      if (absl::Status f = StartFallback(s); !f.ok()) return f;
      uint64_t durable = durable_records();
      return WriteFallback(records, payloads,
                           durable > first_id ? static_cast<size_t>(durable - first_id) : 0);
    }
    uint64_t durable;
    {
      std::lock_guard<std::mutex> lock(mu_);
      durable = acked_records_;
    }
    if (durable < first_id) {
      return absl::DataLossError(absl::StrCat(
          "capture service ", options_.target, ": resumed at record ", durable,
          " but records up to ", first_id, " had been acknowledged"));
    }
    if (durable >= end_id) return absl::OkStatus();
    from = static_cast<size_t>(durable - first_id);
  }
}

absl::Status GrpcSink::Amend(const v1::CaptureInfo& end) {
  if (fallback_sink_ != nullptr) return fallback_sink_->Amend(end);
  if (absl::Status s = CheckStepLevels(end.step_levels()); !s.ok()) return s;
  if (end.has_device_crash()) {
    if (absl::Status s = CheckDeviceCrash(end.device_crash()); !s.ok()) return s;
  }
  for (const auto& [key, value] : end.labels()) (*end_.mutable_labels())[key] = value;
  if (!end.step_levels().empty()) *end_.mutable_step_levels() = end.step_levels();
  if (end.has_device_crash()) *end_.mutable_device_crash() = end.device_crash();
  return absl::OkStatus();
}

absl::Status GrpcSink::Reconnect(absl::Status why, int* attempts) {
  const auto broke = std::chrono::steady_clock::now();
  for (;;) {
    if (!Retryable(why) || *attempts >= options_.max_reconnects ||
        std::chrono::steady_clock::now() - broke > options_.retry_deadline) {
      return why;
    }
    // Back off: 20 ms, 40 ms, ... up to 1 s between attempts.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1000, 20 << std::min(*attempts, 6))));
    ++*attempts;
    ++reconnects_;
    why = OpenStream(true);
    if (why.ok()) return why;
    // A capture that never held a record is not kept when its stream ends:
    // open it again.
    if (why.code() == absl::StatusCode::kNotFound && durable_records() == 0) {
      why = OpenStream(false);
      if (why.ok()) return why;
    }
  }
}

absl::Status GrpcSink::Finish(const v1::CaptureCounters& losses) {
  if (fallback_sink_ != nullptr) return fallback_sink_->Finish(losses);
  int attempts = 0;
  for (;;) {
    absl::Status why = absl::UnavailableError("stream broke");
    if (stream_ != nullptr) {
      v1::IngestRequest req;
      *req.mutable_finish()->mutable_device_counters() = losses;
      *req.mutable_finish()->mutable_labels() = end_.labels();
      *req.mutable_finish()->mutable_step_levels() = end_.step_levels();
      if (end_.has_device_crash()) {
        *req.mutable_finish()->mutable_device_crash() = end_.device_crash();
      }
      stream_->Write(req);
      stream_->WritesDone();
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, options_.ack_timeout, [&] { return got_finished_ || broken_; });
        if (!got_finished_ && !broken_) context_->TryCancel();
      }
      reader_.join();
      const grpc::Status s = stream_->Finish();
      stream_.reset();
      if (got_finished_ && s.ok()) return absl::OkStatus();
      why = s.ok() ? absl::UnavailableError("stream ended before finished")
                   : FromGrpc(s, options_.target);
    }
    const absl::Status reopened = Reconnect(why, &attempts);
    if (reopened.ok()) continue;  // send finish again
    if (LostCapture(reopened)) {
      // Every record was acknowledged, then lost with the capture: the
      // fallback holds none, its end says so.
      if (absl::Status f = StartFallback(reopened); !f.ok()) return f;
      if (absl::Status a = fallback_sink_->Amend(end_); !a.ok()) return a;
      return fallback_sink_->Finish(losses);
    }
    // The finish went through but its answer was lost: done.
    if (reopened.code() == absl::StatusCode::kFailedPrecondition) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + options_.ack_timeout);
      if (!options_.auth_token.empty()) {
        ctx.AddMetadata("authorization", "Bearer " + options_.auth_token);
      }
      v1::GetCaptureRequest get;
      get.set_capture(options_.capture);
      if (stub_->GetCapture(&ctx, get, &finished_).ok() &&
          finished_.state() == v1::CAPTURE_STATE_FINISHED && finished_.records() == sent_records_) {
        return absl::OkStatus();
      }
    }
    return reopened;
  }
}

}  // namespace argsdump
