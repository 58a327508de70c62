// IngestSession with no gRPC at all: a transport the test drives, over a
// real CaptureHub on real files under TEST_TMPDIR. Every state and what each
// refuses, sequence gaps and duplicates, oversized and malformed messages,
// pending payloads, ack coalescing, read-ahead, and writer completions and
// network threads racing a cancel. Runs under TSan (no protobuf maps here).
#include "base/files.h"
#include "server/ingest_session.h"

#include <sys/stat.h>

#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/live_query.h"
#include "store/capture_store.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using State = IngestSession::State;

// A status as plain values: a non-OK absl::Status is reference counted in
// Debian's uninstrumented Abseil, which TSan cannot follow across threads.
struct Outcome {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::string message;
};
std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << absl::StatusCodeToString(o.code) << ": " << o.message;
}

// ---- Requests ---------------------------------------------------------------

v1::IngestRequest Open(const std::string& name, bool resume = false) {
  v1::IngestRequest r;
  r.mutable_open()->set_capture(name);
  r.mutable_open()->set_level(v1::DUMP_LEVEL_FULL);
  r.mutable_open()->set_platform("a2a3sim");
  r.mutable_open()->set_resume(resume);
  return r;
}

v1::IngestRequest Finish() {
  v1::IngestRequest r;
  r.mutable_finish()->mutable_device_counters()->set_dropped_records(3);
  r.mutable_finish()->mutable_device_counters()->set_dropped_flush_timeout(3);
  return r;
}

// A float32 tensor record of `elements` elements at args.bin `offset`.
v1::ArgRecord Tensor(uint64_t id, uint32_t elements, uint64_t offset) {
  v1::ArgRecord r;
  r.set_task_id(0x100000000ull + id);
  r.set_role(v1::ROLE_INPUT);
  r.set_stage(v1::STAGE_BEFORE_DISPATCH);
  r.set_kind(v1::KIND_TENSOR);
  r.set_dtype(v1::DTYPE_FLOAT32);
  r.add_shape(elements);
  r.add_strides(1);
  r.set_numel(elements);
  r.set_is_contiguous(true);
  r.set_logical_bytes(uint64_t{elements} * 4);
  r.set_bin_offset(offset);
  r.set_bin_size(uint64_t{elements} * 4);
  return r;
}

// What a client sends: records with 64-byte payloads, ids in order.
class Records {
 public:
  // Records [next, next + n) and their payload bytes, as one batch.
  v1::IngestRequest Batch(int n) {
    v1::IngestRequest r;
    v1::IngestBatch* b = r.mutable_batch();
    b->set_first_record(next_);
    b->set_payload_offset(bytes_.size());
    for (int i = 0; i < n; ++i) {
      *b->add_records() = Tensor(next_, 16, bytes_.size());
      // Unique (each record's index in it): this suite checks args.bin as
      // the stream sent it, which a shared payload would not be.
      std::string payload(64, static_cast<char>('A' + next_ % 50));
      payload.replace(0, 8, absl::StrCat(next_ + 10000000));
      b->mutable_payload()->append(payload);
      bytes_ += payload;
      ++next_;
    }
    return r;
  }
  // Goes back to what the service holds (a resume from its watermark).
  void Rewind(uint64_t records) {
    next_ = records;
    bytes_.resize(records * 64);
  }
  uint64_t next() const { return next_; }
  const std::string& bytes() const { return bytes_; }

 private:
  uint64_t next_ = 0;
  std::string bytes_;
};

// ---- The transport the test drives -------------------------------------------

// One stream: what the session asks is recorded here; the test answers reads
// (as a client's messages or its half-close), completes writes (or lets them
// complete as they are asked, from whichever thread asks), and waits for End.
class Stream final : public IngestSession::Transport {
 public:
  enum class Writes { kCompleteAtOnce, kHeld };

  explicit Stream(CaptureHub* hub, Writes writes = Writes::kCompleteAtOnce) : writes_(writes) {
    session_ = IngestSession::Create(hub, this);
    session_->Start();
  }
  // A stream still running is cancelled (its held writes fail) first.
  ~Stream() override {
    if (!ended()) Cancel();
    WaitForEnd();
    session_->OnTransportGone();
  }

  IngestSession& session() { return *session_; }
  State state() const { return session_->state(); }

