// The capture service end to end: a real server on 127.0.0.1:0 (in this
// process), real files under TEST_TMPDIR, the real GrpcSink and raw stubs.
#include <functional>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "collector/grpc_sink.h"
#include "tests/capture_reader.h"
#include "collector/local_sink.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/capture_service_fixture.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

// Records of `tasks` tasks: per task a float32 input before dispatch, an
// int32 scalar, and an output after completion; payload sizes vary (some
// over 1 MiB, so they span messages). Offsets are consecutive.
struct Pairs {
  std::vector<v1::ArgRecord> records;
  std::vector<std::string> bytes;

  std::vector<const v1::ArgRecord*> RecordPtrs(size_t from, size_t to) const {
    std::vector<const v1::ArgRecord*> out;
    for (size_t i = from; i < to; ++i) out.push_back(&records[i]);
    return out;
  }
  std::vector<absl::string_view> Payloads(size_t from, size_t to) const {
    std::vector<absl::string_view> out;
    for (size_t i = from; i < to; ++i) out.push_back(bytes[i]);
    return out;
  }
};

Pairs MakePairs(int tasks) {
  Pairs p;
  uint64_t offset = 0;
  auto tensor = [&](uint64_t task, uint32_t arg, v1::Role role, v1::Stage stage,
                    uint32_t elements) {
    const v1::ArgRecord r = TensorRecord(task).FuncIds({static_cast<uint32_t>(task % 5)}).Arg(arg)
        .Role(role).Stage(stage).Shape({elements}).Contiguous().BinOffset(offset)
        .DeviceThread(static_cast<uint32_t>(task % 3));
    offset += r.bin_size();
    std::string b(r.bin_size(), '\0');
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>((i * 31 + task * 7 + arg) & 0xFF);
    p.records.push_back(r);
    p.bytes.push_back(std::move(b));
  };
  for (int t = 0; t < tasks; ++t) {
    const uint64_t task = 0x100000000ull + t;
    const uint32_t elements = t % 7 == 3 ? 300000 : 64 + 16 * (t % 5);  // 1.2 MB every 7th
    tensor(task, 0, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, elements);
    p.records.push_back(ScalarRecord(task).FuncIds({static_cast<uint32_t>(task % 5)}).Arg(2)
                            .Contiguous().ScalarBits(static_cast<uint64_t>(t))
                            .DeviceThread(static_cast<uint32_t>(task % 3)));
    p.bytes.emplace_back();
    tensor(task, 1, v1::ROLE_OUTPUT, v1::STAGE_AFTER_COMPLETION, elements);
  }
  return p;
}

v1::CaptureInfo Info(const std::string& name) {
  v1::CaptureInfo info;
  info.set_name(name);
  info.set_level(v1::DUMP_LEVEL_FULL);
  info.set_platform("a2a3sim");
  (*info.mutable_labels())["case"] = "service_test";
  return info;
}

v1::CaptureCounters DeviceCounters() {
  v1::CaptureCounters c;
  c.set_dropped_records(2);
  c.set_dropped_flush_timeout(2);
  c.set_gate_waits(5);
  return c;
}

// The same pairs through the embedded local store: the reference files.
std::string WriteLocally(const std::string& name, const Pairs& p) {
  const std::string dir = TempPath(absl::StrCat("local_", name, "/args_dump"));
  auto sink = LocalSink::Create(dir, Info(name));
  EXPECT_TRUE(sink.ok());
  EXPECT_TRUE((*sink)->WriteBatch(p.RecordPtrs(0, p.records.size()), p.Payloads(0, p.records.size())).ok());
  EXPECT_TRUE((*sink)->Finish(DeviceCounters()).ok());
  return dir;
}

class CaptureServiceTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& root, uint64_t quota = 0, std::string token = "",
                   std::string tls_cert = "", std::string tls_key = "") {
    TestCaptureServiceOptions o;
    o.root = TempPath(root);
    o.max_capture_bytes = quota;
    o.auth_token = std::move(token);
    o.tls_cert_file = std::move(tls_cert);
    o.tls_key_file = std::move(tls_key);
    auto server = TestCaptureService::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    root_ = server_->root();
    target_ = server_->target();
    channel_ = grpc::CreateChannel(target_, grpc::InsecureChannelCredentials());
    stub_ = v1::CaptureService::NewStub(channel_);
  }

  // A capture's stored file, whichever the backend ("" when there is none).
  std::string Stored(const std::string& capture, const std::string& file) {
    auto bytes = server_->CaptureFile(capture, file);
    return bytes.ok() ? *std::move(bytes) : std::string();
  }

  std::unique_ptr<GrpcSink> Sink(const std::string& name, std::string token = "") {
    GrpcSinkOptions o;
    o.target = target_;
    o.capture = name;
    o.info = Info(name);
    o.auth_token = std::move(token);
    o.ack_timeout = std::chrono::milliseconds(20000);
    auto sink = GrpcSink::Connect(o);
    EXPECT_TRUE(sink.ok()) << sink.status();
    return sink.ok() ? std::move(sink).value() : nullptr;
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }

  v1::CaptureSummary Get(const std::string& name, grpc::Status* status = nullptr) {
    v1::GetCaptureRequest req;
    req.set_capture(name);
    v1::CaptureSummary s;
    grpc::Status st = stub_->GetCapture(Ctx().get(), req, &s);
    if (status != nullptr) *status = st;
    return s;
  }

  // Every page of a query.
  std::vector<v1::CapturedArg> QueryAll(v1::QueryArgsRequest req, int* pages = nullptr) {
    std::vector<v1::CapturedArg> out;
    int n = 0;
    for (;;) {
      v1::QueryArgsResponse resp;
      grpc::Status s = stub_->QueryArgs(Ctx().get(), req, &resp);
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (!s.ok()) break;
      ++n;
      for (const auto& a : resp.args()) out.push_back(a);
      if (resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
    if (pages != nullptr) *pages = n;
    return out;
  }

  std::string ReadPayload(const std::string& name, uint64_t id, uint64_t offset, uint64_t length,
                          grpc::Status* status, int* chunks = nullptr) {
    v1::ReadPayloadRequest req;
    req.set_capture(name);
    req.set_record_id(id);
    req.set_offset(offset);
    req.set_length(length);
    auto ctx = Ctx();
    auto reader = stub_->ReadPayload(ctx.get(), req);
    std::string out;
    v1::PayloadChunk chunk;
    int n = 0;
    while (reader->Read(&chunk)) {
      EXPECT_EQ(chunk.offset(), offset + out.size());
      out += chunk.data();
      ++n;
    }
    *status = reader->Finish();
    if (chunks != nullptr) *chunks = n;
    return out;
  }

  std::string root_, target_;
  std::unique_ptr<TestCaptureService> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
};

TEST_F(CaptureServiceTest, IngestWritesTheSameFilesAsTheLocalStore) {
  StartServer("same_files");
  const Pairs p = MakePairs(40);
  auto sink = Sink("run1");
  ASSERT_NE(sink, nullptr);
  const size_t n = p.records.size();
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, 50), p.Payloads(0, 50)).ok());
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(50, n), p.Payloads(50, n)).ok());
  ASSERT_TRUE(sink->Finish(DeviceCounters()).ok());
  EXPECT_EQ(sink->finished().state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(sink->finished().records(), n);
  EXPECT_EQ(sink->finished().counters().dropped_records(), 2u);
  EXPECT_EQ(sink->reconnects(), 0u);
  const std::string local = WriteLocally("run1", p);
  const std::string remote = "run1";
  EXPECT_TRUE(Stored(remote, "args.bin") == ReadFileOrEmpty(local + "/args.bin"));
  EXPECT_EQ(Stored(remote, "args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  EXPECT_FALSE(Stored(remote, "args_dump.json").empty());
}

// Small messages: records end at every kind of place in a message (the
// server keeps a message's bytes whole or copies the smaller part), some
// carry stats; args.bin, the manifest and args.index are the local store's
// byte for byte.
TEST_F(CaptureServiceTest, ManySmallMessagesWriteTheSameFilesAsTheLocalStore) {
  StartServer("small_messages");
  Pairs p = MakePairs(30);
  for (size_t i = 0; i < p.records.size(); i += 4) {
    if (p.records[i].kind() != v1::KIND_TENSOR) continue;
    v1::TensorStats* st = p.records[i].mutable_stats();
    st->set_count(p.records[i].numel());
    st->set_nan(i % 3);
    st->set_min(-1.5);
    st->set_max(static_cast<double>(i));
    st->set_mean(0.25);
  }
  GrpcSinkOptions o;
  o.target = target_;
  o.capture = "small";
  o.info = Info("small");
  o.ack_timeout = std::chrono::milliseconds(20000);
  o.max_message_bytes = 3000;  // a few records, or a part of one payload
  auto sink = GrpcSink::Connect(o);
  ASSERT_TRUE(sink.ok()) << sink.status();
  const size_t n = p.records.size();
  for (size_t from = 0; from < n; from += 7) {
    const size_t to = std::min(n, from + 7);
    ASSERT_TRUE((*sink)->WriteBatch(p.RecordPtrs(from, to), p.Payloads(from, to)).ok());
  }
  ASSERT_TRUE((*sink)->Finish(DeviceCounters()).ok());
  EXPECT_EQ((*sink)->finished().records(), n);
  const std::string local = WriteLocally("small", p);
  const std::string remote = "small";
  for (const char* file : {"args.bin", "args_dump.json", "args.index"}) {
    const std::string want = ReadFileOrEmpty(local + "/" + file);
    EXPECT_FALSE(want.empty()) << file;
    EXPECT_TRUE(Stored(remote, file) == want) << file << " differs";
  }
}

TEST_F(CaptureServiceTest, ResumesAfterTheStreamBreaksWithoutLossOrDuplicates) {
  StartServer("resume");
  const Pairs p = MakePairs(40);
  const size_t n = p.records.size();
  auto sink = Sink("resumed");
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, 30), p.Payloads(0, 30)).ok());
  sink->BreakStreamForTest();  // as if the network dropped
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(30, 80), p.Payloads(30, 80)).ok());
  sink->BreakStreamForTest();
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(80, n), p.Payloads(80, n)).ok());
  ASSERT_TRUE(sink->Finish(DeviceCounters()).ok());
  EXPECT_GE(sink->reconnects(), 2u);
  const std::string local = WriteLocally("resumed", p);
  const std::string remote = "resumed";
  EXPECT_TRUE(Stored(remote, "args.bin") == ReadFileOrEmpty(local + "/args.bin"));
  EXPECT_EQ(Stored(remote, "args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
}

// The connection drops in the middle of a batch, with a record's payload
// half sent: the service keeps what it acknowledged, drops the partial
// record, and the resumed stream sends the rest once.
TEST_F(CaptureServiceTest, ResumesFromTheMiddleOfABatch) {
  StartServer("resume_mid");
  const Pairs p = MakePairs(40);  // 6 tensors of 1.2 MB: the batch spans 9+ messages
  const size_t n = p.records.size();
  for (int after : {1, 2, 4, 6}) {
    SCOPED_TRACE(after);
    const std::string name = absl::StrCat("mid", after);
    GrpcSinkOptions o;
    o.target = target_;
    o.capture = name;
    o.info = Info(name);
    o.break_after_messages = after;
    auto sink = GrpcSink::Connect(o);
    ASSERT_TRUE(sink.ok()) << sink.status();
    const absl::Status written = (*sink)->WriteBatch(p.RecordPtrs(0, n), p.Payloads(0, n));
    ASSERT_TRUE(written.ok()) << written;
    const absl::Status finished = (*sink)->Finish(DeviceCounters());
    ASSERT_TRUE(finished.ok()) << finished;
    EXPECT_GE((*sink)->reconnects(), 1u);
    const std::string local = WriteLocally(name, p);
    const std::string remote = name;
    EXPECT_TRUE(Stored(remote, "args.bin") == ReadFileOrEmpty(local + "/args.bin"));
    EXPECT_EQ(Stored(remote, "args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  }
}

// Batches go out while earlier ones wait for their acknowledgment: the
// sink keeps them, and a stream that breaks anywhere - between messages,
// inside a payload spread over many, with several batches unacknowledged -
// is resumed from the service's watermark with the kept messages (the
// first cut where the watermark is). The capture is the uninterrupted one.
TEST_F(CaptureServiceTest, UnacknowledgedBatchesAreSentAgainFromTheWatermark) {
  StartServer("window");
  const Pairs p = MakePairs(24);  // 72 records; tasks 3, 10, 17: 1.2 MB tensors
  const size_t n = p.records.size();
  const std::string local = WriteLocally("window", p);
  for (int after : {1, 2, 3, 5, 8, 13, 21, 34, 400, 900, 1500}) {
    SCOPED_TRACE(after);
    const std::string name = absl::StrCat("window", after);
    GrpcSinkOptions o;
    o.target = target_;
    o.capture = name;
    o.info = Info(name);
    o.ack_timeout = std::chrono::milliseconds(20000);
    o.max_message_bytes = 3000;  // a payload of 1.2 MB spans 400 messages
    o.max_unacked_bytes = 3 << 20;  // two large batches do not fit at once
    o.break_after_messages = after;
    auto sink = GrpcSink::Connect(o);
    ASSERT_TRUE(sink.ok()) << sink.status();
    for (size_t from = 0; from < n; from += 5) {
      const size_t to = std::min(n, from + 5);
      const absl::Status s = (*sink)->WriteBatch(p.RecordPtrs(from, to), p.Payloads(from, to));
      ASSERT_TRUE(s.ok()) << s;
    }
    ASSERT_TRUE((*sink)->Flush().ok());
    EXPECT_EQ((*sink)->durable_records(), n);
    EXPECT_EQ((*sink)->sent_records(), n);
    ASSERT_TRUE((*sink)->Finish(DeviceCounters()).ok());
    // One break; a resume may be told to retry while the broken stream
    // still holds the capture.
    EXPECT_GE((*sink)->reconnects(), 1u);
    EXPECT_EQ((*sink)->finished().records(), n);
    EXPECT_TRUE(Stored(name, "args.bin") == ReadFileOrEmpty(local + "/args.bin"));
    EXPECT_EQ(Stored(name, "args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  }
}

TEST_F(CaptureServiceTest, ListsAndGetsCapturesWithPagesLabelsAndState) {
  StartServer("list");
  const Pairs p = MakePairs(3);
  std::unique_ptr<GrpcSink> live;
  for (int i = 0; i < 5; ++i) {
    GrpcSinkOptions o;
    o.target = target_;
    o.capture = absl::StrCat("cap", i);
    o.info = Info(o.capture);
    (*o.info.mutable_labels())["user"] = i % 2 ? "odd" : "even";
    auto sink = GrpcSink::Connect(o);
    ASSERT_TRUE(sink.ok()) << sink.status();
    ASSERT_TRUE((*sink)->WriteBatch(p.RecordPtrs(0, 9), p.Payloads(0, 9)).ok());
    if (i == 4) {
      ASSERT_TRUE((*sink)->Flush().ok());
      live = std::move(sink).value();  // stays live
    } else {
      ASSERT_TRUE((*sink)->Finish(v1::CaptureCounters()).ok());
    }
  }
  std::vector<std::string> names;
  v1::ListCapturesRequest req;
  req.set_page_size(2);
  int pages = 0;
  for (;;) {
    v1::ListCapturesResponse resp;
    ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), req, &resp).ok());
    ++pages;
    for (const auto& c : resp.captures()) names.push_back(c.capture());
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"cap0", "cap1", "cap2", "cap3", "cap4"}));
  v1::ListCapturesRequest odd;
  (*odd.mutable_labels())["user"] = "odd";
  v1::ListCapturesResponse resp;
  ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), odd, &resp).ok());
  ASSERT_EQ(resp.captures_size(), 2);
  EXPECT_EQ(resp.captures(1).capture(), "cap3");
  v1::ListCapturesRequest live_only;
  live_only.set_state(v1::CAPTURE_STATE_LIVE);
  resp.Clear();
  ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), live_only, &resp).ok());
  ASSERT_EQ(resp.captures_size(), 1);
  EXPECT_EQ(resp.captures(0).capture(), "cap4");
  EXPECT_TRUE(resp.captures(0).attached());
  const v1::CaptureSummary s = Get("cap1");
  EXPECT_EQ(s.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(s.records(), 9u);
  EXPECT_EQ(s.counters().total_args(), 9u);
  EXPECT_EQ(s.counters().input_args(), 6u);
  EXPECT_EQ(s.labels().at("user"), "odd");
  grpc::Status st;
  Get("nope", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  Get("../etc", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ListCapturesRequest bad;
  bad.set_page_token("garbage");
  EXPECT_EQ(stub_->ListCaptures(Ctx().get(), bad, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(live->Finish(v1::CaptureCounters()).ok());
}

TEST_F(CaptureServiceTest, QueriesLiveAndFinishedCapturesTheSameWay) {
  StartServer("query");
  const Pairs p = MakePairs(30);
  auto sink = Sink("q");
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, p.records.size()),
                               p.Payloads(0, p.records.size())).ok());
  ASSERT_TRUE(sink->Flush().ok());
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    v1::QueryArgsRequest by_task;
    by_task.set_capture("q");
    by_task.set_task_id(0x100000007ull);
    auto got = QueryAll(by_task);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].record().stage(), v1::STAGE_BEFORE_DISPATCH);
    EXPECT_EQ(got[0].record().arg_index(), 0u);
    EXPECT_EQ(got[1].record().kind(), v1::KIND_SCALAR);
    EXPECT_EQ(got[1].record().scalar_bits(), 7u);
    EXPECT_EQ(got[2].record().role(), v1::ROLE_OUTPUT);
    EXPECT_EQ(got[2].record_id(), 7u * 3 + 2);
    by_task.set_stage(v1::STAGE_AFTER_COMPLETION);
    by_task.set_role(v1::ROLE_OUTPUT);
    got = QueryAll(by_task);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].record().bin_size(), p.records[got[0].record_id()].bin_size());
    // Every scalar, two per page: all 30 come back, none twice.
    v1::QueryArgsRequest scalars;
    scalars.set_capture("q");
    scalars.mutable_filter()->set_kind(v1::KIND_SCALAR);
    scalars.set_page_size(2);
    int pages = 0;
    got = QueryAll(scalars, &pages);
    ASSERT_EQ(got.size(), 30u);
    EXPECT_GE(pages, 15);
    std::set<uint64_t> ids;
    for (const auto& a : got) ids.insert(a.record_id());
    EXPECT_EQ(ids.size(), 30u);
    v1::QueryArgsRequest by_func;
    by_func.set_capture("q");
    by_func.mutable_filter()->set_func_id(3);
    by_func.mutable_filter()->set_dtype(v1::DTYPE_INT32);
    EXPECT_EQ(QueryAll(by_func).size(), 6u);  // tasks 3, 8, ..., 28
    v1::QueryArgsRequest bad = scalars;
    bad.set_page_token("zzz");
    v1::QueryArgsResponse resp;
    EXPECT_EQ(stub_->QueryArgs(Ctx().get(), bad, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    // Tokens are checked strictly and never echoed whole (an 8 KB one
    // broke the status metadata).
    for (const std::string& token :
         {std::string(8192, 'p'), "p" + std::string(8000, '9'), std::string("p1\n\x01"),
          std::string("p-1"), std::string("p")}) {
      bad.set_page_token(token);
      const grpc::Status st = stub_->QueryArgs(Ctx().get(), bad, &resp);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << token.size();
      EXPECT_LT(st.error_message().size(), 120u) << st.error_message();
      EXPECT_NE(st.error_message().find("is not one of ours"), std::string::npos);
    }
    v1::ListCapturesRequest list;
    list.set_page_token("n" + std::string(8192, 'a'));
    v1::ListCapturesResponse listed;
    const grpc::Status st = stub_->ListCaptures(Ctx().get(), list, &listed);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_LT(st.error_message().size(), 120u) << st.error_message();
  };
  check("live");
  EXPECT_EQ(Get("q").state(), v1::CAPTURE_STATE_LIVE);
  // A page token of the live capture, kept across its finish.
  v1::QueryArgsRequest paged;
  paged.set_capture("q");
  paged.set_page_size(4);
  v1::QueryArgsResponse first;
  ASSERT_TRUE(stub_->QueryArgs(Ctx().get(), paged, &first).ok());
  ASSERT_FALSE(first.next_page_token().empty());
  ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  EXPECT_EQ(Get("q").state(), v1::CAPTURE_STATE_FINISHED);
  check("finished");
  // Its positions were in arrival order; the finished capture's are in
  // manifest order: the old token is refused, not answered with rows
  // skipped or repeated.
  paged.set_page_token(first.next_page_token());
  v1::QueryArgsResponse later;
  const grpc::Status sealed = stub_->QueryArgs(Ctx().get(), paged, &later);
  EXPECT_EQ(sealed.error_code(), grpc::StatusCode::ABORTED) << sealed.error_message();
  EXPECT_NE(sealed.error_message().find("finished since this page token was issued"),
            std::string::npos)
      << sealed.error_message();
}

