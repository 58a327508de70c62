// IngestSession: the Ingest protocol of one stream as a plain class over a
// CaptureHub - open, checked batches, acks, finish, every way a stream ends -
// with no gRPC; its Transport (the service's reactor, a test, the fuzz
// target) only carries messages. Invariant: End is asked once, last, after
// the capture was let go, so a client that sees the status can resume at once.
//
// Let go: detached once every job this stream queued is done, or dropped
// when the stream created it and sent no record. The transport is asked for
// at most one read and one write at a time.
//
// States, what arrives in each, and what it does (a message is a read the
// session asked for; "end(S)" means: go to kEnding with status S):
//
//   kAwaitingOpen  open        the hub creates the capture (or attaches to the
//                              live one, `resume`); no reads     -> kOpening
//                  batch       end(FAILED_PRECONDITION batch before open)
//                  finish      end(FAILED_PRECONDITION finish before open)
//                  empty msg   end(INVALID_ARGUMENT)
//                  half-close  end(OK): no capture, nothing to say
//   kOpening       the capture's earlier jobs done (a Barrier): its
//                  watermark starts the stream, `opened` is queued, reads
//                  resume                                       -> kStreaming
//   kStreaming     batch       checked whole (IngestStream); the records whose
//                              payload bytes are all here go to the capture's
//                              writer; an ack follows once durable. Reads pause
//                              while over kReadAheadBytes are queued there.
//                  finish      checked; the writer seals it  -> kFinishing
//                  open        end(FAILED_PRECONDITION open sent twice)
//                  bad batch or finish: end(its INVALID_ARGUMENT or
//                              RESOURCE_EXHAUSTED); a job the writer refused:
//                              end(the writer's status)
//                  half-close  end(FAILED_PRECONDITION): the capture stays live
//   kFinishing     any message end(FAILED_PRECONDITION finish sent twice /
//                              a message after finish)
//                  half-close  remembered: the seal is on its way
//                  sealed      `finished` is queued; after a half-close
//                              end(OK), else the finish grace starts
//                                                               -> kFinished
//                  seal failed end(its status): the capture stays live
//   kFinished      any message end(FAILED_PRECONDITION, as in kFinishing):
//                              whether the seal won the race or not, a
//                              message after finish is refused, never dropped
//                  half-close  end(OK)
//                  the grace (kFinishGrace) is over: end(OK) - a client
//                              that never half-closes waits that long
//   any state before kEnding:
//                  cancel      end(CANCELLED ingest stream cancelled)
//                  failed write (the client is gone): responses not sent are
//                              dropped; end(CANCELLED ingest stream broke)
//   kEnding        the first status stands; an error drops the responses not
//                  sent yet, OK sends them. Messages that still arrive are
//                  dropped. Once no write is in flight        -> kReleasing
//   kReleasing     the capture is let go (see the invariant); then End
//                                                               -> kDone
//   kDone          nothing more: late callbacks of the capture are ignored.
//
// Acks coalesce: while a write is in flight, a newer watermark replaces an
// ack not sent yet, so N batches cost between 1 and N acks.
//
// Threads: events come from the transport's threads and from the capture's
// writer thread. One mutex guards the state; what the session asks of the
// transport and of the capture runs outside it, in the order decided, on one
// thread at a time (whichever event is running when there is something to
// do) - so a transport or a capture may call back into the session from
// inside such a call, and no event waits on another's calls.
#ifndef ARGSDUMP_SERVER_INGEST_SESSION_H_
#define ARGSDUMP_SERVER_INGEST_SESSION_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "proto/argsdump/v1/capture.pb.h"
#include "server/capture_hub.h"
#include "server/ingest_stream.h"

namespace argsdump {

class IngestSession : public std::enable_shared_from_this<IngestSession> {
 public:
  enum class State {
    kAwaitingOpen,
    kOpening,
    kStreaming,
    kFinishing,
    kFinished,
    kEnding,
    kReleasing,
    kDone,
  };
  static const char* StateName(State state);

  // Payload bytes handed to the capture's writer and not durable yet above
  // which the session stops asking for reads (until an append completes).
  static constexpr uint64_t kReadAheadBytes = 64 << 20;
  // How long a sealed capture's stream waits for the client's half-close
  // (or a message to refuse) before it ends OK.
  static constexpr std::chrono::milliseconds kFinishGrace{5000};