  // The client's side.
  bool read_pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_asked_ > reads_answered_;
  }
  // Waits until the session asks for a read (true) or has ended (false: a
  // read still asked then fails, as gRPC's would).
  bool WaitForRead() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return reads_asked_ > reads_answered_ || ended_; });
    return !ended_;
  }
  // A message, once the session asks for one; false if it ended instead.
  bool Write(v1::IngestRequest request) {
    if (!WaitForRead()) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++reads_answered_;
    }
    session_->OnRequest(&request);
    return true;
  }
  // The half-close (or, `broken`, a call that broke), in place of a read.
  void WritesDone(bool broken = false) {
    ASSERT_TRUE(WaitForRead());
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++reads_answered_;
    }
    session_->OnReadsEnded(broken);
  }
  void Cancel() {
    session_->OnCancel();
    // A cancelled call's write in flight fails.
    while (CompleteWrite(false)) {
    }
  }

  // Responses sent so far (complete ones and the one being written).
  std::vector<v1::IngestResponse> responses() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  // Waits until `n` responses were asked (true) or the session ended.
  bool WaitForResponses(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return sent_.size() >= n || ended_; });
    return sent_.size() >= n;
  }
  // Held writes: completes the one in flight, as gRPC would; false if none
  // is (and none can come: the session ended).
  bool CompleteWrite(bool ok = true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return write_in_flight_ || ended_; });
      if (!write_in_flight_) return false;
      write_in_flight_ = false;
    }
    session_->OnSent(ok);
    return true;
  }
  bool write_in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return write_in_flight_;
  }

  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  Outcome WaitForEnd() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ended_; });
    return outcome_;
  }
  int ends() {
    std::lock_guard<std::mutex> lock(mu_);
    return ends_;
  }
  // Runs inside End, at the moment the status goes out.
  void AtEnd(std::function<void()> check) { at_end_ = std::move(check); }
  // The finish grace waits for FireGrace.
  void HoldGrace() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_grace_ = true;
  }
  // Waits until the session started the grace (true) or ended (false).
  bool WaitForGrace() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return graces_ > 0 || ended_; });
    return graces_ > 0;
  }
  void FireGrace() { session_->OnFinishGraceOver(); }
  int graces() {
    std::lock_guard<std::mutex> lock(mu_);
    return graces_;
  }

 private:
  void ReadNext() override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(reads_asked_, reads_answered_) << "two reads at once";
    EXPECT_FALSE(ended_) << "a read after End";
    ++reads_asked_;
    cv_.notify_all();
  }
  void Send(const v1::IngestResponse& response) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      EXPECT_FALSE(write_in_flight_) << "two writes at once";
      EXPECT_FALSE(ended_) << "a write after End";
      sent_.push_back(response);
      write_in_flight_ = writes_ == Writes::kHeld;
      cv_.notify_all();
    }
    if (writes_ == Writes::kCompleteAtOnce) session_->OnSent(true);
  }
  // The grace is over at once (the old rule: a sealed stream ends), unless
  // a test holds it to see what the client does meanwhile.
  void StartFinishGrace(std::chrono::milliseconds grace) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      EXPECT_EQ(grace, IngestSession::kFinishGrace);
      ++graces_;
      cv_.notify_all();
      if (hold_grace_) return;
    }
    session_->OnFinishGraceOver();
  }
  void End(const absl::Status& status) override {
    if (at_end_) at_end_();
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_FALSE(write_in_flight_) << "End with a write in flight";
    ++ends_;
    ended_ = true;
    outcome_ = Outcome{status.code(), std::string(status.message())};
    cv_.notify_all();
  }

  const Writes writes_;
  std::shared_ptr<IngestSession> session_;
  std::function<void()> at_end_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  int reads_asked_ = 0;
  int reads_answered_ = 0;
  bool write_in_flight_ = false;
  std::vector<v1::IngestResponse> sent_;
  bool ended_ = false;
  int ends_ = 0;
  bool hold_grace_ = false;
  int graces_ = 0;
  Outcome outcome_;
};

// Holds a capture's writer thread until Open: the jobs queued behind it wait.
class WriterGate {
 public:
  explicit WriterGate(HubCapture& capture) : state_(std::make_shared<Shared>()) {
    capture.Barrier([state = state_](absl::Status, Watermark) {
      std::unique_lock<std::mutex> lock(state->mu);
      state->cv.wait(lock, [&] { return state->open; });
    });
  }
  ~WriterGate() { Open(); }
  void Open() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->open = true;
    state_->cv.notify_all();
  }

 private:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  std::shared_ptr<Shared> state_;
};

// Waits for every job queued on `capture` so far.
void Drain(HubCapture& capture) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  capture.Barrier([&](absl::Status, Watermark) {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
}

// The durable watermark a response carries (opened or ack).
uint64_t DurableRecords(const v1::IngestResponse& r) {
  return r.has_opened() ? r.opened().durable_records() : r.ack().durable_records();
}

class IngestSessionTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenHub(); }

  void OpenHub(uint64_t max_capture_bytes = 0) {
    hub_.reset();
    CaptureHub::Options o;
    const char* tmp = std::getenv("TEST_TMPDIR");
    o.root = absl::StrCat(tmp ? tmp : "/tmp", "/session_",
                          ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
                          max_capture_bytes);
    o.max_capture_bytes = max_capture_bytes;
    root_ = o.root;
    auto hub = CaptureHub::Open(o);
    ASSERT_TRUE(hub.ok()) << hub.status();
    hub_ = std::move(hub).value();
  }

  std::shared_ptr<HubCapture> Find(const std::string& name) {
    auto c = hub_->Find(name);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }

  // A stream that opened `name` and got `opened`; its durable records.
  uint64_t Opened(Stream& s, const std::string& name, bool resume) {
    EXPECT_TRUE(s.Write(Open(name, resume)));
    EXPECT_TRUE(s.WaitForResponses(1));
    const std::vector<v1::IngestResponse> r = s.responses();
    EXPECT_TRUE(!r.empty() && r[0].has_opened()) << (r.empty() ? "" : r[0].DebugString());
    return r.empty() ? 0 : r[0].opened().durable_records();
  }

  // Sends the batch and waits for the ack that covers it.
  void SendAcked(Stream& s, v1::IngestRequest batch) {
    const uint64_t through = batch.batch().first_record() + batch.batch().records_size();
    ASSERT_TRUE(s.Write(std::move(batch)));
    for (size_t n = 1;; ++n) {
      ASSERT_TRUE(s.WaitForResponses(n)) << s.WaitForEnd();
      const v1::IngestResponse last = s.responses()[n - 1];
      if (last.has_ack() && last.ack().durable_records() >= through) return;
    }
  }

  // Finishes a capture the way a client does, from a resume at its
  // watermark: the rest of `records` up to `total`, then finish.
  void ResumeAndFinish(const std::string& name, Records& records, uint64_t total) {
    Stream s(hub_.get());
    records.Rewind(Opened(s, name, /*resume=*/true));
    if (records.next() < total) SendAcked(s, records.Batch(static_cast<int>(total - records.next())));
    ASSERT_TRUE(s.Write(Finish()));
    const Outcome end = s.WaitForEnd();
    EXPECT_EQ(end.code, absl::StatusCode::kOk) << end;
  }

  // What args.bin and args.index of a finished capture hold.
  void ExpectFinishedWith(const std::string& name, const Records& records) {
    auto c = Find(name);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->finished());
    const std::string dir = root_ + "/" + name + "/args_dump";
    EXPECT_TRUE(ReadFileOrEmpty(dir + "/" + kBinName) == records.bytes());
    auto index = IndexFile::Open(dir + "/" + kIndexName);
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ((*index)->size(), records.next());
    EXPECT_EQ((*index)->counters().dropped_records(), 3u);  // Finish()'s device counters
    struct stat st;
    EXPECT_EQ(::stat((dir + "/" + kManifestName).c_str(), &st), 0);
  }

  std::string root_;
  std::unique_ptr<CaptureHub> hub_;
};

