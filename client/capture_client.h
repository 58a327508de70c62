// CaptureClient: the one client of argsdump.v1.CaptureService. It owns the
// channel (insecure or the caller's TLS credentials), sends the bearer token
// on every call, gives every call a deadline, follows page tokens
// (QueryArgsPager, ListCapturesPager), streams payloads chunk by chunk, and
// writes an Ingest stream through IngestWriter, which resumes a broken one.
//
// Errors of the calls are absl::Status with the server's code and message
// unchanged (proto/grpc_status.h, also for what gRPC itself reports: a
// deadline, an unreachable server); the caller says which call failed
// (Annotate). IngestWriter's name the service (see there).
#ifndef ARGSDUMP_CLIENT_CAPTURE_CLIENT_H_
#define ARGSDUMP_CLIENT_CAPTURE_CLIENT_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"

namespace argsdump {

// Deadline of a unary call and of a whole ReadPayload stream, unless the
// options say otherwise.
inline constexpr std::chrono::milliseconds kCaptureCallTimeout{60000};
// How long an Ingest stream waits for `opened`, an ack or `finished`
// before it counts as broken.
inline constexpr std::chrono::milliseconds kIngestAckTimeout{30000};
// After a broken Ingest stream: how long to keep resuming it (long enough
// for a server to restart; its live captures stay live).
inline constexpr std::chrono::milliseconds kIngestRetryDeadline{60000};
// The largest message the channel sends (an Ingest batch stays well under).
inline constexpr int kMaxSendMessageBytes = 8 << 20;
// The service's largest page.
inline constexpr uint32_t kMaxPageSize = 1000;

struct CaptureClientOptions {
  std::string target;  // host:port
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: insecure
  // Sent as "authorization: Bearer <token>" when not empty.
  std::string auth_token;
  // When set and auth_token is empty: the token is read from this file
  // (base/files.h ReadTokenFile) by Create.
  std::string auth_token_file;
  std::chrono::milliseconds call_timeout = kCaptureCallTimeout;
};

// `s` with "<context>: " before its message (the code kept); OK stays OK.
absl::Status Annotate(const absl::Status& s, absl::string_view context);

class CaptureClient {
 public:
  // InvalidArgument for an empty target or an unreadable token file. No
  // connection is made yet (calls make it; see WaitForConnected).
  static absl::StatusOr<std::unique_ptr<CaptureClient>> Create(CaptureClientOptions options);

  const std::string& target() const { return options_.target; }
  std::chrono::milliseconds call_timeout() const { return options_.call_timeout; }

  // Waits until the channel is connected (the server may still be
  // starting). Unavailable "capture service <target>: cannot connect"
  // after `timeout`.
  absl::Status WaitForConnected(std::chrono::milliseconds timeout) const;

  absl::StatusOr<v1::CaptureSummary> GetCapture(const std::string& capture) const;
  // One page of each; the pagers below follow the tokens.
  absl::StatusOr<v1::QueryArgsResponse> QueryArgs(const v1::QueryArgsRequest& request) const;
  absl::StatusOr<v1::ListCapturesResponse> ListCaptures(
      const v1::ListCapturesRequest& request) const;

  // Streams a record's payload (or the byte range asked for): `on_chunk`
  // is called for each chunk as it arrives. A status it returns that is
  // not OK cancels the call and is returned as is; otherwise the call's.
  // The deadline covers the whole stream.
  absl::Status ReadPayload(
      const v1::ReadPayloadRequest& request,
      const std::function<absl::Status(const v1::PayloadChunk&)>& on_chunk) const;

