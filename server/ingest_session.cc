#include "server/ingest_session.h"

#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"

namespace argsdump {

const char* IngestSession::StateName(State state) {
  switch (state) {
    case State::kAwaitingOpen:
      return "awaiting open";
    case State::kOpening:
      return "opening";
    case State::kStreaming:
      return "streaming";
    case State::kFinishing:
      return "finishing";
    case State::kFinished:
      return "finished";
    case State::kEnding:
      return "ending";
    case State::kReleasing:
      return "releasing";
    case State::kDone:
      return "done";
  }
  return "?";
}

std::shared_ptr<IngestSession> IngestSession::Create(CaptureHub* hub, Transport* transport) {
  return std::shared_ptr<IngestSession>(new IngestSession(hub, transport));
}

void IngestSession::Start() {
  std::unique_lock<std::mutex> lock(mu_);
  MaybeReadLocked();
  RunEffects(std::move(lock));
}

IngestSession::State IngestSession::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

Watermark IngestSession::submitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return submitted_;
}

// ---- Transport events -----------------------------------------------------

void IngestSession::OnRequest(v1::IngestRequest* request) {
  std::unique_lock<std::mutex> lock(mu_);
  reading_ = false;
  assert(state_ != State::kOpening);  // no read is asked while opening
  switch (state_) {
    case State::kAwaitingOpen:
    case State::kOpening:
    case State::kStreaming:
      if (absl::Status s = HandleLocked(request); !s.ok()) {
        EndLocked(std::move(s));
      } else {
        MaybeReadLocked();
      }
      break;
    case State::kFinishing:
    case State::kFinished:
      // After `finish`, the stream carries nothing more: say so instead of
      // dropping it.
      EndLocked(absl::FailedPreconditionError(request->has_finish()
                                                  ? "ingest: finish sent twice"
                                                  : "ingest: a message after finish"));
      break;
    case State::kEnding:
    case State::kReleasing:
    case State::kDone:
      // Not taken: the capture may already have been let go (and
      // forgotten, if unwritten).
      break;
  }
  RunEffects(std::move(lock));
}

void IngestSession::OnReadsEnded(bool cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  reading_ = false;
  reads_ended_ = true;
  if (state_ == State::kFinished) EndLocked(absl::OkStatus());  // sealed and answered
  // Only a `finish` message ends a capture. A half-close without one, a
  // broken or cancelled call, or a message the transport refused (too
  // large) leaves it live, for a resume.
  if (state_ == State::kAwaitingOpen || state_ == State::kStreaming) {
    if (cancelled) {
      EndLocked(absl::CancelledError("ingest stream cancelled"));
    } else if (capture_ == nullptr) {
      EndLocked(absl::OkStatus());
    } else {
      EndLocked(absl::FailedPreconditionError(
          absl::StrCat("ingest: the stream ended without a finish message; capture ",
                       capture_->name(), " stays live (resume it and send finish)")));
    }
  }
  RunEffects(std::move(lock));
}

void IngestSession::OnSent(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  writing_ = false;
  if (!ok) {
    // Nothing more can be sent; end now, even if ending already began (a
    // cancelled stream waits for its write in flight to fail).
    out_.clear();
    EndLocked(absl::CancelledError("ingest stream broke"));
  } else {
    WriteNextLocked();
  }
  RunEffects(std::move(lock));
}

void IngestSession::OnFinishGraceOver() {
  std::unique_lock<std::mutex> lock(mu_);
  if (state_ == State::kFinished) EndLocked(absl::OkStatus());
  RunEffects(std::move(lock));
}

void IngestSession::OnCancel() {
  std::unique_lock<std::mutex> lock(mu_);
  EndLocked(absl::CancelledError("ingest stream cancelled"));
  RunEffects(std::move(lock));
}

void IngestSession::OnTransportGone() {
  std::lock_guard<std::mutex> lock(mu_);
  assert(state_ == State::kDone);  // a transport goes only after End
  transport_ = nullptr;
}

// ---- Messages -------------------------------------------------------------

