// capture_server over an object store and a catalog (a real Ceph RGW and a
// real PostgreSQL), SIGKILLed at five points of an ingest and restarted on
// an EMPTY scratch disk while its client keeps going: the capture completes
// byte for byte like an uninterrupted one (every acknowledged record,
// nothing twice), read back from the store; the files downloaded from the
// store are a capture the reader opens as it is.
#include <sys/stat.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "s3/s3_client.h"
#include "tests/capture_reader.h"
#include "tests/process_fixtures.h"
#include "tests/testing/ceph_rgw.h"
#include "tests/testing/postgres_server.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

// A bucket and a database of their own per test, and the server's flags.
class ObjectStoreServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rgw = SharedCephRgw();
    ASSERT_TRUE(rgw.ok()) << rgw.status();
    rgw_ = *rgw;
    auto pg = SharedPostgresServer();
    ASSERT_TRUE(pg.ok()) << pg.status();
    static std::atomic<int> serial{0};
    const int at = serial++;
    auto db = (*pg)->CreateDatabase(absl::StrCat("kill_", at));
    ASSERT_TRUE(db.ok()) << db.status();
    bucket_ = absl::StrCat("kill-", ::getpid(), "-", at);
    auto client = s3::S3Client::Create(rgw_->ClientOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
    ASSERT_TRUE(client_->CreateBucket(bucket_).ok());
    // The server's credentials come from a file (the flag), not its environment.
    const std::string credentials = TempPath(absl::StrCat("kill_credentials_", at));
    ASSERT_TRUE(WriteStringToFile(credentials,
                                  absl::StrCat("[default]\naws_access_key_id = ",
                                               rgw_->access_key(), "\naws_secret_access_key = ",
                                               rgw_->secret_key(), "\n"))
                    .ok());
    flags_ = {"--object_store=s3://" + bucket_ + "/ci", "--s3_endpoint=" + rgw_->endpoint(),
              "--s3_region=" + rgw_->region(), "--s3_credentials_file=" + credentials,
              "--catalog=" + *db, "--group_commit_ms=20"};
  }

  std::string Stored(const std::string& file) {
    // Sealed under some epoch: ci/run/<epoch>/args_dump/<file>.
    std::string key;
    auto listed = client_->ListObjectsV2(bucket_, "ci/run/");
    EXPECT_TRUE(listed.ok()) << listed.status();
    if (listed.ok()) {
      for (const auto& o : listed->objects) {
        if (absl::EndsWith(o.key, "/args_dump/" + file)) key = o.key;
      }
    }
    auto bytes = client_->GetObjectToString(bucket_, key, {}, 1 << 30);
    EXPECT_TRUE(bytes.ok()) << file << ": " << bytes.status();
    return bytes.ok() ? *bytes : "";
  }

  CephRgw* rgw_ = nullptr;
  std::string bucket_;
  std::unique_ptr<s3::S3Client> client_;
  std::vector<std::string> flags_;
};

class ObjectStoreKillTest : public ObjectStoreServerTest,
                            public ::testing::WithParamInterface<KillAt> {};

// Watches the capture: its durable records come as the server makes them
// so (a segment committed), and the watch ends by itself once the capture
// is sealed. Returns once `records` were seen (true), or the watch ended
// (false; with records < 0: waits for that).
bool Watch(const std::string& target, const std::string& name, int records) {
  auto stub = v1::CaptureService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::WatchCaptureRequest watch;
  watch.set_capture(name);
  auto reader = stub->WatchCapture(&ctx, watch);
  v1::WatchCaptureResponse page;
  int seen = 0;
  while ((records < 0 || seen < records) && reader->Read(&page)) seen += page.args_size();
  ctx.TryCancel();
  reader->Finish().IgnoreError();
  return records >= 0 && seen >= records;
}

