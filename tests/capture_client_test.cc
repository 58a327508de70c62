// client/capture_client against a real capture server on loopback: pages
// followed to the end, payloads in chunks, the bearer token, deadlines, a
// broken Ingest stream resumed, and servers that are not there or never
// answer (a status naming what happened, within the call's deadline).
#include "client/capture_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "server/capture_service.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/record_batch.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using std::chrono::milliseconds;

// A loopback port with a socket bound to it: listening (the kernel accepts
// connections nobody ever reads: a server that never answers) or not
// (connections are refused: no server there). Closed with the object.
class LoopbackPort {
 public:
  explicit LoopbackPort(bool listen) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    if (listen) {
      EXPECT_EQ(::listen(fd_, 16), 0);
    }
  }
  ~LoopbackPort() { ::close(fd_); }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class CaptureClientTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& root, std::string token = "") {
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = FreshTempDir(root);
    o.auth_token = std::move(token);
    auto server = CaptureServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    target_ = absl::StrCat("127.0.0.1:", server_->port());
  }
  void TearDown() override {
    if (server_) server_->Shutdown(milliseconds(1000));
  }

  std::unique_ptr<CaptureClient> Client(std::string token = "",
                                        milliseconds timeout = kCaptureCallTimeout) {
    CaptureClientOptions o;
    o.target = target_;
    o.auth_token = std::move(token);
    o.call_timeout = timeout;
    auto client = CaptureClient::Create(std::move(o));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  static IngestWriterOptions Open(const std::string& capture) {
    IngestWriterOptions o;
    o.open.set_capture(capture);
    o.open.set_level(v1::DUMP_LEVEL_FULL);
    o.open.set_platform("a2a3sim");
    return o;
  }

  // `tasks` tensors of `floats` elements each, one per task, payload bytes
  // counting up from the task id.
  static RecordBatch Tensors(int tasks, uint32_t floats) {
    RecordBatch batch;
    for (int t = 0; t < tasks; ++t) {
      std::string payload(floats * 4, '\0');
      for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(t + i * 7);
      batch.Add(TensorRecord(t + 1).Shape({floats}), std::move(payload));
    }
    return batch;
  }

  // Streams `batch` into a new capture and finishes it.
  void Ingest(const CaptureClient& client, const std::string& capture, const RecordBatch& batch) {
    auto writer = IngestWriter::Open(&client, Open(capture));
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Send(batch.RecordPtrs(), batch.PayloadViews(), 0, 0));
    ASSERT_TRUE((*writer)->WaitAcked(batch.size()));
    v1::CaptureSummary summary;
    ASSERT_TRUE((*writer)->Finish(v1::IngestFinish(), &summary).ok());
    EXPECT_EQ(summary.records(), batch.size());
  }

  std::unique_ptr<CaptureServer> server_;
  std::string target_;
};

