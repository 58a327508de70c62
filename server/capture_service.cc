#include "server/capture_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/thread.h"
#include "format/job.h"
#include "proto/grpc_status.h"
#include "server/bearer_token.h"
#include "server/ingest_session.h"
#include "server/page_token.h"
#include "grpcpp/alarm.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace argsdump {

// ---- IoPool ----------------------------------------------------------------

IoPool::IoPool(int threads) {
  for (int i = 0; i < threads; ++i) {
    std::thread t;
    // A thread the system refuses leaves fewer; with none, Run does the
    // work on the caller's thread.
    if (!StartThread("a file-reading thread of the capture service", &t, [this] {
           for (;;) {
             std::function<void()> work;
             {
               std::unique_lock<std::mutex> lock(mu_);
               cv_.wait(lock, [&] { return stop_ || !work_.empty(); });
               if (work_.empty()) return;
               work = std::move(work_.front());
               work_.pop_front();
             }
             work();
           }
         }).ok()) {
      break;
    }
    threads_.push_back(std::move(t));
  }
}

IoPool::~IoPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void IoPool::Run(std::function<void()> work) {
  if (threads_.empty()) {
    work();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_.push_back(std::move(work));
  }
  cv_.notify_one();
}

namespace {

constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;
constexpr size_t kQueryBudget = 200000;          // rows looked at per QueryArgs call
constexpr size_t kPayloadChunk = 1 << 20;         // ReadPayload message size
constexpr uint64_t kWatchScan = 4096;             // records looked at per watch message

uint32_t PageSize(uint32_t requested) {
  return requested == 0 ? kDefaultPageSize : std::min(requested, kMaxPageSize);
}

void Fill(const QueryHit& hit, v1::CapturedArg* out) {
  out->set_record_id(hit.record_id);
  *out->mutable_record() = RecordFromRow(hit.row);
  if (hit.manifest_index) out->set_manifest_index(*hit.manifest_index);
  if (hit.stats) StatsRowToProto(*hit.stats, out->mutable_record()->mutable_stats());
}

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const absl::Status& s) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

// ---- Ingest ----------------------------------------------------------------

// The gRPC side of one Ingest stream: reads, writes and the end, moved
// between gRPC and its IngestSession, which holds the protocol.
class IngestReactor : public grpc::ServerBidiReactor<v1::IngestRequest, v1::IngestResponse>,
                      private IngestSession::Transport {
 public:
  IngestReactor(CaptureServiceImpl* service, grpc::CallbackServerContext* context)
      : context_(context) {
    if (absl::Status s = service->CheckAuth(context); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    session_ = IngestSession::Create(service->hub(), this);
    session_->Start();
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      session_->OnRequest(&request_);
    } else {
      session_->OnReadsEnded(context_->IsCancelled());
    }
  }
  void OnWriteDone(bool ok) override { session_->OnSent(ok); }
  void OnCancel() override {
    if (session_ != nullptr) session_->OnCancel();
  }
  void OnDone() override {
    if (session_ != nullptr) session_->OnTransportGone();
    delete this;
  }

 private:
  void ReadNext() override { StartRead(&request_); }
  void Send(const v1::IngestResponse& response) override { StartWrite(&response); }
  void End(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }
  void StartFinishGrace(std::chrono::milliseconds grace) override {
    // The alarm holds the session, not the reactor: a cancelled alarm (the
    // reactor gone) calls back with false.
    grace_.Set(std::chrono::system_clock::now() + grace,
               [session = session_](bool fired) {
                 if (fired) session->OnFinishGraceOver();
               });
  }

  grpc::Alarm grace_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<IngestSession> session_;  // null when the call was refused
  v1::IngestRequest request_;  // the read in flight (one at a time)
};

// ---- ReadPayload -----------------------------------------------------------