TEST_F(CaptureServiceTest, ReadsPayloadsAndRangesInChunks) {
  StartServer("payload");
  const Pairs p = MakePairs(8);  // task 3's tensors are 1.2 MB
  auto sink = Sink("pl");
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, p.records.size()),
                               p.Payloads(0, p.records.size())).ok());
  ASSERT_TRUE(sink->Flush().ok());
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    grpc::Status st;
    int chunks = 0;
    const uint64_t big = 3 * 3;  // task 3's input
    EXPECT_TRUE(ReadPayload("pl", big, 0, 0, &st, &chunks) == p.bytes[big]);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_GE(chunks, 2);
    EXPECT_TRUE(ReadPayload("pl", big, 1000, 5000, &st) == p.bytes[big].substr(1000, 5000));
    EXPECT_TRUE(ReadPayload("pl", 3, 10, 0, &st) == p.bytes[3].substr(10));
    EXPECT_TRUE(ReadPayload("pl", 1, 0, 0, &st).empty());  // a scalar
    EXPECT_TRUE(st.ok());
    ReadPayload("pl", 0, p.bytes[0].size() + 1, 0, &st);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::OUT_OF_RANGE);
    ReadPayload("pl", 9999, 0, 0, &st);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  };
  check("live");
  ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  check("finished");
}

TEST_F(CaptureServiceTest, TwoWatchersSeeEveryRecordAsItBecomesDurable) {
  StartServer("watch");
  const Pairs p = MakePairs(25);
  auto sink = Sink("w");
  ASSERT_NE(sink, nullptr);
  auto watch = [&](v1::ArgFilter filter, std::vector<uint64_t>* ids, grpc::Status* status) {
    v1::WatchCaptureRequest req;
    req.set_capture("w");
    *req.mutable_filter() = filter;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto reader = stub_->WatchCapture(&ctx, req);
    v1::WatchCaptureResponse r;
    while (reader->Read(&r)) {
      for (const auto& a : r.args()) ids->push_back(a.record_id());
    }
    *status = reader->Finish();
  };
  std::vector<uint64_t> all, outputs;
  grpc::Status s1, s2;
  v1::ArgFilter out_filter;
  out_filter.set_role(v1::ROLE_OUTPUT);
  std::thread w1(watch, v1::ArgFilter(), &all, &s1);
  std::thread w2(watch, out_filter, &outputs, &s2);
  for (size_t from = 0; from < p.records.size(); from += 15) {
    const size_t to = std::min(p.records.size(), from + 15);
    ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(from, to), p.Payloads(from, to)).ok());
  }
  ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  w1.join();
  w2.join();
  EXPECT_TRUE(s1.ok()) << s1.error_message();
  EXPECT_TRUE(s2.ok()) << s2.error_message();
  ASSERT_EQ(all.size(), p.records.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i);
  ASSERT_EQ(outputs.size(), 25u);
  for (size_t i = 0; i < outputs.size(); ++i) EXPECT_EQ(outputs[i], 3 * i + 2);
}

// A raw ingest stream, for what the sink would never send.
class RawIngest {
 public:
  RawIngest(v1::CaptureService::Stub* stub, const std::string& token = "") {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!token.empty()) ctx_.AddMetadata("authorization", "Bearer " + token);
    stream_ = stub->Ingest(&ctx_);
  }
  bool Send(const v1::IngestRequest& r) { return stream_->Write(r); }
  bool Read(v1::IngestResponse* r) { return stream_->Read(r); }
  grpc::Status End() {
    stream_->WritesDone();
    v1::IngestResponse r;
    while (stream_->Read(&r)) {
    }
    return stream_->Finish();
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::IngestRequest, v1::IngestResponse>> stream_;
};

v1::IngestRequest Open(const std::string& name, bool resume = false) {
  v1::IngestRequest r;
  r.mutable_open()->set_capture(name);
  r.mutable_open()->set_level(v1::DUMP_LEVEL_FULL);
  r.mutable_open()->set_resume(resume);
  return r;
}

v1::IngestRequest Batch(const Pairs& p, size_t from, size_t to, uint64_t payload_offset) {
  v1::IngestRequest r;
  r.mutable_batch()->set_first_record(from);
  r.mutable_batch()->set_payload_offset(payload_offset);
  for (size_t i = from; i < to; ++i) {
    *r.mutable_batch()->add_records() = p.records[i];
    r.mutable_batch()->mutable_payload()->append(p.bytes[i]);
  }
  return r;
}

TEST_F(CaptureServiceTest, CaptureNamesCannotLeaveTheRoot) {
  StartServer("names");
  const std::vector<std::string> names = {"../escape", "/etc/passwd", "a/b", "", ".", "..",
                                         std::string("nul\0byte", 8), std::string(200, 'x')};
  for (const std::string& name : names) {
    RawIngest in(stub_.get());
    in.Send(Open(name));
    const grpc::Status s = in.End();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "'" << name << "'";
  }
  std::ifstream escaped(TempPath("escape"));
  EXPECT_FALSE(escaped.good());
}

// Reads until the ack covers `records` (or the stream ends).
bool ReadUntilAcked(RawIngest& in, uint64_t records) {
  v1::IngestResponse r;
  while (in.Read(&r)) {
    if (r.has_ack() && r.ack().durable_records() >= records) return true;
  }
  return false;
}

