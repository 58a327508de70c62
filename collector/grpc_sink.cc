#include "collector/grpc_sink.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "format/device_crash.h"
#include "format/record.h"

namespace argsdump {

absl::StatusOr<std::unique_ptr<GrpcSink>> GrpcSink::Connect(GrpcSinkOptions options) {
  if (options.target.empty()) return absl::InvalidArgumentError("--capture-server is empty");
  std::unique_ptr<GrpcSink> sink(new GrpcSink(std::move(options)));
  const GrpcSinkOptions& o = sink->options_;
  CaptureClientOptions client;
  client.target = o.target;
  client.credentials = o.credentials;
  client.auth_token = o.auth_token;
  client.call_timeout = o.ack_timeout;
  absl::StatusOr<std::unique_ptr<CaptureClient>> made = CaptureClient::Create(std::move(client));
  if (!made.ok()) return made.status();
  sink->client_ = std::move(made).value();
  // The first open waits for the channel (the server may still be starting).
  const std::chrono::milliseconds wait =
      o.connect_timeout.count() > 0 ? o.connect_timeout : o.ack_timeout;
  if (absl::Status s = sink->client_->WaitForConnected(wait); !s.ok()) return s;
  IngestWriterOptions w;
  v1::IngestOpen& open = w.open;
  open.set_capture(o.capture);
  open.set_level(o.info.level());
  open.set_platform(o.info.platform());
  *open.mutable_labels() = o.info.labels();
  if (o.info.has_scope()) *open.mutable_scope() = o.info.scope();
  *open.mutable_kernels() = o.info.kernels();
  if (o.info.has_job()) *open.mutable_job() = o.info.job();
  if (o.info.has_clock()) *open.mutable_clock() = o.info.clock();
  open.set_resume(o.resume);
  open.set_no_payload_dedup(!o.payload_dedup);
  w.ack_timeout = o.ack_timeout;
  w.retry_deadline = o.retry_deadline;
  w.max_reconnects = o.max_reconnects;
  w.max_message_bytes = o.max_message_bytes;
  w.break_after_messages = o.break_after_messages;
  absl::StatusOr<std::unique_ptr<IngestWriter>> writer =
      IngestWriter::Open(sink->client_.get(), std::move(w));
  if (!writer.ok()) return writer.status();
  sink->writer_ = std::move(writer).value();
  // A resumed capture goes on from its watermark.
  sink->sent_records_ = sink->durable_records();
  return sink;
}

GrpcSink::~GrpcSink() = default;

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
  // What Amend gave so far (the labels, step levels, a device crash) goes
  // with the records, whenever the service was lost.
  fallback_base_bytes_ = writer_->durable_bytes();
  if (amended_) return fallback_sink_->Amend(end_);
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
  // A batch that fits the window goes out kept, with the batches before it
  // still unacknowledged; a larger one once everything before it is
  // acknowledged, and returns acknowledged itself.
  uint64_t bytes = 256 * records.size();
  for (absl::string_view p : payloads) bytes += p.size();
  const bool keep = bytes <= options_.max_unacked_bytes;
  if (absl::Status s = WaitKept(keep ? options_.max_unacked_bytes - bytes : 0); !s.ok()) return s;
  if (fallback_sink_ != nullptr) {
    sent_records_ += records.size();
    return WriteFallback(records, payloads, 0);
  }
  const uint64_t first_id = sent_records_;
  const uint64_t end_id = first_id + records.size();
  sent_records_ = end_id;
  if (keep) {
    if (writer_->Send(records, payloads, 0, first_id, /*keep=*/true)) return absl::OkStatus();
    return ResendKept();
  }
  size_t from = 0;
  int attempts = 0;
  for (;;) {
    if (writer_->Send(records, payloads, from, first_id) && writer_->WaitAcked(end_id)) {
      return absl::OkStatus();
    }
    // The stream broke: find out why, then resume from the watermark.
    const absl::Status why = writer_->StreamEnded();
    if (absl::Status s = writer_->Resume(why, &attempts); !s.ok()) {
      if (!LostCapture(s)) return s;
      // The service lost the capture: what it had not acknowledged of this
      // batch (and everything after) is kept by the fallback.
      if (absl::Status f = StartFallback(s); !f.ok()) return f;
      uint64_t durable = durable_records();
      return WriteFallback(records, payloads,
                           durable > first_id ? static_cast<size_t>(durable - first_id) : 0);
    }
    if (absl::Status s = CheckResumedAt(first_id); !s.ok()) return s;
    const uint64_t durable = durable_records();
    if (durable >= end_id) return absl::OkStatus();
    from = static_cast<size_t>(durable - first_id);
  }
}

