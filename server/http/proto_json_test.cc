// ProtoToJson's added members: hex task ids and typed scalar values, each
// right after the field it explains, and nothing else changed (the text
// still reads back, unknown members aside, as the same message).
#include "server/http/proto_json.h"

#include <string>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/argsdump/v1/capture.pb.h"
#include "tests/testing/arg_records.h"

namespace argsdump {
namespace {

namespace pb = google::protobuf;

// `json` read back ignoring the added members.
template <typename M>
M ReadBack(const std::string& json) {
  M m;
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  EXPECT_TRUE(pb::util::JsonStringToMessage(json, &m, options).ok()) << json;
  return m;
}

TEST(ProtoJsonTest, ScalarValuesSitBesideTheirBitsForEveryDtype) {
  struct Case {
    v1::DType dtype;
    uint64_t bits;
    const char* value;
  };
  const Case cases[] = {
      {v1::DTYPE_FLOAT32, BitsOf(0.1f), "0.1"},
      {v1::DTYPE_FLOAT64, BitsOf(0.1), "0.1"},
      {v1::DTYPE_FLOAT64, BitsOf(-1e300), "-1e+300"},
      // The nearest binary16 to 1/3, as float32 reads it back (the manifest's).
      {v1::DTYPE_FLOAT16, 0x3555, "0.3333"},
      {v1::DTYPE_BFLOAT16, 0xbf80, "-1"},
      {v1::DTYPE_BFLOAT16, 0x7fc0, "\"NaN\""},
      {v1::DTYPE_FLOAT32, BitsOf(-0.0f), "-0"},
      {v1::DTYPE_FLOAT32, 0x7f800000, "\"Infinity\""},
      {v1::DTYPE_FLOAT64, 0xfff0000000000000ull, "\"-Infinity\""},
      {v1::DTYPE_BOOL, 1, "true"},
      {v1::DTYPE_BOOL, 0, "false"},
      {v1::DTYPE_INT8, 0xfd, "-3"},
      {v1::DTYPE_INT16, 0x8000, "-32768"},
      {v1::DTYPE_INT32, BitsOf(int32_t{-3}), "-3"},
      {v1::DTYPE_INT64, BitsOf(int64_t{-3}), "-3"},
      {v1::DTYPE_UINT8, 0xff, "255"},
      {v1::DTYPE_UINT32, 0xffffffff, "4294967295"},
      {v1::DTYPE_UINT64, ~0ull, "18446744073709551615"},
  };
  for (const Case& c : cases) {
    v1::CapturedArg arg;
    arg.set_record_id(4);
    *arg.mutable_record() = ScalarRecord(0x0000000300000007ull).Dtype(c.dtype).ScalarBits(c.bits);
    const std::string json = ProtoToJson(arg);
    const std::string want = std::string("\"scalar_bits\":\"") + std::to_string(c.bits) +
                             "\",\"scalar_value\":" + c.value + ",";
    EXPECT_NE(json.find(want), std::string::npos) << want << "\n" << json;
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(ReadBack<v1::CapturedArg>(json), arg))
        << json;
  }
}

TEST(ProtoJsonTest, TaskIdsGetTheirHexAndTensorsNoScalarValue) {
  v1::QueryArgsResponse page;
  *page.add_args()->mutable_record() = TensorRecord(0x0000000200000a00ull).Shape({2, 3});
  *page.add_args()->mutable_record() = ScalarRecord(0xffffffffffffffffull).ScalarBits(5);
  const std::string json = ProtoToJson(page);
  EXPECT_NE(json.find("\"task_id\":\"8589937152\",\"task_id_hex\":\"0x0000000200000a00\""),
            std::string::npos)
      << json;
  EXPECT_NE(
      json.find("\"task_id\":\"18446744073709551615\",\"task_id_hex\":\"0xffffffffffffffff\""),
      std::string::npos)
      << json;
  // One scalar_value: the scalar's, not the tensor's.
  const size_t first = json.find("scalar_value");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(json.find("scalar_value", first + 1), std::string::npos) << json;
  EXPECT_NE(json.find("\"scalar_value\":5"), std::string::npos) << json;
  EXPECT_TRUE(
      pb::util::MessageDifferencer::Equals(ReadBack<v1::QueryArgsResponse>(json), page));
}

// Summaries: a crash's tasks and the first overflow task, among strings
// holding every character JSON escapes and the structure characters the
// walk looks for.
TEST(ProtoJsonTest, SummariesWithAwkwardStringsKeepTheirTextAndGainHex) {
  v1::ListCapturesResponse list;
  v1::CaptureSummary* s = list.add_captures();
  s->set_capture("a");
  (*s->mutable_labels())["k\"},{[\\"] = "v:\"scalar_bits\":{\n\t\u00e9\x01]";
  s->mutable_counters()->set_first_overflow_task(0x0000000100000003ull);
  v1::CrashedTask* t = s->mutable_device_crash()->add_executing();
  t->set_task_id(0x0000000400000001ull);
  t->set_func("kernel \"quoted\" {x}");
  s->mutable_device_crash()->set_description("died [at] {here}, \"really\"");
  list.add_captures()->set_capture("empty");
  const std::string json = ProtoToJson(list);
  EXPECT_NE(json.find("\"first_overflow_task\":\"4294967299\",\"first_overflow_task_hex\":"
                      "\"0x0000000100000003\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"task_id\":\"17179869185\",\"task_id_hex\":\"0x0000000400000001\""),
            std::string::npos)
      << json;
  EXPECT_TRUE(
      pb::util::MessageDifferencer::Equals(ReadBack<v1::ListCapturesResponse>(json), list))
      << json;
}

// A request prints as the mapping alone: ProtoFromJson takes it back.
TEST(ProtoJsonTest, RequestsPrintWithoutAdditionsAndReadBack) {
  v1::QueryArgsRequest q;
  q.set_capture("c");
  q.set_task_id(0x0000000100000003ull);
  q.mutable_filter()->set_task_id(7);
  const std::string json = ProtoToJson(q);
  EXPECT_EQ(json.find("_hex"), std::string::npos) << json;
  v1::QueryArgsRequest back;
  ASSERT_TRUE(ProtoFromJson(json, &back).ok()) << json;
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(back, q));
}

}  // namespace
}  // namespace argsdump