// ---- A whole life ---------------------------------------------------------------

TEST_F(IngestSessionTest, OpenBatchesFinishGoThroughEveryStateToOk) {
  Records records;
  Stream s(hub_.get(), Stream::Writes::kHeld);
  s.HoldGrace();
  EXPECT_EQ(s.state(), State::kAwaitingOpen);
  EXPECT_TRUE(s.read_pending());
  ASSERT_TRUE(s.Write(Open("life")));
  ASSERT_TRUE(s.WaitForResponses(1));  // `opened`, held in flight
  EXPECT_EQ(s.state(), State::kStreaming);
  ASSERT_TRUE(s.responses()[0].has_opened());
  EXPECT_EQ(s.responses()[0].opened().capture(), "life");
  EXPECT_FALSE(s.responses()[0].opened().resumed());
  EXPECT_EQ(s.responses()[0].opened().durable_records(), 0u);
  ASSERT_TRUE(s.Write(records.Batch(10)));
  ASSERT_TRUE(s.CompleteWrite());
  ASSERT_TRUE(s.WaitForResponses(2));
  ASSERT_TRUE(s.responses()[1].has_ack());
  EXPECT_EQ(s.responses()[1].ack().durable_records(), 10u);
  EXPECT_EQ(s.responses()[1].ack().durable_bin_bytes(), 640u);
  ASSERT_TRUE(s.CompleteWrite());
  ASSERT_TRUE(s.Write(Finish()));
  EXPECT_TRUE(s.state() == State::kFinishing || s.state() == State::kEnding) << IngestSession::StateName(s.state());
  ASSERT_TRUE(s.WaitForResponses(3));  // `finished`, held in flight
  ASSERT_TRUE(s.responses()[2].has_finished()) << s.responses()[2].DebugString();
  EXPECT_EQ(s.responses()[2].finished().state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(s.responses()[2].finished().records(), 10u);
  ASSERT_TRUE(s.WaitForGrace());
  EXPECT_EQ(s.state(), State::kFinished);  // the client has not half-closed
  s.FireGrace();
  EXPECT_EQ(s.state(), State::kEnding);  // the status waits for the write
  EXPECT_FALSE(s.ended());
  ASSERT_TRUE(s.CompleteWrite());
  const Outcome end = s.WaitForEnd();
  EXPECT_EQ(end.code, absl::StatusCode::kOk) << end;
  EXPECT_EQ(s.state(), State::kDone);
  EXPECT_EQ(s.ends(), 1);
  EXPECT_EQ(s.session().submitted().records, 10u);
  EXPECT_EQ(s.session().submitted().bin_bytes, 640u);
  ExpectFinishedWith("life", records);
}

// A resume waits for the jobs an earlier stream queued (kOpening) and goes
// on from the capture's watermark.
TEST_F(IngestSessionTest, AResumeOpensOnceTheCapturesEarlierJobsAreDone) {
  Records records;
  {
    Stream first(hub_.get());
    Opened(first, "r", false);
    SendAcked(first, records.Batch(4));
    first.AtEnd([&] { EXPECT_FALSE(Find("r")->attached()) << "let go before the status"; });
    first.WritesDone();
    const Outcome end = first.WaitForEnd();
    EXPECT_EQ(end.code, absl::StatusCode::kFailedPrecondition) << end;
    EXPECT_NE(end.message.find("stays live"), std::string::npos) << end;
  }
  std::shared_ptr<HubCapture> capture = Find("r");
  ASSERT_NE(capture, nullptr);
  EXPECT_FALSE(capture->finished());
  Stream s(hub_.get());
  auto gate = std::make_unique<WriterGate>(*capture);
  ASSERT_TRUE(s.Write(Open("r", /*resume=*/true)));
  EXPECT_EQ(s.state(), State::kOpening);
  EXPECT_FALSE(s.read_pending()) << "nothing is read while opening";
  EXPECT_TRUE(s.responses().empty());
  EXPECT_TRUE(capture->attached());
  gate.reset();  // opens it
  ASSERT_TRUE(s.WaitForResponses(1));
  ASSERT_TRUE(s.responses()[0].has_opened());
  EXPECT_TRUE(s.responses()[0].opened().resumed());
  EXPECT_EQ(s.responses()[0].opened().durable_records(), 4u);
  EXPECT_EQ(s.responses()[0].opened().durable_bin_bytes(), 256u);
  EXPECT_TRUE(s.WaitForRead());
  EXPECT_EQ(s.state(), State::kStreaming);
  SendAcked(s, records.Batch(4));
  ASSERT_TRUE(s.Write(Finish()));
  EXPECT_EQ(s.WaitForEnd().code, absl::StatusCode::kOk);
  EXPECT_EQ(s.session().submitted().records, 8u);
  ExpectFinishedWith("r", records);
}

// ---- What each state refuses ---------------------------------------------------

TEST_F(IngestSessionTest, BeforeOpenOnlyOpenOrAHalfCloseIsTaken) {
  struct Case {
    const char* what;
    v1::IngestRequest request;
    absl::StatusCode code;
    const char* says;
  };
  Records records;
  std::vector<Case> cases = {
      {"batch", records.Batch(2), absl::StatusCode::kFailedPrecondition, "batch before open"},
      {"finish", Finish(), absl::StatusCode::kFailedPrecondition, "finish before open"},
      {"empty", v1::IngestRequest(), absl::StatusCode::kInvalidArgument, "empty request"},
  };
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    Stream s(hub_.get());
    ASSERT_TRUE(s.Write(std::move(c.request)));
    const Outcome end = s.WaitForEnd();
    EXPECT_EQ(end.code, c.code) << end;
    EXPECT_NE(end.message.find(c.says), std::string::npos) << end;
    EXPECT_EQ(s.state(), State::kDone);
    EXPECT_TRUE(s.responses().empty());
  }
  // A client that says nothing and half-closes: OK, nothing is kept.
  Stream quiet(hub_.get());
  quiet.WritesDone();
  const Outcome end = quiet.WaitForEnd();
  EXPECT_EQ(end.code, absl::StatusCode::kOk) << end;
  bool more = false;
  EXPECT_TRUE(hub_->List({}, v1::CAPTURE_STATE_UNSPECIFIED, "", 10, &more).empty());
}