  // Jobs: the captures of one job's ranks. One page of ListJobs and of
  // QueryJob (QueryJobPager follows the tokens).
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request) const;
  absl::StatusOr<v1::JobSummary> GetJob(const std::string& job) const;
  absl::StatusOr<v1::QueryJobResponse> QueryJob(const v1::QueryJobRequest& request) const;
  absl::StatusOr<v1::FirstNonfiniteResponse> FirstNonfinite(
      const v1::FirstNonfiniteRequest& request) const;
  // A comparison's progress messages: `on_progress` for each as it comes,
  // the last with done = true (returned too). A status `on_progress`
  // returns that is not OK cancels the call and is returned as is.
  using OnCompareProgress = std::function<absl::Status(const v1::CompareProgress&)>;
  absl::StatusOr<v1::CompareProgress> CompareJobs(const v1::CompareJobsRequest& request,
                                                  const OnCompareProgress& on_progress) const;
  absl::StatusOr<v1::CompareProgress> CompareRanks(const v1::CompareRanksRequest& request,
                                                   const OnCompareProgress& on_progress) const;

 private:
  friend class IngestWriter;  // its stream goes through stub_ and NewStreamContext
  explicit CaptureClient(CaptureClientOptions options);
  // A context with the token and the deadline, call_timeout from now.
  std::unique_ptr<grpc::ClientContext> NewContext() const;
  // A context with the token and no deadline (a stream that lives as long
  // as its writer; IngestWriter bounds each wait itself).
  std::unique_ptr<grpc::ClientContext> NewStreamContext() const;

  const CaptureClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
};

// Every page of a QueryArgs, in order: the request as given (its
// page_token the first page's), then each next_page_token until none.
class QueryArgsPager {
 public:
  QueryArgsPager(const CaptureClient* client, v1::QueryArgsRequest request);
  // The next page into `*args` (replaced): false when the last page was
  // already read; the call's status on failure (the pager can be asked
  // again: it retries that page).
  absl::StatusOr<bool> Next(std::vector<v1::CapturedArg>* args);
  bool done() const { return done_; }

 private:
  const CaptureClient* const client_;
  v1::QueryArgsRequest request_;
  bool done_ = false;
};

// Every page of a ListCaptures, as QueryArgsPager.
class ListCapturesPager {
 public:
  ListCapturesPager(const CaptureClient* client, v1::ListCapturesRequest request);
  absl::StatusOr<bool> Next(std::vector<v1::CaptureSummary>* captures);
  bool done() const { return done_; }

 private:
  const CaptureClient* const client_;
  v1::ListCapturesRequest request_;
  bool done_ = false;
};

// Every page of a QueryJob, as QueryArgsPager; progress() is the first
// page's (how far each rank had got).
class QueryJobPager {
 public:
  QueryJobPager(const CaptureClient* client, v1::QueryJobRequest request);
  absl::StatusOr<bool> Next(std::vector<v1::JobArg>* args);
  bool done() const { return done_; }
  const std::vector<v1::RankProgress>& progress() const { return progress_; }

 private:
  const CaptureClient* const client_;
  v1::QueryJobRequest request_;
  bool done_ = false;
  std::vector<v1::RankProgress> progress_;
};

// Worth resuming an Ingest stream for: the network or the server went
// away, or the capture is still attached to the stream that just broke.
bool RetryableIngestError(const absl::Status& s);

struct IngestWriterOptions {
  // The first request of every stream; `resume` is set per stream.
  v1::IngestOpen open;
  std::chrono::milliseconds ack_timeout = kIngestAckTimeout;
  std::chrono::milliseconds retry_deadline = kIngestRetryDeadline;
  int max_reconnects = 1 << 20;
  // Records and payload bytes per batch message.
  size_t max_message_bytes = 1 << 20;
  // Tests: cancel the stream right after sending this many batch messages
  // (once over the writer's life), as a dropped connection would. 0: never.
  int break_after_messages = 0;
};

// One capture's Ingest stream: open, batches, finish. The server's acks
// move the durable watermark (durable_records/durable_bytes), read by a
// thread of its own. When a stream breaks the caller asks StreamEnded()
// why and Resume()s: a new stream with `resume`, backing off, which the
// server answers with its watermark; the caller sends again from there.
// The server's errors read "capture service <target>: <message>". One
// thread drives a writer (the reader thread is its own).
class IngestWriter {
 public:
  // Opens the first stream (options.open.resume as given) and waits for
  // `opened`. `client` must outlive the writer.
  static absl::StatusOr<std::unique_ptr<IngestWriter>> Open(const CaptureClient* client,
                                                            IngestWriterOptions options);
  ~IngestWriter();