absl::Status IngestSession::HandleLocked(v1::IngestRequest* request) {
  switch (request->message_case()) {
    case v1::IngestRequest::kOpen:
      return OpenLocked(request->open());
    case v1::IngestRequest::kBatch:
      return BatchLocked(request->mutable_batch());
    case v1::IngestRequest::kFinish:
      return FinishLocked(request->finish());
    case v1::IngestRequest::MESSAGE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("ingest: empty request (set open, batch or finish)");
}

absl::Status IngestSession::OpenLocked(const v1::IngestOpen& open) {
  if (state_ != State::kAwaitingOpen) {
    return absl::FailedPreconditionError("ingest: open sent twice");
  }
  auto capture = hub_->Open(open);
  if (!capture.ok()) return capture.status();
  capture_ = *capture;
  created_ = !open.resume();
  state_ = State::kOpening;
  // Once every job of an earlier stream is done: the watermark to go on from.
  Effect([self = shared_from_this(), capture = capture_, resumed = open.resume()] {
    capture->Barrier([self, resumed](absl::Status s, Watermark w) {
      self->OnOpened(s, w, resumed);
    });
  });
  return absl::OkStatus();
}

absl::Status IngestSession::BatchLocked(v1::IngestBatch* batch) {
  if (state_ == State::kAwaitingOpen) {
    return absl::FailedPreconditionError("ingest: batch before open");
  }
  if (absl::Status s = stream_.Batch(batch); !s.ok()) return s;
  SubmitCompleteLocked();
  return absl::OkStatus();
}

void IngestSession::SubmitCompleteLocked() {
  AppendJob job;
  if (!stream_.TakeComplete(&job)) return;
  const uint64_t bytes = job.bytes();
  queued_bytes_ += bytes;
  submitted_.records += static_cast<uint64_t>(job.records.size());
  submitted_.bin_bytes += bytes;
  Effect([self = shared_from_this(), capture = capture_, job = std::move(job), bytes]() mutable {
    capture->Append(std::move(job), [self, bytes](absl::Status s, Watermark w) {
      self->OnAppended(s, w, bytes);
    });
  });
}

absl::Status IngestSession::FinishLocked(const v1::IngestFinish& finish) {
  if (state_ == State::kAwaitingOpen) {
    return absl::FailedPreconditionError("ingest: finish before open");
  }
  v1::CaptureInfo end;
  if (absl::Status s = stream_.Finish(finish, &end); !s.ok()) return s;
  state_ = State::kFinishing;
  Effect([self = shared_from_this(), capture = capture_, counters = finish.device_counters(),
          end = std::move(end)]() mutable {
    capture->Finish(
        std::move(counters),
        [self, capture](absl::Status s, Watermark) {
          self->OnSealed(s, s.ok() ? capture->Summary() : v1::CaptureSummary());
        },
        std::move(end), SealCause::kFinishMessage);
  });
  return absl::OkStatus();
}

// ---- The capture's callbacks ----------------------------------------------

void IngestSession::OnOpened(const absl::Status& s, Watermark w, bool resumed) {
  std::unique_lock<std::mutex> lock(mu_);
  // Ended while opening (a cancel): the capture is let go already.
  if (state_ == State::kOpening && !s.ok()) {
    // Its durable watermark is not known (an object store's capture that
    // could not be rebuilt): the client retries the open.
    EndLocked(s);
  } else if (state_ == State::kOpening) {
    state_ = State::kStreaming;
    stream_.Start(w);
    submitted_ = w;
    v1::IngestResponse r;
    r.mutable_opened()->set_capture(capture_->name());
    r.mutable_opened()->set_resumed(resumed);
    r.mutable_opened()->set_durable_records(w.records);
    r.mutable_opened()->set_durable_bin_bytes(w.bin_bytes);
    QueueLocked(std::move(r));
    MaybeReadLocked();
  }
  RunEffects(std::move(lock));
}

void IngestSession::OnAppended(const absl::Status& s, Watermark w, uint64_t bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  queued_bytes_ -= bytes;
  if (!s.ok()) {
    EndLocked(s);
  } else {
    v1::IngestResponse r;
    r.mutable_ack()->set_durable_records(w.records);
    r.mutable_ack()->set_durable_bin_bytes(w.bin_bytes);
    QueueLocked(std::move(r));
    MaybeReadLocked();
  }
  RunEffects(std::move(lock));
}

void IngestSession::OnSealed(const absl::Status& s, const v1::CaptureSummary& summary) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!s.ok()) {
    EndLocked(s);
  } else {
    sealed_ = true;  // a finished capture has no stream
    // Unless a message after finish ended the call first: its status stands.
    if (state_ == State::kFinishing) {
      v1::IngestResponse r;
      *r.mutable_finished() = summary;
      QueueLocked(std::move(r));
      if (reads_ended_) {
        EndLocked(absl::OkStatus());
      } else {
        // The client's half-close (or a message to refuse) ends it.
        state_ = State::kFinished;
        Effect([transport = transport_] { transport->StartFinishGrace(kFinishGrace); });
        MaybeReadLocked();
      }
    }
  }
  RunEffects(std::move(lock));
}