class PayloadReactor : public grpc::ServerWriteReactor<v1::PayloadChunk> {
 public:
  PayloadReactor(CaptureServiceImpl* service, grpc::CallbackServerContext* context,
                 const v1::ReadPayloadRequest* request)
      : service_(service) {
    if (absl::Status s = service->CheckAuth(context); !s.ok()) {
      End(s);
      return;
    }
    auto capture = service->hub()->Find(request->capture());
    if (!capture.ok()) {
      End(capture.status());
      return;
    }
    absl::Status unread;
    auto row = (*capture)->RecordById(request->record_id(), &unread);
    if (!unread.ok()) {
      End(unread);
      return;
    }
    if (!row) {
      End(absl::NotFoundError(absl::StrCat("capture ", request->capture(), " has no record ",
                                           request->record_id(), " (",
                                           (*capture)->durable().records, " records)")));
      return;
    }
    if (request->offset() > row->bin_size) {
      End(absl::OutOfRangeError(absl::StrCat("offset ", request->offset(),
                                             " is past the payload's ", row->bin_size, " bytes")));
      return;
    }
    const uint64_t left = row->bin_size - request->offset();
    const uint64_t length = request->length() == 0 ? left : std::min(request->length(), left);
    start_ = row->bin_offset + request->offset();
    offset_ = request->offset();
    end_ = start_ + length;
    at_ = start_;
    if (length == 0) {
      End(absl::OkStatus());
      return;
    }
    if ((*capture)->bin_path().empty()) {
      // In the object store: one ranged GET streamed through.
      StartStream(*capture);
      return;
    }
    fd_ = ::open((*capture)->bin_path().c_str(), O_RDONLY | O_CLOEXEC);
    const int open_errno = errno;
    if (fd_ < 0 && open_errno == ENOENT && (*capture)->InStore()) {
      // Sealed into the object store since it was looked up.
      StartStream(*capture);
      return;
    }
    if (fd_ < 0 && open_errno == ENOENT) {
      // Deleted (DeleteCapture, retention) since it was looked up: once
      // open, a read goes on to its end whatever happens to the name.
      auto now = service->hub()->Find(request->capture());
      if (!now.ok() || *now != *capture) {
        End(absl::NotFoundError(absl::StrCat("capture ", request->capture(),
                                             " was deleted as its payload was about to be read")));
        return;
      }
    }
    if (fd_ < 0) {
      End(absl::DataLossError(
          absl::StrCat("cannot open ", (*capture)->bin_path(), ": ", std::strerror(open_errno))));
      return;
    }
    ReadNext();
  }

  void OnWriteDone(bool ok) override {
    if (stream_ != nullptr) {
      {
        std::lock_guard<std::mutex> lock(stream_->mu);
        stream_->writing = false;
        if (!ok) stream_->cancelled = true;
      }
      stream_->room.notify_all();
      Pump(stream_);
      return;
    }
    if (!ok) {
      End(absl::CancelledError("read payload: stream broke"));
      return;
    }
    ReadNext();  // the last message ended the call (StartWriteAndFinish)
  }

  void OnDone() override {
    if (fd_ >= 0) ::close(fd_);
    delete this;
  }

 private:
  // The file read runs on the I/O pool; the write is started from there.
  void ReadNext() {
    service_->io()->Run([this] {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kPayloadChunk, end_ - at_));
      std::string* data = chunk_.mutable_data();
      data->resize(n);
      size_t got = 0;
      while (got < n) {
        const ssize_t r = ::pread(fd_, &(*data)[got], n - got, static_cast<off_t>(at_ + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
      }
      if (got < n) {
        End(absl::DataLossError(absl::StrCat("args.bin ends before byte ", at_ + n)));
        return;
      }
      chunk_.set_offset(offset_ + (at_ - start_));
      at_ += n;
      if (at_ >= end_) {
        // The last message carries the status: no write-done reaction and
        // no separate trailers for the client to wait for.
        StartWriteAndFinish(&chunk_, grpc::WriteOptions(), grpc::Status::OK);
        return;
      }
      StartWrite(&chunk_);
    });
  }

  void End(const absl::Status& s) { Finish(ToGrpcStatus(s)); }

  // A payload in the object store: one ranged GET on the I/O pool, cut
  // into messages that are written while the rest arrives (at most
  // kStreamQueue of them wait; a slow client slows the GET). The last
  // message written once the GET has ended well carries the status. Its
  // state is shared with the fetching thread, which outlives the
  // reactor's last call only through it.
  static constexpr size_t kStreamPiece = 256 << 10;
  static constexpr size_t kStreamQueue = 2;
  struct Stream {
    std::mutex mu;
    std::condition_variable room;
    std::deque<std::string> ready;  // fetched, not yet written
    uint64_t sent = 0;              // bytes handed to writes
    bool writing = false;
    bool fetched = false;    // the GET ended (status says how)
    bool cancelled = false;  // the client went away
    bool ended = false;      // Finish was called: the reactor is not touched again
    absl::Status status;
  };