  // Sends records[from..] (record ids first_id + from, ...) with their
  // payloads, from the stream byte `payload_offset` on (the durable byte
  // watermark when none are kept), split into batches of at most
  // max_message_bytes. With `keep` the messages are also kept until the
  // service acknowledges them, so that SendKept can send them again on a
  // new stream: the caller may then let go of records and payloads at
  // once. False when the stream broke (or is ended and not resumed); kept
  // messages are kept whole either way.
  bool Send(const std::vector<const v1::ArgRecord*>& records,
            const std::vector<absl::string_view>& payloads, size_t from, uint64_t first_id,
            bool keep = false);
  // Messages kept and not yet acknowledged: their size (records at their
  // bound, payload bytes), the first record they hold (or, a payload's
  // tail, the record after it), and the record count whose acknowledgment
  // lets go of the oldest (0: none kept).
  uint64_t kept_bytes();
  uint64_t kept_first_record();
  uint64_t kept_front_done();
  // After a Resume: sends what is kept from the durable watermark on (a
  // message half acknowledged is cut where the watermark is). False when
  // the stream broke. The watermark must not be before the first kept
  // record (kept_first_record()).
  bool SendKept();
  // The kept records from the durable watermark on, and their payloads'
  // bytes one after the other (each record's bin_size of them): for a
  // caller that keeps them elsewhere when the service lost the capture.
  // Then forgets them.
  void TakeKept(std::vector<v1::ArgRecord>* records, std::string* payload_bytes);
  // Waits until `records` are acknowledged: false when the stream broke or
  // ack_timeout passed (the stream is then cancelled).
  bool WaitAcked(uint64_t records);
  // After Send or WaitAcked failed: ends the stream and says why (never OK).
  absl::Status StreamEnded();
  // Sends `finish`, half-closes and waits for `finished` (ack_timeout):
  // OK with the summary, or why not (the stream is ended either way).
  absl::Status Finish(const v1::IngestFinish& finish, v1::CaptureSummary* finished);
  // After a broken stream (`why`): reopens it with resume, backing off
  // (20 ms doubling to 1 s), until it works, the error is not worth
  // retrying, retry_deadline passed since the break, or max_reconnects
  // attempts in all were made (`attempts` counts them over the caller's
  // operation). A capture that never held a record (NOT_FOUND with
  // nothing durable) is opened anew. The last error otherwise.
  absl::Status Resume(absl::Status why, int* attempts);
  // Cancels the current stream as a network failure would (tests).
  void Break();

  uint64_t durable_records() const;
  uint64_t durable_bytes() const;
  uint64_t reconnects() const { return reconnects_; }

 private:
  IngestWriter(const CaptureClient* client, IngestWriterOptions options)
      : client_(client), options_(std::move(options)) {}
  absl::Status OpenStream(bool resume);
  void CloseStream();
  void ReaderLoop();
  bool Write(const v1::IngestRequest& req);
  // Lets go of kept messages every record of which is acknowledged.
  void TrimKept();

  // A message kept until acknowledged.
  struct Kept {
    v1::IngestRequest request;  // a batch
    uint64_t size = 0;          // records at their bound, payload bytes
    // Acknowledged once records up to here are: its records' and, when it
    // starts with a payload's tail, the record before them.
    uint64_t done_at = 0;
  };

  const CaptureClient* const client_;
  const IngestWriterOptions options_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::IngestRequest, v1::IngestResponse>> stream_;
  std::thread reader_;
  int messages_sent_ = 0;
  uint64_t reconnects_ = 0;
  std::deque<Kept> kept_;  // the caller's thread's
  uint64_t kept_bytes_ = 0;

  // Guards every member below, shared with the reader thread.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(mu_);
  bool opened_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool got_finished_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t acked_records_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t acked_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  v1::CaptureSummary finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace argsdump

#endif  // ARGSDUMP_CLIENT_CAPTURE_CLIENT_H_