void IngestSession::OnReleased() {
  std::unique_lock<std::mutex> lock(mu_);
  AskEndLocked();
  RunEffects(std::move(lock));
}

// ---- Reads, writes, the end -----------------------------------------------

void IngestSession::MaybeReadLocked() {
  // After `finish` it still reads, to refuse anything more (or see the
  // half-close).
  if (reading_) return;
  if (state_ != State::kAwaitingOpen && state_ != State::kStreaming &&
      state_ != State::kFinishing && state_ != State::kFinished) {
    return;
  }
  if (queued_bytes_ > kReadAheadBytes) return;  // resumed by OnAppended
  reading_ = true;
  Effect([transport = transport_] { transport->ReadNext(); });
}

void IngestSession::QueueLocked(v1::IngestResponse response) {
  if (state_ >= State::kEnding) return;
  // Acks coalesce: a newer watermark replaces one not yet sent.
  if (response.has_ack() && !out_.empty() && out_.back().has_ack()) {
    out_.back() = std::move(response);
  } else {
    out_.push_back(std::move(response));
  }
  WriteNextLocked();
}

void IngestSession::WriteNextLocked() {
  if (writing_) return;
  if (!out_.empty()) {
    current_ = std::move(out_.front());
    out_.pop_front();
    writing_ = true;
    // current_ is not touched again before OnSent.
    Effect([transport = transport_, response = &current_] { transport->Send(*response); });
    return;
  }
  if (state_ == State::kEnding) {
    state_ = State::kReleasing;
    ReleaseLocked();
  }
}

void IngestSession::EndLocked(absl::Status status) {
  if (state_ < State::kEnding) {
    state_ = State::kEnding;
    end_ = std::move(status);
    if (!end_.ok()) out_.clear();
  }
  WriteNextLocked();
}

// The capture is let go before the call ends, so a client that sees the
// status can resume (or reopen the name) at once: detached once every job
// this stream queued is done, or - opened and never written to - no capture
// at all (an open the client gave up on is no orphan).
void IngestSession::ReleaseLocked() {
  if (capture_ == nullptr || sealed_) {
    AskEndLocked();
    return;
  }
  std::shared_ptr<HubCapture> capture = std::move(capture_);
  capture_ = nullptr;  // nothing more reaches it from this stream
  if (created_ && stream_.received_records() == 0 && !stream_.finishing()) {
    Effect([hub = hub_, capture] {
      capture->Detach();
      hub->Forget(capture);
    });
    AskEndLocked();
    return;
  }
  // Runs on the capture's writer (or at once if it is finished).
  Effect([self = shared_from_this(), capture] {
    capture->Barrier([self, capture](absl::Status, Watermark) {
      capture->Detach();
      self->OnReleased();
    });
  });
}

void IngestSession::AskEndLocked() {
  if (state_ == State::kDone) return;
  state_ = State::kDone;
  Effect([transport = transport_, status = end_] { transport->End(status); });
}

// ---- Effects --------------------------------------------------------------

void IngestSession::Effect(std::function<void()> effect) {
  effects_.push_back(std::move(effect));
}

void IngestSession::RunEffects(std::unique_lock<std::mutex> lock) {
  if (running_effects_) return;  // that thread runs ours too, in order
  // An effect may drop the last other reference (End lets the transport go).
  std::shared_ptr<IngestSession> self = shared_from_this();
  running_effects_ = true;
  while (!effects_.empty()) {
    std::function<void()> effect = std::move(effects_.front());
    effects_.pop_front();
    lock.unlock();
    effect();
    // Let go of what the effect holds before the lock is taken again: its
    // capture may be the last reference, and ~HubCapture joins the writer,
    // whose job (a Barrier's callback) may be waiting for this lock.
    effect = nullptr;
    lock.lock();
  }
  running_effects_ = false;
  lock.unlock();  // before `self` goes
}

}  // namespace argsdump