TEST_F(CaptureClientTest, QueryArgsPagerFollowsEveryPage) {
  StartServer("client_paging");
  auto client = Client();
  Ingest(*client, "paged", Tensors(25, 4));
  v1::QueryArgsRequest request;
  request.set_capture("paged");
  request.set_page_size(10);
  QueryArgsPager pager(client.get(), request);
  std::vector<size_t> page_sizes;
  std::vector<uint64_t> tasks;
  std::vector<v1::CapturedArg> page;
  for (;;) {
    absl::StatusOr<bool> got = pager.Next(&page);
    ASSERT_TRUE(got.ok()) << got.status();
    if (!*got) break;
    page_sizes.push_back(page.size());
    for (const v1::CapturedArg& a : page) tasks.push_back(a.record().task_id());
  }
  EXPECT_EQ(page_sizes, (std::vector<size_t>{10, 10, 5}));
  ASSERT_EQ(tasks.size(), 25u);
  for (size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(tasks[i], i + 1);
  EXPECT_TRUE(pager.done());
}

TEST_F(CaptureClientTest, ListCapturesPagerFollowsEveryPage) {
  StartServer("client_list");
  auto client = Client();
  for (const char* name : {"e", "a", "d", "b", "c"}) Ingest(*client, name, Tensors(1, 2));
  v1::ListCapturesRequest request;
  request.set_page_size(2);
  ListCapturesPager pager(client.get(), request);
  std::vector<std::string> names;
  int pages = 0;
  std::vector<v1::CaptureSummary> page;
  while (!pager.done()) {
    absl::StatusOr<bool> got = pager.Next(&page);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(*got);
    ++pages;
    for (const v1::CaptureSummary& c : page) names.push_back(c.capture());
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  absl::StatusOr<bool> after = pager.Next(&page);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(*after);
  EXPECT_TRUE(page.empty());
}

TEST_F(CaptureClientTest, ReadPayloadCallsBackPerChunk) {
  StartServer("client_payload");
  auto client = Client();
  // 2.5 MiB: the service sends 1 MiB chunks.
  const RecordBatch batch = Tensors(1, 655360);
  Ingest(*client, "big", batch);
  v1::ReadPayloadRequest request;
  request.set_capture("big");
  request.set_record_id(0);
  std::vector<uint64_t> offsets;
  std::string bytes;
  const absl::Status s = client->ReadPayload(request, [&](const v1::PayloadChunk& chunk) {
    offsets.push_back(chunk.offset());
    EXPECT_EQ(chunk.offset(), bytes.size());
    bytes += chunk.data();
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 1 << 20, 2 << 20}));
  EXPECT_TRUE(bytes == batch.payload(0));

  // The callback's error ends the call and is what the caller gets.
  int calls = 0;
  const absl::Status stopped = client->ReadPayload(request, [&](const v1::PayloadChunk&) {
    ++calls;
    return absl::DataLossError("enough");
  });
  EXPECT_EQ(stopped, absl::DataLossError("enough"));
  EXPECT_EQ(calls, 1);

  request.set_record_id(7);
  const absl::Status missing =
      client->ReadPayload(request, [](const v1::PayloadChunk&) { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
}

TEST_F(CaptureClientTest, ErrorsCarryTheServersCodeAndMessage) {
  StartServer("client_errors");
  auto client = Client();
  absl::StatusOr<v1::CaptureSummary> got = client->GetCapture("nothing_here");
  EXPECT_EQ(got.status(), absl::NotFoundError("no capture named nothing_here"));
  EXPECT_EQ(Annotate(got.status(), "GetCapture"),
            absl::NotFoundError("GetCapture: no capture named nothing_here"));
  EXPECT_TRUE(Annotate(absl::OkStatus(), "GetCapture").ok());
}

TEST_F(CaptureClientTest, BearerToken) {
  StartServer("client_token", "s3cret");
  const absl::Status wrong = Client("wrong")->GetCapture("x").status();
  EXPECT_EQ(wrong, absl::UnauthenticatedError("wrong bearer token"));
  const absl::Status none = Client()->GetCapture("x").status();
  EXPECT_EQ(none,
            absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata"));
  auto bad = Client("wrong");
  v1::QueryArgsRequest q;
  q.set_capture("x");
  QueryArgsPager pager(bad.get(), q);
  std::vector<v1::CapturedArg> page;
  EXPECT_EQ(pager.Next(&page).status(), absl::UnauthenticatedError("wrong bearer token"));
  EXPECT_FALSE(pager.done());  // the page can be asked for again

  // An Ingest stream is refused the same way, naming the service.
  auto writer = IngestWriter::Open(bad.get(), Open("refused"));
  EXPECT_EQ(writer.status(), absl::UnauthenticatedError(absl::StrCat(
                                 "capture service ", target_, ": wrong bearer token")));

  // The token from a token file.
  const std::string file = FreshTempDir("client_token_file") + "/token";
  ASSERT_TRUE(WriteStringToFile(file, "s3cret\n").ok());
  CaptureClientOptions o;
  o.target = target_;
  o.auth_token_file = file;
  auto from_file = CaptureClient::Create(o);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_TRUE(absl::IsNotFound((*from_file)->GetCapture("x").status()));
}

TEST_F(CaptureClientTest, CreateRefusesWhatCannotWork) {
  EXPECT_TRUE(absl::IsInvalidArgument(CaptureClient::Create({}).status()));
  CaptureClientOptions o;
  o.target = "127.0.0.1:1";
  o.auth_token_file = TempPath("client_no_such_token_file");
  const absl::Status s = CaptureClient::Create(o).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("cannot read a token from"), absl::string_view::npos) << s;
}

TEST_F(CaptureClientTest, DeadlinePassedIsDeadlineExceeded) {
  StartServer("client_deadline");
  // Every call's deadline is a second before it starts.
  auto client = Client("", milliseconds(-1000));
  const absl::Status get = client->GetCapture("x").status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(get)) << get;
  v1::QueryArgsRequest q;
  q.set_capture("x");
  const absl::Status query = client->QueryArgs(q).status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(query)) << query;
  v1::ReadPayloadRequest r;
  r.set_capture("x");
  const absl::Status read =
      client->ReadPayload(r, [](const v1::PayloadChunk&) { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsDeadlineExceeded(read)) << read;
}

TEST_F(CaptureClientTest, NoServerThereIsUnavailable) {
  const LoopbackPort refused(/*listen=*/false);
  target_ = refused.target();
  auto client = Client();
  const absl::Status s = client->GetCapture("x").status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_FALSE(s.message().empty());
  v1::ListCapturesRequest l;
  ListCapturesPager pager(client.get(), l);
  std::vector<v1::CaptureSummary> page;
  EXPECT_TRUE(absl::IsUnavailable(pager.Next(&page).status()));
  const absl::Status w = client->WaitForConnected(milliseconds(100));
  EXPECT_EQ(w, absl::UnavailableError(absl::StrCat("capture service ", target_,
                                                   ": cannot connect")));
  auto writer = IngestWriter::Open(client.get(), Open("nowhere"));
  EXPECT_TRUE(absl::IsUnavailable(writer.status())) << writer.status();
  EXPECT_NE(writer.status().message().find(absl::StrCat("capture service ", target_)),
            absl::string_view::npos)
      << writer.status();
}

TEST_F(CaptureClientTest, ServerThatNeverAnswersEndsAtTheDeadline) {
  const LoopbackPort silent(/*listen=*/true);
  target_ = silent.target();
  auto client = Client("", milliseconds(200));
  const absl::Status s = client->GetCapture("x").status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  v1::ReadPayloadRequest r;
  r.set_capture("x");
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      client->ReadPayload(r, [](const v1::PayloadChunk&) { return absl::OkStatus(); })));
  EXPECT_TRUE(absl::IsUnavailable(client->WaitForConnected(milliseconds(100))));
}

