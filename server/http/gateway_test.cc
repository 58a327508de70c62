// The HTTP face against a real capture_server (in this process) on
// 127.0.0.1 port 0, over real sockets with an HTTP client: every endpoint,
// its answers compared with the gRPC answers to the same queries, paging,
// ranges, errors, auth, TLS, and a live capture queried while it grows.
// What slow and malformed clients get: gateway_slow_clients_test.cc.
#include <string>
#include <vector>

#include "format/arg_filter_params.h"
#include "server/http/gateway_test_fixture.h"

namespace argsdump {
namespace {

TEST_F(HttpGatewayTest, EveryQueryAnswersWhatGrpcAnswers) {
  Start("same_answers");
  WriteScene("scene");
  WriteScene("other");

  v1::ListCapturesRequest list;
  v1::ListCapturesResponse captures;
  ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), list, &captures).ok());
  ExpectSameAnswer("/v1/captures", captures);
  // Paging: one per page, the token from the JSON answer.
  list.set_page_size(1);
  ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), list, &captures).ok());
  ExpectSameAnswer("/v1/captures?page_size=1", captures);
  ASSERT_FALSE(captures.next_page_token().empty());
  list.set_page_token(captures.next_page_token());
  ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), list, &captures).ok());
  ExpectSameAnswer("/v1/captures?page_size=1&page_token=" + list.page_token(), captures);
  EXPECT_EQ(captures.captures(0).capture(), "scene");
  (*list.mutable_labels())["case"] = "http";
  list.set_state(v1::CAPTURE_STATE_FINISHED);
  list.clear_page_token();
  ASSERT_TRUE(stub_->ListCaptures(Ctx().get(), list, &captures).ok());
  ExpectSameAnswer("/v1/captures?page_size=1&label=case:http&state=finished", captures);

  v1::GetCaptureRequest get;
  get.set_capture("scene");
  v1::CaptureSummary summary;
  ASSERT_TRUE(stub_->GetCapture(Ctx().get(), get, &summary).ok());
  ExpectSameAnswer("/v1/captures/scene", summary);
  EXPECT_EQ(summary.records(), 7u);
  // The kernel table is in GetCapture's JSON.
  ASSERT_EQ(summary.kernels_size(), 4);
  auto got = Get("/v1/captures/scene");
  ASSERT_TRUE(got);
  EXPECT_NE(got->body.find("{\"func_id\":1,\"name\":\"softmax_rows\",\"type\":\"activation\""),
            std::string::npos)
      << got->body;
  // By name over HTTP: accumulate is task 1's kernel (its two inout records).
  auto named = Get("/v1/captures/scene/args?func=accumulate");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->status, 200);
  v1::QueryArgsResponse by_name;
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;  // typed scalars and hex ids beside the proto's fields
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(named->body, &by_name, lenient).ok())
      << named->body;
  ASSERT_EQ(by_name.args_size(), 2);
  for (const v1::CapturedArg& a : by_name.args()) EXPECT_EQ(a.record().func_ids(0), 2u);
  // A name the capture does not have: 400 with the service's words.
  auto unknown = Get("/v1/captures/scene/args?func=softmax");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 400);
  EXPECT_NE(unknown->body.find("no kernel named \\\"softmax\\\" in this capture; its kernels: "
                               "accumulate, copy_3d, scale, softmax_rows"),
            std::string::npos)
      << unknown->body;

  // QueryArgs: the shorthands, every filter field, pages.
  struct Case {
    std::string query;
    v1::QueryArgsRequest request;
  };
  std::vector<Case> cases;
  auto add = [&](std::string q, auto fill) {
    Case c{std::move(q), {}};
    c.request.set_capture("scene");
    fill(c.request.mutable_filter(), &c.request);
    cases.push_back(std::move(c));
  };
  add("", [](v1::ArgFilter*, v1::QueryArgsRequest*) {});
  add("task_id=0x0000000100000001", [](v1::ArgFilter* f, auto) { f->set_task_id(kSceneTask + 1); });
  add("task_id=4294967297", [](v1::ArgFilter* f, auto) { f->set_task_id(kSceneTask + 1); });
  add("stage=after_completion&role=ROLE_OUTPUT", [](v1::ArgFilter* f, auto) {
    f->set_stage(v1::STAGE_AFTER_COMPLETION);
    f->set_role(v1::ROLE_OUTPUT);
  });
  add("kind=scalar", [](v1::ArgFilter* f, auto) { f->set_kind(v1::KIND_SCALAR); });
  add("dtype=float32&arg_index=0", [](v1::ArgFilter* f, auto) {
    f->set_dtype(v1::DTYPE_FLOAT32);
    f->set_arg_index(0);
  });
  add("func_id=4&step=0", [](v1::ArgFilter* f, auto) {
    f->set_func_id(4);
    f->set_step(0);
  });
  add("overflow=false&has_nonfinite=false", [](v1::ArgFilter* f, auto) {
    f->set_overflow(false);
    f->set_has_nonfinite(false);
  });
  add("func_unknown=true", [](v1::ArgFilter* f, auto) { f->set_func_unknown(true); });
  // func=: a kernel's name in the capture's table, or a func id.
  add("func=accumulate", [](v1::ArgFilter* f, auto) { f->set_func_name("accumulate"); });
  add("func=4", [](v1::ArgFilter* f, auto) { f->set_func_id(4); });
  add("func_type=elementwise&role=inout", [](v1::ArgFilter* f, auto) {
    f->set_func_type("elementwise");
    f->set_role(v1::ROLE_INOUT);
  });
  add("page_size=2", [](v1::ArgFilter*, v1::QueryArgsRequest* r) { r->set_page_size(2); });
  for (Case& c : cases) {
    // Every page, each one's token taken from the previous JSON answer.
    for (int page = 0; page < 10; ++page) {
      v1::QueryArgsResponse answer;
      ASSERT_TRUE(stub_->QueryArgs(Ctx().get(), c.request, &answer).ok()) << c.query;
      std::string path = "/v1/captures/scene/args?" + c.query;
      if (!c.request.page_token().empty()) {
        path += (c.query.empty() ? "" : "&") + std::string("page_token=") +
                httplib::detail::encode_query_param(c.request.page_token());
      }
      ExpectSameAnswer(path, answer);
      if (answer.next_page_token().empty()) break;
      c.request.set_page_token(answer.next_page_token());
    }
  }
  // The generic mirror takes the request in JSON.
  v1::QueryArgsRequest q;
  q.set_capture("scene");
  q.mutable_filter()->set_role(v1::ROLE_INOUT);
  v1::QueryArgsResponse inout;
  ASSERT_TRUE(stub_->QueryArgs(Ctx().get(), q, &inout).ok());
  EXPECT_EQ(inout.args_size(), 2);
  auto rpc = http_->Post("/v1/rpc/QueryArgs", ProtoToJson(q), "application/json");
  ASSERT_TRUE(rpc);
  EXPECT_EQ(rpc->body, ProtoToJson(inout) + "\n");

  // GetArg (a record with its manifest index) and the payload bytes.
  for (uint64_t id = 0; id < 7; ++id) {
    v1::GetArgRequest g;
    g.set_capture("scene");
    g.set_record_id(id);
    v1::CapturedArg arg;
    ASSERT_TRUE(stub_->GetArg(Ctx().get(), g, &arg).ok());
    EXPECT_TRUE(arg.has_manifest_index());
    ExpectSameAnswer(absl::StrCat("/v1/captures/scene/args/", id), arg);
    auto payload = Get(absl::StrCat("/v1/captures/scene/args/", id, "/payload"));
    ASSERT_TRUE(payload);
    EXPECT_EQ(payload->status, 200);
    EXPECT_EQ(payload->body, GrpcPayload("scene", id)) << id;
    EXPECT_EQ(payload->body.size(), arg.record().bin_size());
  }
}