// Only a finish message ends a capture: a half-close without one, a
// message too large for gRPC, a cancelled call leave it live (and
// resumable); anything after finish is refused; an open that never wrote
// a record leaves nothing behind.
TEST_F(CaptureServiceTest, OnlyAFinishMessageEndsACapture) {
  StartServer("ends");
  const Pairs p = MakePairs(4);
  auto opened = [&](RawIngest& in, const std::string& name, bool resume) {
    EXPECT_TRUE(in.Send(Open(name, resume)));
    v1::IngestResponse r;
    EXPECT_TRUE(in.Read(&r));
    EXPECT_TRUE(r.has_opened()) << r.DebugString();
    return r.opened().durable_records();
  };
  // A half-close without finish.
  {
    RawIngest in(stub_.get());
    opened(in, "half", false);
    ASSERT_TRUE(in.Send(Batch(p, 0, 6, 0)));
    ASSERT_TRUE(ReadUntilAcked(in, 6));
    const grpc::Status s = in.End();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_NE(s.error_message().find("stays live"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(Get("half").state(), v1::CAPTURE_STATE_LIVE);
  // A message larger than gRPC takes (4 MiB): the stream fails, the
  // capture keeps what it had and stays live.
  {
    RawIngest in(stub_.get());
    opened(in, "huge", false);
    ASSERT_TRUE(in.Send(Batch(p, 0, 6, 0)));
    ASSERT_TRUE(ReadUntilAcked(in, 6));
    v1::IngestRequest big;
    big.mutable_batch()->set_first_record(6);
    big.mutable_batch()->set_payload_offset(Get("huge").counters().payload_bytes());
    big.mutable_batch()->mutable_payload()->assign(5 << 20, 'x');
    in.Send(big);
    EXPECT_FALSE(in.End().ok());
  }
  for (const char* name : {"half", "huge"}) {
    SCOPED_TRACE(name);
    grpc::Status st;
    const v1::CaptureSummary s = Get(name, &st);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(s.state(), v1::CAPTURE_STATE_LIVE);
    EXPECT_EQ(s.records(), 6u);
    // Resumed and finished properly. The server lets a capture go before
    // it ends the call, so once the client saw the status it resumes at
    // once; only a message gRPC itself refused ("huge") may end the call
    // before the server did (ABORTED: still attached, retried).
    for (int attempt = 0;; ++attempt) {
      RawIngest in(stub_.get());
      in.Send(Open(name, true));
      v1::IngestResponse r;
      if (!in.Read(&r) || !r.has_opened()) {
        const grpc::Status st = in.End();
        ASSERT_EQ(std::string(name), "huge") << st.error_message();
        ASSERT_EQ(st.error_code(), grpc::StatusCode::ABORTED) << st.error_message();
        ASSERT_LT(attempt, 500) << st.error_message();
        continue;
      }
      EXPECT_EQ(r.opened().durable_records(), 6u);
      ASSERT_TRUE(in.Send(Batch(p, 6, p.records.size(), r.opened().durable_bin_bytes())));
      v1::IngestRequest finish;
      finish.mutable_finish();
      ASSERT_TRUE(in.Send(finish));
      EXPECT_TRUE(in.End().ok());
      break;
    }
    EXPECT_EQ(Get(name).state(), v1::CAPTURE_STATE_FINISHED);
    EXPECT_EQ(Get(name).records(), p.records.size());
  }
  // After finish: a batch, or a second finish, is refused.
  for (const bool second_finish : {false, true}) {
    RawIngest in(stub_.get());
    const std::string name = second_finish ? "twice" : "after";
    opened(in, name, false);
    ASSERT_TRUE(in.Send(Batch(p, 0, 3, 0)));
    v1::IngestRequest finish;
    finish.mutable_finish();
    ASSERT_TRUE(in.Send(finish));
    in.Send(second_finish ? finish : Batch(p, 3, 6, 0));
    const grpc::Status s = in.End();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << name;
    EXPECT_NE(s.error_message().find(second_finish ? "finish sent twice" : "a message after finish"),
              std::string::npos)
        << s.error_message();
    // The call ended at the refused message; the finish completes on the
    // capture's writer: a watch ends when it has.
    grpc::ClientContext wctx;
    v1::WatchCaptureRequest watch;
    watch.set_capture(name);
    auto reader = stub_->WatchCapture(&wctx, watch);
    v1::WatchCaptureResponse w;
    while (reader->Read(&w)) {
    }
    EXPECT_TRUE(reader->Finish().ok());
    grpc::Status got;
    const v1::CaptureSummary summary = Get(name, &got);
    EXPECT_EQ(summary.state(), v1::CAPTURE_STATE_FINISHED);
    EXPECT_TRUE(got.ok()) << got.error_message();
    EXPECT_EQ(summary.records(), 3u) << summary.DebugString();  // the finish itself was taken
  }
  // An open that never wrote a record leaves no capture behind.
  {
    RawIngest in(stub_.get());
    opened(in, "orphan", false);
    EXPECT_FALSE(in.End().ok());
  }
  grpc::Status orphan;
  Get("orphan", &orphan);  // dropped before the stream's status was sent
  EXPECT_EQ(orphan.error_code(), grpc::StatusCode::NOT_FOUND);
  RawIngest reuse(stub_.get());
  opened(reuse, "orphan", false);  // the name is free again
  reuse.End();
}

// Payloads of a few bytes (a scalar-sized tensor, a batch of them under 16
// bytes) arrive byte for byte: the job handed to the writer owns them.
TEST_F(CaptureServiceTest, TinyPayloadsAreStoredByteForByte) {
  StartServer("tiny");
  RawIngest in(stub_.get());
  ASSERT_TRUE(in.Send(Open("tiny")));
  v1::IngestResponse r;
  ASSERT_TRUE(in.Read(&r) && r.has_opened());
  std::string sent;
  uint64_t offset = 0;
  for (uint32_t batch = 0; batch < 6; ++batch) {
    v1::IngestRequest req;
    req.mutable_batch()->set_first_record(batch);
    req.mutable_batch()->set_payload_offset(offset);
    const uint32_t n = 1 + batch * 2;  // 1 to 11 bytes
    *req.mutable_batch()->add_records() = TensorRecord(0x100000000ull + batch).FuncIds({1})
        .Dtype(v1::DTYPE_UINT8).Shape({n}).Contiguous().BinOffset(offset);
    std::string bytes;
    for (uint32_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(0xA0 + batch * 16 + i));
    req.mutable_batch()->set_payload(bytes);
    sent += bytes;
    offset += n;
    ASSERT_TRUE(in.Send(req));
  }
  v1::IngestRequest finish;
  finish.mutable_finish();
  ASSERT_TRUE(in.Send(finish));
  ASSERT_TRUE(in.End().ok());
  EXPECT_TRUE(Stored("tiny", "args.bin") == sent);
}

// FinishCapture seals a live capture its client will not come back to.
TEST_F(CaptureServiceTest, FinishCaptureSealsADetachedLiveCapture) {
  StartServer("finish_rpc", 0, "s3cret");
  const Pairs p = MakePairs(2);
  auto sink = Sink("abandoned", "s3cret");
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, 6), p.Payloads(0, 6)).ok());
  ASSERT_TRUE(sink->Flush().ok());
  v1::FinishCaptureRequest req;
  req.set_capture("abandoned");
  v1::CaptureSummary s;
  EXPECT_EQ(stub_->FinishCapture(Ctx().get(), req, &s).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub_->FinishCapture(Ctx("s3cret").get(), req, &s).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);  // attached
  sink->BreakStreamForTest();
  sink.reset();  // gone for good
  grpc::Status st;
  // The client went away without a status: the server learns of it when the
  // transport says so (no event reaches this test), so ask until it has.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    st = stub_->FinishCapture(Ctx("s3cret").get(), req, &s);
    if (st.error_code() != grpc::StatusCode::FAILED_PRECONDITION) break;
  }
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(s.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(s.records(), 6u);
  EXPECT_EQ(stub_->FinishCapture(Ctx("s3cret").get(), req, &s).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);  // finished
  req.set_capture("nope");
  EXPECT_EQ(stub_->FinishCapture(Ctx("s3cret").get(), req, &s).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// A download under way when its capture is deleted reads on to its end,
// byte for byte (the open file outlives the name); a read asked for after
// the deletion is NOT_FOUND, naming the capture.
TEST_F(CaptureServiceTest, ADownloadUnderWayOutlivesTheDeletionOfItsCapture) {
  StartServer("delete_mid_read");
  const Pairs p = MakePairs(8);  // task 3's tensors are 1.2 MB
  auto sink = Sink("doomed");
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, p.records.size()),
                               p.Payloads(0, p.records.size())).ok());
  ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  const uint64_t big = 3 * 3;  // task 3's input
  v1::ReadPayloadRequest req;
  req.set_capture("doomed");
  req.set_record_id(big);
  auto ctx = Ctx();
  auto reader = stub_->ReadPayload(ctx.get(), req);
  v1::PayloadChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  std::string got = chunk.data();
  ASSERT_LT(got.size(), p.bytes[big].size()) << "the payload came in one chunk";
  v1::DeleteCaptureRequest del;
  del.set_capture("doomed");
  v1::DeleteCaptureResponse freed;
  ASSERT_TRUE(stub_->DeleteCapture(Ctx().get(), del, &freed).ok());
  ASSERT_FALSE(IsDirectory(root_ + "/doomed"));
  while (reader->Read(&chunk)) got += chunk.data();
  const grpc::Status st = reader->Finish();
  if (server_->object_store()) {
    // Read by ranges from the store: what follows the deletion is gone,
    // and the answer says so (or every byte came before it).
    if (!st.ok()) {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
      EXPECT_NE(st.error_message().find("deleted"), std::string::npos) << st.error_message();
    }
    EXPECT_TRUE(!st.ok() || got == p.bytes[big]);
  } else {
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(got == p.bytes[big]) << got.size() << " of " << p.bytes[big].size() << " bytes";
  }
  grpc::Status after;
  ReadPayload("doomed", big, 0, 0, &after);
  EXPECT_EQ(after.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(after.error_message().find("doomed"), std::string::npos) << after.error_message();
}