TEST_F(IngestSessionTest, OpenIsRefusedAsTheHubSays) {
  {
    Stream s(hub_.get());
    Opened(s, "taken", false);
    Records records;
    SendAcked(s, records.Batch(1));
    ASSERT_TRUE(s.Write(Open("taken")));  // a second open on the stream
    const Outcome twice = s.WaitForEnd();
    EXPECT_EQ(twice.code, absl::StatusCode::kFailedPrecondition) << twice;
    EXPECT_NE(twice.message.find("open sent twice"), std::string::npos) << twice;
  }
  struct Case {
    v1::IngestRequest open;
    absl::StatusCode code;
  };
  v1::IngestRequest level_off = Open("off");
  level_off.mutable_open()->set_level(v1::DUMP_LEVEL_OFF);
  std::vector<Case> cases = {
      {Open("../escape"), absl::StatusCode::kInvalidArgument},
      {Open(""), absl::StatusCode::kInvalidArgument},
      {level_off, absl::StatusCode::kInvalidArgument},
      {Open("taken"), absl::StatusCode::kAlreadyExists},
      {Open("nobody", /*resume=*/true), absl::StatusCode::kNotFound},
  };
  for (Case& c : cases) {
    SCOPED_TRACE(c.open.open().capture());
    Stream s(hub_.get());
    ASSERT_TRUE(s.Write(std::move(c.open)));
    const Outcome end = s.WaitForEnd();
    EXPECT_EQ(end.code, c.code) << end;
    EXPECT_TRUE(s.responses().empty());
  }
  // One stream at a time: a resume while another stream holds it.
  Stream holder(hub_.get());
  Opened(holder, "taken", /*resume=*/true);
  Stream second(hub_.get());
  ASSERT_TRUE(second.Write(Open("taken", /*resume=*/true)));
  EXPECT_EQ(second.WaitForEnd().code, absl::StatusCode::kAborted);
  EXPECT_TRUE(Find("taken")->attached()) << "the holder keeps it";
}

// After `finish`, anything more is refused - and the finish still seals.
TEST_F(IngestSessionTest, AMessageAfterFinishOrASecondFinishIsRefused) {
  for (const bool second_finish : {false, true}) {
    SCOPED_TRACE(second_finish ? "second finish" : "batch after finish");
    const std::string name = second_finish ? "twice" : "after";
    Records records;
    Stream s(hub_.get());
    Opened(s, name, false);
    SendAcked(s, records.Batch(3));
    std::shared_ptr<HubCapture> capture = Find(name);
    ASSERT_NE(capture, nullptr);
    auto gate = std::make_unique<WriterGate>(*capture);  // the seal waits
    ASSERT_TRUE(s.Write(Finish()));
    EXPECT_EQ(s.state(), State::kFinishing);
    ASSERT_TRUE(s.Write(second_finish ? Finish() : records.Batch(2)));
    EXPECT_EQ(s.state(), State::kReleasing) << "the status waits for the seal";
    EXPECT_FALSE(s.ended());
    s.AtEnd([&] { EXPECT_TRUE(capture->finished()) << "sealed before the status"; });
    gate.reset();
    const Outcome end = s.WaitForEnd();
    EXPECT_EQ(end.code, absl::StatusCode::kFailedPrecondition) << end;
    EXPECT_NE(end.message.find(second_finish ? "finish sent twice" : "a message after finish"),
              std::string::npos)
        << end;
    EXPECT_EQ(capture->durable().records, 3u);  // the finish itself was taken
    records.Rewind(3);
    ExpectFinishedWith(name, records);
    for (const v1::IngestResponse& r : s.responses()) EXPECT_FALSE(r.has_finished());
  }
}

// A half-close after finish is no error: the stream ends OK once sealed.
TEST_F(IngestSessionTest, AHalfCloseAfterFinishWaitsForTheSeal) {
  Records records;
  Stream s(hub_.get());
  Opened(s, "hc", false);
  SendAcked(s, records.Batch(2));
  std::shared_ptr<HubCapture> capture = Find("hc");
  auto gate = std::make_unique<WriterGate>(*capture);
  ASSERT_TRUE(s.Write(Finish()));
  s.WritesDone();
  EXPECT_EQ(s.state(), State::kFinishing);
  EXPECT_FALSE(s.ended());
  gate.reset();
  EXPECT_EQ(s.WaitForEnd().code, absl::StatusCode::kOk);
  ASSERT_FALSE(s.responses().empty());
  EXPECT_TRUE(s.responses().back().has_finished());
  ExpectFinishedWith("hc", records);
}

