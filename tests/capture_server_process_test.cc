// The capture_server binary as a process: reflection (what grpc_cli ls -l
// and grpc_cli call do: list, describe, call with messages built from the
// served descriptors alone), SIGKILL mid-capture then restart (every acked
// record is there), SIGTERM (live captures get their manifest).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collector/grpc_sink.h"
#include "collector/sink.h"
#include "tests/process_fixtures.h"
#include "tests/testing/child_process.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/text_format.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"

namespace argsdump {
namespace {

namespace refl = grpc::reflection::v1alpha;
namespace pb = google::protobuf;

// ---- Reflection, as a reflection-only client sees the server --------------

class ReflectionClient {
 public:
  explicit ReflectionClient(std::shared_ptr<grpc::Channel> channel)
      : stub_(refl::ServerReflection::NewStub(channel)) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    stream_ = stub_->ServerReflectionInfo(&ctx_);
  }
  ~ReflectionClient() {
    stream_->WritesDone();
    stream_->Finish().IgnoreError();
  }
  std::vector<std::string> ListServices() {
    refl::ServerReflectionRequest req;
    req.set_list_services("*");
    refl::ServerReflectionResponse resp;
    EXPECT_TRUE(stream_->Write(req) && stream_->Read(&resp));
    std::vector<std::string> names;
    for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
    return names;
  }
  // Adds the file defining `symbol`, and the files it needs, to the pool.
  bool Describe(const std::string& symbol) {
    refl::ServerReflectionRequest req;
    req.set_file_containing_symbol(symbol);
    refl::ServerReflectionResponse resp;
    if (!stream_->Write(req) || !stream_->Read(&resp)) return false;
    if (resp.has_error_response()) {
      ADD_FAILURE() << symbol << ": " << resp.error_response().error_message();
      return false;
    }
    for (const std::string& bytes : resp.file_descriptor_response().file_descriptor_proto()) {
      pb::FileDescriptorProto file;
      if (!file.ParseFromString(bytes)) return false;
      files_[file.name()] = file;
    }
    // Build in dependency order.
    for (const auto& [name, file] : files_) Build(name);
    return pool_.FindServiceByName(symbol) != nullptr ||
           pool_.FindMessageTypeByName(symbol) != nullptr;
  }
  const pb::DescriptorPool& pool() const { return pool_; }

 private:
  bool Build(const std::string& name) {
    if (pool_.FindFileByName(name) != nullptr) return true;
    auto it = files_.find(name);
    if (it == files_.end()) return false;  // not sent yet (already known to the server stream)
    for (const std::string& dep : it->second.dependency()) Build(dep);
    return pool_.BuildFile(it->second) != nullptr;
  }

  std::unique_ptr<refl::ServerReflection::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<refl::ServerReflectionRequest,
                                           refl::ServerReflectionResponse>>
      stream_;
  std::map<std::string, pb::FileDescriptorProto> files_;
  pb::DescriptorPool pool_;
};

// A unary call with a request given as text, typed only by the pool.
grpc::Status CallByReflection(const std::shared_ptr<grpc::Channel>& channel,
                              const pb::DescriptorPool& pool, const std::string& method_name,
                              const std::string& request_text, std::string* response_text) {
  const pb::MethodDescriptor* method = pool.FindMethodByName(method_name);
  if (method == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "no method " + method_name);
  pb::DynamicMessageFactory factory(&pool);
  std::unique_ptr<pb::Message> req(factory.GetPrototype(method->input_type())->New());
  if (!pb::TextFormat::ParseFromString(request_text, req.get())) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "bad request text");
  }
  const std::string bytes = req->SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx,
                 absl::StrCat("/", method->service()->full_name(), "/", method->name()),
                 grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status s = done.get_future().get();
  if (s.ok()) {
    std::vector<grpc::Slice> slices;
    response.Dump(&slices);
    std::string out;
    for (const auto& sl : slices) out.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    std::unique_ptr<pb::Message> resp(factory.GetPrototype(method->output_type())->New());
    if (!resp->ParseFromString(out)) return grpc::Status(grpc::StatusCode::INTERNAL, "bad reply");
    pb::TextFormat::PrintToString(*resp, response_text);
  }
  return s;
}