// Scalars of every kind come with their value read as their dtype, and task
// ids with their hex, on every path that answers records: QueryArgs
// (filtered to scalars), GetArg and the generic /v1/rpc/ mirror.
TEST_F(HttpGatewayTest, ScalarValuesAndHexTaskIdsBesideTheBitsAndTheDecimal) {
  Start("typed_scalars");
  const SceneRecords g = GeometryCapture();
  {
    SceneIngest in(stub_.get(), "geometry", token_);
    ASSERT_TRUE(in.Send(g, 0, g.records.size()));
    ASSERT_TRUE(in.Finish());
  }
  const std::vector<GeometryScalar> scalars = GeometryScalars();
  auto expect_scalar = [&](const std::string& body, size_t i) {
    const GeometryScalar& want = scalars[i];
    const std::string beside = absl::StrCat("\"scalar_bits\":\"", want.bits,
                                            "\",\"scalar_value\":", want.json, ",");
    EXPECT_NE(body.find(beside), std::string::npos) << beside << "\n" << body;
  };
  auto page = Get("/v1/captures/geometry/args?kind=scalar");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200) << page->body;
  for (size_t i = 0; i < scalars.size(); ++i) expect_scalar(page->body, i);
  EXPECT_NE(page->body.find("\"task_id\":\"8589934593\",\"task_id_hex\":\"0x0000000200000001\""),
            std::string::npos)
      << page->body;
  // The tensors (records 0 and 1) have hex ids and no scalar_value.
  for (uint64_t id : {0, 1}) {
    auto arg = Get(absl::StrCat("/v1/captures/geometry/args/", id));
    ASSERT_TRUE(arg);
    ASSERT_EQ(arg->status, 200);
    EXPECT_EQ(arg->body.find("scalar_value"), std::string::npos) << arg->body;
    EXPECT_NE(arg->body.find(absl::StrCat("\"task_id_hex\":\"0x000000020000000", id, "\"")),
              std::string::npos)
        << arg->body;
    EXPECT_NE(arg->body.find("\"is_contiguous\":false"), std::string::npos) << arg->body;
  }
  EXPECT_NE(Get("/v1/captures/geometry/args/0")->body.find("\"start_offset\":\"3\""),
            std::string::npos);
  for (size_t i = 0; i < scalars.size(); ++i) {
    auto arg = Get(absl::StrCat("/v1/captures/geometry/args/", i + 2));
    ASSERT_TRUE(arg);
    ASSERT_EQ(arg->status, 200);
    expect_scalar(arg->body, i);
  }
  v1::QueryArgsRequest q;
  q.set_capture("geometry");
  q.mutable_filter()->set_dtype(v1::DTYPE_BFLOAT16);
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  auto rpc = http_->Post("/v1/rpc/QueryArgs", headers, ProtoToJson(q), "application/json");
  ASSERT_TRUE(rpc);
  ASSERT_EQ(rpc->status, 200) << rpc->body;
  EXPECT_NE(rpc->body.find("\"scalar_value\":1.5,"), std::string::npos) << rpc->body;
}