// Sealed before the client said more: the stream waits (the finish grace)
// for its half-close, so a message after finish is refused however the
// race with the seal went, and a half-close or the grace's end is OK.
TEST_F(IngestSessionTest, ASealedStreamWaitsForTheClientBeforeItEnds) {
  enum class Then { kMessage, kSecondFinish, kHalfClose, kGraceOver };
  for (const Then then : {Then::kMessage, Then::kSecondFinish, Then::kHalfClose, Then::kGraceOver}) {
    const std::string name = absl::StrCat("sealed", static_cast<int>(then));
    SCOPED_TRACE(name);
    Records records;
    Stream s(hub_.get());
    s.HoldGrace();
    Opened(s, name, false);
    SendAcked(s, records.Batch(3));
    ASSERT_TRUE(s.Write(Finish()));
    ASSERT_TRUE(s.WaitForGrace());  // sealed, `finished` sent, the client not heard from
    EXPECT_EQ(s.state(), State::kFinished);
    ASSERT_TRUE(s.responses().back().has_finished());
    EXPECT_TRUE(Find(name)->finished());
    EXPECT_FALSE(s.ended());
    switch (then) {
      case Then::kMessage: ASSERT_TRUE(s.Write(records.Batch(2))); break;
      case Then::kSecondFinish: ASSERT_TRUE(s.Write(Finish())); break;
      case Then::kHalfClose: s.WritesDone(); break;
      case Then::kGraceOver: s.FireGrace(); break;
    }
    const Outcome end = s.WaitForEnd();
    if (then == Then::kMessage || then == Then::kSecondFinish) {
      EXPECT_EQ(end.code, absl::StatusCode::kFailedPrecondition) << end;
      EXPECT_NE(end.message.find(then == Then::kMessage ? "a message after finish"
                                                         : "finish sent twice"),
                std::string::npos)
          << end;
    } else {
      EXPECT_EQ(end.code, absl::StatusCode::kOk) << end;
    }
    s.FireGrace();  // a late grace changes nothing
    EXPECT_EQ(s.ends(), 1);
    EXPECT_EQ(s.graces(), 1);
    records.Rewind(3);  // what a refused batch carried is not stored
    ExpectFinishedWith(name, records);
  }
}

// A client that half-closes before the seal is done starts no grace.
TEST_F(IngestSessionTest, AHalfCloseBeforeTheSealNeedsNoGrace) {
  Records records;
  Stream s(hub_.get());
  s.HoldGrace();
  Opened(s, "early", false);
  SendAcked(s, records.Batch(2));
  auto gate = std::make_unique<WriterGate>(*Find("early"));
  ASSERT_TRUE(s.Write(Finish()));
  s.WritesDone();
  gate.reset();
  EXPECT_EQ(s.WaitForEnd().code, absl::StatusCode::kOk);
  EXPECT_EQ(s.graces(), 0);
}

// ---- Sequence numbers, offsets, records -----------------------------------------

// Each bad batch ends its stream with INVALID_ARGUMENT; nothing of it is
// kept, and the next stream resumes from the same watermark.
TEST_F(IngestSessionTest, GapsDuplicatesAndBadRecordsAreRefusedAndNothingOfThemKept) {
  Records records;
  {
    Stream s(hub_.get());
    Opened(s, "seq", false);
    SendAcked(s, records.Batch(4));
    s.WritesDone();
    s.WaitForEnd();
  }
  struct Case {
    const char* what;
    std::function<void(v1::IngestBatch*)> spoil;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"gap", [](v1::IngestBatch* b) { b->set_first_record(6); }, "batch starts at record 6, expected 4"},
      {"duplicate", [](v1::IngestBatch* b) { b->set_first_record(2); }, "batch starts at record 2, expected 4"},
      {"payload offset", [](v1::IngestBatch* b) { b->set_payload_offset(100); },
       "payload starts at args.bin offset 100, expected 256"},
      {"bin_offset", [](v1::IngestBatch* b) { b->mutable_records(1)->set_bin_offset(8); },
       "has bin_offset 8, expected 320"},
      {"numel", [](v1::IngestBatch* b) { b->mutable_records(0)->set_numel(17); }, "ingest: "},
      {"dtype", [](v1::IngestBatch* b) { b->mutable_records(0)->set_dtype(static_cast<v1::DType>(77)); },
       "ingest: "},
      {"bytes of no record", [](v1::IngestBatch* b) { b->mutable_payload()->append("extra"); },
       "5 payload bytes belong to no record"},
      {"a record too large to ever complete",
       [](v1::IngestBatch* b) {
         v1::ArgRecord* r = b->mutable_records(1);
         const uint32_t elements = static_cast<uint32_t>(IngestStream::kMaxPendingBytes / 4 + 1);
         *r = Tensor(5, elements, r->bin_offset());
       },
       "over the 268435456 bytes a record may carry"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Stream s(hub_.get());
    ASSERT_EQ(Opened(s, "seq", /*resume=*/true), 4u);
    records.Rewind(4);
    v1::IngestRequest bad = records.Batch(3);
    c.spoil(bad.mutable_batch());
    ASSERT_TRUE(s.Write(std::move(bad)));
    const Outcome end = s.WaitForEnd();
    EXPECT_EQ(end.code, absl::StatusCode::kInvalidArgument) << end;
    EXPECT_NE(end.message.find(c.says), std::string::npos) << end;
    EXPECT_EQ(s.session().submitted().records, 4u);
    EXPECT_EQ(Find("seq")->durable().records, 4u);
    EXPECT_FALSE(Find("seq")->attached());
  }
  ResumeAndFinish("seq", records, 9);
  ExpectFinishedWith("seq", records);
}