// Readers that cancel after their first chunk, more of them than the
// service has threads for reading: none holds a thread, and the next read
// gets every byte.
TEST_F(CaptureServiceTest, ReadersThatGoAwayMidPayloadLeaveTheServiceServing) {
  StartServer("cancel_mid_read");
  const Pairs p = MakePairs(8);  // task 3's tensors are 1.2 MB
  auto sink = Sink("left");
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, p.records.size()),
                               p.Payloads(0, p.records.size())).ok());
  ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  const uint64_t big = 3 * 3;  // task 3's input
  for (int i = 0; i < 4; ++i) {
    v1::ReadPayloadRequest req;
    req.set_capture("left");
    req.set_record_id(big);
    auto ctx = Ctx();
    auto reader = stub_->ReadPayload(ctx.get(), req);
    v1::PayloadChunk chunk;
    ASSERT_TRUE(reader->Read(&chunk));
    ASSERT_LT(chunk.data().size(), p.bytes[big].size()) << "the payload came in one chunk";
    ctx->TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  grpc::Status st;
  EXPECT_TRUE(ReadPayload("left", big, 0, 0, &st) == p.bytes[big]);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// DeleteCapture: token-protected like the rest; a live capture is refused
// (finish it first), a finished one goes with its files, and the service
// says what every capture takes on disk before and after.
TEST_F(CaptureServiceTest, DeleteCaptureRemovesAFinishedCaptureWithItsFiles) {
  StartServer("delete_rpc", 0, "s3cret");
  const Pairs p = MakePairs(6);
  auto done = Sink("done", "s3cret");
  ASSERT_NE(done, nullptr);
  ASSERT_TRUE(done->WriteBatch(p.RecordPtrs(0, 9), p.Payloads(0, 9)).ok());
  ASSERT_TRUE(done->Finish(v1::CaptureCounters()).ok());
  auto live = Sink("live", "s3cret");
  ASSERT_NE(live, nullptr);
  ASSERT_TRUE(live->WriteBatch(p.RecordPtrs(0, 9), p.Payloads(0, 9)).ok());
  ASSERT_TRUE(live->Flush().ok());

  v1::ListCapturesRequest list;
  v1::ListCapturesResponse before;
  ASSERT_TRUE(stub_->ListCaptures(Ctx("s3cret").get(), list, &before).ok());
  ASSERT_EQ(before.captures_size(), 2);
  const uint64_t done_bytes = before.captures(0).disk_bytes();  // by name: "done" first
  EXPECT_EQ(before.captures(0).capture(), "done");
  EXPECT_GT(done_bytes, 0u);
  EXPECT_GT(before.captures(1).disk_bytes(), 0u);
  EXPECT_EQ(before.root_disk_bytes(), done_bytes + before.captures(1).disk_bytes());

  v1::DeleteCaptureRequest req;
  v1::DeleteCaptureResponse resp;
  req.set_capture("done");
  EXPECT_EQ(stub_->DeleteCapture(Ctx().get(), req, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub_->DeleteCapture(Ctx("wrong").get(), req, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_FALSE(Stored("done", "args_dump.json").empty());  // what a refused call leaves
  req.set_capture("live");
  grpc::Status refused = stub_->DeleteCapture(Ctx("s3cret").get(), req, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("FinishCapture"), std::string::npos)
      << refused.error_message();
  req.set_capture("../etc");
  EXPECT_EQ(stub_->DeleteCapture(Ctx("s3cret").get(), req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  req.set_capture("done");
  ASSERT_TRUE(stub_->DeleteCapture(Ctx("s3cret").get(), req, &resp).ok());
  EXPECT_EQ(resp.freed_bytes(), done_bytes);
  EXPECT_FALSE(IsDirectory(root_ + "/done"));
  EXPECT_TRUE(Stored("done", "args_dump.json").empty());
  EXPECT_EQ(stub_->DeleteCapture(Ctx("s3cret").get(), req, &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::GetCaptureRequest get;
  get.set_capture("done");
  v1::CaptureSummary s;
  EXPECT_EQ(stub_->GetCapture(Ctx("s3cret").get(), get, &s).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::ListCapturesResponse after;
  ASSERT_TRUE(stub_->ListCaptures(Ctx("s3cret").get(), list, &after).ok());
  ASSERT_EQ(after.captures_size(), 1);
  EXPECT_EQ(after.captures(0).capture(), "live");
  EXPECT_EQ(after.root_disk_bytes(), after.captures(0).disk_bytes());
  // The live capture streams on and finishes as if nothing happened.
  ASSERT_TRUE(live->WriteBatch(p.RecordPtrs(9, 18), p.Payloads(9, 18)).ok());
  EXPECT_TRUE(live->Finish(v1::CaptureCounters()).ok());
}

// A capture of the overflow check alone records at FULL but ran at level
// 0: its summary says level OFF with the overflow check in its scope, live
// and finished, in GetCapture and ListCaptures (as its manifest does).
TEST_F(CaptureServiceTest, SummariesTellTheLevelThatRan) {
  StartServer("summary_level");
  const Pairs p = MakePairs(2);
  RawIngest in(stub_.get());
  v1::IngestRequest open = Open("overflow_only");
  open.mutable_open()->mutable_scope()->set_level(0);
  open.mutable_open()->mutable_scope()->set_overflow(true);
  open.mutable_open()->mutable_scope()->set_stats("off");
  open.mutable_open()->mutable_scope()->set_mode("all");
  ASSERT_TRUE(in.Send(open));
  v1::IngestResponse r;
  ASSERT_TRUE(in.Read(&r) && r.has_opened());
  ASSERT_TRUE(in.Send(Batch(p, 0, 4, 0)));
  auto expect_truthful = [](const v1::CaptureSummary& s, const char* when) {
    EXPECT_EQ(s.level(), v1::DUMP_LEVEL_OFF) << when;
    EXPECT_TRUE(s.scope().overflow()) << when;
    EXPECT_EQ(s.scope().mode(), "all") << when;
  };
  expect_truthful(Get("overflow_only"), "live");
  v1::IngestRequest finish;
  finish.mutable_finish();
  ASSERT_TRUE(in.Send(finish));
  ASSERT_TRUE(in.End().ok());
  expect_truthful(Get("overflow_only"), "finished");
  v1::ListCapturesResponse list;
  ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), v1::ListCapturesRequest(), &list).ok());
  ASSERT_EQ(list.captures_size(), 1);
  expect_truthful(list.captures(0), "listed");
  const std::string manifest =
      Stored("overflow_only", "args_dump.json");
  EXPECT_NE(manifest.find("\"dump_args_level\": 0,"), std::string::npos) << manifest;
  // A capture whose client sends no scope keeps the level it recorded at.
  RawIngest plain(stub_.get());
  ASSERT_TRUE(plain.Send(Open("no_scope")));
  ASSERT_TRUE(plain.Read(&r) && r.has_opened());
  const v1::CaptureSummary s = Get("no_scope");
  EXPECT_EQ(s.level(), v1::DUMP_LEVEL_FULL);
  EXPECT_FALSE(s.has_scope());
  plain.Send(finish);
  EXPECT_TRUE(plain.End().ok());
}

// The finish message's step levels (the dynamic switch): checked, then the
// capture's level and its manifest say what ran; bad ones are refused and
// the capture stays live and resumable.
TEST_F(CaptureServiceTest, FinishCarriesTheLevelsPerStep) {
  StartServer("step_levels");
  const Pairs p = MakePairs(2);
  auto finish_with = [&](const std::string& name,
                         std::vector<std::pair<uint32_t, uint32_t>> levels, bool resume) {
    std::unique_ptr<RawIngest> stream;
    v1::IngestResponse r;
    // The last stream ended with a status: its capture was let go first.
    stream = std::make_unique<RawIngest>(stub_.get());
    stream->Send(Open(name, resume));
    if (!stream->Read(&r) || !r.has_opened()) return stream->End();
    RawIngest& in = *stream;
    if (r.opened().durable_records() == 0) {
      EXPECT_TRUE(in.Send(Batch(p, 0, 6, 0)));
    }
    v1::IngestRequest finish;
    for (const auto& [step, level] : levels) {
      v1::StepLevel* l = finish.mutable_finish()->add_step_levels();
      l->set_first_step(step);
      l->set_level(level);
    }
    finish.mutable_finish();
    EXPECT_TRUE(in.Send(finish));
    return in.End();
  };
  for (const auto& bad : std::vector<std::vector<std::pair<uint32_t, uint32_t>>>{
           {{0, 2}, {3, 7}}, {{2, 2}, {2, 3}}, {{4, 1}, {1, 3}}}) {
    const grpc::Status st = finish_with("bad", bad, /*resume=*/bad[0].first != 0);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("step_levels["), std::string::npos) << st.error_message();
    EXPECT_EQ(Get("bad").state(), v1::CAPTURE_STATE_LIVE);
  }
  const grpc::Status ok = finish_with("good", {{0, 0}, {2, 3}, {5, 1}}, false);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  const v1::CaptureSummary s = Get("good");
  EXPECT_EQ(s.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(s.level(), v1::DUMP_LEVEL_PARTIAL);  // the last level above 0
  const std::string manifest = Stored("good", "args_dump.json");
  EXPECT_NE(manifest.find("\"dump_levels\": [{\"first_step\": 0, \"level\": 0}, "
                          "{\"first_step\": 2, \"level\": 3}, {\"first_step\": 5, \"level\": 1}]"),
            std::string::npos)
      << manifest;
  EXPECT_NE(manifest.find("\"dump_args_level\": 1,"), std::string::npos);
}

// How the device process died goes over the wire with the
// finish, into the same manifest the local store writes, and GetCapture
// reports it: when the capture finishes, and after a restart (read back
// from args.index).
TEST_F(CaptureServiceTest, ADeviceCrashReachesTheManifestAndGetCapture) {
  StartServer("device_crash");
  const Pairs p = MakePairs(4);
  const size_t n = p.records.size();
  v1::CaptureInfo end;
  *end.mutable_device_crash() = SegvCrash(0x100000003, 0x100000002);
  auto sink = Sink("crashed");
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, n), p.Payloads(0, n)).ok());
  ASSERT_TRUE(sink->Amend(end).ok());
  ASSERT_TRUE(sink->Finish(DeviceCounters()).ok());
  const std::string crash = end.device_crash().SerializeAsString();
  EXPECT_EQ(sink->finished().device_crash().SerializeAsString(), crash);
  EXPECT_EQ(Get("crashed").device_crash().SerializeAsString(), crash);

  const std::string local = TempPath("local_crashed/args_dump");
  {
    auto store = LocalSink::Create(local, Info("crashed"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->WriteBatch(p.RecordPtrs(0, n), p.Payloads(0, n)).ok());
    ASSERT_TRUE((*store)->Amend(end).ok());
    ASSERT_TRUE((*store)->Finish(DeviceCounters()).ok());
  }
  const std::string manifest = Stored("crashed", "args_dump.json");
  EXPECT_EQ(manifest, ReadFileOrEmpty(local + "/args_dump.json"));
  EXPECT_NE(manifest.find("\"device_crash\": {\"signal\": 11"), std::string::npos) << manifest;

  // A capture without one says nothing of a crash.
  auto clean = Sink("clean");
  ASSERT_NE(clean, nullptr);
  ASSERT_TRUE(clean->WriteBatch(p.RecordPtrs(0, n), p.Payloads(0, n)).ok());
  ASSERT_TRUE(clean->Finish(DeviceCounters()).ok());
  EXPECT_FALSE(Get("clean").has_device_crash());

  server_->Shutdown(std::chrono::milliseconds(200));
  server_.reset();
  sink.reset();
  clean.reset();
  StartServer("device_crash");
  const v1::CaptureSummary again = Get("crashed");
  EXPECT_EQ(again.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(again.device_crash().SerializeAsString(), crash);
  EXPECT_FALSE(Get("clean").has_device_crash());
}

// A device_crash over its bounds is INVALID_ARGUMENT naming the field, at
// the service (a raw stream) and already at the sink; the capture stays
// live, without it.
TEST_F(CaptureServiceTest, ABadDeviceCrashIsInvalidArgument) {
  StartServer("device_crash_bad");
  const Pairs p = MakePairs(2);
  std::vector<v1::DeviceCrash> bad(3, SegvCrash(0x100000001, 0x100000000));
  bad[0].mutable_executing(1)->set_func(std::string(5000, 'f'));
  for (int i = 0; i < 3; ++i) bad[1].mutable_executing(0)->add_func_ids(i);  // 4 with its own
  bad[2].set_signal(-4);
  const std::vector<std::string> says = {"device_crash.executing[1].func: 5000 bytes",
                                         "device_crash.executing[0].func_ids: 4 ids",
                                         "device_crash.signal: -4"};
  for (size_t i = 0; i < bad.size(); ++i) {
    RawIngest in(stub_.get());
    v1::IngestResponse r;
    ASSERT_TRUE(in.Send(Open("bad", /*resume=*/i > 0)));
    ASSERT_TRUE(in.Read(&r) && r.has_opened());
    if (i == 0) {
      EXPECT_TRUE(in.Send(Batch(p, 0, 6, 0)));
    }
    v1::IngestRequest finish;
    *finish.mutable_finish()->mutable_device_crash() = bad[i];
    EXPECT_TRUE(in.Send(finish));
    const grpc::Status st = in.End();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find(says[i]), std::string::npos) << st.error_message();
    const v1::CaptureSummary s = Get("bad");
    EXPECT_EQ(s.state(), v1::CAPTURE_STATE_LIVE);
    EXPECT_FALSE(s.has_device_crash());
  }
  auto sink = Sink("bad_at_sink");
  ASSERT_NE(sink, nullptr);
  v1::CaptureInfo end;
  *end.mutable_device_crash() = bad[0];
  const absl::Status s = sink->Amend(end);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find(says[0]), std::string::npos) << s;
}

// MakePairs' kernels (func id = task % 5) as the SDK would name them.
google::protobuf::RepeatedPtrField<v1::Kernel> PairKernels() {
  google::protobuf::RepeatedPtrField<v1::Kernel> t;
  const char* names[] = {"add", "mul", "matmul", "relu", "copy"};
  const char* types[] = {"elementwise", "elementwise", "matmul", "activation", ""};
  for (uint32_t i = 0; i < 5; ++i) {
    v1::Kernel* k = t.Add();
    k->set_func_id(i);
    k->set_name(names[i]);
    k->set_type(types[i]);
    k->add_signature()->set_direction(v1::ARG_DIRECTION_IN);
    v1::KernelArg* out = k->add_signature();
    out->set_direction(v1::ARG_DIRECTION_OUT);
    out->set_dtype(v1::DTYPE_FLOAT32);
  }
  return t;
}

std::set<uint32_t> FuncsOf(const std::vector<v1::CapturedArg>& args) {
  std::set<uint32_t> ids;
  for (const v1::CapturedArg& a : args) ids.insert(a.record().func_ids().begin(), a.record().func_ids().end());
  return ids;
}

// The kernel table goes in with IngestOpen, into the same files as the
// local store's, out of GetCapture (also after a restart, from args.index),
// and QueryArgs/WatchCapture select by a kernel's name or type, live and
// finished; an unknown name is INVALID_ARGUMENT listing the known ones.
TEST_F(CaptureServiceTest, TheKernelTableTravelsAndSelectsByName) {
  StartServer("kernels");
  const Pairs p = MakePairs(10);
  const size_t n = p.records.size();
  GrpcSinkOptions o;
  o.target = target_;
  o.capture = "named";
  o.info = Info("named");
  *o.info.mutable_kernels() = PairKernels();
  o.ack_timeout = std::chrono::milliseconds(20000);
  auto sink = GrpcSink::Connect(o);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->WriteBatch(p.RecordPtrs(0, n), p.Payloads(0, n)).ok());
  ASSERT_TRUE((*sink)->Flush().ok());
  auto query = [&](std::optional<std::string> name, std::optional<std::string> type) {
    v1::QueryArgsRequest req;
    req.set_capture("named");
    if (name) req.mutable_filter()->set_func_name(*name);
    if (type) req.mutable_filter()->set_func_type(*type);
    return QueryAll(req);
  };
  // Live: the store's rows, by name.
  std::vector<v1::CapturedArg> live = query("matmul", std::nullopt);
  EXPECT_EQ(live.size(), 6u);  // tasks 2 and 7, three records each
  EXPECT_EQ(FuncsOf(live), std::set<uint32_t>{2});
  ASSERT_TRUE((*sink)->Finish(DeviceCounters()).ok());

  const v1::CaptureSummary s = Get("named");
  ASSERT_EQ(s.kernels_size(), 5);
  EXPECT_EQ(s.kernels(2).SerializeAsString(), PairKernels().Get(2).SerializeAsString());
  // ListCaptures' pages leave it out.
  v1::ListCapturesResponse listed;
  ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), v1::ListCapturesRequest(), &listed).ok());
  ASSERT_EQ(listed.captures_size(), 1);
  EXPECT_EQ(listed.captures(0).kernels_size(), 0);

  const std::string local = TempPath("local_named/args_dump");
  {
    v1::CaptureInfo info = Info("named");
    *info.mutable_kernels() = PairKernels();
    auto store = LocalSink::Create(local, info);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->WriteBatch(p.RecordPtrs(0, n), p.Payloads(0, n)).ok());
    ASSERT_TRUE((*store)->Finish(DeviceCounters()).ok());
  }
  const std::string manifest = Stored("named", "args_dump.json");
  EXPECT_EQ(manifest, ReadFileOrEmpty(local + "/args_dump.json"));
  EXPECT_NE(manifest.find("{\"func_id\": 2, \"name\": \"matmul\", \"type\": \"matmul\""),
            std::string::npos);

  // Finished: the index's rows.
  std::vector<v1::CapturedArg> finished = query("matmul", std::nullopt);
  EXPECT_EQ(finished.size(), 6u);
  EXPECT_EQ(FuncsOf(finished), std::set<uint32_t>{2});
  EXPECT_EQ(FuncsOf(query(std::nullopt, "elementwise")), (std::set<uint32_t>{0, 1}));
  EXPECT_TRUE(query("add", "matmul").empty());  // both must hold

  v1::QueryArgsRequest unknown;
  unknown.set_capture("named");
  unknown.mutable_filter()->set_func_name("nope");
  v1::QueryArgsResponse resp;
  grpc::Status st = stub_->QueryArgs(Ctx().get(), unknown, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "capture named: no kernel named \"nope\" in this capture; its kernels: add, copy, "
            "matmul, mul, relu");
  unknown.mutable_filter()->clear_func_name();
  unknown.mutable_filter()->set_func_type("conv");
  st = stub_->QueryArgs(Ctx().get(), unknown, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("its types: activation, elementwise, matmul"),
            std::string::npos)
      << st.error_message();

  // WatchCapture replays a finished capture through the same filter.
  v1::WatchCaptureRequest w;
  w.set_capture("named");
  w.mutable_filter()->set_func_name("relu");
  {
    auto ctx = Ctx();
    auto reader = stub_->WatchCapture(ctx.get(), w);
    v1::WatchCaptureResponse r;
    std::vector<v1::CapturedArg> seen;
    while (reader->Read(&r)) seen.insert(seen.end(), r.args().begin(), r.args().end());
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(seen.size(), 6u);
    EXPECT_EQ(FuncsOf(seen), std::set<uint32_t>{3});
  }
  w.mutable_filter()->set_func_name("nope");
  {
    auto ctx = Ctx();
    auto reader = stub_->WatchCapture(ctx.get(), w);
    v1::WatchCaptureResponse r;
    while (reader->Read(&r)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }

  // A restart reads the table back from args.index.
  server_->Shutdown(std::chrono::milliseconds(200));
  server_.reset();
  sink->reset();
  StartServer("kernels");
  EXPECT_EQ(Get("named").kernels_size(), 5);
  EXPECT_EQ(query("copy", std::nullopt).size(), 6u);
}

