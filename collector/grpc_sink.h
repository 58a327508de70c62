// GrpcSink: a CaptureSink that streams the capture to a capture service
// (argsdump.v1.CaptureService.Ingest) instead of writing it locally. The
// service stores it with the same CaptureStore, so the files are the same.
//
// Batches go out while earlier ones wait for the service's acknowledgment,
// up to `max_unacked_bytes` of them: the sink keeps their messages until
// the service acknowledges them as durable, so WriteBatch returns (and the
// collector lets the device reuse that arena space) once a batch is sent
// and the window has room. A batch larger than the window is sent when
// everything before it is acknowledged and returns once it is too. Finish
// waits for every acknowledgment. When the stream breaks, the sink
// reconnects, reopens the capture with `resume`, and resends from the
// service's watermark: nothing lost, nothing stored twice. It gives up
// after `max_reconnects` attempts in a row.
//
// When the resume is refused because the service no longer has the capture
// (NOT_FOUND: it was deleted while the server was down) and a `fallback` is
// given, the records the service had not acknowledged go to the sink it
// makes (a local capture) instead, with their payload offsets counted from
// the first of them, and so does everything after: nothing unacknowledged
// is dropped. kept_locally() then says so.
#ifndef ARGSDUMP_COLLECTOR_GRPC_SINK_H_
#define ARGSDUMP_COLLECTOR_GRPC_SINK_H_

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/capture_client.h"
#include "collector/sink.h"
#include "grpcpp/grpcpp.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"

namespace argsdump {

struct GrpcSinkOptions {
  std::string target;   // host:port of the capture service
  std::string capture;  // the capture's name on the service
  v1::CaptureInfo info;  // level, platform, labels
  bool payload_dedup = true;  // false: IngestOpen.no_payload_dedup
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: insecure
  std::string auth_token;  // sent as "authorization: Bearer <token>" when set
  // How long to wait for the ack of a batch (or for `opened`) before the
  // stream counts as broken.
  std::chrono::milliseconds ack_timeout = kIngestAckTimeout;
  // How long Connect waits for the channel to come up (0: ack_timeout).
  std::chrono::milliseconds connect_timeout{0};
  // After a broken stream: reconnect (resume) with backoff until this long
  // has passed since it broke -- long enough for the service to restart
  // (its live captures stay live) -- or max_reconnects attempts were made.
  std::chrono::milliseconds retry_deadline = kIngestRetryDeadline;
  int max_reconnects = 1 << 20;
  // Reattach to the live capture of this name (after this client itself
  // restarted) instead of opening a new one: records go on from its
  // durable watermark (durable_records()).
  bool resume = false;
  // Where records go when the service lost the capture (see above); null:
  // that is an error (NOT_FOUND) like any other.
  std::function<absl::StatusOr<std::unique_ptr<CaptureSink>>()> fallback;
  // Records and payload bytes per message (well under gRPC's 4 MiB).
  size_t max_message_bytes = 1 << 20;
  // Sent and not yet acknowledged: at most this many bytes (records at 256
  // bytes each, payload bytes), kept by the sink for a resend. 0: every
  // batch waits for its acknowledgment.
  uint64_t max_unacked_bytes = 4 << 20;
  // Tests: cancel the stream right after sending this many batch messages
  // (once), as a dropped connection mid-batch would. 0: never.
  int break_after_messages = 0;
};

class GrpcSink : public CaptureSink {
 public:
  // Opens a new capture on the service (ALREADY_EXISTS if the name is
  // taken), or with options.resume the live one of that name.
  static absl::StatusOr<std::unique_ptr<GrpcSink>> Connect(GrpcSinkOptions options);
  ~GrpcSink() override;

  absl::Status Write(const v1::ArgRecord& record, absl::string_view payload) override;
  absl::Status WriteBatch(const std::vector<const v1::ArgRecord*>& records,
                          const std::vector<absl::string_view>& payloads) override;
  // Waits until every record written so far is acknowledged (resending
  // on a broken stream): then durable_records() == sent_records(), or the
  // fallback holds the rest. An error a later batch would have met (a
  // refusal, a stream that cannot be resumed) is met here instead.
  absl::Status Flush() { return WaitKept(0); }
  absl::Status Amend(const v1::CaptureInfo& end) override;
  absl::Status Finish(const v1::CaptureCounters& losses) override;

  // Breaks the current stream as a network failure would (tests).
  void BreakStreamForTest() { writer_->Break(); }
  uint64_t reconnects() const { return writer_->reconnects(); }
  // Records the service holds durably (acknowledged), and records handed
  // to it so far: what a run reports when it ends.
  uint64_t durable_records() { return writer_->durable_records(); }
  uint64_t sent_records() const { return sent_records_; }
  const v1::CaptureSummary& finished() const { return finished_; }
  // The service lost the capture and the fallback took over: why, and how
  // many records went to the fallback (durable_records() were acknowledged
  // by the service before it lost them).
  bool kept_locally() const { return fallback_sink_ != nullptr; }
  const absl::Status& lost_capture() const { return lost_capture_; }
  uint64_t kept_locally_records() const { return kept_locally_records_; }

 private:
  explicit GrpcSink(GrpcSinkOptions options) : options_(std::move(options)) {}
  // `why` came from a resume: the service lost the capture and a fallback
  // is given. Makes the fallback sink (records from the durable byte
  // watermark on are rebased to 0 there).
  bool LostCapture(const absl::Status& why) const;
  absl::Status StartFallback(const absl::Status& why);
  // records[from..] to the fallback, rebased.
  absl::Status WriteFallback(const std::vector<const v1::ArgRecord*>& records,
                             const std::vector<absl::string_view>& payloads, size_t from);
  // Waits until at most `room` bytes are sent and not acknowledged,
  // resending on a broken stream.
  absl::Status WaitKept(uint64_t room);
  // After the stream broke with batches kept: resumes and sends them again
  // from the watermark (or to the fallback when the service lost the
  // capture).
  absl::Status ResendKept();
  absl::Status KeptToFallback();
  // After a resume: DataLoss when the service's watermark is before
  // `acknowledged`, records it had acknowledged.
  absl::Status CheckResumedAt(uint64_t acknowledged);

  const GrpcSinkOptions options_;
  std::unique_ptr<CaptureClient> client_;
  std::unique_ptr<IngestWriter> writer_;  // the stream, its reader, its watermark
  v1::CaptureSummary finished_;

  v1::CaptureInfo end_;  // labels, step levels, device_crash: sent with finish
  bool amended_ = false;  // Amend gave end_ something
  int resend_attempts_ = 0;  // reconnects since the service last acknowledged
  uint64_t sent_records_ = 0;  // ids handed out (records durable or in flight)

  std::unique_ptr<CaptureSink> fallback_sink_;  // once the service lost the capture
  absl::Status lost_capture_;
  uint64_t fallback_base_bytes_ = 0;  // stream offset of the fallback's first payload byte
  uint64_t kept_locally_records_ = 0;
};

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_GRPC_SINK_H_