// Payload bytes held for records not complete yet are bounded.
TEST_F(IngestSessionTest, PendingPayloadBytesPastTheBoundAreResourceExhausted) {
  Stream s(hub_.get());
  Opened(s, "pend", false);
  const uint64_t half = IngestStream::kMaxPendingBytes / 4;  // elements of a kMax-byte tensor
  v1::IngestRequest first;
  first.mutable_batch()->set_first_record(0);
  first.mutable_batch()->set_payload_offset(0);
  *first.mutable_batch()->add_records() = Tensor(0, static_cast<uint32_t>(half), 0);
  *first.mutable_batch()->add_records() =
      Tensor(1, static_cast<uint32_t>(half), IngestStream::kMaxPendingBytes);
  first.mutable_batch()->mutable_payload()->assign(IngestStream::kMaxPendingBytes - 1, 'p');
  ASSERT_TRUE(s.Write(std::move(first)));  // all of it pending: one byte short
  v1::IngestRequest more;
  more.mutable_batch()->set_first_record(2);
  more.mutable_batch()->set_payload_offset(IngestStream::kMaxPendingBytes - 1);
  more.mutable_batch()->set_payload("pp");
  ASSERT_TRUE(s.Write(std::move(more)));
  const Outcome end = s.WaitForEnd();
  EXPECT_EQ(end.code, absl::StatusCode::kResourceExhausted) << end;
  EXPECT_NE(end.message.find("waiting for their record to complete"), std::string::npos) << end;
  EXPECT_EQ(s.session().submitted().records, 0u);
}

// A record's payload may come over several batches: it goes to the writer
// (and is acked) once its last byte is here; a finish with one still
// waiting is refused.
TEST_F(IngestSessionTest, PendingPayloadsWaitForTheirLastByte) {
  Stream s(hub_.get());
  Opened(s, "split", false);
  std::string bytes;
  for (int i = 0; i < 3 * 64; ++i) bytes.push_back(static_cast<char>(i));
  v1::IngestRequest first;
  first.mutable_batch()->set_first_record(0);
  first.mutable_batch()->set_payload_offset(0);
  for (int i = 0; i < 3; ++i) *first.mutable_batch()->add_records() = Tensor(i, 16, 64 * i);
  first.mutable_batch()->set_payload(bytes.substr(0, 100));  // record 0 and 36 bytes of 1
  ASSERT_TRUE(s.Write(std::move(first)));
  ASSERT_TRUE(s.WaitForResponses(2));
  ASSERT_TRUE(s.responses()[1].has_ack());
  EXPECT_EQ(s.responses()[1].ack().durable_records(), 1u);
  EXPECT_EQ(s.responses()[1].ack().durable_bin_bytes(), 64u);
  EXPECT_EQ(s.session().submitted().records, 1u);
  v1::IngestRequest rest;
  rest.mutable_batch()->set_first_record(3);
  rest.mutable_batch()->set_payload_offset(100);
  rest.mutable_batch()->set_payload(bytes.substr(100, 60));  // 1 completes, 2 has 32 of 64
  ASSERT_TRUE(s.Write(std::move(rest)));
  ASSERT_TRUE(s.WaitForResponses(3));
  EXPECT_EQ(s.responses()[2].ack().durable_records(), 2u);
  EXPECT_EQ(s.responses()[2].ack().durable_bin_bytes(), 128u);
  ASSERT_TRUE(s.Write(Finish()));
  const Outcome end = s.WaitForEnd();
  EXPECT_EQ(end.code, absl::StatusCode::kInvalidArgument) << end;
  EXPECT_NE(end.message.find("finished with 1 records still missing payload bytes"),
            std::string::npos)
      << end;
  std::shared_ptr<HubCapture> capture = Find("split");
  EXPECT_FALSE(capture->finished());
  EXPECT_EQ(capture->durable().records, 2u);
  EXPECT_TRUE(ReadFileOrEmpty(root_ + "/split/args_dump/" + kBinName) == bytes.substr(0, 128));
}

// ---- Acks, read-ahead, the writer's refusals -------------------------------------

// While a write is in flight, acks coalesce: N batches made durable behind
// it cost one ack, carrying the newest watermark; with writes completing at
// once, each batch gets its own.
TEST_F(IngestSessionTest, AcksCoalesceWhileAWriteIsInFlight) {
  Records records;
  Stream s(hub_.get(), Stream::Writes::kHeld);
  ASSERT_TRUE(s.Write(Open("acks")));
  ASSERT_TRUE(s.WaitForResponses(1));  // `opened`, held
  std::shared_ptr<HubCapture> capture = Find("acks");
  constexpr int kBatches = 10;
  for (int b = 0; b < kBatches; ++b) ASSERT_TRUE(s.Write(records.Batch(3)));
  ASSERT_TRUE(s.WaitForRead());  // the last batch is on the writer's queue
  Drain(*capture);               // and every append is done
  EXPECT_EQ(capture->durable().records, 3u * kBatches);
  EXPECT_EQ(s.responses().size(), 1u) << "acks wait behind the write in flight";
  ASSERT_TRUE(s.CompleteWrite());
  ASSERT_TRUE(s.WaitForResponses(2));
  ASSERT_TRUE(s.CompleteWrite());
  const std::vector<v1::IngestResponse> coalesced = s.responses();
  ASSERT_EQ(coalesced.size(), 2u) << "ten batches, one ack";
  EXPECT_EQ(coalesced[1].ack().durable_records(), 3u * kBatches);
  EXPECT_EQ(coalesced[1].ack().durable_bin_bytes(), 3u * kBatches * 64);
  EXPECT_FALSE(s.write_in_flight());
  // No write in flight: the next batch's ack goes out on its own.
  ASSERT_TRUE(s.Write(records.Batch(3)));
  ASSERT_TRUE(s.WaitForResponses(3));
  ASSERT_TRUE(s.CompleteWrite());
  EXPECT_EQ(s.responses()[2].ack().durable_records(), 3u * kBatches + 3);
  ASSERT_TRUE(s.Write(Finish()));
  ASSERT_TRUE(s.CompleteWrite());  // `finished`
  EXPECT_EQ(s.WaitForEnd().code, absl::StatusCode::kOk);
  // With writes completing at once and each ack awaited: one per batch.
  Stream each(hub_.get());
  Opened(each, "each", false);
  Records more;
  for (int b = 0; b < kBatches; ++b) SendAcked(each, more.Batch(3));
  EXPECT_EQ(each.responses().size(), 1u + kBatches);
  for (int b = 0; b < kBatches; ++b) {
    EXPECT_EQ(DurableRecords(each.responses()[1 + b]), 3u * (b + 1));
  }
}

