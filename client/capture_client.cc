#include "client/capture_client.h"

#include <chrono>
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/thread.h"
#include "proto/grpc_status.h"

namespace argsdump {

absl::Status Annotate(const absl::Status& s, absl::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

// ---- CaptureClient ---------------------------------------------------------

CaptureClient::CaptureClient(CaptureClientOptions options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(kMaxSendMessageBytes);
  channel_ = grpc::CreateCustomChannel(
      options_.target,
      options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials(), args);
  stub_ = v1::CaptureService::NewStub(channel_);
}

absl::StatusOr<std::unique_ptr<CaptureClient>> CaptureClient::Create(
    CaptureClientOptions options) {
  if (options.target.empty()) {
    return absl::InvalidArgumentError("the capture service's address is empty");
  }
  if (options.auth_token.empty() && !options.auth_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(options.auth_token_file);
    if (!token.ok()) return token.status();
    options.auth_token = *std::move(token);
  }
  return std::unique_ptr<CaptureClient>(new CaptureClient(std::move(options)));
}

absl::Status CaptureClient::WaitForConnected(std::chrono::milliseconds timeout) const {
  if (channel_->WaitForConnected(std::chrono::system_clock::now() + timeout)) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat("capture service ", options_.target, ": cannot connect"));
}

std::unique_ptr<grpc::ClientContext> CaptureClient::NewStreamContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!options_.auth_token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.auth_token);
  }
  return context;
}

std::unique_ptr<grpc::ClientContext> CaptureClient::NewContext() const {
  auto context = NewStreamContext();
  context->set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
  return context;
}

absl::StatusOr<v1::CaptureSummary> CaptureClient::GetCapture(const std::string& capture) const {
  v1::GetCaptureRequest request;
  request.set_capture(capture);
  v1::CaptureSummary summary;
  auto context = NewContext();
  const grpc::Status s = stub_->GetCapture(context.get(), request, &summary);
  if (!s.ok()) return FromGrpcStatus(s);
  return summary;
}