TEST_F(HttpGatewayTest, PayloadRangesAreBytesOfThePayload) {
  Start("ranges");
  WriteScene("scene");
  const std::string all = GrpcPayload("scene", 0);  // 16x32 floats
  ASSERT_EQ(all.size(), 2048u);
  const std::string path = "/v1/captures/scene/args/0/payload";
  struct Case {
    std::string range;
    size_t begin, length;
  };
  for (const Case& c : {Case{"bytes=0-0", 0, 1}, Case{"bytes=100-199", 100, 100},
                        Case{"bytes=2000-", 2000, 48}, Case{"bytes=-16", 2032, 16},
                        Case{"bytes=1000-99999", 1000, 1048}}) {
    auto res = Get(path, {{"Range", c.range}});
    ASSERT_TRUE(res) << c.range;
    EXPECT_EQ(res->status, 206) << c.range;
    EXPECT_EQ(res->body, all.substr(c.begin, c.length)) << c.range;
    EXPECT_EQ(res->get_header_value("Content-Range"),
              absl::StrCat("bytes ", c.begin, "-", c.begin + c.length - 1, "/2048"))
        << c.range;
  }
  auto part = Get(path + "?offset=10&length=20");
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 200);
  EXPECT_EQ(part->body, all.substr(10, 20));
  auto tail = Get(path + "?offset=2040");
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->body, all.substr(2040));
  ExpectError(path, 416, "OUT_OF_RANGE", "past the payload's 2048 bytes",
              {{"Range", "bytes=2048-"}});
  ExpectError(path, 416, "OUT_OF_RANGE", "one byte range", {{"Range", "bytes=0-1,5-6"}});
  ExpectError(path + "?offset=1", 400, "INVALID_ARGUMENT", "not both", {{"Range", "bytes=0-1"}});
  ExpectError(path + "?offset=4096", 400, "INVALID_ARGUMENT", "past the payload");
  // A scalar has no payload: an empty body.
  auto scalar = Get("/v1/captures/scene/args/4/payload");
  ASSERT_TRUE(scalar);
  EXPECT_EQ(scalar->status, 200);
  EXPECT_TRUE(scalar->body.empty());
}

TEST_F(HttpGatewayTest, TensorsComeAsJsonNumbersWithinTheBound) {
  Start("tensors");
  WriteScene("scene");
  // 16x32 = 512 elements, over this server's bound of 300: 413 unless fit.
  ExpectError("/v1/captures/scene/args/0/tensor", 413, "RESOURCE_EXHAUSTED", "fit=");
  auto fitted = Get("/v1/captures/scene/args/0/tensor?fit=128");
  ASSERT_TRUE(fitted);
  ASSERT_EQ(fitted->status, 200) << fitted->body;
  EXPECT_NE(fitted->body.find("\"grid_rows\": 8, \"grid_cols\": 16"), std::string::npos)
      << fitted->body.substr(0, 300);
  EXPECT_NE(fitted->body.find("\"NaN\""), std::string::npos);
  EXPECT_NE(fitted->body.find("\"Infinity\""), std::string::npos);
  EXPECT_NE(fitted->body.find("\"-Infinity\""), std::string::npos);
  EXPECT_NE(fitted->body.find("\"nan\":\"1\",\"pos_inf\":\"1\",\"neg_inf\":\"1\""),
            std::string::npos)
      << fitted->body.substr(fitted->body.find("stats"), 200);
  // The inout pair, exact: 64 values each.
  auto before = Get("/v1/captures/scene/args/2/tensor");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 200);
  EXPECT_NE(before->body.find("\"rows\": 8, \"cols\": 8, \"grid_rows\": 8"), std::string::npos);
  // A 3-D tensor: the slice at index 1.
  auto slice = Get("/v1/captures/scene/args/5/tensor?index=1");
  ASSERT_TRUE(slice);
  EXPECT_EQ(slice->status, 200) << slice->body;
  EXPECT_NE(slice->body.find("\"index\": [1], \"rows\": 4, \"cols\": 8"), std::string::npos);
  ExpectError("/v1/captures/scene/args/5/tensor?index=2", 400, "INVALID_ARGUMENT",
              "index[0] = 2 is past dimension 0's 2 entries");
  ExpectError("/v1/captures/scene/args/5/tensor?index=0,0", 400, "INVALID_ARGUMENT",
              "2 values for a rank 3 tensor");
  // Truncated: 25 of 64 elements captured, the rest null.
  auto cut = Get("/v1/captures/scene/args/6/tensor");
  ASSERT_TRUE(cut);
  EXPECT_NE(cut->body.find("\"captured\": 25"), std::string::npos) << cut->body.substr(0, 300);
  EXPECT_NE(cut->body.find("null"), std::string::npos);
  ExpectError("/v1/captures/scene/args/4/tensor", 400, "INVALID_ARGUMENT", "not a tensor");
  ExpectError("/v1/captures/scene/args/0/tensor?fit=0", 400, "INVALID_ARGUMENT", "fit=0");
  ExpectError("/v1/captures/scene/args/0/tensor?fit=x", 400, "INVALID_ARGUMENT", "fit=x");
}