// Over kReadAheadBytes handed to the writer and not durable: no read is
// asked until an append completes.
TEST_F(IngestSessionTest, ReadsPauseWhileTooMuchWaitsForTheWriter) {
  Stream s(hub_.get());
  Opened(s, "ahead", false);
  std::shared_ptr<HubCapture> capture = Find("ahead");
  auto gate = std::make_unique<WriterGate>(*capture);
  const uint64_t big = IngestSession::kReadAheadBytes + 4;
  v1::IngestRequest r;
  r.mutable_batch()->set_first_record(0);
  r.mutable_batch()->set_payload_offset(0);
  *r.mutable_batch()->add_records() = Tensor(0, static_cast<uint32_t>(big / 4), 0);
  r.mutable_batch()->mutable_payload()->assign(big, 'r');
  ASSERT_TRUE(s.Write(std::move(r)));
  EXPECT_FALSE(s.read_pending()) << "reading paused";
  EXPECT_EQ(s.state(), State::kStreaming);
  gate.reset();
  ASSERT_TRUE(s.WaitForRead());  // resumed by the append's completion
  ASSERT_TRUE(s.WaitForResponses(2));
  EXPECT_EQ(s.responses()[1].ack().durable_bin_bytes(), big);
  ASSERT_TRUE(s.Write(Finish()));
  EXPECT_EQ(s.WaitForEnd().code, absl::StatusCode::kOk);
}

// A job the writer refuses (the quota) ends the stream with its status;
// the capture keeps what it had, and submitted() says what was refused.
TEST_F(IngestSessionTest, AJobTheWriterRefusesEndsTheStreamWithItsStatus) {
  OpenHub(/*max_capture_bytes=*/64 * 5);
  Records records;
  Stream s(hub_.get());
  Opened(s, "quota", false);
  SendAcked(s, records.Batch(4));
  ASSERT_TRUE(s.Write(records.Batch(4)));
  const Outcome end = s.WaitForEnd();
  EXPECT_EQ(end.code, absl::StatusCode::kResourceExhausted) << end;
  EXPECT_NE(end.message.find("over the server's quota of 320 bytes"), std::string::npos) << end;
  EXPECT_EQ(s.session().submitted().records, 8u);
  std::shared_ptr<HubCapture> capture = Find("quota");
  EXPECT_EQ(capture->durable().records, 4u);
  EXPECT_FALSE(capture->attached());
  EXPECT_FALSE(capture->finished());
}

// ---- Ends that leave the capture live ---------------------------------------

TEST_F(IngestSessionTest, AHalfCloseWithoutFinishLetsTheCaptureGoBeforeTheStatus) {
  Records records;
  Stream s(hub_.get());
  Opened(s, "half", false);
  SendAcked(s, records.Batch(5));
  s.AtEnd([&] {
    std::shared_ptr<HubCapture> c = Find("half");
    EXPECT_FALSE(c->attached());
    EXPECT_FALSE(c->finished());
    EXPECT_EQ(c->durable().records, 5u);
  });
  s.WritesDone();
  const Outcome end = s.WaitForEnd();
  EXPECT_EQ(end.code, absl::StatusCode::kFailedPrecondition) << end;
  EXPECT_NE(end.message.find("capture half stays live (resume it and send finish)"),
            std::string::npos)
      << end;
  ResumeAndFinish("half", records, 8);
  ExpectFinishedWith("half", records);
}

TEST_F(IngestSessionTest, AnOpenThatWroteNoRecordLeavesNoCapture) {
  for (const bool cancel : {false, true}) {
    SCOPED_TRACE(cancel ? "cancelled" : "half-closed");
    {
      Stream s(hub_.get());
      Opened(s, "orphan", false);
      s.AtEnd([&] {
        EXPECT_EQ(hub_->Find("orphan").status().code(), absl::StatusCode::kNotFound)
            << "dropped before the status";
      });
      if (cancel) {
        s.Cancel();
      } else {
        s.WritesDone();
      }
      EXPECT_NE(s.WaitForEnd().code, absl::StatusCode::kOk);
    }
    struct stat st;
    EXPECT_NE(::stat((root_ + "/orphan/args_dump/" + kJournalName).c_str(), &st), 0);
  }
  // A resume cancelled while opening (its Barrier still queued): no
  // `opened`, and the capture - not this stream's - is kept.
  Stream first(hub_.get());
  Opened(first, "slow", false);
  Records records;
  SendAcked(first, records.Batch(1));
  first.WritesDone();
  first.WaitForEnd();
  Stream resumed(hub_.get());
  auto gate = std::make_unique<WriterGate>(*Find("slow"));
  ASSERT_TRUE(resumed.Write(Open("slow", /*resume=*/true)));
  ASSERT_EQ(resumed.state(), State::kOpening);
  resumed.session().OnCancel();
  EXPECT_EQ(resumed.state(), State::kReleasing) << "the status waits for the capture's jobs";
  gate.reset();
  EXPECT_EQ(resumed.WaitForEnd().code, absl::StatusCode::kCancelled);
  EXPECT_TRUE(resumed.responses().empty()) << "no `opened` after the end";
  EXPECT_EQ(Find("slow")->durable().records, 1u) << "a resumed capture is kept";
}