TEST_P(ObjectStoreKillTest, RestartedOnAnEmptyDiskTheClientResumesToTheUninterruptedCapture) {
  const KillAt at = GetParam();
  const int n = static_cast<int>(at);
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(
      server.Start(FreshTempDir(absl::StrCat("os_kill_root_", n)), "127.0.0.1:0", flags_));
  const std::string target = server.target();
  auto sink = Connect(target, "run");
  ASSERT_NE(sink, nullptr);
  const std::vector<RecordBatch> batches = KillBatches();
  const int before = BatchesBeforeKill(at);
  for (int b = 0; b < before; ++b) ASSERT_TRUE(Send(sink.get(), batches[b]).ok());
  ASSERT_TRUE(sink->Flush().ok());  // acknowledged before the kill
  absl::Status racing;
  std::thread client;
  if (at == KillAt::kMidBatch) {
    // A batch of 300 records in several messages: killed once part of it
    // is committed (the rest may or may not be).
    client = std::thread([&] { racing = Send(sink.get(), batches[3]); });
    ASSERT_TRUE(Watch(target, "run", 3 * 40 + 1));
  } else if (at == KillAt::kDuringFinish) {
    // Killed once the capture is sealed in the store: the client's answer
    // may be lost.
    client = std::thread([&] { racing = sink->Finish(v1::CaptureCounters()); });
    Watch(target, "run", -1);
  }
  server.Signal(SIGKILL);
  server.Wait();
  // A new machine: nothing of the first server's disk.
  ServerProcess again;
  ASSERT_NO_FATAL_FAILURE(
      again.Start(FreshTempDir(absl::StrCat("os_kill_empty_root_", n)), target, flags_));
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
  const v1::CaptureSummary summary = GetCapture(target, "run");
  EXPECT_EQ(summary.state(), v1::CAPTURE_STATE_FINISHED);
  const std::string local =
      WriteUninterrupted(absl::StrCat("os_kill_uninterrupted_", n), batches);
  EXPECT_TRUE(Stored("args.bin") == ReadFileOrEmpty(local + "/args.bin"));
  EXPECT_EQ(Stored("args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  // (args.index holds the capture's info, which names it: the local one
  // is unnamed. capture_hub_remote_test compares indexes byte for byte.)
  EXPECT_FALSE(Stored("args.index").empty());
  // Downloaded, the three objects are a capture as any other.
  const std::string downloaded = TempPath(absl::StrCat("os_kill_downloaded_", n)) + "/args_dump";
  ASSERT_TRUE(CreateDirectories(downloaded).ok());
  for (const char* file : {"args.bin", "args_dump.json", "args.index"}) {
    ASSERT_TRUE(WriteStringToFile(downloaded + "/" + file, Stored(file)).ok());
  }
  const CaptureFiles read = ReadCapture(downloaded);
  EXPECT_EQ(read.entries.size(), 6u * 40 + 300 - 40);
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

// The store goes away mid-ingest (its gateway stopped): the server's
// commit fails after its retries and fails the appends (UNAVAILABLE); the
// client keeps resuming until the store is back; the capture ends byte for
// byte the uninterrupted one. Waits on the server's log, not on time.
TEST_F(ObjectStoreServerTest, AStoreOutageMidIngestLosesNothingAcknowledged) {
  std::vector<std::string> flags = flags_;
  flags.push_back("--s3_retry_deadline=1s");
  ServerProcess server;
  server.PipeLog();
  ASSERT_NO_FATAL_FAILURE(server.Start(FreshTempDir("os_outage_root"), "127.0.0.1:0", flags));
  auto sink = Connect(server.target(), "run");
  ASSERT_NE(sink, nullptr);
  const std::vector<RecordBatch> batches = KillBatches();
  for (int b = 0; b < 3; ++b) ASSERT_TRUE(Send(sink.get(), batches[b]).ok());
  ASSERT_TRUE(sink->Flush().ok());  // committed before the store goes away
  ASSERT_TRUE(rgw_->StopGateway().ok());
  absl::Status sent;
  std::thread client([&] {
    for (int b = 3; b < 6 && sent.ok(); ++b) sent = Send(sink.get(), batches[b]);
    if (sent.ok()) sent = sink->Finish(v1::CaptureCounters());
  });
  const std::string failed = server.WaitForLogLine("could not be committed");
  EXPECT_NE(failed, "") << "the server ended before a commit failed";
  ASSERT_TRUE(rgw_->StartGateway().ok());
  std::thread drain([&] {  // the log pipe must not fill
    for (std::string line; server.NextLogLine(&line);) {
    }
  });
  client.join();
  EXPECT_TRUE(sent.ok()) << sent;
  EXPECT_GE(sink->reconnects(), 1u);
  EXPECT_EQ(GetCapture(server.target(), "run").state(), v1::CAPTURE_STATE_FINISHED);
  const std::string local = WriteUninterrupted("os_outage_uninterrupted", batches);
  EXPECT_TRUE(Stored("args.bin") == ReadFileOrEmpty(local + "/args.bin"));
  EXPECT_EQ(Stored("args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0);
  drain.join();
}

INSTANTIATE_TEST_SUITE_P(EveryPoint, ObjectStoreKillTest,
                         ::testing::Values(KillAt::kAfterOpen, KillAt::kAfterOneBatch,
                                           KillAt::kAfterThreeBatches, KillAt::kMidBatch,
                                           KillAt::kDuringFinish));

}  // namespace
}  // namespace argsdump
