// CaptureHub without gRPC: the writer thread, readers on other threads while
// it appends and finishes, watchers, attach rules, quota, reload. Runs under
// TSan (the gRPC tests cannot: Debian's gRPC is not instrumented).
#include "server/capture_hub.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <limits>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/files.h"
#include "base/thread.h"
#include "gtest/gtest.h"
#include "server/capture_hub_testing.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

std::string Root(const std::string& name) { return TempPath("hub_" + name); }

// The capture keeps the client's clock; the server's offset from it is
// measured against the client's wall clock sent with the open (here a
// client whose clock reads 0: the offset is the server's whole wall clock).
TEST(CaptureHubTest, OpenKeepsTheClockAndMeasuresTheServersOffset) {
  CaptureHub::Options o;
  o.root = Root("clock");
  auto hub = CaptureHub::Open(o);
  ASSERT_TRUE(hub.ok()) << hub.status();
  v1::IngestOpen open = OpenRequest("timed");
  open.mutable_clock()->set_base_monotonic_ns(123);
  open.mutable_clock()->set_base_unix_ns(456);
  open.mutable_clock()->set_host("rank-host");
  open.set_client_unix_ns(1);
  auto timed = (*hub)->Open(open);
  ASSERT_TRUE(timed.ok()) << timed.status();
  const v1::CaptureClock clock = (*timed)->Clock();
  EXPECT_EQ(clock.base_monotonic_ns(), 123);
  EXPECT_EQ(clock.base_unix_ns(), 456);
  EXPECT_EQ(clock.host(), "rank-host");
  EXPECT_TRUE(clock.has_server_offset());
  EXPECT_GT(clock.server_offset_ns(), 0);
  // No clock sent: none kept, no offset.
  auto plain = (*hub)->Open(OpenRequest("plain"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE((*plain)->Clock().has_server_offset());
  EXPECT_EQ((*plain)->Clock().base_unix_ns(), 0);
}

TEST(CaptureHubTest, ReadersAndWatchersRunWhileTheWriterAppendsAndFinishes) {
  CaptureHub::Options o;
  o.root = Root("concurrent");
  auto hub = CaptureHub::Open(o);
  ASSERT_TRUE(hub.ok()) << hub.status();
  auto capture = (*hub)->Open(OpenRequest("c"));
  ASSERT_TRUE(capture.ok()) << capture.status();
  std::shared_ptr<HubCapture> c = *capture;
  std::atomic<uint64_t> pokes{0};
  const uint64_t watcher = c->AddWatcher([&] { pokes.fetch_add(1); });
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      while (!stop.load()) {
        ArgFilter q;
        q.task_id = 1000 + (reads.load() % 400);
        const QueryPage page = c->Query(q, 0, 10, 1000);
        for (const QueryHit& h : page.hits) EXPECT_EQ(h.row.task_id, *q.task_id);
        const Watermark w = c->durable();
        if (w.records > 0) {
          EXPECT_TRUE(c->RecordById(w.records - 1).has_value());
        }
        ArgFilter scalars;
        scalars.kind = v1::KIND_SCALAR;
        const auto hits = c->ByArrival(scalars, 0, w.records);
        EXPECT_EQ(hits.size(), w.records / 2);
        c->Summary();
        reads.fetch_add(1 + r);
      }
    });
  }
  Waiter waiter;
  uint64_t bin = 0;
  for (int j = 0; j < 40; ++j) c->Append(Job(j * 20, 1000 + j * 10, 10, &bin), waiter.Callback());
  c->Finish(v1::CaptureCounters(), waiter.Callback());
  for (const Outcome& s : waiter.Wait()) EXPECT_TRUE(s.ok()) << s;
  stop = true;
  for (auto& t : readers) t.join();
  c->RemoveWatcher(watcher);
  EXPECT_TRUE(c->finished());
  EXPECT_GE(pokes.load(), 2u);
  EXPECT_EQ(c->durable().records, 800u);
  EXPECT_EQ(c->durable().bin_bytes, 400u * 64);
  ArgFilter q;
  q.task_id = 1005;
  const QueryPage page = c->Query(q, 0, 10, 1000);
  ASSERT_EQ(page.hits.size(), 2u);
  EXPECT_EQ(page.hits[0].row.kind, v1::KIND_TENSOR);
  const v1::CaptureSummary s = c->Summary();
  EXPECT_EQ(s.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(s.counters().total_args(), 800u);
  // Work queued after the finish is refused, not lost silently.
  Waiter late;
  uint64_t b2 = bin;
  c->Append(Job(800, 5000, 1, &b2), late.Callback());
  EXPECT_EQ(late.Wait()[0].code, absl::StatusCode::kFailedPrecondition);
}