  void StartStream(std::shared_ptr<HubCapture> capture) {
    stream_ = std::make_shared<Stream>();
    service_->io()->Run([this, stream = stream_, capture = std::move(capture),
                         hub = service_->hub(), start = start_, length = end_ - start_] {
      std::string piece;
      // Queues `full` once there is room; `fetched`: it is the end of a
      // GET that ended well, said under the same lock. Once `fetched` is
      // set, with a write in flight only its OnWriteDone may touch the
      // reactor (as at the end below).
      auto offer = [&](std::string full, bool fetched) -> absl::Status {
        bool pump = true;
        {
          std::unique_lock<std::mutex> lock(stream->mu);
          stream->room.wait(lock, [&] {
            return stream->ready.size() < kStreamQueue || stream->cancelled;
          });
          if (stream->cancelled) return absl::CancelledError("read payload: stream broke");
          stream->ready.push_back(std::move(full));
          stream->fetched = fetched;
          pump = !fetched || !stream->writing;
        }
        if (pump) Pump(stream);
        return absl::OkStatus();
      };
      absl::Status s = capture->ReadBin(start, length, [&](std::string_view data) {
        while (!data.empty()) {
          const size_t take = std::min(kStreamPiece - piece.size(), data.size());
          piece.append(data.data(), take);
          data.remove_prefix(take);
          if (piece.size() == kStreamPiece) {
            if (absl::Status offered = offer(std::move(piece), false); !offered.ok()) {
              return offered;
            }
            piece = std::string();
          }
        }
        return absl::OkStatus();
      });
      if (s.ok() && !piece.empty()) {
        s = offer(std::move(piece), true);
        if (s.ok()) return;
      }
      if (!s.ok() && !absl::IsCancelled(s)) {
        // Deleted (DeleteCapture, retention) since the read began: its
        // objects go with it, and the rest of the payload with them.
        auto now = hub->Find(capture->name());
        if (absl::IsNotFound(now.status()) || (now.ok() && *now != capture)) {
          s = absl::NotFoundError(absl::StrCat("capture ", capture->name(),
                                               " was deleted while its payload was read"));
        }
      }
      // Until `fetched` is set nothing ends the call, so the reactor is
      // alive here. With a write in flight, its OnWriteDone ends the call
      // (and this thread must not touch the reactor again); without one,
      // this thread does.
      bool last = false;
      {
        std::lock_guard<std::mutex> lock(stream->mu);
        stream->fetched = true;
        stream->status = s;
        last = !stream->writing;
      }
      if (last) Pump(stream);
    });
  }

  // Starts the next write, or ends the call once everything fetched was
  // written (or the client went away and the fetch stopped): decided under
  // the stream's lock, done outside it. Any thread.
  void Pump(const std::shared_ptr<Stream>& stream) {
    std::unique_lock<std::mutex> lock(stream->mu);
    if (stream->writing || stream->ended) return;
    if (!stream->ready.empty() && !stream->cancelled) {
      *chunk_.mutable_data() = std::move(stream->ready.front());
      stream->ready.pop_front();
      chunk_.set_offset(offset_ + stream->sent);
      stream->sent += chunk_.data().size();
      // The last piece of a GET that ended well goes with the status.
      const bool last = stream->ready.empty() && stream->fetched && stream->status.ok();
      stream->writing = !last;
      stream->ended = last;
      lock.unlock();
      stream->room.notify_all();
      if (last) {
        StartWriteAndFinish(&chunk_, grpc::WriteOptions(), grpc::Status::OK);
      } else {
        StartWrite(&chunk_);
      }
      return;
    }
    if (!stream->fetched) return;
    stream->ended = true;
    const absl::Status status =
        stream->cancelled ? absl::CancelledError("read payload: stream broke") : stream->status;
    lock.unlock();
    End(status);
  }

  CaptureServiceImpl* const service_;
  std::shared_ptr<Stream> stream_;  // a payload in the object store
  int fd_ = -1;
  uint64_t start_ = 0, offset_ = 0, end_ = 0, at_ = 0;
  v1::PayloadChunk chunk_;
};

// ---- WatchCapture ----------------------------------------------------------