// A slice of several ReadPayload chunks is reduced as they come (twice: the
// histogram's bins need the min and max), in a budget smaller than it, and
// answers what the whole slice does.
TEST_F(HttpGatewayTest, ALargeSliceIsReducedAsItIsReadWithinTheBudget) {
  configure_ = [](HttpGatewayOptions* o) {
    o->inflight_budget_bytes = 3 << 20;  // the slice is 4 MB
    o->tensor.max_elements = 1 << 20;
  };
  Start("large_slice");
  SceneRecords big;
  std::vector<float> values = Ramp(1000 * 1000, 0.001f, 0);
  values[4321] = std::numeric_limits<float>::quiet_NaN();
  values[999 * 1000 + 998] = std::numeric_limits<float>::infinity();
  big.Add(TensorRecord(kSceneTask).FuncIds({1}).Arg(0).Shape({1000, 1000}).Contiguous(), values);
  {
    SceneIngest in(stub_.get(), "big");
    ASSERT_TRUE(in.Send(big, 0, 1));
    ASSERT_TRUE(in.Finish());
  }
  const std::string payload = GrpcPayload("big", 0);
  ASSERT_EQ(payload.size(), 4000000u);
  for (uint64_t fit : {1, 100, 10000, 1000000}) {
    auto res = Get(absl::StrCat("/v1/captures/big/args/0/tensor?fit=", fit));
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body.substr(0, 300);
    auto plan = PlanTensorSlice(big.records[0], {}, fit, TensorViewLimits{1 << 20, 64 << 20});
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(res->body, TensorSliceJson(0, big.records[0], *plan, payload) + "\n") << "fit " << fit;
  }
}

// The bytes payload and tensor answers hold are one budget across requests:
// past it a request waits, then gets 503 with Retry-After.
TEST_F(HttpGatewayTest, PastTheInFlightBudgetAnswersAre503) {
  configure_ = [](HttpGatewayOptions* o) {
    o->inflight_budget_bytes = 600 << 10;
    o->budget_wait = std::chrono::milliseconds(300);
    o->send_buffer_bytes = 32 << 10;  // the download below stalls
  };
  Start("budget");
  SceneRecords big;
  big.Add(TensorRecord(kSceneTask).FuncIds({1}).Arg(0).Shape({256, 256}).Contiguous(),
          Ramp(256 * 256, 0.01f, 0));
  {
    SceneIngest in(stub_.get(), "big");
    ASSERT_TRUE(in.Send(big, 0, 1));
    ASSERT_TRUE(in.Finish());
  }
  // A download not read holds its chunks (512 KiB of the 600).
  auto download = std::make_unique<RawConnection>(server_->http_port());
  ASSERT_TRUE(download->Send("GET /v1/captures/big/args/0/payload HTTP/1.1\r\nHost: x\r\n\r\n"));
  // Its answer's head arrives: it holds them now.
  char head[16];
  ASSERT_EQ(::recv(download->fd(), head, sizeof head, MSG_WAITALL), 16);
  auto busy = Get("/v1/captures/big/args/0/tensor?fit=16");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503) << busy->body;
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  EXPECT_NE(busy->body.find("UNAVAILABLE"), std::string::npos) << busy->body;
  EXPECT_NE(busy->body.find("of their 614400 bytes"), std::string::npos) << busy->body;
  // Small answers need none of it.
  EXPECT_EQ(Get("/v1/captures/big")->status, 200);
  // The download gone, its bytes are back (the next request waits for
  // them if the server has not seen the end yet).
  download.reset();
  auto answered = Get("/v1/captures/big/args/0/tensor?fit=16");
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200) << answered->body;
}