absl::Status GrpcSink::WaitKept(uint64_t room) {
  while (fallback_sink_ == nullptr && writer_->kept_bytes() > room) {
    if (writer_->WaitAcked(writer_->kept_front_done())) {
      resend_attempts_ = 0;  // acknowledged: the service makes progress
    } else if (absl::Status s = ResendKept(); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status GrpcSink::ResendKept() {
  for (;;) {
    // The stream broke: find out why, then resume from the watermark. The
    // attempts count until the service acknowledges something again, so
    // that a service that takes every resume and acknowledges nothing
    // ends in an error after max_reconnects.
    const absl::Status why = writer_->StreamEnded();
    if (absl::Status s = writer_->Resume(why, &resend_attempts_); !s.ok()) {
      if (!LostCapture(s)) return s;
      // The service lost the capture: what it had not acknowledged of the
      // kept batches goes to the fallback, from its watermark on.
      if (absl::Status f = StartFallback(s); !f.ok()) return f;
      return KeptToFallback();
    }
    if (writer_->kept_bytes() > 0) {
      if (absl::Status s = CheckResumedAt(writer_->kept_first_record()); !s.ok()) return s;
    }
    if (writer_->SendKept()) return absl::OkStatus();
  }
}

absl::Status GrpcSink::CheckResumedAt(uint64_t acknowledged) {
  const uint64_t durable = durable_records();
  if (durable >= acknowledged) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("capture service ", options_.target,
                                          ": resumed at record ", durable, " but records up to ",
                                          acknowledged, " had been acknowledged"));
}

absl::Status GrpcSink::KeptToFallback() {
  std::vector<v1::ArgRecord> records;
  std::string bytes;
  writer_->TakeKept(&records, &bytes);
  std::vector<const v1::ArgRecord*> pointers;
  std::vector<absl::string_view> payloads;
  size_t at = 0;
  for (const v1::ArgRecord& r : records) {
    const size_t size = static_cast<size_t>(std::min<uint64_t>(r.bin_size(), bytes.size() - at));
    pointers.push_back(&r);
    payloads.push_back(absl::string_view(bytes).substr(at, size));
    at += size;
  }
  if (pointers.empty()) return absl::OkStatus();
  return WriteFallback(pointers, payloads, 0);
}

absl::Status GrpcSink::Amend(const v1::CaptureInfo& end) {
  if (fallback_sink_ != nullptr) return fallback_sink_->Amend(end);
  if (absl::Status s = CheckStepLevels(end.step_levels()); !s.ok()) return s;
  if (end.has_device_crash()) {
    if (absl::Status s = CheckDeviceCrash(end.device_crash()); !s.ok()) return s;
  }
  amended_ = true;
  for (const auto& [key, value] : end.labels()) (*end_.mutable_labels())[key] = value;
  if (!end.step_levels().empty()) *end_.mutable_step_levels() = end.step_levels();
  if (end.has_device_crash()) *end_.mutable_device_crash() = end.device_crash();
  return absl::OkStatus();
}

absl::Status GrpcSink::Finish(const v1::CaptureCounters& losses) {
  if (absl::Status s = WaitKept(0); !s.ok()) return s;
  if (fallback_sink_ != nullptr) return fallback_sink_->Finish(losses);
  int attempts = 0;
  for (;;) {
    v1::IngestFinish finish;
    *finish.mutable_device_counters() = losses;
    *finish.mutable_labels() = end_.labels();
    *finish.mutable_step_levels() = end_.step_levels();
    if (end_.has_device_crash()) *finish.mutable_device_crash() = end_.device_crash();
    const absl::Status why = writer_->Finish(finish, &finished_);
    if (why.ok()) return why;
    const absl::Status reopened = writer_->Resume(why, &attempts);
    if (reopened.ok()) continue;  // send finish again
    if (LostCapture(reopened)) {
      // Every record was acknowledged, then lost with the capture: the
      // fallback holds none, its end says so.
      if (absl::Status f = StartFallback(reopened); !f.ok()) return f;
      return fallback_sink_->Finish(losses);
    }
    // The finish went through but its answer was lost: done.
    if (reopened.code() == absl::StatusCode::kFailedPrecondition) {
      absl::StatusOr<v1::CaptureSummary> got = client_->GetCapture(options_.capture);
      if (got.ok()) finished_ = *std::move(got);
      if (got.ok() && finished_.state() == v1::CAPTURE_STATE_FINISHED &&
          finished_.records() == sent_records_) {
        return absl::OkStatus();
      }
    }
    return reopened;
  }
}

}  // namespace argsdump