class WatchReactor : public grpc::ServerWriteReactor<v1::WatchCaptureResponse> {
 public:
  WatchReactor(CaptureServiceImpl* service, grpc::CallbackServerContext* context,
               const v1::WatchCaptureRequest* request)
      : shared_(std::make_shared<Shared>()) {
    shared_->reactor = this;
    if (absl::Status s = service->CheckAuth(context); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    auto capture = service->hub()->Find(request->capture());
    if (!capture.ok()) {
      Finish(ToGrpcStatus(capture.status()));
      return;
    }
    capture_ = *capture;
    query_ = ArgFilter::FromProto(request->filter());
    if (absl::Status s = capture_->ResolveKernels(&query_); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    cursor_ = request->start_record();
    auto shared = shared_;
    watcher_ = capture_->AddWatcher([shared] {
      std::lock_guard<std::recursive_mutex> lock(shared->mu);
      if (shared->reactor != nullptr) shared->reactor->PumpLocked();
    });
    std::lock_guard<std::recursive_mutex> lock(shared_->mu);
    PumpLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::recursive_mutex> lock(shared_->mu);
    writing_ = false;
    if (!ok) {
      EndLocked(absl::CancelledError("watch: stream broke"));
      return;
    }
    PumpLocked();
  }

  // The client went away, or the server shuts down (past its grace): a
  // watch of a capture that stopped growing would otherwise wait forever
  // and hold Shutdown up.
  void OnCancel() override {
    std::lock_guard<std::recursive_mutex> lock(shared_->mu);
    if (!writing_) EndLocked(absl::CancelledError("watch cancelled"));
  }

  void OnDone() override {
    {
      std::lock_guard<std::recursive_mutex> lock(shared_->mu);
      shared_->reactor = nullptr;
    }
    if (capture_ != nullptr) capture_->RemoveWatcher(watcher_);
    delete this;
  }

 private:
  // What the capture's writer thread (a watcher's poke) may reach after
  // this reactor is gone. Recursive: a StartWrite from a thread that is not
  // gRPC's may run the reaction it completes inline, under this lock.
  struct Shared {
    std::recursive_mutex mu;
    WatchReactor* reactor = nullptr;
  };

  // Sends what became durable since the last message; ends after the last
  // record of a finished capture.
  void PumpLocked() {
    if (writing_ || ended_) return;
    const bool finished = capture_->finished();  // before durable(): final then
    const Watermark w = capture_->durable();
    while (cursor_ < w.records) {
      const uint64_t to = std::min(w.records, cursor_ + kWatchScan);
      absl::Status unread;
      std::vector<QueryHit> hits = capture_->ByArrival(query_, cursor_, to, &unread);
      if (!unread.ok()) {
        EndLocked(unread);
        return;
      }
      cursor_ = to;
      if (hits.empty()) continue;
      response_.Clear();
      for (const QueryHit& h : hits) Fill(h, response_.add_args());
      response_.set_durable_records(cursor_);
      writing_ = true;
      StartWrite(&response_);
      return;
    }
    if (finished) EndLocked(absl::OkStatus());
  }

  void EndLocked(const absl::Status& s) {
    if (ended_) return;
    ended_ = true;
    Finish(ToGrpcStatus(s));
  }

  std::shared_ptr<Shared> shared_;
  std::shared_ptr<HubCapture> capture_;
  uint64_t watcher_ = 0;
  ArgFilter query_;
  uint64_t cursor_ = 0;
  bool writing_ = false;
  bool ended_ = false;
  v1::WatchCaptureResponse response_;
};

// ---- CompareJobs, CompareRanks ---------------------------------------------

// Streams a comparison's progress: the comparison runs on the I/O pool and
// queues its messages; they are written one at a time, then the status.
class CompareReactor : public grpc::ServerWriteReactor<v1::CompareProgress> {
 public:
  using Run = std::function<absl::Status(const JobQueries::Emit&, const std::atomic<bool>*)>;

  CompareReactor(CaptureServiceImpl* service, grpc::CallbackServerContext* context, Run run) {
    if (absl::Status s = service->CheckAuth(context); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    service->io()->Run([this, run = std::move(run)] {
      const absl::Status s = run(
          [this](const v1::CompareProgress& p) {
            {
              std::lock_guard<std::mutex> lock(mu_);
              if (cancelled_.load()) return false;
              queue_.push_back(p);
            }
            Pump();
            return true;
          },
          &cancelled_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        end_ = s;
        ended_ = true;
      }
      Pump();
    });
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) {
        cancelled_.store(true);
        queue_.clear();
      }
    }
    Pump();
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  // Starts the next write, or the end once the comparison is over and
  // every message is out; the call is made outside the lock (it may run
  // the reaction it completes, and OnDone, inline).
  void Pump() {
    bool write = false, finish = false;
    absl::Status end;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_ || finished_) return;
      if (!queue_.empty()) {
        current_ = std::move(queue_.front());
        queue_.pop_front();
        writing_ = write = true;
      } else if (ended_) {
        finished_ = finish = true;
        end = end_;
      }
    }
    if (write) StartWrite(&current_);
    if (finish) Finish(ToGrpcStatus(end));
  }