TEST_F(HttpGatewayTest, BadRequestsGetAStatusAndAMessage) {
  Start("bad");
  WriteScene("scene");
  ExpectError("/v1/captures/nope", 404, "NOT_FOUND", "nope");
  ExpectError("/v1/captures/nope/args", 404, "NOT_FOUND", "nope");
  ExpectError("/v1/captures/scene/args/99", 404, "NOT_FOUND", "no record 99");
  ExpectError("/v1/captures/scene/args/99/payload", 404, "NOT_FOUND", "no record 99");
  ExpectError("/v1/captures/scene/args/x1", 400, "INVALID_ARGUMENT", "record id 'x1'");
  ExpectError("/v1/captures/scene/args/-1", 400, "INVALID_ARGUMENT", "record id '-1'");
  ExpectError("/v1/nothing", 404, "NOT_FOUND", "no such endpoint");
  const std::string args = "/v1/captures/scene/args?";
  ExpectError(args + "stage=bogus", 400, "INVALID_ARGUMENT",
              "stage=bogus: not one of before_dispatch, after_completion");
  ExpectError(args + "stage=unspecified", 400, "INVALID_ARGUMENT", "stage=unspecified");
  ExpectError(args + "role=in", 400, "INVALID_ARGUMENT", "role=in");
  ExpectError(args + "task_id=0xzz", 400, "INVALID_ARGUMENT", "task_id=0xzz");
  ExpectError(args + "task_id=-5", 400, "INVALID_ARGUMENT", "task_id=-5");
  ExpectError(args + "arg_index=4294967296", 400, "INVALID_ARGUMENT", "arg_index=4294967296");
  ExpectError(args + "page_size=-1", 400, "INVALID_ARGUMENT", "page_size=-1");
  ExpectError(args + "overflow=maybe", 400, "INVALID_ARGUMENT", "overflow=maybe");
  ExpectError(args + "step=1&step=2", 400, "INVALID_ARGUMENT", "'step' is given 2 times");
  ExpectError(args + "tsk=1", 400, "INVALID_ARGUMENT", "unknown parameter 'tsk'");
  ExpectError(args + "page_token=garbage", 400, "INVALID_ARGUMENT", "page");
  ExpectError("/v1/captures?state=done", 400, "INVALID_ARGUMENT", "state=done");
  ExpectError("/v1/captures?label=nokey", 400, "INVALID_ARGUMENT", "label=nokey");
  ExpectError("/v1/captures?label=:v", 400, "INVALID_ARGUMENT", "not key:value");
  ExpectError("/v1/captures/scene?x=1", 400, "INVALID_ARGUMENT",
              "unknown parameter 'x' (this endpoint takes none)");
  // Identical pairs too (httplib keeps one of them).
  ExpectError(args + "step=1&step=1", 400, "INVALID_ARGUMENT", "'step' is given 2 times");
  ExpectError("/v1/captures?state=live&st%61te=live", 400, "INVALID_ARGUMENT",
              "'state' is given 2 times");
  // Numbers are digits: no sign, no spaces.
  ExpectError(args + "task_id=1%20", 400, "INVALID_ARGUMENT", "task_id=1 ");
  ExpectError(args + "task_id=+1", 400, "INVALID_ARGUMENT", "task_id=+1");
  ExpectError(args + "page_size=%2010", 400, "INVALID_ARGUMENT", "page_size= 10");
  ExpectError("/v1/captures/scene/args/1%20", 400, "INVALID_ARGUMENT", "record id '1 '");
  ExpectError("/v1/captures/scene/args/0/tensor?index=%201", 400, "INVALID_ARGUMENT", "index=");
  // Values that are not UTF-8 (a proto3 string must be): the parameter
  // named, not an empty 501.
  ExpectError("/v1/captures?page_token=%ff", 400, "INVALID_ARGUMENT", "'page_token'");
  ExpectError("/v1/captures?label=case:%c3", 400, "INVALID_ARGUMENT", "'label'");
  ExpectError(args + "page_token=%ed%a0%80", 400, "INVALID_ARGUMENT", "not UTF-8");
  ExpectError("/v1/captures?%ff=1", 400, "INVALID_ARGUMENT", "a parameter's name is not UTF-8");
  // A Range header httplib cannot read, on any endpoint: it is named.
  auto range = Get("/v1/captures", {{"Range", "items=0-5"}});
  ASSERT_TRUE(range);
  EXPECT_EQ(range->status, 416);
  EXPECT_NE(range->body.find("Range: 'items=0-5'"), std::string::npos) << range->body;
  auto rpc = http_->Post("/v1/rpc/QueryArgs", "{\"capture\": 5", "application/json");
  ASSERT_TRUE(rpc);
  EXPECT_EQ(rpc->status, 400);
  EXPECT_NE(rpc->body.find("argsdump.v1.QueryArgsRequest"), std::string::npos) << rpc->body;
  rpc = http_->Post("/v1/rpc/QueryArgs", "{\"captur\": \"scene\"}", "application/json");
  ASSERT_TRUE(rpc);
  EXPECT_EQ(rpc->status, 400) << rpc->body;
  rpc = http_->Post("/v1/rpc/Ingest", "{}", "application/json");
  ASSERT_TRUE(rpc);
  EXPECT_EQ(rpc->status, 404);
  EXPECT_NE(rpc->body.find("UNIMPLEMENTED"), std::string::npos);
  // A JSON body sent as a form (curl -d) is still JSON, past 8 KiB too.
  rpc = http_->Post("/v1/rpc/QueryArgs",
                    absl::StrCat("{\"capture\": \"scene\"", std::string(20000, ' '), "}"),
                    "application/x-www-form-urlencoded");
  ASSERT_TRUE(rpc);
  EXPECT_EQ(rpc->status, 200) << rpc->body.substr(0, 300);
  // DELETE of a finished capture: its files are freed, then it is gone.
  auto del = http_->Delete("/v1/captures/scene");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200) << del->body;
  EXPECT_NE(del->body.find("freed_bytes"), std::string::npos);
  ExpectError("/v1/captures/scene", 404, "NOT_FOUND", "scene");
  // Nothing above hurt the server: gRPC still answers.
  v1::ListCapturesResponse list;
  EXPECT_TRUE(stub_->ListCaptures(Ctx().get(), v1::ListCapturesRequest(), &list).ok());
}