TEST(CaptureHubTest, OneStreamAtATimeAndResumeFromTheWatermark) {
  CaptureHub::Options o;
  o.root = Root("attach");
  auto hub = std::move(CaptureHub::Open(o)).value();
  auto c = std::move(hub->Open(OpenRequest("a")).value());
  EXPECT_EQ(hub->Open(OpenRequest("a")).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(hub->Open(OpenRequest("a", true)).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(hub->Open(OpenRequest("b", true)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(hub->Open(OpenRequest("../a")).status().code(), absl::StatusCode::kInvalidArgument);
  Waiter w;
  uint64_t bin = 0;
  c->Append(Job(0, 1, 5, &bin), w.Callback());
  c->Append(Job(10, 6, 5, &bin), w.Callback());
  w.Wait();
  c->Detach();
  auto again = hub->Open(OpenRequest("a", true));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->durable().records, 20u);
  // A job that does not start at the watermark is refused.
  Waiter bad;
  uint64_t b2 = 0;
  c->Append(Job(5, 1, 1, &b2), bad.Callback());
  EXPECT_EQ(bad.Wait()[0].code, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->durable().records, 20u);
}

TEST(CaptureHubTest, QuotaRefusesTheBatchAndKeepsTheCapture) {
  CaptureHub::Options o;
  o.root = Root("quota");
  o.max_capture_bytes = 64 * 7;
  auto hub = std::move(CaptureHub::Open(o)).value();
  auto c = std::move(hub->Open(OpenRequest("q")).value());
  Waiter w;
  uint64_t bin = 0;
  c->Append(Job(0, 1, 5, &bin), w.Callback());  // 320 bytes
  c->Append(Job(10, 6, 5, &bin), w.Callback());  // 640 > 448
  const auto s = w.Wait();
  EXPECT_TRUE(s[0].ok());
  EXPECT_EQ(s[1].code, absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s[1].message.find("would grow to 640 bytes, over the server's quota of 448"),
            std::string::npos)
      << s[1];
  EXPECT_EQ(c->durable().records, 10u);
  EXPECT_EQ(c->durable().bin_bytes, 320u);
}

// A hub that goes away (a server restart) leaves its live captures live:
// the next one lists them live and detached, and a stream resumes them
// from the durable watermark to a clean finish.
TEST(CaptureHubTest, ReopeningTheRootKeepsLiveCapturesLive) {
  CaptureHub::Options o;
  o.root = Root("reopen");
  uint64_t bin = 0;
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    auto c = std::move(hub->Open(OpenRequest("kept")).value());
    Waiter w;
    c->Append(Job(0, 1, 3, &bin), w.Callback());
    w.Wait();
  }
  auto hub = std::move(CaptureHub::Open(o)).value();
  auto c = hub->Find("kept");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE((*c)->finished());
  EXPECT_FALSE((*c)->attached());
  EXPECT_EQ((*c)->durable().records, 6u);
  EXPECT_EQ((*c)->durable().bin_bytes, 3u * 64);
  EXPECT_EQ((*c)->Summary().labels().at("case"), "hub");
  EXPECT_TRUE((*c)->RecordById(5).has_value());
  bool more = false;
  EXPECT_EQ(hub->List({{"case", "hub"}}, v1::CAPTURE_STATE_LIVE, "", 10, &more).size(), 1u);
  EXPECT_TRUE(hub->List({{"case", "other"}}, v1::CAPTURE_STATE_UNSPECIFIED, "", 10, &more).empty());
  // A new stream opens it fresh: refused. Resumed: it goes on.
  EXPECT_EQ(hub->Open(OpenRequest("kept")).status().code(), absl::StatusCode::kAlreadyExists);
  auto resumed = hub->Open(OpenRequest("kept", true));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  Waiter w;
  (*resumed)->Append(Job(6, 4, 2, &bin), w.Callback());
  (*resumed)->Finish(v1::CaptureCounters(), w.Callback());
  for (const Outcome& out : w.Wait()) EXPECT_TRUE(out.ok()) << out;
  EXPECT_TRUE((*c)->finished());
  EXPECT_EQ((*c)->durable().records, 10u);
  EXPECT_FALSE((*c)->Summary().recovered());
}

// A server that went away as a capture was being created leaves its
// journal empty, or its folder without one: nothing of it was acknowledged, so the next start drops it
// (a resume opens it anew) instead of serving it as damaged; a journal
// with a damaged header and more after it is still damage.
TEST(CaptureHubTest, AnEmptyJournalIsACaptureNeverStartedNotDamage) {
  CaptureHub::Options o;
  o.root = Root("empty_journal");
  uint64_t bin = 0;
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    auto c = std::move(hub->Open(OpenRequest("kept")).value());
    Waiter w;
    c->Append(Job(0, 1, 3, &bin), w.Callback());
    w.Wait();
  }
  ASSERT_TRUE(CreateDirectories(o.root + "/unborn/args_dump").ok());
  ASSERT_TRUE(WriteStringToFile(o.root + "/unborn/args_dump/args.journal", "").ok());
  ASSERT_TRUE(CreateDirectories(o.root + "/folder_only/args_dump").ok());
  ASSERT_TRUE(CreateDirectories(o.root + "/scrambled/args_dump").ok());
  ASSERT_TRUE(
      WriteStringToFile(o.root + "/scrambled/args_dump/args.journal", std::string(200, 'x')).ok());
  auto hub = std::move(CaptureHub::Open(o)).value();
  EXPECT_EQ(hub->Find("unborn").status().code(), absl::StatusCode::kNotFound);
  struct stat st;
  EXPECT_NE(::stat((o.root + "/unborn").c_str(), &st), 0) << "its folder is left";
  EXPECT_EQ(hub->Find("folder_only").status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(::stat((o.root + "/folder_only").c_str(), &st), 0) << "its folder is left";
  EXPECT_EQ(hub->Find("scrambled").status().code(), absl::StatusCode::kDataLoss);
  auto kept = hub->Find("kept");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ((*kept)->durable().records, 6u);
  // Its client's resume finds nothing; a new open makes it again.
  EXPECT_EQ(hub->Open(OpenRequest("unborn", true)).status().code(), absl::StatusCode::kNotFound);
  auto again = hub->Open(OpenRequest("unborn"));
  ASSERT_TRUE(again.ok()) << again.status();
  Waiter w;
  uint64_t fresh = 0;
  (*again)->Append(Job(0, 1, 2, &fresh), w.Callback());
  (*again)->Finish(v1::CaptureCounters(), w.Callback());
  for (const Outcome& out : w.Wait()) EXPECT_TRUE(out.ok()) << out;
  EXPECT_EQ((*again)->durable().records, 4u);
}

// A live capture nobody comes back to is sealed after the idle timeout (a
// watcher sees it end); an explicit finish does the same at once; neither
// touches a capture a stream is attached to.
TEST(CaptureHubTest, IdleLiveCapturesAreSealedAndExplicitFinishWorks) {
  CaptureHub::Options o;
  o.root = Root("idle");
  o.live_idle_timeout = absl::Milliseconds(50);
  auto hub = std::move(CaptureHub::Open(o)).value();
  auto idle = std::move(hub->Open(OpenRequest("idle")).value());
  auto busy = std::move(hub->Open(OpenRequest("busy")).value());
  {
    Waiter w;
    uint64_t bin = 0;
    idle->Append(Job(0, 1, 2, &bin), w.Callback());
    uint64_t bin2 = 0;
    busy->Append(Job(0, 1, 2, &bin2), w.Callback());
    w.Wait();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool sealed = false;
  const uint64_t watcher = idle->AddWatcher([&] {
    std::lock_guard<std::mutex> lock(mu);
    if (idle->finished()) sealed = true;
    cv.notify_all();
  });
  idle->Detach();  // its stream went away
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return sealed; });
  }
  idle->RemoveWatcher(watcher);
  EXPECT_TRUE(idle->finished());
  EXPECT_EQ(idle->durable().records, 4u);
  EXPECT_FALSE(busy->finished());  // attached: never sealed by the timeout
  // FinishCapture: refused while attached, done once detached.
  Waiter none;
  EXPECT_EQ(hub->FinishDetached("busy", none.Callback()).code(),
            absl::StatusCode::kFailedPrecondition);
  busy->Detach();
  Waiter w;
  ASSERT_TRUE(hub->FinishDetached("busy", w.Callback()).ok());
  // Sealed as it was checked: a resume that comes in now is refused, not
  // attached to a capture on its way to finished.
  EXPECT_EQ(busy->Attach().code(), absl::StatusCode::kFailedPrecondition);
  for (const Outcome& out : w.Wait()) EXPECT_TRUE(out.ok()) << out;
  EXPECT_TRUE(busy->finished());
  EXPECT_EQ(busy->SealIfDetached(none.Callback()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(hub->FinishDetached("busy", none.Callback()).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A finished capture whose args.index was damaged on disk: rebuilt from the
// journal at startup (and served as before); without a journal, served as
// DATA_LOSS naming the file and the byte -- never read.
TEST(CaptureHubTest, ADamagedIndexIsRebuiltOrRefused) {
  CaptureHub::Options o;
  o.root = Root("damaged_index");
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    for (const char* name : {"with_journal", "without_journal"}) {
      auto c = std::move(hub->Open(OpenRequest(name)).value());
      Waiter w;
      uint64_t bin = 0;
      c->Append(Job(0, 1, 4, &bin), w.Callback());
      c->Finish(v1::CaptureCounters(), w.Callback());
      w.Wait();
    }
  }
  for (const char* name : {"with_journal", "without_journal"}) {
    const std::string index = o.root + "/" + name + "/args_dump/args.index";
    std::FILE* f = std::fopen(index.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, -40, SEEK_END);  // into the position[] array
    const std::string ff(24, '\xff');
    std::fwrite(ff.data(), 1, ff.size(), f);
    std::fclose(f);
  }
  ASSERT_EQ(std::remove((o.root + "/without_journal/args_dump/args.journal").c_str()), 0);
  auto hub = std::move(CaptureHub::Open(o)).value();
  auto rebuilt = hub->Find("with_journal");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ((*rebuilt)->durable().records, 8u);
  for (uint64_t id = 0; id < 8; ++id) EXPECT_TRUE((*rebuilt)->RecordById(id).has_value());
  ArgFilter q;
  q.task_id = 3;
  EXPECT_EQ((*rebuilt)->Query(q, 0, 10, 100).hits.size(), 2u);
  auto refused = hub->Find("without_journal");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(refused.status().message().find("args.index: byte "), std::string::npos)
      << refused.status();
  // It is still listed (a dashboard sees it), and cannot be resumed.
  bool more = false;
  EXPECT_EQ(hub->List({}, v1::CAPTURE_STATE_UNSPECIFIED, "", 10, &more).size(), 2u);
  EXPECT_EQ(hub->Open(OpenRequest("without_journal", true)).status().code(),
            absl::StatusCode::kDataLoss);
}

// A job's callback may hold the last reference to its capture (a stream
// let go of an unwritten capture the hub forgot): the capture then goes on
// its own writer thread, which cannot join itself - it is let go, and the
// jobs still queued are answered.
TEST(CaptureHubTest, TheLastReferenceMayGoOnTheCapturesWriterThread) {
  CaptureHub::Options o;
  o.root = Root("last_on_writer");
  auto hub = CaptureHub::Open(o);
  ASSERT_TRUE(hub.ok()) << hub.status();
  auto opened = (*hub)->Open(OpenRequest("short_lived"));
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<HubCapture> c = std::move(opened).value();
  std::weak_ptr<HubCapture> weak = c;
  // The writer waits at a gate while the jobs behind it are queued.
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  c->Barrier([&](absl::Status, Watermark) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  });
  c->Barrier([keep = c](absl::Status, Watermark) {});  // holds a reference
  Waiter after;
  c->Barrier(after.Callback());
  c->Detach();
  (*hub)->Forget(c);
  EXPECT_EQ((*hub)->Find("short_lived").status().code(), absl::StatusCode::kNotFound);
  c.reset();  // the job above holds the last reference now
  {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
  }
  cv.notify_all();
  const std::vector<Outcome> answered = after.Wait();
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_EQ(answered[0].code, absl::StatusCode::kFailedPrecondition) << answered[0];
  EXPECT_NE(answered[0].message.find("capture short_lived is gone"), std::string::npos)
      << answered[0];
  EXPECT_TRUE(weak.expired());
}

// A finished capture of `n` tasks under `hub`'s root, its manifest dated
// `age` ago (retention orders and ages captures by it).
void FinishedCapture(CaptureHub* hub, const std::string& name, int n,
                     std::chrono::seconds age) {
  auto c = std::move(hub->Open(OpenRequest(name)).value());
  Waiter w;
  uint64_t bin = 0;
  c->Append(Job(0, 1, n, &bin), w.Callback());
  w.Wait();
  c->Detach();
  Waiter f;
  ASSERT_TRUE(hub->FinishDetached(name, f.Callback()).ok());
  for (const Outcome& out : f.Wait()) ASSERT_TRUE(out.ok()) << out;
  const std::string manifest = hub->options().root + "/" + name + "/args_dump/args_dump.json";
  const auto when = std::chrono::system_clock::now() - age;
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = std::chrono::system_clock::to_time_t(when);
  times[0].tv_nsec = times[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, manifest.c_str(), times, 0), 0);
}

// Over --max_total_bytes, the oldest finished captures go first, only as
// many as needed, never a live one; with only live ones left a new capture
// is ResourceExhausted with the numbers. Sizes are the files' blocks.
TEST(CaptureHubTest, RetentionEvictsTheOldestFinishedFirstAndNeverALiveOne) {
  CaptureHub::Options o;
  o.root = Root("retention");
  uint64_t a_bytes = 0, total = 0;
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    FinishedCapture(hub.get(), "b", 40, std::chrono::hours(2));
    FinishedCapture(hub.get(), "a", 40, std::chrono::hours(3));  // the oldest, made second
    FinishedCapture(hub.get(), "c", 40, std::chrono::hours(1));
    auto live = std::move(hub->Open(OpenRequest("live")).value());
    Waiter w;
    uint64_t bin = 0;
    live->Append(Job(0, 1, 40, &bin), w.Callback());
    w.Wait();
    a_bytes = (*hub->Find("a"))->Summary().disk_bytes();
    EXPECT_GT(a_bytes, 40u * 64);
    total = hub->RootDiskBytes();
    uint64_t sum = 0;
    for (const char* n : {"a", "b", "c", "live"}) sum += (*hub->Find(n))->Summary().disk_bytes();
    EXPECT_EQ(total, sum);
  }
  // Room for all but the oldest: a goes, at startup, and only a.
  o.max_total_bytes = total - a_bytes + 1;
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    EXPECT_EQ(hub->Find("a").status().code(), absl::StatusCode::kNotFound);
    EXPECT_FALSE(IsDirectory(o.root + "/a"));
    for (const char* n : {"b", "c", "live"}) EXPECT_TRUE(hub->Find(n).ok()) << n;
    EXPECT_EQ(hub->RootDiskBytes(), total - a_bytes);
  }
  // The live capture alone is over the limit: evicting every finished
  // capture would not make room, so none goes, and a new capture is refused
  // with the numbers.
  const uint64_t live_bytes = [&] {
    auto hub = std::move(CaptureHub::Open(o)).value();
    return (*hub->Find("live"))->Summary().disk_bytes();
  }();
  ASSERT_GT(live_bytes, 0u);
  for (const uint64_t limit : {uint64_t{1}, live_bytes}) {
    o.max_total_bytes = limit;
    auto hub = std::move(CaptureHub::Open(o)).value();
    for (const char* n : {"b", "c", "live"}) EXPECT_TRUE(hub->Find(n).ok()) << n << " " << limit;
    auto refused = hub->Open(OpenRequest("new"));
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
    const uint64_t held = hub->RootDiskBytes();
    const std::string want = absl::StrCat(
        "holds ", held, " bytes on disk, ", live_bytes,
        " of them in 1 live capture(s), at or over --max_total_bytes=", limit, "; evicting the ",
        held - live_bytes, " bytes of finished captures would not make room, so none was evicted");
    EXPECT_NE(std::string(refused.status().message()).find(want), std::string::npos)
        << refused.status();
    for (const char* n : {"b", "c", "live"}) EXPECT_TRUE(hub->Find(n).ok()) << n << " " << limit;
    EXPECT_EQ(hub->Find("new").status().code(), absl::StatusCode::kNotFound);
    EXPECT_FALSE(IsDirectory(o.root + "/new"));
  }
  // One byte more than the live one takes: both finished captures have to
  // go, and then the new capture fits.
  o.max_total_bytes = live_bytes + 1;
  auto hub = std::move(CaptureHub::Open(o)).value();
  EXPECT_EQ(hub->Find("b").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(hub->Find("c").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE((*hub->Find("live"))->finished());
  EXPECT_TRUE(hub->Open(OpenRequest("new")).ok());
}

// The names of the captures `hub` lists.
std::vector<std::string> Names(const CaptureHub& hub) {
  bool more = false;
  std::vector<std::string> names;
  for (const auto& c : hub.List({}, v1::CAPTURE_STATE_UNSPECIFIED, "", 1000, &more)) {
    names.push_back(c->name());
  }
  return names;
}

// A hub whose root is over its --max_total_bytes by more than its oldest
// finished capture and less than its two oldest: six finished captures c0
// (the oldest) .. c5, and a live one, "grower", that took the root over
// the limit after they were made.
std::unique_ptr<CaptureHub> HubOverByTwoCaptures(const std::string& root,
                                                 std::shared_ptr<HubCapture>* grower) {
  uint64_t each = 0;
  {
    CaptureHub::Options probe;
    probe.root = root + "_probe";
    auto hub = std::move(CaptureHub::Open(probe)).value();
    FinishedCapture(hub.get(), "probe", 40, std::chrono::hours(1));
    each = (*hub->Find("probe"))->Summary().disk_bytes();
  }
  CaptureHub::Options o;
  o.root = root;
  o.max_total_bytes = 6 * each + 1;
  auto hub = std::move(CaptureHub::Open(o)).value();
  for (int i = 0; i < 6; ++i) {
    FinishedCapture(hub.get(), absl::StrCat("c", i), 40, std::chrono::hours(6 - i));
    EXPECT_EQ((*hub->Find(absl::StrCat("c", i)))->Summary().disk_bytes(), each);
  }
  *grower = std::move(hub->Open(OpenRequest("grower")).value());
  uint64_t bin = 0, records = 0;
  for (int task = 1; (*grower)->Summary().disk_bytes() <= each; task += 10) {
    Waiter w;
    (*grower)->Append(Job(records, task, 10, &bin), w.Callback());
    for (const Outcome& out : w.Wait()) EXPECT_TRUE(out.ok()) << out;
    records += 20;
  }
  const uint64_t grown = (*grower)->Summary().disk_bytes();
  EXPECT_LE(grown, 2 * each) << "the live capture grew past two finished ones";
  EXPECT_EQ(hub->RootDiskBytes(), 6 * each + grown);
  return hub;
}

// Eight opens at once over --max_total_bytes evict exactly what the same
// eight opens evict one after another: the two oldest, no more (each
// eviction sees the others' deletions, not a shared snapshot). Three
// rounds: a race that over-evicts shows in one of them.
TEST(CaptureHubTest, ConcurrentOpensEvictWhatSequentialOpensEvict) {
  constexpr int kOpens = 8;
  const std::vector<std::string> want = {"c2",   "c3",   "c4",   "c5",   "grower",
                                         "new0", "new1", "new2", "new3", "new4",
                                         "new5", "new6", "new7"};
  {
    std::shared_ptr<HubCapture> grower;
    auto hub = HubOverByTwoCaptures(Root("evict_sequential"), &grower);
    for (int i = 0; i < kOpens; ++i) {
      auto opened = hub->Open(OpenRequest(absl::StrCat("new", i)));
      ASSERT_TRUE(opened.ok()) << opened.status();
    }
    EXPECT_EQ(Names(*hub), want);
  }
  for (int round = 0; round < 3; ++round) {
    std::shared_ptr<HubCapture> grower;
    auto hub = HubOverByTwoCaptures(Root(absl::StrCat("evict_concurrent_", round)), &grower);
    std::mutex mu;
    std::condition_variable cv;
    int ready = 0;
    std::vector<absl::StatusCode> codes(kOpens);
    std::vector<std::thread> threads;
    for (int i = 0; i < kOpens; ++i) {
      threads.emplace_back([&, i] {
        {
          // All start together.
          std::unique_lock<std::mutex> lock(mu);
          ++ready;
          cv.notify_all();
          cv.wait(lock, [&] { return ready == kOpens; });
        }
        codes[i] = hub->Open(OpenRequest(absl::StrCat("new", i))).status().code();
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < kOpens; ++i) EXPECT_EQ(codes[i], absl::StatusCode::kOk) << i;
    EXPECT_EQ(Names(*hub), want) << "round " << round;
  }
}

// --retain_for: a finished capture older than it goes when a capture is
// opened (and by the reaper); younger ones and live ones stay.
TEST(CaptureHubTest, RetainForEvictsFinishedCapturesPastTheirAge) {
  CaptureHub::Options o;
  o.root = Root("retain_for");
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    FinishedCapture(hub.get(), "old", 4, std::chrono::hours(50));
    FinishedCapture(hub.get(), "young", 4, std::chrono::hours(1));
  }
  o.retain_for = absl::Hours(48);
  auto hub = std::move(CaptureHub::Open(o)).value();
  auto fresh = hub->Open(OpenRequest("fresh"));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(hub->Find("old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(IsDirectory(o.root + "/old"));
  EXPECT_TRUE(hub->Find("young").ok());
  EXPECT_TRUE(hub->Find("fresh").ok());
}

// A capture a crash left without a manifest (and beyond repair) is as old
// as its newest file for retention: kept while that is young, evicted once
// it is older than --retain_for, like any other.
TEST(CaptureHubTest, ADamagedCaptureIsDatedByItsNewestFile) {
  CaptureHub::Options o;
  o.root = Root("retain_damaged");
  for (const char* name : {"crashed_now", "crashed_long_ago"}) {
    ASSERT_TRUE(CreateDirectories(o.root + "/" + name + "/args_dump").ok());
    ASSERT_TRUE(
        WriteStringToFile(o.root + "/" + name + "/args_dump/args.bin", std::string(100, 'x')).ok());
  }
  const std::string old_dir = o.root + "/crashed_long_ago/args_dump";
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ::time(nullptr) - 50 * 3600;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, (old_dir + "/args.bin").c_str(), times, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, old_dir.c_str(), times, 0), 0);
  o.retain_for = absl::Hours(48);
  auto hub = std::move(CaptureHub::Open(o)).value();
  EXPECT_EQ(hub->Find("crashed_now").status().code(), absl::StatusCode::kDataLoss)
      << hub->Find("crashed_now").status();
  struct stat st;
  EXPECT_EQ(::stat((o.root + "/crashed_now/args_dump/args.bin").c_str(), &st), 0);
  EXPECT_EQ(hub->Find("crashed_long_ago").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(IsDirectory(o.root + "/crashed_long_ago"));
}

// A retention of centuries, or for ever, keeps finished captures: at
// startup, when a capture opens, and as the reaper looks (time arithmetic
// saturates instead of wrapping into the past).
TEST(CaptureHubTest, AHugeOrInfiniteRetentionKeepsEverything) {
  for (const absl::Duration retain :
       {absl::Hours(24 * 365 * 300), absl::Seconds(std::numeric_limits<int64_t>::max()),
        absl::InfiniteDuration(), absl::Hours(24 * 36500)}) {
    CaptureHub::Options o;
    o.root = Root(absl::StrCat("retain_huge_", absl::ToInt64Hours(retain)));
    {
      auto hub = std::move(CaptureHub::Open(o)).value();
      FinishedCapture(hub.get(), "old", 4, std::chrono::hours(24 * 365 * 30));
      FinishedCapture(hub.get(), "young", 4, std::chrono::seconds(0));
    }
    o.retain_for = retain;
    auto hub = std::move(CaptureHub::Open(o)).value();
    for (const char* name : {"old", "young"}) {
      EXPECT_TRUE(hub->Find(name).ok()) << name << " " << retain;
    }
    // An open (which applies retention) and a capture finishing.
    FinishedCapture(hub.get(), "fresh", 4, std::chrono::seconds(0));
    for (const char* name : {"old", "young", "fresh"}) {
      EXPECT_TRUE(hub->Find(name).ok()) << name << " " << retain;
      EXPECT_TRUE(IsDirectory(o.root + "/" + name + "/args_dump")) << name;
    }
  }
}

// A huge idle timeout never comes: a detached live capture is not idle, and
// stays live (resumable) for as long as the hub runs.
TEST(CaptureHubTest, AHugeIdleTimeoutNeverSealsALiveCapture) {
  for (const absl::Duration timeout :
       {absl::Milliseconds(10000000000000), absl::Hours(24 * 365 * 300),
        absl::Seconds(std::numeric_limits<int64_t>::max()), absl::InfiniteDuration()}) {
    CaptureHub::Options o;
    o.root = Root("idle_huge");
    o.live_idle_timeout = timeout;
    auto hub = std::move(CaptureHub::Open(o)).value();
    const std::string name = absl::StrCat("c", absl::ToInt64Hours(timeout) % 1000);
    auto c = std::move(hub->Open(OpenRequest(name)).value());
    Waiter w;
    uint64_t bin = 0;
    c->Append(Job(0, 1, 2, &bin), w.Callback());
    w.Wait();
    c->Detach();
    Waiter none;
    EXPECT_EQ(c->SealIfDetached(none.Callback(), timeout).code(),
              absl::StatusCode::kFailedPrecondition)
        << timeout;
    EXPECT_FALSE(c->finished()) << timeout;
    // Resumed as the client comes back.
    auto resumed = hub->Open(OpenRequest(name, /*resume=*/true));
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ((*resumed)->durable().records, 4u);
    (*resumed)->Detach();
    ASSERT_TRUE(hub->FinishDetached(name, w.Callback()).ok());
    for (const Outcome& out : w.Wait()) EXPECT_TRUE(out.ok()) << out;
  }
}

// DeleteCapture racing a new capture of the same name: the delete answers
// OK (what the deleted capture took), never an internal error, and the new
// capture is whole: every record it was sent is in it once it finishes.
TEST(CaptureHubTest, DeleteRacingANewCaptureOfTheSameNameLeavesTheNewOneWhole) {
  CaptureHub::Options o;
  o.root = Root("delete_race");
  auto hub = std::move(CaptureHub::Open(o)).value();
  for (int round = 0; round < 20; ++round) {
    FinishedCapture(hub.get(), "x", 30, std::chrono::seconds(0));
    // Files beside the capture's own widen the window in which the old
    // folder is being emptied while the new capture writes.
    for (int i = 0; i < 400; ++i) {
      ASSERT_TRUE(WriteStringToFile(absl::StrCat(o.root, "/x/args_dump/scratch_", i), "s").ok());
    }
    const uint64_t old_bytes = (*hub->Find("x"))->Summary().disk_bytes();
    absl::StatusCode deleted = absl::StatusCode::kUnknown;
    std::string delete_message;
    uint64_t freed = 0;
    std::atomic<bool> go{false};
    std::thread deleter([&] {
      while (!go.load()) {
      }
      auto d = hub->Delete("x", "deleted (test)");
      deleted = d.status().code();
      delete_message = std::string(d.status().message());
      if (d.ok()) freed = *d;
    });
    go = true;
    // The new capture: opened as soon as the name is free, written at once.
    std::shared_ptr<HubCapture> fresh;
    for (;;) {
      auto opened = hub->Open(OpenRequest("x"));
      if (opened.ok()) {
        fresh = std::move(opened).value();
        break;
      }
      ASSERT_EQ(opened.status().code(), absl::StatusCode::kAlreadyExists) << opened.status();
    }
    Waiter w;
    uint64_t bin = 0;
    fresh->Append(Job(0, 1, 5, &bin), w.Callback());
    for (const Outcome& out : w.Wait()) ASSERT_TRUE(out.ok()) << out;
    deleter.join();
    ASSERT_EQ(deleted, absl::StatusCode::kOk) << "round " << round << ": " << delete_message;
    EXPECT_EQ(freed, old_bytes);
    fresh->Detach();
    Waiter f;
    ASSERT_TRUE(hub->FinishDetached("x", f.Callback()).ok());
    for (const Outcome& out : f.Wait()) ASSERT_TRUE(out.ok()) << "round " << round << ": " << out;
    ArgFilter all;
    EXPECT_EQ(fresh->Query(all, 0, 100, 1000).hits.size(), 10u) << "round " << round;
    for (const char* file : {"args_dump.json", "args.bin", "args.index"}) {
      struct stat st;
      EXPECT_EQ(::stat((o.root + "/x/args_dump/" + file).c_str(), &st), 0)
          << "round " << round << ": " << file;
    }
    ASSERT_TRUE(hub->Delete("x", "deleted (test, next round)").ok());
  }
  // Nothing was left behind by the deletions.
  EXPECT_FALSE(IsDirectory(o.root + "/x"));
}

// A deletion cut short (the server killed while removing files) left its
// renamed folder: the next start removes it, and nothing else.
TEST(CaptureHubTest, AnInterruptedDeletionIsFinishedAtStartup) {
  CaptureHub::Options o;
  o.root = Root("interrupted_delete");
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    FinishedCapture(hub.get(), "kept", 3, std::chrono::seconds(0));
    FinishedCapture(hub.get(), "gone", 3, std::chrono::seconds(0));
  }
  // "gone" was being deleted; "kept" has a new capture beside such a folder.
  ASSERT_EQ(::rename((o.root + "/gone/args_dump").c_str(),
                     (o.root + "/gone/args_dump~deleting~1.0").c_str()),
            0);
  ASSERT_TRUE(CreateDirectories(o.root + "/kept/args_dump~deleting~1.1").ok());
  ASSERT_TRUE(WriteStringToFile(o.root + "/kept/args_dump~deleting~1.1/args.bin", "x").ok());
  auto hub = std::move(CaptureHub::Open(o)).value();
  EXPECT_EQ(hub->Find("gone").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(IsDirectory(o.root + "/gone"));
  EXPECT_FALSE(IsDirectory(o.root + "/kept/args_dump~deleting~1.1"));
  ASSERT_TRUE(hub->Find("kept").ok());
  ArgFilter all;
  EXPECT_EQ((*hub->Find("kept"))->Query(all, 0, 100, 1000).hits.size(), 6u);
}

// Links planted in the root lead nowhere: a deletion's leftover that is a
// link, and a capture folder that is a link to a capture elsewhere, are
// removed as links; the files they lead to stay.
TEST(CaptureHubTest, DeletionNeverFollowsALinkOutOfTheRoot) {
  CaptureHub::Options elsewhere;
  elsewhere.root = Root("links_elsewhere");
  {
    auto hub = std::move(CaptureHub::Open(elsewhere)).value();
    FinishedCapture(hub.get(), "real", 3, std::chrono::seconds(0));
  }
  const std::string victim = elsewhere.root + "/victim";
  ASSERT_TRUE(CreateDirectories(victim).ok());
  ASSERT_TRUE(WriteStringToFile(victim + "/keep.txt", "mine").ok());
  CaptureHub::Options o;
  o.root = Root("links");
  ASSERT_TRUE(CreateDirectories(o.root + "/x").ok());
  ASSERT_EQ(::symlink(victim.c_str(), (o.root + "/x/args_dump~deleting~1.0").c_str()), 0);
  ASSERT_TRUE(CreateDirectories(o.root + "/linked").ok());
  ASSERT_EQ(::symlink((elsewhere.root + "/real/args_dump").c_str(),
                      (o.root + "/linked/args_dump").c_str()),
            0);
  ASSERT_EQ(::symlink(victim.c_str(), (o.root + "/planted").c_str()), 0);
  ASSERT_TRUE(CreateDirectories(o.root + "/y").ok());
  ASSERT_EQ(::symlink(victim.c_str(), (o.root + "/y/args_dump~deleting~2.0").c_str()), 0);
  {
    auto hub = std::move(CaptureHub::Open(o)).value();
    if (hub->Find("linked").ok()) {
      (void)hub->Delete("linked", "deleted");
    }
    (void)hub->Delete("planted", "deleted");
  }
  struct stat st;
  EXPECT_EQ(::lstat((victim + "/keep.txt").c_str(), &st), 0);
  EXPECT_TRUE(IsDirectory(elsewhere.root + "/real/args_dump"));
  EXPECT_EQ(::lstat((elsewhere.root + "/real/args_dump/args.bin").c_str(), &st), 0);
  EXPECT_EQ(::lstat((o.root + "/x/args_dump~deleting~1.0").c_str(), &st), -1);
}

// Delete: a finished capture and its files go (what they took is returned);
// a live one is refused; a reader that holds the capture still reads it.
TEST(CaptureHubTest, DeleteRemovesAFinishedCaptureAndRefusesALiveOne) {
  CaptureHub::Options o;
  o.root = Root("delete");
  auto hub = std::move(CaptureHub::Open(o)).value();
  FinishedCapture(hub.get(), "done", 6, std::chrono::seconds(0));
  auto live = std::move(hub->Open(OpenRequest("live")).value());
  EXPECT_EQ(hub->Delete("live", "deleted").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(hub->Delete("nope", "deleted").status().code(), absl::StatusCode::kNotFound);
  auto held = std::move(hub->Find("done").value());
  const uint64_t bytes = held->Summary().disk_bytes();
  auto freed = hub->Delete("done", "deleted");
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*freed, bytes);
  EXPECT_FALSE(IsDirectory(o.root + "/done"));
  EXPECT_EQ(hub->Find("done").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(hub->Delete("done", "deleted").status().code(), absl::StatusCode::kNotFound);
  // The holder's index stays mapped: its rows read as before.
  ArgFilter all;
  EXPECT_EQ(held->Query(all, 0, 100, 1000).hits.size(), 12u);
  // The name is free again.
  EXPECT_TRUE(hub->Open(OpenRequest("done")).ok());
}

// Whether this build has a sanitizer, whose shadow memory does not fit
// under an address-space limit (absl's test works with gcc and clang; a
// bare __has_feature does not: protobuf's headers define it as 0 for gcc).
constexpr bool kSanitized =
#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || defined(ABSL_HAVE_THREAD_SANITIZER)
    true;
#else
    false;
#endif

// The system refusing a capture's writer thread (here: an address-space
// limit with no room for its stack) is RESOURCE_EXHAUSTED for that open,
// naming the thread; nothing of the capture is left on disk, the process
// goes on, and captures opened before are untouched. Run in a child, whose
// limit the test's own process does not share.
TEST(CaptureHubTest, ARefusedWriterThreadIsAnErrorNotACrash) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's shadow memory does not fit under RLIMIT_AS";
  CaptureHub::Options o;
  o.root = Root("refused_thread");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto hub = std::move(CaptureHub::Open(o)).value();
    FinishedCapture(hub.get(), "before", 4, std::chrono::seconds(0));
    // What the process maps now, and 4 MiB more: less than a thread stack.
    long vm_kib = 0;
    if (FILE* f = std::fopen("/proc/self/status", "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, f)) {
        if (std::sscanf(line, "VmSize: %ld kB", &vm_kib) == 1) break;
      }
      std::fclose(f);
    }
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(vm_kib + 4096) * 1024;
    if (vm_kib == 0 || ::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(10);
    {
      // Where the limit does not keep a thread from starting (a runtime
      // that reserved its stacks ahead), there is nothing to test.
      std::thread probe;
      if (StartThread("a probe thread", &probe, [] {}).ok()) {
        probe.join();
        ::_exit(20);
      }
    }
    auto refused = hub->Open(OpenRequest("x"));
    if (refused.ok()) ::_exit(11);
    if (refused.status().code() != absl::StatusCode::kResourceExhausted) ::_exit(12);
    if (refused.status().message().find("cannot start the writer thread of capture x") ==
        std::string::npos) {
      ::_exit(13);
    }
    if (IsDirectory(o.root + "/x")) ::_exit(14);
    if (hub->Find("x").status().code() != absl::StatusCode::kNotFound) ::_exit(15);
    if (!hub->Find("before").ok()) ::_exit(16);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 20) GTEST_SKIP() << "RLIMIT_AS does not refuse a thread here";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: no limit set, 11: opened, 12: another code, 13: another message, 14: a folder "
         "left, 15: listed, 16: the earlier capture lost";
}

TEST(CaptureHubTest, NamesStayUnderTheRoot) {
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "../x", "a/b", "/abs", "a\\b", "x y"}) {
    EXPECT_EQ(ValidateCaptureName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ValidateCaptureName(std::string("a\0b", 3)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateCaptureName(std::string(129, 'a')).code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& good :
       std::vector<std::string>{"run1", "a..b", "case-3_x.y", std::string(128, 'z')}) {
    EXPECT_TRUE(ValidateCaptureName(good).ok()) << good;
  }
}

}  // namespace
}  // namespace argsdump
