// libFuzzer target: any bytes as what Ingest clients send - a sequence of
// IngestRequest messages (the wire format of `repeated IngestRequest
// requests = 1`) - played through IngestSession over a real CaptureHub, as
// the service plays them. An open with `resume` starts a new stream (a
// client reconnecting; the stream before half-closes or is cancelled);
// anything else goes to the stream of the moment. No crash and no hang; every
// stream ends once, its capture let go before the status; acks never go
// back; the writer refuses nothing the session let through (the capture's
// durable watermark is what the stream handed over); and whatever was sealed
// reads back: the index opens and the manifest parses, one entry per record.
//   bazel build --config=fuzz //server:ingest_stream_fuzzer   (tools/fuzz.sh)
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "proto/argsdump/v1/capture.pb.h"
#include "server/capture_hub.h"
#include "store/live_query.h"
#include "store/capture_store.h"
#include "server/ingest_session.h"
#include "tests/fuzz_scratch.h"
#include "viewer/manifest_reader.h"

namespace argsdump {
namespace {

std::vector<v1::IngestRequest> Requests(const uint8_t* data, size_t size) {
  std::vector<v1::IngestRequest> out;
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  while (out.size() < 64) {
    const uint32_t tag = in.ReadTag();
    if (tag != ((1 << 3) | 2)) break;
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) break;
    const auto limit = in.PushLimit(static_cast<int>(length));
    v1::IngestRequest r;
    if (!r.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) break;
    in.PopLimit(limit);
    out.push_back(std::move(r));
  }
  return out;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

// One client stream: messages go in when the session asks for a read,
// writes complete as they are asked.
class FuzzStream final : public IngestSession::Transport {
 public:
  explicit FuzzStream(CaptureHub* hub) : hub_(hub) {
    session_ = IngestSession::Create(hub, this);
    session_->Start();
  }
  ~FuzzStream() override { session_->OnTransportGone(); }

  // Gives the session `request` once it asks for a read; false when the
  // stream ended first.
  bool Deliver(v1::IngestRequest* request) {
    if (!WaitForRead()) return false;
    session_->OnRequest(request);
    return true;
  }
  // Ends the stream as a client going away does, and waits for its end.
  void Leave(bool cancel) {
    if (cancel) {
      session_->OnCancel();
    } else if (WaitForRead()) {
      session_->OnReadsEnded(false);
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ends_ > 0; });
    lock.unlock();
    CheckEnded();
  }

 private:
  bool WaitForRead() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return read_asked_ || ends_ > 0; });
    if (ends_ > 0) return false;
    read_asked_ = false;
    return true;
  }
  // The capture's durable watermark is what the stream handed its writer.
  void CheckEnded() {
    Check(session_->state() == IngestSession::State::kDone);
    if (capture_.empty()) return;
    auto capture = hub_->Find(capture_);
    if (!capture.ok()) return;  // opened, nothing written: dropped
    Check((*capture)->durable().records == session_->submitted().records);
    Check((*capture)->durable().bin_bytes == session_->submitted().bin_bytes);
  }

  void ReadNext() override {
    std::lock_guard<std::mutex> lock(mu_);
    Check(!read_asked_ && ends_ == 0);
    read_asked_ = true;
    cv_.notify_all();
  }
  void Send(const v1::IngestResponse& response) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check(ends_ == 0);
      if (response.has_opened()) {
        capture_ = response.opened().capture();
        durable_ = response.opened().durable_records();
      } else if (response.has_ack()) {
        Check(response.ack().durable_records() >= durable_);
        durable_ = response.ack().durable_records();
      }
    }
    session_->OnSent(true);
  }
  // The grace is over at once: the fuzz input's next message or its end
  // race the seal as a client's would, and both outcomes are checked.
  void StartFinishGrace(std::chrono::milliseconds) override { session_->OnFinishGraceOver(); }
  void End(const absl::Status&) override {
    std::string name;
    {
      std::lock_guard<std::mutex> lock(mu_);
      name = capture_;
    }
    // Let go before the status: a client that sees it can resume at once.
    if (!name.empty()) {
      auto capture = hub_->Find(name);
      Check(!capture.ok() || !(*capture)->attached());
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++ends_;
    Check(ends_ == 1);
    cv_.notify_all();
  }

  CaptureHub* const hub_;
  std::shared_ptr<IngestSession> session_;
  std::mutex mu_;  // guards below
  std::condition_variable cv_;
  bool read_asked_ = false;
  int ends_ = 0;
  std::string capture_;  // from `opened`
  uint64_t durable_ = 0;
};

// Every sealed capture reads back whole.
void CheckSealed(const CaptureHub& hub) {
  bool more = false;
  for (const auto& c : hub.List({}, v1::CAPTURE_STATE_FINISHED, "", 1000, &more)) {
    const std::string dir = hub.options().root + "/" + c->name() + "/args_dump";
    if (c->durable().records == 0) continue;  // sealed empty: no files
    auto index = IndexFile::Open(dir + "/" + kIndexName);
    Check(index.ok());
    auto manifest = ManifestReader::Open(dir + "/" + kManifestName);
    Check(manifest.ok());
    uint64_t entries = 0;
    Check((*manifest)->ForEach([&](const ManifestEntry&) { return ++entries, true; }).ok());
    Check(entries == c->durable().records && (*index)->size() == entries);
  }
}

}  // namespace
}  // namespace argsdump

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace argsdump;
  std::vector<v1::IngestRequest> requests = Requests(data, size);
  EmptyFolder(FuzzScratch());
  CaptureHub::Options options;
  options.root = FuzzScratch() + "/root";
  auto hub = CaptureHub::Open(options);
  Check(hub.ok());
  {
    std::unique_ptr<FuzzStream> stream;
    size_t messages = 0;  // in the current stream
    bool ended = false;   // the current stream ended: the rest of it is not sent
    for (v1::IngestRequest& r : requests) {
      if (stream == nullptr || (messages > 0 && r.has_open() && r.open().resume())) {
        // The client goes away, half-closing or cancelling (as the input has it).
        if (stream != nullptr) stream->Leave(/*cancel=*/messages % 2 == 1);
        stream = std::make_unique<FuzzStream>(hub->get());
        messages = 0;
        ended = false;
      }
      ++messages;
      if (!ended) ended = !stream->Deliver(&r);
    }
    if (stream != nullptr) stream->Leave(/*cancel=*/false);
  }
  CheckSealed(**hub);
  hub->reset();
  EmptyFolder(FuzzScratch());
  return 0;
}