TEST(CaptureServerProcessTest, ReflectionListsDescribesAndCallsEveryService) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(TempPath("reflection_root")));
  auto channel = grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials());
  ReflectionClient reflection(channel);
  const std::vector<std::string> services = reflection.ListServices();
  const std::set<std::string> listed(services.begin(), services.end());
  EXPECT_TRUE(listed.count("argsdump.v1.CaptureService"));
  EXPECT_TRUE(listed.count("grpc.health.v1.Health"));
  EXPECT_TRUE(listed.count("grpc.reflection.v1alpha.ServerReflection"));
  for (const std::string& s : services) {
    ASSERT_TRUE(reflection.Describe(s)) << s;
    const pb::ServiceDescriptor* d = reflection.pool().FindServiceByName(s);
    ASSERT_NE(d, nullptr) << s;
    EXPECT_GT(d->method_count(), 0) << s;
  }
  const pb::ServiceDescriptor* capture =
      reflection.pool().FindServiceByName("argsdump.v1.CaptureService");
  ASSERT_NE(capture, nullptr);
  for (const char* m : {"Ingest", "ListCaptures", "GetCapture", "QueryArgs", "ReadPayload",
                        "WatchCapture"}) {
    EXPECT_NE(capture->FindMethodByName(m), nullptr) << m;
  }
  std::string reply;
  // grpc_cli call ... ListCaptures ""
  grpc::Status s = CallByReflection(channel, reflection.pool(),
                                    "argsdump.v1.CaptureService.ListCaptures", "", &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // A hex task id, as docs/service.md shows it (grpc_cli).
  s = CallByReflection(channel, reflection.pool(), "argsdump.v1.CaptureService.QueryArgs",
                       "capture: 'absent' task_id: 0x0000000100000003 stage: "
                       "STAGE_AFTER_COMPLETION role: ROLE_OUTPUT",
                       &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_NE(s.error_message().find("absent"), std::string::npos);
  s = CallByReflection(channel, reflection.pool(), "grpc.health.v1.Health.Check", "", &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(reply.find("SERVING"), std::string::npos) << reply;
  server.Signal(SIGTERM);
  const int status = server.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// grpc_health_probe and Kubernetes ask for the service by name: the server
// as a whole ("") and argsdump.v1.CaptureService are SERVING, a name it
// does not serve is NOT_FOUND.
TEST(CaptureServerProcessTest, HealthAnswersForTheServerAndTheCaptureServiceByName) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(TempPath("health_root")));
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  auto check = [&](const std::string& service, grpc::health::v1::HealthCheckResponse* reply) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    return health->Check(&ctx, request, reply);
  };
  for (const std::string service : {"", "argsdump.v1.CaptureService"}) {
    grpc::health::v1::HealthCheckResponse reply;
    const grpc::Status s = check(service, &reply);
    ASSERT_TRUE(s.ok()) << "'" << service << "': " << s.error_message();
    EXPECT_EQ(reply.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
  grpc::health::v1::HealthCheckResponse reply;
  EXPECT_EQ(check("argsdump.v1.NoSuchService", &reply).error_code(), grpc::StatusCode::NOT_FOUND);
  server.Signal(SIGTERM);
  const int status = server.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Tasks with a 4 KiB float32 input each.
// SIGKILL mid-capture, the server restarted on the same port: the client's
// sink, which never stopped, retries through the outage, resumes from the
// durable watermark and finishes; the capture is byte for byte the
// uninterrupted one (every acked record kept, nothing twice).
TEST(CaptureServerProcessTest, SigkillMidCaptureTheClientResumesOnTheRestartedServer) {
  const std::string root = TempPath("sigkill_root");
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root));
  const std::string target = server.target();
  auto sink = Connect(target, "killed");
  ASSERT_NE(sink, nullptr);
  uint64_t offset = 0;
  std::vector<RecordBatch> sent;
  for (int b = 0; b < 5; ++b) {
    sent.push_back(MakeBatch(100 + b * 50, 50, &offset));
    ASSERT_TRUE(Send(sink.get(), sent.back()).ok());
  }
  ASSERT_TRUE(sink->Flush().ok());  // acknowledged: durable
  server.Signal(SIGKILL);
  server.Wait();
  // The next batch goes out while no server runs: the sink retries.
  sent.push_back(MakeBatch(900, 10, &offset));
  absl::Status during_outage;
  std::thread client([&] { during_outage = Send(sink.get(), sent.back()); });
  ServerProcess again;
  ASSERT_NO_FATAL_FAILURE(again.Start(root, target));
  client.join();
  EXPECT_TRUE(during_outage.ok()) << during_outage;
  EXPECT_GE(sink->reconnects(), 1u);
  sent.push_back(MakeBatch(2000, 20, &offset));
  ASSERT_TRUE(Send(sink.get(), sent.back()).ok());
  ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  const v1::CaptureSummary summary = GetCapture(target, "killed");
  EXPECT_EQ(summary.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_FALSE(summary.recovered());
  EXPECT_EQ(summary.records(), 280u);
  const std::string local = WriteUninterrupted("sigkill_uninterrupted", sent);
  const std::string dir = root + "/killed/args_dump";
  EXPECT_TRUE(ReadFileOrEmpty(dir + "/args.bin") == ReadFileOrEmpty(local + "/args.bin"));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

// SIGTERM leaves a live capture live (no manifest): after the restart it is
// LIVE and detached, and its client resumes it to the end.
TEST(CaptureServerProcessTest, SigtermLeavesLiveCapturesResumable) {
  const std::string root = TempPath("sigterm_root");
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root));
  auto sink = Connect(server.target(), "live");
  ASSERT_NE(sink, nullptr);
  uint64_t offset = 0;
  std::vector<RecordBatch> sent = {MakeBatch(1, 20, &offset)};
  ASSERT_TRUE(Send(sink.get(), sent.back()).ok());
  ASSERT_TRUE(sink->Flush().ok());
  server.Signal(SIGTERM);
  const int status = server.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  sink.reset();  // the client went away too
  EXPECT_FALSE(std::ifstream(root + "/live/args_dump/args_dump.json").good());
  ServerProcess again;
  ASSERT_NO_FATAL_FAILURE(again.Start(root));
  const v1::CaptureSummary live = GetCapture(again.target(), "live");
  EXPECT_EQ(live.state(), v1::CAPTURE_STATE_LIVE);
  EXPECT_FALSE(live.attached());
  EXPECT_EQ(live.records(), 20u);
  auto resumed = Connect(again.target(), "live", /*resume=*/true);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->durable_records(), 20u);
  sent.push_back(MakeBatch(21, 10, &offset));
  ASSERT_TRUE(Send(resumed.get(), sent.back()).ok());
  ASSERT_TRUE(resumed->Finish(v1::CaptureCounters()).ok());
  const std::string local = WriteUninterrupted("sigterm_uninterrupted", sent);
  EXPECT_EQ(ReadFileOrEmpty(root + "/live/args_dump/args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

// SIGTERM ends the server within its grace whatever streams are open: a
// watch of a live capture that stopped growing used to hold it forever.
TEST(CaptureServerProcessTest, SigtermEndsWithAWatchOpenOnAQuietLiveCapture) {
  const std::string root = TempPath("sigterm_watch_root");
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(server.Start(root));
  auto sink = Connect(server.target(), "quiet");
  ASSERT_NE(sink, nullptr);
  uint64_t offset = 0;
  ASSERT_TRUE(Send(sink.get(), MakeBatch(1, 5, &offset)).ok());
  ASSERT_TRUE(sink->Flush().ok());
  auto stub = v1::CaptureService::NewStub(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::WatchCaptureRequest watch;
  watch.set_capture("quiet");
  auto reader = stub->WatchCapture(&ctx, watch);
  v1::WatchCaptureResponse first;
  ASSERT_TRUE(reader->Read(&first));  // the 5 records so far; then nothing comes
  EXPECT_EQ(first.args_size(), 5);
  server.Signal(SIGTERM);
  const int status = server.Wait();  // returns: the watch no longer holds it up
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  v1::WatchCaptureResponse more;
  while (reader->Read(&more)) {
  }
  EXPECT_FALSE(reader->Finish().ok());  // ended by the server, with a status
}

// A stream that opens `name`, sends `batch` and half-closes without a
// finish: the capture stays live, detached once the status is back.
grpc::Status IngestWithoutFinish(const std::string& target, const std::string& name,
                                 const RecordBatch& batch) {
  auto stub = v1::CaptureService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = stub->Ingest(&ctx);
  v1::IngestRequest open;
  open.mutable_open()->set_capture(name);
  open.mutable_open()->set_level(v1::DUMP_LEVEL_FULL);
  v1::IngestRequest send;
  send.mutable_batch()->set_first_record(0);
  send.mutable_batch()->set_payload_offset(0);
  for (size_t i = 0; i < batch.size(); ++i) {
    *send.mutable_batch()->add_records() = batch.records()[i];
    send.mutable_batch()->mutable_payload()->append(batch.payload(i));
  }
  EXPECT_TRUE(stream->Write(open) && stream->Write(send));
  v1::IngestResponse r;
  while (stream->Read(&r)) {
    if (r.has_ack() && r.ack().durable_records() == batch.size()) break;
  }
  stream->WritesDone();
  while (stream->Read(&r)) {
  }
  return stream->Finish();
}

// The server's log: a line per capture opened (new or resumed) and one per
// capture sealed, with its counters and what sealed it - its finish
// message, FinishCapture, the idle timeout, recovery at start.
TEST(CaptureServerProcessTest, LogsEachCaptureOpenedAndSealedWithItsCounters) {
  const std::string root = TempPath("log_root");
  const std::string no_losses =
      "dropped 0 records (ready queue full 0, free queue empty 0, arena ack timeout 0, flush "
      "timeout 0, host gone 0, overwritten 0), 0 truncated";
  {
    ServerProcess server;
    server.PipeLog();
    ASSERT_NO_FATAL_FAILURE(server.Start(root));
    // Sealed by its finish message, after a resume.
    auto sink = Connect(server.target(), "by_finish");
    ASSERT_NE(sink, nullptr);
    EXPECT_EQ(server.WaitForLogLine("capture by_finish opened"),
              "capture_server: capture by_finish opened (new, level 2, platform unset)");
    uint64_t offset = 0;
    ASSERT_TRUE(Send(sink.get(), MakeBatch(1, 30, &offset)).ok());
    ASSERT_TRUE(sink->Flush().ok());
    sink->BreakStreamForTest();
    ASSERT_TRUE(Send(sink.get(), MakeBatch(31, 10, &offset)).ok());
    EXPECT_EQ(server.WaitForLogLine("capture by_finish opened"),
              "capture_server: capture by_finish opened (resumed at 30 records, 122880 payload "
              "bytes)");
    v1::CaptureCounters losses;
    losses.set_dropped_records(7);
    losses.set_dropped_ready_queue_full(4);
    losses.set_dropped_flush_timeout(3);
    ASSERT_TRUE(sink->Finish(losses).ok());
    EXPECT_EQ(server.WaitForLogLine("capture by_finish finished"),
              "capture_server: capture by_finish finished (finish message): 40 records, 163840 "
              "payload bytes; dropped 7 records (ready queue full 4, free queue empty 0, arena "
              "ack timeout 0, flush timeout 3, host gone 0, overwritten 0), 0 truncated");
    // Sealed by FinishCapture once its client left.
    offset = 0;
    EXPECT_EQ(IngestWithoutFinish(server.target(), "by_rpc", MakeBatch(1, 10, &offset)).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
    auto stub = v1::CaptureService::NewStub(
        grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::FinishCaptureRequest finish;
    finish.set_capture("by_rpc");
    v1::CaptureSummary summary;
    ASSERT_TRUE(stub->FinishCapture(&ctx, finish, &summary).ok());
    EXPECT_EQ(server.WaitForLogLine("capture by_rpc finished"),
              "capture_server: capture by_rpc finished (FinishCapture): 10 records, 40960 payload "
              "bytes; " + no_losses);
    // Left live, for the next server: one to time out, one to recover.
    offset = 0;
    EXPECT_FALSE(IngestWithoutFinish(server.target(), "idle", MakeBatch(1, 20, &offset)).ok());
    offset = 0;
    EXPECT_FALSE(IngestWithoutFinish(server.target(), "cut", MakeBatch(1, 20, &offset)).ok());
    server.Signal(SIGTERM);
    EXPECT_NE(server.WaitForLogLine("shutting down"), "");
    EXPECT_EQ(server.Wait(), 0);
  }
  // Half of "cut"'s payloads go: it cannot go on live, recovery seals it.
  ASSERT_EQ(::truncate((root + "/cut/args_dump/args.bin").c_str(), 10 * 4096), 0);
  ServerProcess again;
  again.PipeLog();
  ASSERT_NO_FATAL_FAILURE(again.Start(root, "127.0.0.1:0", {"--live_idle_timeout_ms=100"}));
  std::vector<std::string> before;
  EXPECT_EQ(again.WaitForLogLine("capture idle finished", &before),
            "capture_server: capture idle finished (idle timeout): 20 records, 81920 payload "
            "bytes; " + no_losses);
  auto logged = [&](const std::string& line) {
    for (const std::string& b : before) {
      if (b == line) return true;
    }
    ADD_FAILURE() << "not logged: " << line << "\nlogged:\n" << absl::StrJoin(before, "\n");
    return false;
  };
  logged("capture_server: capture idle is live after a restart: 20 records, 81920 payload bytes "
         "durable; waiting for its client to resume it");
  logged("capture_server: capture cut finished (recovered: kept 10 records; dropped 10 records "
         "whose payload args.bin (40960 bytes) does not hold): 10 records, 40960 payload bytes; " +
         no_losses);
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

}  // namespace
}  // namespace argsdump

namespace argsdump {
namespace {

// A capture_server that is expected to refuse to start: its exit status
// and what it printed on stderr.
std::pair<int, std::string> RunToExit(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {ServerBinary()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto child = ChildProcess::Start(argv, TempPath("run_to_exit_stdout"));
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return {-1, ""};
  const std::optional<int> status = (*child)->Wait(std::chrono::seconds(60));
  EXPECT_TRUE(status.has_value()) << "capture_server did not end";
  const int code = status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  return {code, (*child)->stderr_text()};
}

// One server per root, and per port: a second one exits 2 saying why
// instead of answering every other call.
// What the files of a capture's args_dump take on disk (as the server counts).
uint64_t CaptureDiskBytes(const std::string& dir) {
  uint64_t bytes = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (struct dirent* e = ::readdir(d)) {
    struct stat st;
    if (::stat((dir + "/" + e->d_name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  ::closedir(d);
  return bytes;
}

// --max_total_bytes on a real server: at startup the oldest finished
// capture goes first, with an INFO line naming it and the numbers; with
// only a live capture left a new stream is refused RESOURCE_EXHAUSTED, and
// the live one streams on.
TEST(CaptureServerProcessTest, MaxTotalBytesEvictsOldestFinishedFirstAndSaysSo) {
  const std::string root = TempPath("retention_root");
  {
    ServerProcess server;
    ASSERT_NO_FATAL_FAILURE(server.Start(root));
    for (const char* name : {"first", "second"}) {
      auto sink = Connect(server.target(), name);
      ASSERT_NE(sink, nullptr);
      uint64_t offset = 0;
      ASSERT_TRUE(Send(sink.get(), MakeBatch(1, 10, &offset)).ok());
      ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
    }
    server.Signal(SIGTERM);
    EXPECT_EQ(server.Wait(), 0);
  }
  // "first" is the older one: its manifest was written first (and is dated
  // an hour back, so that the order does not hang on a timestamp's grain).
  struct timespec old[2] = {{std::time(nullptr) - 3600, 0}, {std::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root + "/first/args_dump/args_dump.json").c_str(), old, 0), 0);
  const uint64_t first = CaptureDiskBytes(root + "/first/args_dump");
  const uint64_t second = CaptureDiskBytes(root + "/second/args_dump");
  ASSERT_GT(first, 0u);
  ASSERT_GT(second, 0u);
  ServerProcess server;
  server.PipeLog();
  // Room for the younger one only.
  const std::string limit = absl::StrCat(second + 1);
  ASSERT_NO_FATAL_FAILURE(server.Start(root, "127.0.0.1:0", {"--max_total_bytes=" + limit}));
  const std::string evicted = server.WaitForLogLine("evicted");
  EXPECT_EQ(evicted, absl::StrCat("capture_server: capture first evicted, oldest finished first: "
                                  "the root held ", first + second,
                                  " bytes on disk, at or over --max_total_bytes=", limit, " (",
                                  first, " bytes on disk)"));
  auto stub = v1::CaptureService::NewStub(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  auto get = [&](const std::string& name) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::GetCaptureRequest req;
    req.set_capture(name);
    v1::CaptureSummary s;
    return stub->GetCapture(&ctx, req, &s).error_code();
  };
  EXPECT_EQ(get("first"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(get("second"), grpc::StatusCode::OK);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0);
  // One byte of room: "second" goes as a live capture opens; then the live
  // one alone is over the limit, and the next capture is refused.
  ServerProcess tight;
  ASSERT_NO_FATAL_FAILURE(tight.Start(root, "127.0.0.1:0", {"--max_total_bytes=1"}));
  auto live = Connect(tight.target(), "live");
  ASSERT_NE(live, nullptr);
  uint64_t offset = 0;
  ASSERT_TRUE(Send(live.get(), MakeBatch(1, 10, &offset)).ok());
  ASSERT_TRUE(live->Flush().ok());
  GrpcSinkOptions o;
  o.target = tight.target();
  o.capture = "refused";
  o.info.set_name("refused");
  o.info.set_level(v1::DUMP_LEVEL_FULL);
  auto refused = GrpcSink::Connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("--max_total_bytes=1"), absl::string_view::npos)
      << refused.status();
  ASSERT_TRUE(Send(live.get(), MakeBatch(11, 10, &offset)).ok());
  EXPECT_TRUE(live->Finish(v1::CaptureCounters()).ok());
  tight.Signal(SIGTERM);
  EXPECT_EQ(tight.Wait(), 0);
}

// The HTTP face's bounds on slow clients are flags; the server states at
// start what it serves with, so an operator sees a value took.
TEST(CaptureServerProcessTest, HttpBoundsAreFlagsAndTheServerSaysWhatItUses) {
  ServerProcess server;
  server.PipeLog();
  server.Start(TempPath("http_bounds_root"), "127.0.0.1:0",
               {"--http_listen=127.0.0.1:0", "--http_max_connections=7",
                "--http_request_timeout=250ms", "--http_write_stall_timeout=3s",
                "--http_evict_after=0", "--http_inflight_budget_bytes=2MiB",
                "--http_budget_wait=0", "--http_send_buffer_bytes=64KiB"});
  const std::string line = server.WaitForLogLine("HTTP limits");
  EXPECT_EQ(line,
            "capture_server: HTTP limits: 7 connections, request deadline 250ms, answer stall "
            "3s, evict after 0, 2MiB in flight (waited for 0), send buffer 64KiB");
  server.Signal(SIGTERM);
  for (std::string rest; server.NextLogLine(&rest);) {
  }
  EXPECT_EQ(server.Wait(), 0);
  // The defaults, as docs/http.md gives them.
  ServerProcess defaults;
  defaults.PipeLog();
  defaults.Start(TempPath("http_bounds_defaults"), "127.0.0.1:0", {"--http_listen=127.0.0.1:0"});
  EXPECT_EQ(defaults.WaitForLogLine("HTTP limits"),
            "capture_server: HTTP limits: 256 connections, request deadline 10s, answer stall "
            "10s, evict after 1s, 256MiB in flight (waited for 1s), send buffer sized by the "
            "kernel");
  defaults.Signal(SIGTERM);
  for (std::string rest; defaults.NextLogLine(&rest);) {
  }
  EXPECT_EQ(defaults.Wait(), 0);
}

TEST(CaptureServerProcessTest, ASecondServerOnTheSameRootOrPortExitsTwo) {
  const std::string root = TempPath("one_per_root");
  ServerProcess first;
  first.Start(root);
  const auto [same_root, root_err] =
      RunToExit({"--listen=127.0.0.1:0", "--root=" + root, "--shutdown_grace_ms=100"});
  EXPECT_EQ(same_root, 2) << root_err;
  EXPECT_NE(root_err.find("--root " + root + " is in use by another capture_server (pid "),
            std::string::npos)
      << root_err;
  const auto [same_port, port_err] = RunToExit(
      {"--listen=" + first.target(), "--root=" + TempPath("other_root"),
       "--shutdown_grace_ms=100"});
  EXPECT_EQ(same_port, 2) << port_err;
  EXPECT_NE(port_err.find("cannot listen on " + first.target()), std::string::npos) << port_err;
  // Bad flags: exit 2 naming the flag (absl alone would exit 1).
  const auto [bogus, bogus_err] = RunToExit({"--bogus_flag=3"});
  EXPECT_EQ(bogus, 2) << bogus_err;
  EXPECT_NE(bogus_err.find("--bogus_flag=3: no such flag"), std::string::npos) << bogus_err;
  const auto [grace, grace_err] = RunToExit({"--shutdown_grace_ms=soon"});
  EXPECT_EQ(grace, 2) << grace_err;
  EXPECT_NE(grace_err.find("--shutdown_grace_ms: 'soon'"), std::string::npos) << grace_err;
  const auto [retain, retain_err] = RunToExit({"--retain_for=a week"});
  EXPECT_EQ(retain, 2) << retain_err;
  EXPECT_NE(retain_err.find("--retain_for: 'a week'"), std::string::npos) << retain_err;
  const auto [negative, negative_err] = RunToExit({"--retain_for=-1h"});
  EXPECT_EQ(negative, 2) << negative_err;
  EXPECT_NE(negative_err.find("--retain_for: '-1h' is negative"), std::string::npos) << negative_err;
  const auto [total, total_err] = RunToExit({"--max_total_bytes=lots"});
  EXPECT_EQ(total, 2) << total_err;
  EXPECT_NE(total_err.find("--max_total_bytes: 'lots'"), std::string::npos) << total_err;
  // The HTTP face's flags, each refused by name before anything listens.
  for (const auto& [flag, says] : std::vector<std::pair<std::string, std::string>>{
           {"--http_listen=nohost", "--http_listen nohost: not host:port"},
           {"--http_max_connections=0", "--http_max_connections: '0' is under the minimum of 1"},
           {"--http_max_connections=many", "--http_max_connections: 'many'"},
           {"--http_max_tensor_elements=0", "--http_max_tensor_elements: '0' is under the minimum"},
           {"--http_cors_origin=https://dash.example/", "--http_cors_origin https://dash.example/"},
       }) {
    const auto [code, err] = RunToExit({"--listen=127.0.0.1:0", "--http_listen=127.0.0.1:0",
                                        "--root=" + TempPath("http_flags"), flag});
    EXPECT_EQ(code, 2) << flag << ": " << err;
    EXPECT_NE(err.find(says), std::string::npos) << flag << ": " << err;
  }
  // A CORS origin is for the HTTP face: without --http_listen it is a
  // mistake, not something to ignore.
  const auto [cors, cors_err] = RunToExit({"--listen=127.0.0.1:0", "--root=" + TempPath("cors"),
                                           "--http-cors-origin=https://dash.example"});
  EXPECT_EQ(cors, 2) << cors_err;
  EXPECT_NE(cors_err.find("--http-cors-origin: the HTTP face is off; it needs --http_listen"),
            std::string::npos)
      << cors_err;
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(), 0);
  // Once it is gone, the root is free again.
  ServerProcess again;
  again.Start(root);
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

}  // namespace
}  // namespace argsdump