TEST_F(HttpGatewayTest, TheBearerTokenIsTheServices) {
  Start("auth", "s3cret");
  WriteScene("scene");
  const std::string path = "/v1/captures/scene";
  auto none = http_->Get(path.c_str());
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  // The filter schema alone needs no token (the page builds its form from
  // it before it has one); only as a GET, and it holds no capture's data.
  auto schema = http_->Get("/v1/schema");
  ASSERT_TRUE(schema);
  EXPECT_EQ(schema->status, 200);
  auto schema_post = http_->Post("/v1/schema", "{}", "application/json");
  ASSERT_TRUE(schema_post);
  EXPECT_EQ(schema_post->status, 401);
  auto schema_extra = http_->Get("/v1/schema/x");
  ASSERT_TRUE(schema_extra);
  EXPECT_EQ(schema_extra->status, 401);
  EXPECT_NE(none->body.find("UNAUTHENTICATED"), std::string::npos);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer realm=\"argsdump\"");
  // The scheme in any case (RFC 9110), the token exactly.
  for (const char* scheme : {"bearer", "BEARER", "BeArEr"}) {
    auto res = http_->Get(path.c_str(), {{"Authorization", absl::StrCat(scheme, " s3cret")}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << scheme;
  }
  for (const char* wrong : {"Bearer nope", "Bearer s3cret2", "s3cret", "Basic czNjcmV0",
                            "bearer S3CRET", "Bearer  s3cret", "Bearer"}) {
    auto res = http_->Get(path.c_str(), {{"Authorization", wrong}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401) << wrong;
  }
  EXPECT_EQ(Get(path)->status, 200);
  // The token comes before anything else in the request: without it, a
  // bad parameter, record id, body, range or endpoint is a 401 too, and
  // the answer says nothing about the request.
  for (const std::string bad :
       {"/v1/captures?bogus=1", "/v1/captures?state=nope", "/v1/captures?page_size=x",
        "/v1/captures/scene/args?stage=nope", "/v1/captures/scene/args?task_id=zz",
        "/v1/captures/scene/args/xyz", "/v1/captures/scene/args/0/payload?offset=x",
        "/v1/captures/scene/args/2/tensor?fit=0", "/v1/captures/scene/args/2/tensor?index=a",
        "/v1/captures/scene?x=%FF", "/v1/nothing/here", "/v1/captures/no%20such"}) {
    for (const char* authorization : {"", "Bearer nope"}) {
      httplib::Headers headers;
      if (*authorization != '\0') headers.emplace("Authorization", authorization);
      auto res = http_->Get(bad.c_str(), headers);
      ASSERT_TRUE(res) << bad;
      EXPECT_EQ(res->status, 401) << bad << " " << authorization << ": " << res->body;
      EXPECT_EQ(res->body.find("parameter"), std::string::npos) << bad << ": " << res->body;
      EXPECT_EQ(res->body.find("="), std::string::npos) << bad << ": " << res->body;
    }
    // With it, the same request is refused for what it is.
    auto res = Get(bad);
    ASSERT_TRUE(res) << bad;
    EXPECT_NE(res->status, 401) << bad;
    EXPECT_NE(res->status, 200) << bad;
  }
  auto bad_range = http_->Get((path + "/args/0/payload").c_str(), {{"Range", "bytes=zz"}});
  ASSERT_TRUE(bad_range);
  EXPECT_EQ(bad_range->status, 401) << bad_range->body;
  EXPECT_EQ(Get(path + "/args/0/payload", {{"Range", "bytes=zz"}})->status, 416);
  auto bad_body = http_->Post("/v1/rpc/GetCapture", "{\"capture\": 7}", "application/json");
  ASSERT_TRUE(bad_body);
  EXPECT_EQ(bad_body->status, 401) << bad_body->body;
  // No --http_cors_origin: no page from elsewhere may read an answer.
  auto cross = Get(path, {{"Origin", "https://dash.example"}});
  ASSERT_TRUE(cross);
  EXPECT_EQ(cross->status, 200);
  EXPECT_FALSE(cross->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(Get(path + "/args/0/payload")->status, 200);
  auto payload = http_->Get((path + "/args/0/payload").c_str());
  ASSERT_TRUE(payload);
  EXPECT_EQ(payload->status, 401);
  auto tensor = http_->Get((path + "/args/2/tensor").c_str());
  ASSERT_TRUE(tensor);
  EXPECT_EQ(tensor->status, 401);
  auto rpc = http_->Post("/v1/rpc/GetCapture", "{\"capture\": \"scene\"}", "application/json");
  ASSERT_TRUE(rpc);
  EXPECT_EQ(rpc->status, 401);
  // The page itself holds no data: it loads without a token and asks for one.
  auto page = http_->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("app.js"), std::string::npos);
  for (const char* asset : {"/app.js", "/style.css", "/index.html"}) {
    auto res = http_->Get(asset);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << asset;
    EXPECT_FALSE(res->body.empty()) << asset;
  }
}

TEST_F(HttpGatewayTest, PagesFromTheGivenOriginsMayCallTheApi) {
  const std::string dash = "https://dash.example:3000";
  cors_ = {dash, "http://127.0.0.1:8080"};
  Start("cors", "s3cret");
  WriteScene("scene");
  for (const std::string path : {"/v1/captures", "/v1/captures/scene/args?task_id=0x100000001",
                                 "/v1/captures/scene/args/0/payload"}) {
    auto res = Get(path, {{"Origin", dash}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), dash) << path;
    EXPECT_EQ(res->get_header_value("Vary"), "Origin") << path;
    EXPECT_NE(res->get_header_value("Access-Control-Expose-Headers").find("Content-Range"),
              std::string::npos);
  }
  // Errors too, so that the dashboard can show their message.
  for (const auto& [path, status] : std::vector<std::pair<std::string, int>>{
           {"/v1/captures/nope", 404}, {"/v1/captures/scene/args?stage=X", 400}}) {
    auto res = Get(path, {{"Origin", dash}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << path;
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), dash) << path;
  }
  auto no_token = http_->Get("/v1/captures", {{"Origin", dash}});
  ASSERT_TRUE(no_token);
  EXPECT_EQ(no_token->status, 401);
  EXPECT_EQ(no_token->get_header_value("Access-Control-Allow-Origin"), dash);
  // The preflight a browser sends before a GET with a token and a Range
  // carries no token itself: answered, not refused.
  const httplib::Headers preflight = {{"Origin", dash},
                                      {"Access-Control-Request-Method", "GET"},
                                      {"Access-Control-Request-Headers", "authorization,range"}};
  auto pre = http_->Options("/v1/captures/scene/args/0/payload", preflight);
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), dash);
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("GET"), std::string::npos);
  const std::string allowed = pre->get_header_value("Access-Control-Allow-Headers");
  EXPECT_NE(allowed.find("Authorization"), std::string::npos) << allowed;
  EXPECT_NE(allowed.find("Range"), std::string::npos) << allowed;
  // Another origin, or the origin with another port or scheme: nothing
  // that lets its page read the answer.
  for (const char* other : {"https://evil.example", "https://dash.example:3001",
                            "http://dash.example:3000", "null"}) {
    auto res = Get("/v1/captures", {{"Origin", other}});
    ASSERT_TRUE(res);
    EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin")) << other;
    httplib::Headers h = preflight;
    h.erase("Origin");
    h.emplace("Origin", other);
    auto p = http_->Options("/v1/captures", h);
    ASSERT_TRUE(p);
    EXPECT_NE(p->status, 204) << other;
    EXPECT_FALSE(p->has_header("Access-Control-Allow-Origin")) << other;
  }
  // The page and its files are same-origin only.
  auto page = http_->Get("/", {{"Origin", dash}});
  ASSERT_TRUE(page);
  EXPECT_FALSE(page->has_header("Access-Control-Allow-Origin"));
}