TEST_F(IngestSessionTest, CancelMidStreamKeepsWhatWasAckedAndResumes) {
  Records records;
  Stream s(hub_.get());
  Opened(s, "cut", false);
  SendAcked(s, records.Batch(6));
  ASSERT_TRUE(s.Write(records.Batch(6)));  // maybe durable, maybe not yet
  s.AtEnd([&] { EXPECT_FALSE(Find("cut")->attached()); });
  s.Cancel();
  const Outcome end = s.WaitForEnd();
  EXPECT_EQ(end.code, absl::StatusCode::kCancelled) << end;
  EXPECT_EQ(end.message, "ingest stream cancelled");
  // Every job it queued was done before the status: durable is all of it.
  EXPECT_EQ(Find("cut")->durable().records, s.session().submitted().records);
  EXPECT_EQ(s.session().submitted().records, 12u);
  ASSERT_FALSE(s.Write(records.Batch(1))) << "no read after the end";
  ResumeAndFinish("cut", records, 20);
  ExpectFinishedWith("cut", records);
}

TEST_F(IngestSessionTest, AFailedWriteEndsTheStreamAsBroken) {
  Records records;
  Stream s(hub_.get(), Stream::Writes::kHeld);
  ASSERT_TRUE(s.Write(Open("broke")));
  ASSERT_TRUE(s.CompleteWrite());  // `opened`
  ASSERT_TRUE(s.Write(records.Batch(2)));
  ASSERT_TRUE(s.WaitForResponses(2));
  ASSERT_TRUE(s.Write(records.Batch(2)));
  ASSERT_TRUE(s.CompleteWrite(/*ok=*/false));  // the client is gone
  const Outcome end = s.WaitForEnd();
  EXPECT_EQ(end.code, absl::StatusCode::kCancelled) << end;
  EXPECT_EQ(end.message, "ingest stream broke");
  EXPECT_EQ(Find("broke")->durable().records, 4u);
  ResumeAndFinish("broke", records, 4);
  ExpectFinishedWith("broke", records);
}

// ---- Threads ----------------------------------------------------------------

// Writer completions (acks on the capture's writer thread), writes completed
// by a "network" thread, the client's batches and a cancel from a third
// thread, all at once: one End, CANCELLED, after the capture was let go,
// with every queued job durable; the next stream resumes from there.
TEST_F(IngestSessionTest, WriterCompletionsRaceACancel) {
  for (const int cancel_after_acks : {0, 1, 3, 8, 20}) {
    SCOPED_TRACE(cancel_after_acks);
    const std::string name = absl::StrCat("race", cancel_after_acks);
    Records records;
    uint64_t submitted = 0;
    {
      Stream s(hub_.get(), Stream::Writes::kHeld);
      std::thread network([&] {
        while (s.CompleteWrite()) {
        }
      });
      std::thread canceller([&] {
        s.WaitForResponses(1 + cancel_after_acks);
        s.session().OnCancel();
      });
      s.AtEnd([&] {
        auto c = hub_->Find(name);  // gone if no record came before the cancel
        EXPECT_TRUE(!c.ok() || !(*c)->attached());
      });
      ASSERT_TRUE(s.Write(Open(name)));
      for (int b = 0; b < 200 && s.Write(records.Batch(2)); ++b) {
      }
      // A client that wrote all 200 first cancels too (a second cancel).
      s.session().OnCancel();
      const Outcome end = s.WaitForEnd();
      canceller.join();
      network.join();
      EXPECT_EQ(end.code, absl::StatusCode::kCancelled) << end;
      EXPECT_EQ(s.ends(), 1);
      submitted = s.session().submitted().records;
      auto c = hub_->Find(name);
      EXPECT_EQ(c.ok() ? (*c)->durable().records : 0, submitted);
      for (const v1::IngestResponse& r : s.responses()) {
        EXPECT_LE(DurableRecords(r), submitted);
      }
    }
    if (hub_->Find(name).ok()) {
      ResumeAndFinish(name, records, 400);
    } else {  // dropped (no record came before the cancel): a new one
      records.Rewind(0);
      Stream fresh(hub_.get());
      Opened(fresh, name, false);
      SendAcked(fresh, records.Batch(400));
      ASSERT_TRUE(fresh.Write(Finish()));
      EXPECT_EQ(fresh.WaitForEnd().code, absl::StatusCode::kOk);
    }
    ExpectFinishedWith(name, records);
  }
}

// Many streams at once on one hub, each its own capture, writes completed
// at once from whichever thread sends them.
TEST_F(IngestSessionTest, ConcurrentStreamsOnOneHub) {
  constexpr int kStreams = 6;
  std::vector<std::thread> clients;
  std::vector<Records> records(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      Stream s(hub_.get());
      Opened(s, absl::StrCat("c", i), false);
      for (int b = 0; b < 30; ++b) ASSERT_TRUE(s.Write(records[i].Batch(5)));
      ASSERT_TRUE(s.Write(Finish()));
      const Outcome end = s.WaitForEnd();
      EXPECT_EQ(end.code, absl::StatusCode::kOk) << end;
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kStreams; ++i) ExpectFinishedWith(absl::StrCat("c", i), records[i]);
}

}  // namespace
}  // namespace argsdump