  std::mutex mu_;
  std::deque<v1::CompareProgress> queue_ ABSL_GUARDED_BY(mu_);
  v1::CompareProgress current_;  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // the comparison returned
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> cancelled_{false};
};

}  // namespace

// ---- CaptureServiceImpl ----------------------------------------------------

CaptureServiceImpl::CaptureServiceImpl(CaptureHub* hub, std::string auth_token)
    : hub_(hub), auth_token_(std::move(auth_token)) {}

CaptureServiceImpl::~CaptureServiceImpl() = default;

absl::Status CaptureServiceImpl::CheckAuth(const grpc::CallbackServerContext* context) const {
  const auto& md = context->client_metadata();
  auto it = md.find("authorization");
  return CheckBearerToken(it == md.end() ? std::nullopt
                                         : std::optional<absl::string_view>(absl::string_view(
                                               it->second.data(), it->second.size())),
                          auth_token_);
}

grpc::ServerBidiReactor<v1::IngestRequest, v1::IngestResponse>* CaptureServiceImpl::Ingest(
    grpc::CallbackServerContext* context) {
  return new IngestReactor(this, context);
}

grpc::ServerUnaryReactor* CaptureServiceImpl::ListCaptures(grpc::CallbackServerContext* context,
                                                           const v1::ListCapturesRequest* request,
                                                           v1::ListCapturesResponse* response) {
  if (absl::Status s = CheckAuth(context); !s.ok()) return Done(context, s);
  auto after = ParseNameToken(request->page_token());
  if (!after.ok()) return Done(context, after.status());
  if (!request->job().empty()) {
    if (absl::Status s = ValidateJobName(request->job()); !s.ok()) return Done(context, s);
  }
  std::map<std::string, std::string> labels(request->labels().begin(), request->labels().end());
  bool more = false;
  const auto captures = hub_->List(labels, request->state(), *after,
                                   PageSize(request->page_size()), &more, request->job());
  for (const auto& c : captures) *response->add_captures() = c->Summary();
  if (more && !captures.empty()) response->set_next_page_token(NameToken(captures.back()->name()));
  response->set_root_disk_bytes(hub_->RootDiskBytes());
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CaptureServiceImpl::DeleteCapture(
    grpc::CallbackServerContext* context, const v1::DeleteCaptureRequest* request,
    v1::DeleteCaptureResponse* response) {
  if (absl::Status s = CheckAuth(context); !s.ok()) return Done(context, s);
  if (absl::Status s = ValidateCaptureName(request->capture()); !s.ok()) return Done(context, s);
  auto freed = hub_->Delete(request->capture(), "deleted (DeleteCapture)");
  if (!freed.ok()) return Done(context, freed.status());
  response->set_freed_bytes(*freed);
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CaptureServiceImpl::GetCapture(grpc::CallbackServerContext* context,
                                                         const v1::GetCaptureRequest* request,
                                                         v1::CaptureSummary* response) {
  if (absl::Status s = CheckAuth(context); !s.ok()) return Done(context, s);
  auto capture = hub_->Find(request->capture());
  if (!capture.ok()) return Done(context, capture.status());
  *response = (*capture)->Summary();
  *response->mutable_kernels() = (*capture)->Kernels();
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CaptureServiceImpl::FinishCapture(
    grpc::CallbackServerContext* context, const v1::FinishCaptureRequest* request,
    v1::CaptureSummary* response) {
  if (absl::Status s = CheckAuth(context); !s.ok()) return Done(context, s);
  auto* reactor = context->DefaultReactor();
  auto capture = hub_->Find(request->capture());
  if (!capture.ok()) {
    reactor->Finish(ToGrpcStatus(capture.status()));
    return reactor;
  }
  std::shared_ptr<HubCapture> c = *capture;
  // Answered from the capture's writer thread once the manifest is written.
  absl::Status queued = hub_->FinishDetached(
      request->capture(), [reactor, response, c](absl::Status s, Watermark) {
        if (s.ok()) *response = c->Summary();
        reactor->Finish(ToGrpcStatus(s));
      });
  if (!queued.ok()) reactor->Finish(ToGrpcStatus(queued));
  return reactor;
}

grpc::ServerUnaryReactor* CaptureServiceImpl::QueryArgs(grpc::CallbackServerContext* context,
                                                        const v1::QueryArgsRequest* request,
                                                        v1::QueryArgsResponse* response) {
  if (absl::Status s = CheckAuth(context); !s.ok()) return Done(context, s);
  auto capture = hub_->Find(request->capture());
  if (!capture.ok()) return Done(context, capture.status());
  auto from = ParsePositionToken(request->page_token());
  if (!from.ok()) return Done(context, from.status());
  ArgFilter q = ArgFilter::FromProto(request->filter());
  if (request->has_task_id()) q.task_id = request->task_id();
  if (request->stage() != v1::STAGE_UNSPECIFIED) q.stage = request->stage();
  if (request->role() != v1::ROLE_UNSPECIFIED) q.role = request->role();
  if (absl::Status s = (*capture)->ResolveKernels(&q); !s.ok()) return Done(context, s);
  auto* reactor = context->DefaultReactor();
  const uint32_t limit = PageSize(request->page_size());
  // Finished captures read their mapped index: off the reaction thread.
  std::shared_ptr<HubCapture> c = *capture;
  const PagePosition start = *from;
  io_.Run([c, q, start, limit, response, reactor] {
    bool live = false;
    const QueryPage page = c->Query(q, start.position, limit, kQueryBudget, &live);
    if (!page.error.ok()) {
      reactor->Finish(ToGrpcStatus(page.error));
      return;
    }
    if (start.live && *start.live != live) {
      // A live capture's positions mean nothing in its manifest order.
      reactor->Finish(ToGrpcStatus(absl::AbortedError(
          *start.live ? absl::StrCat("capture ", c->name(), " finished since this page token "
                                     "was issued (live pages are in arrival order, finished ones "
                                     "in manifest order): query again without a page_token")
                      : absl::StrCat("this page token is from capture ", c->name(),
                                     "'s finished pages, but it is live"))));
      return;
    }
    for (const QueryHit& h : page.hits) Fill(h, response->add_args());
    if (page.next) response->set_next_page_token(PositionToken(*page.next, live));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* CaptureServiceImpl::GetArg(grpc::CallbackServerContext* context,
                                                     const v1::GetArgRequest* request,
                                                     v1::CapturedArg* response) {
  if (absl::Status s = CheckAuth(context); !s.ok()) return Done(context, s);
  auto capture = hub_->Find(request->capture());
  if (!capture.ok()) return Done(context, capture.status());
  auto* reactor = context->DefaultReactor();
  // A finished capture's row is read from its mapped index: off the
  // reaction thread, as QueryArgs.
  std::shared_ptr<HubCapture> c = *capture;
  const uint64_t id = request->record_id();
  io_.Run([c, id, response, reactor] {
    absl::StatusOr<QueryHit> hit = c->HitById(id);
    if (hit.ok()) Fill(*hit, response);
    reactor->Finish(ToGrpcStatus(hit.status()));
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::PayloadChunk>* CaptureServiceImpl::ReadPayload(
    grpc::CallbackServerContext* context, const v1::ReadPayloadRequest* request) {
  return new PayloadReactor(this, context, request);
}

grpc::ServerWriteReactor<v1::WatchCaptureResponse>* CaptureServiceImpl::WatchCapture(
    grpc::CallbackServerContext* context, const v1::WatchCaptureRequest* request) {
  return new WatchReactor(this, context, request);
}

template <typename Response, typename Fn>
grpc::ServerUnaryReactor* CaptureServiceImpl::Answer(grpc::CallbackServerContext* context,
                                                     Response* response, Fn answer) {
  if (absl::Status s = CheckAuth(context); !s.ok()) return Done(context, s);
  auto* reactor = context->DefaultReactor();
  io_.Run([reactor, response, answer = std::move(answer)] {
    absl::StatusOr<Response> r = answer();
    if (r.ok()) *response = *std::move(r);
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* CaptureServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                       const v1::ListJobsRequest* request,
                                                       v1::ListJobsResponse* response) {
  return Answer(context, response, [this, request] { return jobs_.ListJobs(*request); });
}

grpc::ServerUnaryReactor* CaptureServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                     const v1::GetJobRequest* request,
                                                     v1::JobSummary* response) {
  return Answer(context, response, [this, request] { return jobs_.GetJob(request->job()); });
}

grpc::ServerUnaryReactor* CaptureServiceImpl::QueryJob(grpc::CallbackServerContext* context,
                                                       const v1::QueryJobRequest* request,
                                                       v1::QueryJobResponse* response) {
  return Answer(context, response, [this, request] { return jobs_.QueryJob(*request); });
}

grpc::ServerUnaryReactor* CaptureServiceImpl::FirstNonfinite(
    grpc::CallbackServerContext* context, const v1::FirstNonfiniteRequest* request,
    v1::FirstNonfiniteResponse* response) {
  return Answer(context, response, [this, request] { return jobs_.FirstNonfinite(*request); });
}

grpc::ServerUnaryReactor* CaptureServiceImpl::GetJobGrid(grpc::CallbackServerContext* context,
                                                         const v1::GetJobGridRequest* request,
                                                         v1::JobGrid* response) {
  return Answer(context, response, [this, request] { return jobs_.GetJobGrid(*request); });
}

grpc::ServerWriteReactor<v1::CompareProgress>* CaptureServiceImpl::CompareJobs(
    grpc::CallbackServerContext* context, const v1::CompareJobsRequest* request) {
  return new CompareReactor(this, context,
                            [this, request](const JobQueries::Emit& emit,
                                            const std::atomic<bool>* cancelled) {
                              return jobs_.CompareJobs(*request, emit, cancelled);
                            });
}

grpc::ServerWriteReactor<v1::CompareProgress>* CaptureServiceImpl::CompareRanks(
    grpc::CallbackServerContext* context, const v1::CompareRanksRequest* request) {
  return new CompareReactor(this, context,
                            [this, request](const JobQueries::Emit& emit,
                                            const std::atomic<bool>* cancelled) {
                              return jobs_.CompareRanks(*request, emit, cancelled);
                            });
}

// ---- CaptureServer ---------------------------------------------------------

namespace {

absl::StatusOr<std::string> ReadWhole(const std::string& path, const char* what) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read ", bytes.status().message()));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CaptureServer>> CaptureServer::Start(CaptureServerOptions options) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!options.tls_cert_file.empty()) {
    auto cert = ReadWhole(options.tls_cert_file, "--tls_cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadWhole(options.tls_key_file, "--tls_key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  std::unique_ptr<CaptureServer> server(new CaptureServer());
  auto hub = CaptureHub::Open(options.hub);
  if (!hub.ok()) return hub.status();
  server->hub_ = std::move(hub).value();
  server->service_ = std::make_unique<CaptureServiceImpl>(server->hub_.get(), options.auth_token);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second server on the same port
  // would start and share the calls.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, creds, &server->port_);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("capture server: cannot listen on ", options.listen));
  }
  // Health checks name the server ("") or the service they depend on; both
  // are SERVING until Shutdown, which makes every name NOT_SERVING.
  server->server_->GetHealthCheckService()->SetServingStatus(
      v1::CaptureService::service_full_name(), true);
  if (!options.http.listen.empty()) {
    HttpGatewayOptions http = options.http;
    http.tls_cert_file = options.tls_cert_file;
    http.tls_key_file = options.tls_key_file;
    http.auth_token = options.auth_token;
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    auto gateway = HttpGateway::Start(http, server->server_->InProcessChannel(args));
    if (!gateway.ok()) return gateway.status();  // ~CaptureServer stops the gRPC side
    server->http_ = *std::move(gateway);
  }
  return server;
}

void CaptureServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  // HTTP requests are calls on the server: they end first.
  if (http_ != nullptr) http_->Shutdown(grace);
  if (server_ != nullptr) {  // null when Start failed
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_->Wait();
  }
  // Live captures stay live (their journals hold every acked record): a
  // client resumes them after the restart; see --live_idle_timeout.
}

CaptureServer::~CaptureServer() { Shutdown(std::chrono::milliseconds(0)); }

}  // namespace argsdump