absl::StatusOr<v1::QueryArgsResponse> CaptureClient::QueryArgs(
    const v1::QueryArgsRequest& request) const {
  v1::QueryArgsResponse response;
  auto context = NewContext();
  const grpc::Status s = stub_->QueryArgs(context.get(), request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::StatusOr<v1::ListCapturesResponse> CaptureClient::ListCaptures(
    const v1::ListCapturesRequest& request) const {
  v1::ListCapturesResponse response;
  auto context = NewContext();
  const grpc::Status s = stub_->ListCaptures(context.get(), request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::Status CaptureClient::ReadPayload(
    const v1::ReadPayloadRequest& request,
    const std::function<absl::Status(const v1::PayloadChunk&)>& on_chunk) const {
  auto context = NewContext();
  auto reader = stub_->ReadPayload(context.get(), request);
  v1::PayloadChunk chunk;
  while (reader->Read(&chunk)) {
    if (absl::Status s = on_chunk(chunk); !s.ok()) {
      context->TryCancel();
      reader->Finish().IgnoreError();
      return s;
    }
  }
  return FromGrpcStatus(reader->Finish());
}

// ---- Jobs ------------------------------------------------------------------

absl::StatusOr<v1::ListJobsResponse> CaptureClient::ListJobs(
    const v1::ListJobsRequest& request) const {
  v1::ListJobsResponse response;
  auto context = NewContext();
  const grpc::Status s = stub_->ListJobs(context.get(), request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::StatusOr<v1::JobSummary> CaptureClient::GetJob(const std::string& job) const {
  v1::GetJobRequest request;
  request.set_job(job);
  v1::JobSummary summary;
  auto context = NewContext();
  const grpc::Status s = stub_->GetJob(context.get(), request, &summary);
  if (!s.ok()) return FromGrpcStatus(s);
  return summary;
}

absl::StatusOr<v1::QueryJobResponse> CaptureClient::QueryJob(
    const v1::QueryJobRequest& request) const {
  v1::QueryJobResponse response;
  auto context = NewContext();
  const grpc::Status s = stub_->QueryJob(context.get(), request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::StatusOr<v1::FirstNonfiniteResponse> CaptureClient::FirstNonfinite(
    const v1::FirstNonfiniteRequest& request) const {
  v1::FirstNonfiniteResponse response;
  auto context = NewContext();
  const grpc::Status s = stub_->FirstNonfinite(context.get(), request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

namespace {

// A comparison's stream read to its end (see CaptureClient::CompareJobs).
absl::StatusOr<v1::CompareProgress> ReadComparison(
    grpc::ClientContext* context, grpc::ClientReaderInterface<v1::CompareProgress>* reader,
    const CaptureClient::OnCompareProgress& on_progress) {
  v1::CompareProgress progress, last;
  while (reader->Read(&progress)) {
    if (absl::Status s = on_progress(progress); !s.ok()) {
      context->TryCancel();
      reader->Finish().IgnoreError();
      return s;
    }
    last = progress;
  }
  if (absl::Status s = FromGrpcStatus(reader->Finish()); !s.ok()) return s;
  if (!last.done()) return absl::DataLossError("the comparison ended without its answer");
  return last;
}

}  // namespace

absl::StatusOr<v1::CompareProgress> CaptureClient::CompareJobs(
    const v1::CompareJobsRequest& request, const OnCompareProgress& on_progress) const {
  auto context = NewContext();
  auto reader = stub_->CompareJobs(context.get(), request);
  return ReadComparison(context.get(), reader.get(), on_progress);
}

absl::StatusOr<v1::CompareProgress> CaptureClient::CompareRanks(
    const v1::CompareRanksRequest& request, const OnCompareProgress& on_progress) const {
  auto context = NewContext();
  auto reader = stub_->CompareRanks(context.get(), request);
  return ReadComparison(context.get(), reader.get(), on_progress);
}

// ---- Pagers ----------------------------------------------------------------

QueryJobPager::QueryJobPager(const CaptureClient* client, v1::QueryJobRequest request)
    : client_(client), request_(std::move(request)) {}

absl::StatusOr<bool> QueryJobPager::Next(std::vector<v1::JobArg>* args) {
  args->clear();
  if (done_) return false;
  absl::StatusOr<v1::QueryJobResponse> page = client_->QueryJob(request_);
  if (!page.ok()) return page.status();
  for (v1::JobArg& a : *page->mutable_args()) args->push_back(std::move(a));
  if (page->progress_size() > 0) {
    progress_.assign(page->progress().begin(), page->progress().end());
  }
  request_.set_page_token(page->next_page_token());
  done_ = page->next_page_token().empty();
  return true;
}

QueryArgsPager::QueryArgsPager(const CaptureClient* client, v1::QueryArgsRequest request)
    : client_(client), request_(std::move(request)) {}

absl::StatusOr<bool> QueryArgsPager::Next(std::vector<v1::CapturedArg>* args) {
  args->clear();
  if (done_) return false;
  absl::StatusOr<v1::QueryArgsResponse> page = client_->QueryArgs(request_);
  if (!page.ok()) return page.status();
  for (v1::CapturedArg& a : *page->mutable_args()) args->push_back(std::move(a));
  request_.set_page_token(page->next_page_token());
  done_ = page->next_page_token().empty();
  return true;
}

ListCapturesPager::ListCapturesPager(const CaptureClient* client,
                                     v1::ListCapturesRequest request)
    : client_(client), request_(std::move(request)) {}

absl::StatusOr<bool> ListCapturesPager::Next(std::vector<v1::CaptureSummary>* captures) {
  captures->clear();
  if (done_) return false;
  absl::StatusOr<v1::ListCapturesResponse> page = client_->ListCaptures(request_);
  if (!page.ok()) return page.status();
  for (v1::CaptureSummary& c : *page->mutable_captures()) captures->push_back(std::move(c));
  request_.set_page_token(page->next_page_token());
  done_ = page->next_page_token().empty();
  return true;
}

// ---- IngestWriter ----------------------------------------------------------

bool RetryableIngestError(const absl::Status& s) {
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

absl::StatusOr<std::unique_ptr<IngestWriter>> IngestWriter::Open(const CaptureClient* client,
                                                                 IngestWriterOptions options) {
  const bool resume = options.open.resume();
  std::unique_ptr<IngestWriter> writer(new IngestWriter(client, std::move(options)));
  if (absl::Status s = writer->OpenStream(resume); !s.ok()) return s;
  return writer;
}

IngestWriter::~IngestWriter() { CloseStream(); }

uint64_t IngestWriter::durable_records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return acked_records_;
}

uint64_t IngestWriter::durable_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return acked_bytes_;
}

absl::Status IngestWriter::OpenStream(bool resume) {
  CloseStream();
  grpc::ClientContext* context;
  {
    std::lock_guard<std::mutex> lock(mu_);
    context_ = client_->NewStreamContext();
    context = context_.get();
    opened_ = false;
    broken_ = false;
    got_finished_ = false;
  }
  stream_ = client_->stub_->Ingest(context);
  if (absl::Status st = StartThread("the capture stream's reader thread", &reader_,
                                    [this] { ReaderLoop(); });
      !st.ok()) {
    context->TryCancel();
    stream_->Finish().IgnoreError();
    stream_.reset();
    return st;
  }
  v1::IngestRequest req;
  *req.mutable_open() = options_.open;
  req.mutable_open()->set_resume(resume);
  // The server measures its clock's offset from ours against this.
  req.mutable_open()->set_client_unix_ns(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  stream_->Write(req);
  std::unique_lock<std::mutex> lock(mu_);
  const bool got = cv_.wait_for(lock, options_.ack_timeout, [&] {
    return opened_ || broken_;
  });
  if (got && opened_) return absl::OkStatus();
  lock.unlock();
  if (!got) context->TryCancel();
  reader_.join();
  const grpc::Status s = stream_->Finish();
  stream_.reset();
  if (!got) {
    return absl::DeadlineExceededError(
        absl::StrCat("capture service ", client_->target(), ": no answer to open"));
  }
  const std::string service = absl::StrCat("capture service ", client_->target());
  return s.ok() ? absl::UnavailableError(absl::StrCat(service, ": stream ended before opened"))
                : FromGrpcStatus(s, service);
}

void IngestWriter::CloseStream() {
  if (stream_ == nullptr) return;
  Break();
  reader_.join();
  stream_->Finish().IgnoreError();
  stream_.reset();
}

void IngestWriter::ReaderLoop() {
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

void IngestWriter::Break() {
  std::lock_guard<std::mutex> lock(mu_);
  if (context_ != nullptr) context_->TryCancel();
}

bool IngestWriter::Write(const v1::IngestRequest& req) {
  const bool ok = stream_->Write(req);
  if (++messages_sent_ == options_.break_after_messages) Break();
  return ok;
}

bool IngestWriter::Send(const std::vector<const v1::ArgRecord*>& records,
                        const std::vector<absl::string_view>& payloads, size_t from,
                        uint64_t first_id, bool keep) {
  if (stream_ == nullptr && !keep) return false;
  // The service has every byte before the durable watermark, and every
  // kept message's bytes are on their way after it.
  uint64_t offset = durable_bytes();
  if (!kept_.empty()) {
    const v1::IngestBatch& last = kept_.back().request.batch();
    offset = last.payload_offset() + last.payload().size();
  }
  const size_t first_kept = kept_.size();
  v1::IngestRequest req;
  v1::IngestBatch* batch = nullptr;
  size_t size = 0;
  bool ok = true;
  auto start = [&](uint64_t next_id) {
    req.Clear();
    batch = req.mutable_batch();
    batch->set_first_record(next_id);
    batch->set_payload_offset(offset);
    size = 0;
  };
  auto flush = [&] {
    if (!keep) return ok = Write(req);
    Kept k;
    k.size = size;
    // A message that starts with a payload's tail is acknowledged with the
    // record that payload belongs to, one before its first.
    k.done_at = batch->first_record() + static_cast<uint64_t>(batch->records_size());
    kept_bytes_ += size;
    k.request = std::move(req);
    kept_.push_back(std::move(k));
    return true;
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
  if (!keep) return true;
  if (stream_ == nullptr) return false;
  for (size_t i = first_kept; i < kept_.size(); ++i) {
    if (!Write(kept_[i].request)) return false;
  }
  return true;
}

void IngestWriter::TrimKept() {
  const uint64_t acked = durable_records();
  while (!kept_.empty() && kept_.front().done_at <= acked) {
    kept_bytes_ -= kept_.front().size;
    kept_.pop_front();
  }
}

uint64_t IngestWriter::kept_bytes() {
  TrimKept();
  return kept_bytes_;
}

uint64_t IngestWriter::kept_first_record() {
  TrimKept();
  return kept_.empty() ? 0 : kept_.front().request.batch().first_record();
}

uint64_t IngestWriter::kept_front_done() {
  TrimKept();
  return kept_.empty() ? 0 : kept_.front().done_at;
}

namespace {

// `batch` from record `records` and stream byte `bytes` on (both within
// it): what is left of it when the service holds everything before them.
v1::IngestRequest CutBatch(const v1::IngestBatch& batch, uint64_t records, uint64_t bytes) {
  v1::IngestRequest cut;
  v1::IngestBatch* b = cut.mutable_batch();
  b->set_first_record(records);
  b->set_payload_offset(bytes);
  const uint64_t skip = records - batch.first_record();
  for (int i = static_cast<int>(skip); i < batch.records_size(); ++i) {
    *b->add_records() = batch.records(i);
  }
  b->set_payload(batch.payload().substr(static_cast<size_t>(bytes - batch.payload_offset())));
  return cut;
}

// Whether record `records` and stream byte `bytes` fall within `batch`
// (they are where the service's watermark stands).
bool WithinBatch(const v1::IngestBatch& batch, uint64_t records, uint64_t bytes) {
  return records >= batch.first_record() &&
         records <= batch.first_record() + static_cast<uint64_t>(batch.records_size()) &&
         bytes >= batch.payload_offset() &&
         bytes <= batch.payload_offset() + batch.payload().size();
}

}  // namespace

bool IngestWriter::SendKept() {
  if (stream_ == nullptr) return false;
  TrimKept();
  if (kept_.empty()) return true;
  const uint64_t records = durable_records();
  const uint64_t bytes = durable_bytes();
  const v1::IngestBatch& front = kept_.front().request.batch();
  if (records == front.first_record() && bytes == front.payload_offset()) {
    for (const Kept& k : kept_) {
      if (!Write(k.request)) return false;
    }
    return true;
  }
  if (!WithinBatch(front, records, bytes)) {
    // A watermark the kept messages cannot be cut at: the stream is
    // broken off (the caller's resumes are bounded).
    Break();
    return false;
  }
  if (!Write(CutBatch(front, records, bytes))) return false;
  for (size_t i = 1; i < kept_.size(); ++i) {
    if (!Write(kept_[i].request)) return false;
  }
  return true;
}

void IngestWriter::TakeKept(std::vector<v1::ArgRecord>* records, std::string* payload_bytes) {
  TrimKept();
  records->clear();
  payload_bytes->clear();
  const uint64_t bytes_from = durable_bytes();
  const uint64_t from = durable_records();
  for (const Kept& k : kept_) {
    const v1::IngestBatch& b = k.request.batch();
    for (int i = 0; i < b.records_size(); ++i) {
      if (b.first_record() + static_cast<uint64_t>(i) >= from) records->push_back(b.records(i));
    }
    // The bytes from the watermark on (the first message may hold some
    // before it).
    const uint64_t end = b.payload_offset() + b.payload().size();
    if (end > bytes_from) {
      const uint64_t skip = bytes_from > b.payload_offset() ? bytes_from - b.payload_offset() : 0;
      payload_bytes->append(b.payload(), static_cast<size_t>(skip), std::string::npos);
    }
  }
  kept_.clear();
  kept_bytes_ = 0;
}

bool IngestWriter::WaitAcked(uint64_t records) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool done = cv_.wait_for(lock, options_.ack_timeout, [&] {
    return acked_records_ >= records || broken_;
  });
  if (done && acked_records_ >= records) return true;
  if (!done) context_->TryCancel();  // timed out: treat the stream as broken
  return false;
}

absl::Status IngestWriter::StreamEnded() {
  if (stream_ == nullptr) return absl::UnavailableError("stream broke");
  // The stream is dead (a write failed, the reader saw its end, or the ack
  // wait timed out and cancelled it): its status says why.
  reader_.join();
  absl::Status why =
      FromGrpcStatus(stream_->Finish(), absl::StrCat("capture service ", client_->target()));
  stream_.reset();
  if (why.ok()) why = absl::UnavailableError("stream ended early");
  return why;
}

absl::Status IngestWriter::Finish(const v1::IngestFinish& finish, v1::CaptureSummary* finished) {
  if (stream_ == nullptr) return absl::UnavailableError("stream broke");
  v1::IngestRequest req;
  *req.mutable_finish() = finish;
  stream_->Write(req);
  stream_->WritesDone();
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, options_.ack_timeout, [&] {
        return got_finished_ || broken_;
    });
    if (!got_finished_ && !broken_) context_->TryCancel();
  }
  reader_.join();
  const grpc::Status s = stream_->Finish();
  stream_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  if (got_finished_ && s.ok()) {
    *finished = finished_;
    return absl::OkStatus();
  }
  return s.ok() ? absl::UnavailableError("stream ended before finished")
                : FromGrpcStatus(s, absl::StrCat("capture service ", client_->target()));
}

absl::Status IngestWriter::Resume(absl::Status why, int* attempts) {
  const auto broke = std::chrono::steady_clock::now();
  for (;;) {
    if (!RetryableIngestError(why) || *attempts >= options_.max_reconnects ||
        std::chrono::steady_clock::now() - broke > options_.retry_deadline) {
      return why;
    }
    // Back off: 20 ms, 40 ms, ... up to 1 s between attempts.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(1000, 20 << std::min(*attempts, 6))));
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

}  // namespace argsdump
