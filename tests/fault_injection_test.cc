// Fault injection with real processes and real files: capture_server
// SIGKILLed at every point of an ingest and restarted while its client
// keeps going; sim_run SIGKILLed mid-run and its capture recovered; and
// each class of damaged file served, recovered or refused as documented --
// never a crash, every intact entry kept.
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "store/journal.h"
#include "tests/capture_reader.h"
#include "tests/process_fixtures.h"

namespace argsdump {
namespace {

void Put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::unique_ptr<v1::CaptureService::Stub> Stub(const std::string& target) {
  return v1::CaptureService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
}

grpc::Status GetStatus(const std::string& target, const std::string& name,
                       v1::CaptureSummary* out = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetCaptureRequest get;
  get.set_capture(name);
  v1::CaptureSummary s;
  grpc::Status st = Stub(target)->GetCapture(&ctx, get, &s);
  if (out != nullptr) *out = s;
  return st;
}

// Entries of `type` in a journal file as it stands.
uint64_t Journaled(const std::string& path, JournalEntryType want = JournalEntryType::kRecord) {
  auto reader = JournalReader::FromBytes(ReadFileToString(path, kUnboundedFileBytes).value_or(""));
  JournalEntryType type;
  std::string payload;
  uint64_t n = 0;
  while (reader->Next(&type, &payload)) n += type == want;
  return n;
}

// Blocks until `path` holds at least `entries` journaled entries of `type`, woken by
// events only: inotify for the directory (the file appearing) and the file
// growing, a pidfd for the child's exit (then it fails instead of hanging).
void WaitForJournal(const std::string& dir, const std::string& path, uint64_t entries, pid_t pid,
                    JournalEntryType type = JournalEntryType::kRecord) {
  const int fd = inotify_init1(IN_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_GE(inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MODIFY), 0);
  const int child = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  ASSERT_GE(child, 0) << "pidfd_open: " << std::strerror(errno);
  char buf[4096];
  while (Journaled(path, type) < entries) {
    struct pollfd p[2] = {{fd, POLLIN, 0}, {child, POLLIN, 0}};
    ASSERT_GT(::poll(p, 2, kChildStepLimitMs), 0)
        << "no journal growth in " << kChildStepLimitMs / 1000 << " s at "
        << Journaled(path, type) << " of " << entries << " entries";
    ASSERT_FALSE(p[1].revents & POLLIN)
        << "the process ended before " << entries << " entries were journaled";
    ASSERT_GT(::read(fd, buf, sizeof(buf)), 0);
  }
  ::close(child);
  ::close(fd);
}

// ---- the server killed at every point of an ingest ---------------------------------

class ServerKillTest : public ::testing::TestWithParam<KillAt> {};

// Whatever point the server dies at, the client that keeps going (its
// sink retries through the outage and resumes) ends with a capture byte
// for byte like an uninterrupted one: every acked record, nothing twice.
TEST_P(ServerKillTest, TheClientResumesToTheUninterruptedCapture) {
  const KillAt at = GetParam();
  const std::string root = FreshTempDir(absl::StrCat("kill_root_", static_cast<int>(at)));
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root));
  const std::string target = server.target();
  auto sink = Connect(target, "run");
  ASSERT_NE(sink, nullptr);
  const std::vector<RecordBatch> batches = KillBatches();
  const int before = BatchesBeforeKill(at);
  for (int b = 0; b < before; ++b) ASSERT_TRUE(Send(sink.get(), batches[b]).ok());
  ASSERT_TRUE(sink->Flush().ok());  // acknowledged before the kill
  absl::Status racing;
  std::thread client;
  const std::string dir = root + "/run/args_dump";
  if (at == KillAt::kMidBatch) {
    // A batch of 300 records in several messages: killed once part of it
    // is durable (the rest may or may not be).
    client = std::thread([&] { racing = Send(sink.get(), batches[3]); });
    WaitForJournal(dir, dir + "/args.journal", 3 * 40 + 1, server.pid());
  } else if (at == KillAt::kDuringFinish) {
    // Killed once the finish reached the store (its counters entry): the
    // manifest may or may not be written; the client's answer is lost.
    client = std::thread([&] { racing = sink->Finish(v1::CaptureCounters()); });
    WaitForJournal(dir, dir + "/args.journal", 1, server.pid(), JournalEntryType::kCounters);
  }
  server.Signal(SIGKILL);
  server.Wait();
  ServerProcess again;
  ASSERT_NO_FATAL_FAILURE(again.Start(root, target));
  if (client.joinable()) {
    client.join();
    EXPECT_TRUE(racing.ok()) << racing;
  }
  if (at != KillAt::kDuringFinish) {
    for (int b = FirstBatchAfterRestart(at); b < 6; ++b) {
      ASSERT_TRUE(Send(sink.get(), batches[b]).ok()) << b;
    }
    ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  }
  v1::CaptureSummary summary;
  ASSERT_TRUE(GetStatus(target, "run", &summary).ok());
  EXPECT_EQ(summary.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_FALSE(summary.recovered());
  const std::string local =
      WriteUninterrupted(absl::StrCat("kill_uninterrupted_", static_cast<int>(at)), batches);
  EXPECT_TRUE(ReadFileOrEmpty(dir + "/args.bin") == ReadFileOrEmpty(local + "/args.bin"));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

INSTANTIATE_TEST_SUITE_P(EveryPoint, ServerKillTest,
                         ::testing::Values(KillAt::kAfterOpen, KillAt::kAfterOneBatch,
                                           KillAt::kAfterThreeBatches, KillAt::kMidBatch,
                                           KillAt::kDuringFinish));

// A sink of capture "gone" on `target` that keeps what the service lost in
// a local capture at `kept`.
GrpcSinkOptions LostCaptureOptions(const std::string& target, const std::string& kept) {
  GrpcSinkOptions o;
  o.target = target;
  o.capture = "gone";
  o.info.set_level(v1::DUMP_LEVEL_FULL);
  o.fallback = [kept, info = o.info]() -> absl::StatusOr<std::unique_ptr<CaptureSink>> {
    auto local = LocalSink::Create(kept, info);
    if (!local.ok()) return local.status();
    return std::unique_ptr<CaptureSink>(std::move(local).value());
  };
  return o;
}

// The capture deleted while the server was down: the restarted server
// refuses its resume (NOT_FOUND). With a fallback, the records the service
// had not acknowledged (the batches sent after the restart) go to a local
// capture, byte for byte the capture those records make alone, and
// acknowledged + kept = all; the service does not get the capture back
// half-empty. Before, the sink failed and those records were dropped. The
// same at Finish: every record was acknowledged, so none is kept.
TEST(LostCaptureTest, RecordsNotAcknowledgedAreKeptLocally) {
  for (bool at_finish : {false, true}) {
    SCOPED_TRACE(at_finish ? "at finish" : "mid-stream");
    const std::string root = FreshTempDir(absl::StrCat("lost_root_", at_finish));
    const std::string kept = TempPath(absl::StrCat("lost_kept_", at_finish)) + "/args_dump";
    ServerProcess server;
    ASSERT_NO_FATAL_FAILURE(server.Start(root));
    const std::string target = server.target();
    auto sink = GrpcSink::Connect(LostCaptureOptions(target, kept));
    ASSERT_TRUE(sink.ok()) << sink.status();
    uint64_t offset = 0;
    std::vector<RecordBatch> acked;
    acked.push_back(MakeBatch(1000, 40, &offset));
    acked.push_back(MakeBatch(2000, 40, &offset));
    for (const RecordBatch& b : acked) ASSERT_TRUE(Send(sink->get(), b).ok());
    ASSERT_TRUE((*sink)->Flush().ok());  // acknowledged
    server.Signal(SIGKILL);
    server.Wait();
    std::filesystem::remove_all(root + "/gone");
    ServerProcess again;
    ASSERT_NO_FATAL_FAILURE(again.Start(root, target));
    // The same records from payload offset 0: what the kept capture must be.
    uint64_t alone = 0;
    std::vector<RecordBatch> later;
    if (!at_finish) {
      std::vector<RecordBatch> stream;  // as the stream sends them (offsets go on)
      for (auto [task, n] : {std::pair<int, int>{3000, 30}, {4000, 20}}) {
        stream.push_back(MakeBatch(task, n, &offset));
        later.push_back(MakeBatch(task, n, &alone));
      }
      for (const RecordBatch& b : stream) ASSERT_TRUE(Send(sink->get(), b).ok());
    }
    ASSERT_TRUE((*sink)->Finish(v1::CaptureCounters()).ok());
    EXPECT_TRUE((*sink)->kept_locally());
    EXPECT_EQ((*sink)->lost_capture().code(), absl::StatusCode::kNotFound)
        << (*sink)->lost_capture();
    EXPECT_EQ((*sink)->durable_records(), 80u);
    EXPECT_EQ((*sink)->kept_locally_records(), at_finish ? 0u : 50u);
    EXPECT_EQ((*sink)->sent_records(), at_finish ? 80u : 130u);
    v1::CaptureSummary summary;
    EXPECT_EQ(GetStatus(target, "gone", &summary).error_code(), grpc::StatusCode::NOT_FOUND);
    struct stat st;
    if (at_finish) {
      EXPECT_NE(::stat((kept + "/args_dump.json").c_str(), &st), 0) << "no record, no capture";
    } else {
      const std::string expected = WriteUninterrupted("lost_expected", later);
      EXPECT_TRUE(ReadFileOrEmpty(kept + "/args.bin") == ReadFileOrEmpty(expected + "/args.bin"));
      EXPECT_EQ(ReadFileOrEmpty(kept + "/args_dump.json"), ReadFileOrEmpty(expected + "/args_dump.json"));
    }
    again.Signal(SIGTERM);
    EXPECT_EQ(again.Wait(), 0);
  }
}

// The service is lost while batches wait for their acknowledgment and the
// client has amended the capture's end: the fallback that keeps the
// unacknowledged records (started inside Finish) gets that end too.
TEST(LostCaptureTest, WhatAmendGaveGoesWithTheRecordsKeptLocally) {
  const std::string root = FreshTempDir("lost_amend_root");
  const std::string kept = TempPath("lost_amend_kept") + "/args_dump";
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root));
  const std::string target = server.target();
  auto sink = GrpcSink::Connect(LostCaptureOptions(target, kept));
  ASSERT_TRUE(sink.ok()) << sink.status();
  uint64_t offset = 0;
  ASSERT_TRUE(Send(sink->get(), MakeBatch(1000, 40, &offset)).ok());
  ASSERT_TRUE((*sink)->Flush().ok());
  // Stopped: the next batch is sent and kept, never acknowledged.
  server.Signal(SIGSTOP);
  ASSERT_TRUE(Send(sink->get(), MakeBatch(2000, 10, &offset)).ok());
  server.Signal(SIGKILL);
  server.Wait();
  std::filesystem::remove_all(root + "/gone");
  ServerProcess again;
  ASSERT_NO_FATAL_FAILURE(again.Start(root, target));
  v1::CaptureInfo end;
  (*end.mutable_labels())["steps"] = "7";
  ASSERT_TRUE((*sink)->Amend(end).ok());
  ASSERT_TRUE((*sink)->Finish(v1::CaptureCounters()).ok());
  EXPECT_TRUE((*sink)->kept_locally());
  EXPECT_EQ((*sink)->kept_locally_records(), 10u);
  const std::string manifest = ReadFileOrEmpty(kept + "/args_dump.json");
  EXPECT_NE(manifest.find("\"steps\""), std::string::npos) << manifest.substr(0, 2000);
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

// Without a fallback the refused resume is the sink's error, naming it.
TEST(LostCaptureTest, WithoutAFallbackTheRefusalIsTheError) {
  const std::string root = FreshTempDir("lost_root_nofallback");
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root));
  const std::string target = server.target();
  auto sink = Connect(target, "gone");
  ASSERT_NE(sink, nullptr);
  uint64_t offset = 0;
  ASSERT_TRUE(Send(sink.get(), MakeBatch(1000, 10, &offset)).ok());
  ASSERT_TRUE(sink->Flush().ok());  // acknowledged
  server.Signal(SIGKILL);
  server.Wait();
  std::filesystem::remove_all(root + "/gone");
  ServerProcess again;
  ASSERT_NO_FATAL_FAILURE(again.Start(root, target));
  const absl::Status s = Send(sink.get(), MakeBatch(2000, 10, &offset));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_FALSE(sink->kept_locally());
}