// A hostile table in IngestOpen is INVALID_ARGUMENT naming the entry, and
// nothing is created.
TEST_F(CaptureServiceTest, AHostileKernelTableIsInvalidArgument) {
  StartServer("kernels_bad");
  std::vector<google::protobuf::RepeatedPtrField<v1::Kernel>> bad(4, PairKernels());
  bad[0].Mutable(1)->set_name("add");
  bad[1].Mutable(3)->set_name(std::string(300, 'n'));
  bad[2].Mutable(0)->set_func_id(70000);
  for (int i = 0; i < 4100; ++i) bad[3].Add()->set_name(absl::StrCat("k", i));
  const std::vector<std::string> says = {"kernels[1].name: \"add\" is given twice",
                                         "kernels[3].name: 300 bytes, at most 128",
                                         "kernels[0].func_id: 70000",
                                         "kernels: 4105 kernels, at most 4096"};
  for (size_t i = 0; i < bad.size(); ++i) {
    RawIngest in(stub_.get());
    v1::IngestRequest open = Open("bad");
    *open.mutable_open()->mutable_kernels() = bad[i];
    ASSERT_TRUE(in.Send(open));
    const grpc::Status st = in.End();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find(says[i]), std::string::npos) << st.error_message();
    grpc::Status got;
    Get("bad", &got);
    EXPECT_EQ(got.error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

// Labels ride in every summary and every ListCaptures page: too many, too
// long, or holding control characters, they are refused where they come
// in (the open, the finish), and a refused finish leaves the records the
// service acknowledged readable.
TEST_F(CaptureServiceTest, HostileLabelsAreInvalidArgument) {
  StartServer("labels_bad");
  std::vector<std::pair<std::function<void(google::protobuf::Map<std::string, std::string>*)>,
                        std::string>>
      bad = {
          {[](auto* l) { for (int i = 0; i < 65; ++i) (*l)[absl::StrCat("k", i)] = "v"; },
           "at most 64 labels, got 65"},
          {[](auto* l) { (*l)[std::string(129, 'k')] = "v"; }, "a label key must be 1-128 bytes, got 129"},
          {[](auto* l) { (*l)[""] = "v"; }, "a label key must be 1-128 bytes, got 0"},
          {[](auto* l) { (*l)["big"] = std::string(4097, 'v'); },
           "label 'big': a value is at most 4096 bytes, got 4097"},
          {[](auto* l) { (*l)["line"] = "a\nforged: line"; }, "label 'line': its value holds control character 10"},
          {[](auto* l) { (*l)[std::string("e\x1b[2J", 5)] = "v"; }, "holds control character 27"},
      };
  for (size_t i = 0; i < bad.size(); ++i) {
    RawIngest in(stub_.get());
    v1::IngestRequest open = Open("bad");
    bad[i].first(open.mutable_open()->mutable_labels());
    ASSERT_TRUE(in.Send(open));
    const grpc::Status st = in.End();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << i << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(bad[i].second), std::string::npos) << st.error_message();
    grpc::Status got;
    Get("bad", &got);
    EXPECT_EQ(got.error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // The same at the finish: refused, the acknowledged records kept.
  const Pairs p = MakePairs(3);
  RawIngest in(stub_.get());
  ASSERT_TRUE(in.Send(Open("late")));
  v1::IngestResponse r;
  ASSERT_TRUE(in.Read(&r));
  ASSERT_TRUE(r.has_opened());
  ASSERT_TRUE(in.Send(Batch(p, 0, p.records.size(), 0)));
  do {
    ASSERT_TRUE(in.Read(&r));
  } while (!r.has_ack() || r.ack().durable_records() < p.records.size());
  v1::IngestRequest finish;
  (*finish.mutable_finish()->mutable_labels())["big"] = std::string(5000, 'v');
  ASSERT_TRUE(in.Send(finish));
  const grpc::Status st = in.End();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("at most 4096 bytes, got 5000"), std::string::npos)
      << st.error_message();
  const v1::CaptureSummary late = Get("late");
  EXPECT_EQ(late.records(), p.records.size());
  EXPECT_NE(late.state(), v1::CAPTURE_STATE_FINISHED);
  EXPECT_EQ(late.labels().count("big"), 0u);
}

TEST_F(CaptureServiceTest, MalformedRecordsAreRefusedAndTheCaptureStaysReadable) {
  StartServer("malformed");
  const Pairs p = MakePairs(4);
  RawIngest in(stub_.get());
  ASSERT_TRUE(in.Send(Open("m")));
  v1::IngestResponse r;
  ASSERT_TRUE(in.Read(&r));
  ASSERT_TRUE(r.has_opened());
  ASSERT_TRUE(in.Send(Batch(p, 0, 6, 0)));
  do {
    ASSERT_TRUE(in.Read(&r));
  } while (!r.has_ack() || r.ack().durable_records() < 6);
  const uint64_t bytes_before = r.ack().durable_bin_bytes();
  auto bad_batch = [&](auto mutate) {
    v1::IngestRequest b = Batch(p, 6, 9, bytes_before);
    mutate(b.mutable_batch()->mutable_records(0));
    return b;
  };
  std::vector<v1::IngestRequest> bad = {
      bad_batch([](v1::ArgRecord* x) {
        for (int i = 0; i < 5; ++i) {
          x->add_shape(1);
          x->add_strides(1);
        }
      }),
      bad_batch([](v1::ArgRecord* x) { x->set_numel(x->numel() + 1); }),
      bad_batch([](v1::ArgRecord* x) { x->set_dtype(static_cast<v1::DType>(77)); }),
      bad_batch([](v1::ArgRecord* x) { x->set_bin_offset(x->bin_offset() + 4); }),
      bad_batch([](v1::ArgRecord* x) { x->set_bin_size(x->bin_size() - 4); }),
      bad_batch([](v1::ArgRecord* x) {
        x->set_shape(0, 1u << 31);
        x->add_shape(1u << 31);
        x->add_strides(1);
      }),
  };
  // The first bad batch ends the stream; each further one needs a resume.
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    RawIngest again(stub_.get());
    if (i == 0) {
      ASSERT_TRUE(in.Send(bad[0]));
      EXPECT_EQ(in.End().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      continue;
    }
    // Resume: the previous stream let the capture go before its status.
    RawIngest r2(stub_.get());
    r2.Send(Open("m", true));
    v1::IngestResponse opened;
    ASSERT_TRUE(r2.Read(&opened) && opened.has_opened()) << r2.End().error_message();
    EXPECT_EQ(opened.opened().durable_records(), 6u);
    r2.Send(bad[i]);
    const grpc::Status s = r2.End();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  const v1::CaptureSummary summary = Get("m");
  EXPECT_EQ(summary.state(), v1::CAPTURE_STATE_LIVE);
  EXPECT_EQ(summary.records(), 6u);
  EXPECT_EQ(summary.bin_bytes(), bytes_before);
  v1::QueryArgsRequest q;
  q.set_capture("m");
  EXPECT_EQ(QueryAll(q).size(), 6u);
}

TEST_F(CaptureServiceTest, QuotaBreachIsResourceExhaustedWithTheNumbers) {
  StartServer("quota", /*quota=*/100000);
  const Pairs p = MakePairs(10);  // task 3 alone is 1.2 MB
  auto sink = Sink("big");
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->WriteBatch(p.RecordPtrs(0, 9), p.Payloads(0, 9)).ok());
  // The refusal comes back with the batch's acknowledgment: on the next
  // write or the flush.
  absl::Status s = sink->WriteBatch(p.RecordPtrs(9, 12), p.Payloads(9, 12));
  if (s.ok()) s = sink->Flush();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("quota of 100000 bytes"), std::string::npos) << s;
  const v1::CaptureSummary summary = Get("big");
  EXPECT_EQ(summary.records(), 9u);
  v1::QueryArgsRequest q;
  q.set_capture("big");
  EXPECT_EQ(QueryAll(q).size(), 9u);
}

TEST_F(CaptureServiceTest, WrongOrMissingTokenIsUnauthenticated) {
  StartServer("auth", 0, "s3cret");
  v1::GetCaptureRequest req;
  req.set_capture("x");
  v1::CaptureSummary s;
  EXPECT_EQ(stub_->GetCapture(Ctx().get(), req, &s).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub_->GetCapture(Ctx("wrong").get(), req, &s).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub_->GetCapture(Ctx("s3cret").get(), req, &s).error_code(),
            grpc::StatusCode::NOT_FOUND);  // authenticated: the capture is not there
  RawIngest in(stub_.get(), "wrong");
  in.Send(Open("a"));
  EXPECT_EQ(in.End().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  GrpcSinkOptions o;
  o.target = target_;
  o.capture = "a";
  o.info = Info("a");
  o.auth_token = "s3cret";
  auto sink = GrpcSink::Connect(o);
  ASSERT_TRUE(sink.ok()) << sink.status();
  const Pairs p = MakePairs(2);
  EXPECT_TRUE((*sink)->WriteBatch(p.RecordPtrs(0, 6), p.Payloads(0, 6)).ok());
  EXPECT_TRUE((*sink)->Finish(v1::CaptureCounters()).ok());
}

// A server restart: finished captures are listed as they were; a live one
// is live again (detached), queryable, and a client resumes it to a finish
// whose files are byte for byte those of an uninterrupted capture.
TEST_F(CaptureServiceTest, RestartKeepsLiveCapturesResumable) {
  StartServer("restart");
  const Pairs p = MakePairs(10);
  auto done = Sink("done");
  ASSERT_NE(done, nullptr);
  ASSERT_TRUE(done->WriteBatch(p.RecordPtrs(0, 30), p.Payloads(0, 30)).ok());
  ASSERT_TRUE(done->Finish(DeviceCounters()).ok());
  auto live = Sink("live");
  ASSERT_NE(live, nullptr);
  ASSERT_TRUE(live->WriteBatch(p.RecordPtrs(0, 12), p.Payloads(0, 12)).ok());
  ASSERT_TRUE(live->Flush().ok());
  // Graceful shutdown: the live capture stays live on disk.
  server_->Shutdown(std::chrono::milliseconds(200));
  server_.reset();
  live.reset();
  done.reset();
  EXPECT_FALSE(std::ifstream(root_ + "/live/args_dump/args_dump.json").good());
  StartServer("restart");
  EXPECT_EQ(Get("done").records(), 30u);
  EXPECT_EQ(Get("done").counters().dropped_records(), 2u);
  const v1::CaptureSummary s = Get("live");
  EXPECT_EQ(s.state(), v1::CAPTURE_STATE_LIVE);
  EXPECT_FALSE(s.attached());
  EXPECT_EQ(s.records(), 12u);
  v1::QueryArgsRequest q;
  q.set_capture("live");
  q.set_task_id(0x100000002ull);
  EXPECT_EQ(QueryAll(q).size(), 3u);
  grpc::Status st;
  EXPECT_TRUE(ReadPayload("done", 27, 0, 0, &st) == p.bytes[27]);
  // The client comes back (resume), sends from the watermark, finishes.
  GrpcSinkOptions o;
  o.target = target_;
  o.capture = "live";
  o.info = Info("live");
  o.resume = true;
  auto resumed = GrpcSink::Connect(o);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->durable_records(), 12u);
  ASSERT_TRUE((*resumed)->WriteBatch(p.RecordPtrs(12, 30), p.Payloads(12, 30)).ok());
  ASSERT_TRUE((*resumed)->Finish(DeviceCounters()).ok());
  const std::string local = WriteLocally("uninterrupted", p);
  EXPECT_TRUE(Stored("live", "args.bin") == ReadFileOrEmpty(local + "/args.bin"));
  EXPECT_EQ(Stored("live", "args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
  EXPECT_EQ(Get("live").state(), v1::CAPTURE_STATE_FINISHED);
}

TEST_F(CaptureServiceTest, EightClientsStreamAtOnceWithoutLoss) {
  StartServer("eight");
  const Pairs p = MakePairs(30);
  const size_t n = p.records.size();
  std::vector<std::thread> clients;
  std::vector<absl::Status> results(8);
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      GrpcSinkOptions o;
      o.target = target_;
      o.capture = absl::StrCat("client", c);
      o.info = Info(o.capture);
      auto sink = GrpcSink::Connect(o);
      if (!sink.ok()) {
        results[c] = sink.status();
        return;
      }
      for (size_t from = 0; from < n && results[c].ok(); from += 7) {
        const size_t to = std::min(n, from + 7);
        results[c] = (*sink)->WriteBatch(p.RecordPtrs(from, to), p.Payloads(from, to));
      }
      if (results[c].ok()) results[c] = (*sink)->Finish(DeviceCounters());
    });
  }
  for (auto& t : clients) t.join();
  const std::string local = WriteLocally("eight", p);
  for (int c = 0; c < 8; ++c) {
    SCOPED_TRACE(c);
    EXPECT_TRUE(results[c].ok()) << results[c];
    const std::string name = absl::StrCat("client", c);
    EXPECT_TRUE(Stored(name, "args.bin") == ReadFileOrEmpty(local + "/args.bin"));
    EXPECT_EQ(Stored(name, "args_dump.json"), ReadFileOrEmpty(local + "/args_dump.json"));
    EXPECT_EQ(Get(absl::StrCat("client", c)).records(), n);
  }
}