TEST_F(CaptureClientTest, BrokenIngestStreamResumesFromTheWatermark) {
  StartServer("client_resume");
  auto client = Client();
  const RecordBatch batch = Tensors(6, 64);
  auto writer = IngestWriter::Open(client.get(), Open("resumed"));
  ASSERT_TRUE(writer.ok()) << writer.status();
  IngestWriter& w = **writer;
  ASSERT_TRUE(w.Send(batch.RecordPtrs(0, 3), batch.PayloadViews(0, 3), 0, 0));
  ASSERT_TRUE(w.WaitAcked(3));
  w.Break();
  const std::vector<const v1::ArgRecord*> records = batch.RecordPtrs();
  const std::vector<absl::string_view> payloads = batch.PayloadViews();
  // The broken stream takes nothing more; its end says why.
  EXPECT_FALSE(w.Send(records, payloads, 3, 0) && w.WaitAcked(6));
  const absl::Status why = w.StreamEnded();
  EXPECT_TRUE(RetryableIngestError(why)) << why;
  int attempts = 0;
  ASSERT_TRUE(w.Resume(why, &attempts).ok());
  EXPECT_GE(attempts, 1);
  EXPECT_EQ(w.reconnects(), static_cast<uint64_t>(attempts));
  // The service kept what it acknowledged (perhaps more): send from there.
  const uint64_t durable = w.durable_records();
  ASSERT_GE(durable, 3u);
  ASSERT_TRUE(w.Send(records, payloads, durable, 0));
  ASSERT_TRUE(w.WaitAcked(6));
  v1::CaptureSummary summary;
  ASSERT_TRUE(w.Finish(v1::IngestFinish(), &summary).ok());
  EXPECT_EQ(summary.records(), 6u);
  EXPECT_EQ(summary.bin_bytes(), batch.end_bin_offset());

  // Resuming is for a broken connection, not for a refusal.
  int none = 0;
  const absl::Status refused = absl::InvalidArgumentError("no");
  EXPECT_EQ(w.Resume(refused, &none), refused);
  EXPECT_EQ(none, 0);
}

}  // namespace
}  // namespace argsdump