  // What carries the messages. Each call may come from any thread, one at a
  // time, never under the session's lock; each may call back into the
  // session (even before it returns).
  class Transport {
   public:
    virtual ~Transport() = default;
    // Read the next request: OnRequest when one came, OnReadsEnded when the
    // client half-closed or the call broke.
    virtual void ReadNext() = 0;
    // Send `response` (valid until OnSent): one write at a time.
    virtual void Send(const v1::IngestResponse& response) = 0;
    // End the call with `status`: the last thing asked.
    virtual void End(const absl::Status& status) = 0;
    // Call OnFinishGraceOver after `grace` (once; the session ignores it
    // after the stream ended).
    virtual void StartFinishGrace(std::chrono::milliseconds grace) = 0;
  };

  // A session in kAwaitingOpen. `hub` outlives it, `transport` lives until
  // OnTransportGone. Nothing is asked of the transport before Start.
  static std::shared_ptr<IngestSession> Create(CaptureHub* hub, Transport* transport);
  // Asks the transport for the first read.
  void Start();

  // Transport events. OnRequest may take `request`'s contents (payload bytes
  // are moved, not copied); the transport reuses it after the call.
  void OnRequest(v1::IngestRequest* request);
  // `cancelled`: the call broke (or was cancelled) rather than half-closed.
  void OnReadsEnded(bool cancelled);
  void OnFinishGraceOver();
  void OnSent(bool ok);
  void OnCancel();
  // After End: the transport is gone; nothing is asked of it any more.
  void OnTransportGone();

  State state() const;
  // Records and args.bin bytes of the capture handed to its writer by this
  // stream, counted from the capture's start (its watermark at open). Once
  // the session is kDone, the capture's durable watermark is exactly this
  // unless the writer refused a job (the quota, or a fault of ours).
  Watermark submitted() const;

 private:
  IngestSession(CaptureHub* hub, Transport* transport) : hub_(hub), transport_(transport) {}

  // Message handling (kAwaitingOpen, kStreaming); an error ends the stream.
  absl::Status HandleLocked(v1::IngestRequest* request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OpenLocked(const v1::IngestOpen& open) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BatchLocked(v1::IngestBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FinishLocked(const v1::IngestFinish& finish) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the records whose payload bytes are all here to the writer.
  void SubmitCompleteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The capture's callbacks (its writer thread).
  void OnOpened(const absl::Status& s, Watermark w, bool resumed);
  void OnAppended(const absl::Status& s, Watermark w, uint64_t bytes);
  void OnSealed(const absl::Status& s, const v1::CaptureSummary& summary);
  void OnReleased();

  void MaybeReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueLocked(v1::IngestResponse response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Goes to kEnding with `status` (the first one stands) and moves the
  // ending along.
  void EndLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AskEndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Queues a call to the transport or the capture, to run outside the lock.
  void Effect(std::function<void()> effect) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the queued calls in order, unlocking for each, unless another
  // thread is already running them (it runs these too). Releases `lock`.
  void RunEffects(std::unique_lock<std::mutex> lock);

  CaptureHub* const hub_;

  // Guards every member below. A std::mutex, not absl::Mutex: TSan sees
  // only instrumented code (.bazelrc), and Debian's Abseil is not.
  mutable std::mutex mu_;
  Transport* transport_ ABSL_GUARDED_BY(mu_);  // null once it is gone
  State state_ ABSL_GUARDED_BY(mu_) = State::kAwaitingOpen;
  absl::Status end_ ABSL_GUARDED_BY(mu_);  // the status End gets (kEnding on)
  // The capture this stream opened; null before open, and once let go.
  std::shared_ptr<HubCapture> capture_ ABSL_GUARDED_BY(mu_);
  bool created_ ABSL_GUARDED_BY(mu_) = false;  // the open created it (no resume)
  bool sealed_ ABSL_GUARDED_BY(mu_) = false;   // our finish sealed it: nothing to let go
  IngestStream stream_ ABSL_GUARDED_BY(mu_);   // what the client sent, checked
  Watermark submitted_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // handed to the writer, not durable yet
  // The transport's one read and one write at a time.
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;  // the client half-closed
  // Being written (Send's argument): set under mu_ when no write is in
  // flight, read by the transport outside it until OnSent.
  v1::IngestResponse current_;
  std::deque<v1::IngestResponse> out_ ABSL_GUARDED_BY(mu_);  // to write, in order
  std::deque<std::function<void()>> effects_ ABSL_GUARDED_BY(mu_);
  bool running_effects_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_INGEST_SESSION_H_