// TLS with a bearer token, as for a non-loopback bind: a TLS client with
// the token streams; without the token it is UNAUTHENTICATED; a plaintext
// client does not get through at all.
TEST_F(CaptureServiceTest, TlsAndTokenTogether) {
  const std::string dir = TempPath("tls_files");
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
                          " -addext subjectAltName=IP:127.0.0.1 -keyout " + key + " -out " +
                          cert + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl (tools/setup.sh installs it)";
  StartServer("tls", 0, "t0ken", cert, key);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFileOrEmpty(cert);
  GrpcSinkOptions o;
  o.target = target_;
  o.capture = "secure";
  o.info = Info("secure");
  o.credentials = grpc::SslCredentials(ssl);
  o.auth_token = "t0ken";
  auto sink = GrpcSink::Connect(o);
  ASSERT_TRUE(sink.ok()) << sink.status();
  const Pairs p = MakePairs(3);
  EXPECT_TRUE((*sink)->WriteBatch(p.RecordPtrs(0, 9), p.Payloads(0, 9)).ok());
  EXPECT_TRUE((*sink)->Finish(v1::CaptureCounters()).ok());
  auto tls_stub = v1::CaptureService::NewStub(grpc::CreateChannel(target_, grpc::SslCredentials(ssl)));
  v1::GetCaptureRequest req;
  req.set_capture("secure");
  v1::CaptureSummary s;
  EXPECT_EQ(tls_stub->GetCapture(Ctx().get(), req, &s).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(tls_stub->GetCapture(Ctx("t0ken").get(), req, &s).ok());
  EXPECT_EQ(s.records(), 9u);
  auto ctx = Ctx("t0ken");
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  EXPECT_EQ(stub_->GetCapture(ctx.get(), req, &s).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace argsdump