// A restart while many clients stream must not make any of them give up.
// Eight clients stream at once; the server is SIGKILLed once each has sent
// two batches, and restarted while they go on sending (their sinks retry
// through the outage): all eight captures end finished and byte-identical
// to an uninterrupted one.
TEST(ServerKillTest, EightClientsStreamThroughARestart) {
  const std::string root = FreshTempDir("kill_eight_root");
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root));
  const std::string target = server.target();
  uint64_t offset = 0;
  std::vector<RecordBatch> batches;
  for (int b = 0; b < 6; ++b) batches.push_back(MakeBatch(1000 + b * 1000, 40, &offset));
  constexpr int kClients = 8;
  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;
  std::vector<absl::Status> results(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto sink = Connect(target, absl::StrCat("client", c));
      if (sink == nullptr) {
        results[c] = absl::UnavailableError("no connection");
      }
      for (int b = 0; sink != nullptr && b < 6; ++b) {
        if (absl::Status st = Send(sink.get(), batches[b]); !st.ok()) {
          results[c] = st;
          break;
        }
        if (b == 1) {
          std::lock_guard<std::mutex> lock(mu);
          ++ready;
          cv.notify_all();
        }
      }
      if (sink != nullptr && results[c].ok()) results[c] = sink->Finish(v1::CaptureCounters());
      if (!results[c].ok()) {
        std::lock_guard<std::mutex> lock(mu);
        ready = kClients;  // do not wait for a client that failed
        cv.notify_all();
      }
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ready >= kClients; });
  }
  server.Signal(SIGKILL);
  server.Wait();
  ServerProcess again;
  ASSERT_NO_FATAL_FAILURE(again.Start(root, target));
  for (std::thread& t : clients) t.join();
  const std::string local = WriteUninterrupted("kill_eight_uninterrupted", batches);
  for (int c = 0; c < kClients; ++c) {
    SCOPED_TRACE(c);
    EXPECT_TRUE(results[c].ok()) << results[c];
    v1::CaptureSummary summary;
    ASSERT_TRUE(GetStatus(target, absl::StrCat("client", c), &summary).ok());
    EXPECT_EQ(summary.state(), v1::CAPTURE_STATE_FINISHED);
    const std::string dir = absl::StrCat(root, "/client", c, "/args_dump");
    EXPECT_TRUE(ReadFileOrEmpty(dir + "/args.bin") == ReadFileOrEmpty(local + "/args.bin"));
    EXPECT_EQ(ReadFileOrEmpty(dir + "/args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  }
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

// ---- sim_run killed mid-run ---------------------------------------------------------

std::string SimRunBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/argsdump/apps/sim_run/sim_run");
}

// sim_run SIGKILLed while its device runs: --recover gives back a capture
// whose entries are exactly the first entries of the uninterrupted run's
// (what was durable when it died, byte for byte), and says it lost
// nothing acknowledged (exit 0).
TEST(SimRunKillTest, RecoveredCaptureIsAPrefixOfTheUninterruptedOne) {
  const std::string tmp = FreshTempDir("simrun_kill");
  // 200 chained tasks, then one that never finishes (the device is busy
  // when it is killed).
  std::ostringstream w;
  w << "{\"name\": \"chain\", \"buffers\": [{\"name\": \"a\", \"dtype\": \"FLOAT32\", \"shape\": [256],"
    << " \"init\": {\"fill\": 1}}, {\"name\": \"b\", \"dtype\": \"FLOAT32\", \"shape\": [256]}],"
    << " \"tasks\": [";
  for (int i = 0; i < 200; ++i) {
    w << (i ? ", " : "") << "{\"func\": \"relu\", \"args\": [{\"tensor\": \"" << (i % 2 ? "b" : "a")
      << "\", \"role\": \"input\"}, {\"tensor\": \"" << (i % 2 ? "a" : "b")
      << "\", \"role\": \"output\"}]}";
  }
  w << ", {\"func\": \"hang\", \"args\": [{\"tensor\": \"a\", \"role\": \"input\"},"
    << " {\"tensor\": \"b\", \"role\": \"output\"}]}]}";
  Put(tmp + "/chain.json", w.str());
  // One recording thread, one drain, one shard, a record per buffer: what
  // is durable is always a prefix in arrival (= task) order.
  const std::vector<std::string> common = {"--workload=" + tmp + "/chain.json", "--dump-args=2",
                                           "--schedulers=1", "--workers=1", "--drain-threads=1",
                                           "--collector-shards=1", "--records-per-buffer=1",
                                           "--buffers-per-thread=64", "--ready-queue-depth=64"};
  auto spawn = [&](const std::string& prefix, bool short_timeout) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (short_timeout) ::setenv("SIMPLER_SCHEDULER_TIMEOUT_MS", "300", 1);
      const std::string bin = SimRunBinary();
      std::vector<std::string> args = {bin, "--output-prefix=" + prefix};
      args.insert(args.end(), common.begin(), common.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execv(bin.c_str(), argv.data());
      _exit(127);
    }
    return pid;
  };
  // The uninterrupted run: the hang is reaped after 300 ms (exit 1).
  const std::string full = tmp + "/full";
  int status = 0;
  ::waitpid(spawn(full, true), &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  const CaptureFiles reference = ReadCapture(full + "/args_dump");
  ASSERT_GT(reference.entries.size(), 400u);
  // The killed run: SIGKILL once 300 records are durable.
  const std::string killed = tmp + "/killed";
  ASSERT_EQ(::mkdir(killed.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((killed + "/args_dump").c_str(), 0755), 0);  // watched from the start
  const pid_t pid = spawn(killed, false);
  WaitForJournal(killed + "/args_dump", killed + "/args_dump/args.journal", 300, pid);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  const pid_t recover = ::fork();
  if (recover == 0) {
    const std::string bin = SimRunBinary();
    const std::string dir = killed + "/args_dump";
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execl(bin.c_str(), bin.c_str(), "--recover", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ::waitpid(recover, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const CaptureFiles got = ReadCapture(killed + "/args_dump");
  ASSERT_GE(got.entries.size(), 300u);
  ASSERT_LT(got.entries.size(), reference.entries.size());
  for (size_t i = 0; i < got.entries.size(); ++i) {
    ASSERT_EQ(got.entries[i].Key(), reference.entries[i].Key()) << i;
    EXPECT_TRUE(got.entries[i].payload == reference.entries[i].payload) << i;
  }
}

// ---- damaged files under a server's root ---------------------------------------------

// One capture per class of damage, then a server on the root: each is
// served as documented and the server keeps answering.
TEST(DamagedFilesTest, EveryClassIsServedRecoveredOrRefusedNeverACrash) {
  const std::string root = FreshTempDir("damaged_root");
  uint64_t offset;
  std::vector<RecordBatch> batches;
  {
    ServerProcess server;
    ASSERT_NO_FATAL_FAILURE(server.Start(root));
    for (const char* name : {"index", "index_no_journal", "journal_middle", "journal_tail",
                             "bin_short", "bin_missing", "manifest"}) {
      auto sink = Connect(server.target(), name);
      ASSERT_NE(sink, nullptr);
      offset = 0;
      batches = {MakeBatch(1, 20, &offset), MakeBatch(21, 20, &offset)};
      for (const RecordBatch& b : batches) ASSERT_TRUE(Send(sink.get(), b).ok());
      ASSERT_TRUE(sink->Flush().ok());
      // Three stay live (their journal is what a restart reads); the rest finish.
      const std::string n = name;
      if (n != "journal_middle" && n != "journal_tail" && n != "bin_missing") {
        ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
      }
    }
    server.Signal(SIGKILL);
    server.Wait();
  }
  auto dir = [&](const std::string& name) { return root + "/" + name + "/args_dump"; };
  auto flip = [&](const std::string& path, size_t at, const std::string& bytes) {
    std::string data = ReadFileOrEmpty(path);
    ASSERT_LT(at + bytes.size(), data.size() + 1);
    data.replace(at, bytes.size(), bytes);
    Put(path, data);
  };
  const std::string index = ReadFileOrEmpty(dir("index") + "/args.index");
  flip(dir("index") + "/args.index", index.size() - 100, std::string(60, '\xff'));
  flip(dir("index_no_journal") + "/args.index", index.size() - 100, std::string(60, '\xff'));
  std::remove((dir("index_no_journal") + "/args.journal").c_str());
  const std::string journal = ReadFileOrEmpty(dir("journal_middle") + "/args.journal");
  flip(dir("journal_middle") + "/args.journal", journal.size() / 2, "\x55\xaa");
  std::ofstream(dir("journal_tail") + "/args.journal", std::ios::app) << "AJNL torn";
  ASSERT_EQ(::truncate((dir("bin_short") + "/args.bin").c_str(), 4096 * 30 + 7), 0);
  std::remove((dir("bin_missing") + "/args.bin").c_str());
  flip(dir("manifest") + "/args_dump.json", 200, "}}}}");

  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root));
  const std::string t = server.target();
  v1::CaptureSummary s;
  // A damaged index with its journal: rebuilt, served whole.
  ASSERT_TRUE(GetStatus(t, "index", &s).ok());
  EXPECT_EQ(s.records(), 40u);
  // Without a journal: DATA_LOSS naming the file and the byte.
  grpc::Status st = GetStatus(t, "index_no_journal");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_NE(st.error_message().find("args.index: byte "), std::string::npos) << st.error_message();
  // A live capture whose journal was damaged mid-way: sealed by recovery,
  // every intact entry kept, the loss in its manifest.
  ASSERT_TRUE(GetStatus(t, "journal_middle", &s).ok());
  EXPECT_EQ(s.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(s.records(), 39u);
  const CaptureFiles middle = ReadCapture(dir("journal_middle"));
  EXPECT_EQ(middle.manifest.recovery().records_kept(), 39u);
  EXPECT_FALSE(middle.manifest.recovery().journal_damage(0).tail());
  // A torn tail only: live again, nothing lost, resumable.
  ASSERT_TRUE(GetStatus(t, "journal_tail", &s).ok());
  EXPECT_EQ(s.state(), v1::CAPTURE_STATE_LIVE);
  EXPECT_EQ(s.records(), 40u);
  // args.bin missing under a live capture: recovered without the payloads,
  // which it counts.
  ASSERT_TRUE(GetStatus(t, "bin_missing", &s).ok());
  EXPECT_EQ(ReadCapture(dir("bin_missing")).manifest.recovery().records_without_payload(), 40u);
  // args.bin short under a finished capture: the records past it answer
  // DATA_LOSS on read, those before it their bytes.
  auto read = [&](const std::string& name, uint64_t record, std::string* bytes) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReadPayloadRequest r;
    r.set_capture(name);
    r.set_record_id(record);
    auto reader = Stub(t)->ReadPayload(&ctx, r);
    v1::PayloadChunk chunk;
    while (reader->Read(&chunk)) *bytes += chunk.data();
    return reader->Finish();
  };
  std::string bytes;
  EXPECT_TRUE(read("bin_short", 3, &bytes).ok());
  EXPECT_TRUE(bytes == batches[0].payload(3));
  bytes.clear();
  EXPECT_EQ(read("bin_short", 35, &bytes).error_code(), grpc::StatusCode::DATA_LOSS);
  // A damaged manifest: the server answers from its index all the same.
  ASSERT_TRUE(GetStatus(t, "manifest", &s).ok());
  EXPECT_EQ(s.records(), 40u);
  // And the server is alive after all of it.
  grpc::ClientContext ctx;
  v1::ListCapturesRequest list;
  v1::ListCapturesResponse listed;
  ASSERT_TRUE(Stub(t)->ListCaptures(&ctx, list, &listed).ok());
  EXPECT_EQ(listed.captures_size(), 7);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0);
}

}  // namespace
}  // namespace argsdump