TEST_F(HttpGatewayTest, ALiveCaptureIsQueriedWhileItGrows) {
  Start("live");
  const SceneRecords s = SceneCapture();
  SceneIngest in(stub_.get(), "growing");
  ASSERT_TRUE(in.Send(s, 0, 2));
  auto first = Get("/v1/captures/growing");
  ASSERT_TRUE(first);
  EXPECT_NE(first->body.find("\"state\":\"CAPTURE_STATE_LIVE\""), std::string::npos);
  EXPECT_NE(first->body.find("\"records\":\"2\""), std::string::npos) << first->body;
  v1::QueryArgsRequest q;
  q.set_capture("growing");
  v1::QueryArgsResponse live;
  ASSERT_TRUE(stub_->QueryArgs(Ctx().get(), q, &live).ok());
  EXPECT_EQ(live.args_size(), 2);
  ExpectSameAnswer("/v1/captures/growing/args", live);
  auto tensor = Get("/v1/captures/growing/args/0/tensor?fit=64");
  ASSERT_TRUE(tensor);
  EXPECT_EQ(tensor->status, 200) << tensor->body;
  ExpectError("/v1/captures/growing/args/2", 404, "NOT_FOUND", "no record 2");

  ASSERT_TRUE(in.Send(s, 2, 5));
  ASSERT_TRUE(stub_->QueryArgs(Ctx().get(), q, &live).ok());
  EXPECT_EQ(live.args_size(), 5);
  ExpectSameAnswer("/v1/captures/growing/args", live);
  auto arg = Get("/v1/captures/growing/args/4");
  ASSERT_TRUE(arg);
  EXPECT_EQ(arg->status, 200);
  EXPECT_EQ(arg->body.find("manifest_index"), std::string::npos) << "live: no manifest order yet";

  ASSERT_TRUE(in.Send(s, 5, s.records.size()));
  ASSERT_TRUE(in.Finish());
  auto done = Get("/v1/captures/growing");
  ASSERT_TRUE(done);
  EXPECT_NE(done->body.find("\"state\":\"CAPTURE_STATE_FINISHED\""), std::string::npos);
  EXPECT_NE(done->body.find("\"records\":\"7\""), std::string::npos);
}

TEST_F(HttpGatewayTest, HttpsWithTheServersCertificateAndToken) {
  const std::string dir = FreshTempDir("tls_files");
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
                          " -addext subjectAltName=IP:127.0.0.1 -keyout " + key + " -out " +
                          cert + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl (tools/setup.sh installs it)";
  configure_ = [](HttpGatewayOptions* o) {
    o->request_timeout = std::chrono::milliseconds(500);
  };
  Start("tls", "t0ken", cert, key);
  // A handshake that never ends (a ClientHello's first bytes) is under
  // the request deadline too: the connection ends, no HTTP answer.
  RawConnection stalled(server_->http_port());
  ASSERT_TRUE(stalled.Send(std::string("\x16\x03\x01\x02", 4)));
  WriteScene("secure");
  auto res = Get("/v1/captures/secure");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  // Plain HTTP to the HTTPS port gets no answer.
  httplib::Client plain("127.0.0.1", server_->http_port());
  plain.set_connection_timeout(5);
  plain.set_read_timeout(5);
  auto cleartext = plain.Get("/v1/captures/secure", {{"Authorization", "Bearer t0ken"}});
  EXPECT_TRUE(!cleartext || cleartext->status != 200);
  EXPECT_EQ(stalled.ReadAnswer(), "");  // ended before any answer
}

TEST(HttpGatewayStartTest, BadOptionsAreErrorsNotCrashes) {
  for (const char* listen : {"nohost", "127.0.0.1:x", "127.0.0.1:70000", ":80"}) {
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = FreshTempDir("start_bad");
    o.http.listen = listen;
    auto server = CaptureServer::Start(o);
    ASSERT_FALSE(server.ok()) << listen;
    EXPECT_NE(server.status().message().find("--http_listen"), std::string::npos)
        << server.status();
  }
  for (const char* origin : {"dash.example", "https://dash.example/", "https://",
                             "https://dash.example/path", "ftp://dash.example"}) {
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = FreshTempDir("start_bad_origin");
    o.http.listen = "127.0.0.1:0";
    o.http.cors_origins = {"https://ok.example", origin};
    auto server = CaptureServer::Start(o);
    ASSERT_FALSE(server.ok()) << origin;
    EXPECT_NE(server.status().message().find(absl::StrCat("--http_cors_origin ", origin)),
              std::string::npos)
        << server.status();
  }
  {
    // "*": any page, and the answer says "*" (the token is a header, not a
    // cookie, so no credentials mode is needed).
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = FreshTempDir("start_any_origin");
    o.http.listen = "127.0.0.1:0";
    o.http.cors_origins = {"*"};
    auto server = CaptureServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    httplib::Client http("127.0.0.1", (*server)->http_port());
    auto res = http.Get("/v1/captures", {{"Origin", "https://anywhere.example"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "*");
  }
  // The HTTP port taken: an error naming it.
  CaptureServerOptions o;
  o.listen = "127.0.0.1:0";
  o.hub.root = FreshTempDir("start_first");
  o.http.listen = "127.0.0.1:0";
  auto first = CaptureServer::Start(o);
  ASSERT_TRUE(first.ok());
  CaptureServerOptions again = o;
  again.hub.root = FreshTempDir("start_second");
  again.http.listen = absl::StrCat("127.0.0.1:", (*first)->http_port());
  auto second = CaptureServer::Start(again);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("cannot listen"), std::string::npos);
}

// The schema a page builds its filter form from: every parameter the args
// query takes, from the one filter table, each with its kind; and each one
// it lists is a parameter the args endpoint accepts.
TEST_F(HttpGatewayTest, TheSchemaListsTheFilterParametersTheArgsEndpointTakes) {
  Start("schema");
  WriteScene("scene");
  auto schema = Get("/v1/schema");
  ASSERT_TRUE(schema);
  EXPECT_EQ(schema->status, 200);
  EXPECT_EQ(schema->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(schema->body.rfind("{\"filter\":[", 0), 0u) << schema->body;
  for (const std::string& name : ArgFilterParamNames()) {
    EXPECT_NE(schema->body.find("{\"name\": \"" + name + "\""), std::string::npos) << name;
    auto taken = Get("/v1/captures/scene/args?" + name + "=%01");
    ASSERT_TRUE(taken);
    // A bad value of a known parameter: a 400 (from the gateway or the
    // service), never "unknown parameter".
    EXPECT_EQ(taken->status, 400) << name;
    EXPECT_EQ(taken->body.find("unknown parameter"), std::string::npos) << taken->body;
  }
  EXPECT_NE(schema->body.find("\"kind\": \"enum\""), std::string::npos);
  EXPECT_NE(schema->body.find("\"kind\": \"bool\""), std::string::npos);
  auto extra = Get("/v1/schema?x=1");
  ASSERT_TRUE(extra);
  EXPECT_EQ(extra->status, 400);
}

}  // namespace
}  // namespace argsdump
