// The SDK's test library over captures written by the real store: every
// dtype read back as values, scalars, truncated, non-contiguous and
// payload-less entries, queries, and each matcher passing and failing with
// its message.
#include "sdk/testing.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <cstdlib>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/temp_dir.h"
#include "viewer/test_capture.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using testing::ArgQuery;
using testing::Capture;
using testing::CapturedArg;
using testing::Role;
using testing::Stage;

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return TestCapture::Bytes(v);
}

// What a matcher says about `value`: matched, and its explanation.
template <typename M, typename V>
std::pair<bool, std::string> Explain(const M& matcher, const V& value) {
  ::testing::StringMatchResultListener listener;
  const bool ok = matcher.MatchAndExplain(value, &listener);
  return {ok, listener.str()};
}

constexpr uint64_t kTask = 0x100000007;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Capture Open(const TestCapture& c, const std::string& name) {
  const std::string dir = AbsentTempPath(name) + "/args_dump";
  EXPECT_TRUE(c.WriteTo(dir).ok());
  auto opened = Capture::Open(dir);
  EXPECT_TRUE(opened.ok()) << opened.status();
  return *opened;
}

TEST(TestingLibraryTest, EveryDtypeReadsBackAsValues) {
  using R = v1::Role;
  const auto out = R::ROLE_OUTPUT;
  const auto after = v1::STAGE_AFTER_COMPLETION;
  TestCapture c;
  struct Want {
    v1::DType dtype;
    std::string bytes;
    std::vector<double> values;
    std::optional<std::vector<int64_t>> ints;  // nullopt: a float dtype
  };
  const std::vector<Want> wants = {
      {v1::DTYPE_FLOAT32, Bytes(std::vector<float>{1.5f, -2.0f, NAN}), {1.5, -2, kNaN}, {}},
      {v1::DTYPE_FLOAT64, Bytes(std::vector<double>{0.1, -1e300}), {0.1, -1e300}, {}},
      {v1::DTYPE_FLOAT16, Bytes(std::vector<uint16_t>{0x3C00, 0xC000, 0x7C00, 0x0001}),
       {1, -2, INFINITY, std::ldexp(1.0, -24)}, {}},
      {v1::DTYPE_BFLOAT16, Bytes(std::vector<uint16_t>{0x3F80, 0x4020, 0xFF80}), {1, 2.5, -INFINITY},
       {}},
      {v1::DTYPE_FP8E4M3FN, std::string("\x38\x7f\xfe\x01", 4), {1, kNaN, -448, std::ldexp(1.0, -9)},
       {}},
      {v1::DTYPE_FP8E8M0, std::string("\x7f\x80\xff", 3), {1, 2, kNaN}, {}},
      // FP4E2M1: two per byte, low nibble first: 0x21 -> 0.5, 1; 0xF7 -> 6, -6.
      {v1::DTYPE_FP4E2M1, std::string("\x21\xf7", 2), {0.5, 1, 6, -6}, {}},
      {v1::DTYPE_INT8, Bytes(std::vector<int8_t>{-128, 127, -1}), {-128, 127, -1},
       std::vector<int64_t>{-128, 127, -1}},
      {v1::DTYPE_UINT8, Bytes(std::vector<uint8_t>{255, 0}), {255, 0}, std::vector<int64_t>{255, 0}},
      {v1::DTYPE_INT16, Bytes(std::vector<int16_t>{-32768, 5}), {-32768, 5},
       std::vector<int64_t>{-32768, 5}},
      {v1::DTYPE_UINT16, Bytes(std::vector<uint16_t>{65535}), {65535}, std::vector<int64_t>{65535}},
      {v1::DTYPE_INT32, Bytes(std::vector<int32_t>{INT32_MIN, 7}), {INT32_MIN, 7},
       std::vector<int64_t>{INT32_MIN, 7}},
      {v1::DTYPE_UINT32, Bytes(std::vector<uint32_t>{UINT32_MAX}), {4294967295.0},
       std::vector<int64_t>{4294967295}},
      // Beyond 2^53 the doubles round; the integers are exact.
      {v1::DTYPE_INT64, Bytes(std::vector<int64_t>{INT64_MIN, (int64_t{1} << 53) + 1}),
       {-9223372036854775808.0, 9007199254740992.0},
       std::vector<int64_t>{INT64_MIN, (int64_t{1} << 53) + 1}},
      {v1::DTYPE_UINT64, Bytes(std::vector<uint64_t>{(uint64_t{1} << 53) + 1}),
       {9007199254740992.0}, std::vector<int64_t>{(int64_t{1} << 53) + 1}},
      {v1::DTYPE_BOOL, Bytes(std::vector<uint8_t>{0, 1, 2}), {0, 1, 1},
       std::vector<int64_t>{0, 1, 1}},
  };
  uint32_t arg = 0;
  for (const Want& w : wants) {
    const uint32_t n = static_cast<uint32_t>(w.values.size());
    c.Tensor(kTask, arg++, out, after, w.dtype, {n}, w.bytes);
  }
  const Capture capture = Open(c, "dtypes");
  ASSERT_EQ(capture.args().size(), wants.size());
  for (size_t i = 0; i < wants.size(); ++i) {
    const CapturedArg& a = capture.args()[i];
    SCOPED_TRACE(a.Describe());
    EXPECT_EQ(static_cast<int>(a.dtype), static_cast<int>(wants[i].dtype) - 1);  // proto = enum + 1
    auto values = a.Values();
    ASSERT_TRUE(values.ok()) << values.status();
    ASSERT_EQ(values->size(), wants[i].values.size());
    for (size_t k = 0; k < values->size(); ++k) {
      if (std::isnan(wants[i].values[k])) {
        EXPECT_TRUE(std::isnan((*values)[k])) << k;
      } else {
        EXPECT_EQ((*values)[k], wants[i].values[k]) << k;
      }
    }
    auto ints = a.Integers();
    if (!wants[i].ints) {
      EXPECT_EQ(ints.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(ints.status().message()), HasSubstr("are not integers; use Values()"));
    } else {
      ASSERT_TRUE(ints.ok()) << ints.status();
      EXPECT_EQ(*ints, *wants[i].ints);
    }
  }
  // Unsigned: exact where Integers cannot be, refused for negatives.
  TestCapture u;
  u.Tensor(kTask, 0, out, after, v1::DTYPE_UINT64, {2},
           Bytes(std::vector<uint64_t>{UINT64_MAX, uint64_t{1} << 63}));
  u.Tensor(kTask, 1, out, after, v1::DTYPE_INT16, {1}, Bytes(std::vector<int16_t>{-3}));
  const Capture big = Open(u, "unsigned");
  EXPECT_EQ(*big.args()[0].Unsigned(), (std::vector<uint64_t>{UINT64_MAX, uint64_t{1} << 63}));
  EXPECT_EQ(big.args()[0].Integers().status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(big.args()[1].Unsigned().status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*big.args()[1].Integers(), std::vector<int64_t>{-3});
}

TEST(TestingLibraryTest, ScalarsTruncatedNonContiguousAndPayloadless) {
  using R = v1::Role;
  TestCapture c;
  c.Scalar(kTask, 4, v1::DTYPE_FLOAT32, BitsOf(0.5f));
  c.Scalar(kTask, 5, v1::DTYPE_INT64, BitsOf(int64_t{-7}));
  c.Scalar(kTask, 6, v1::DTYPE_UINT64, UINT64_MAX);
  c.Scalar(kTask, 7, v1::DTYPE_BOOL, 1);
  c.Scalar(kTask, 8, v1::DTYPE_FLOAT64, BitsOf(std::nan("")));
  // 4 of 8 elements captured.
  c.Tensor(kTask, 0, R::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_FLOAT32, {8},
           Bytes(std::vector<float>{1, 2, 3, 4}), 32);
  // A transposed window of a 4x4 buffer: captured as its logical elements.
  v1::ArgRecord& t = c.Tensor(kTask, 1, R::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH,
                              v1::DTYPE_INT32, {2, 3}, Bytes(std::vector<int32_t>{1, 5, 9, 2, 6, 10}));
  t.set_is_contiguous(false);
  t.set_strides(0, 1);
  t.set_strides(1, 4);
  t.set_start_offset(1);
  // Metadata only (a hybrid level's unmarked tensor).
  c.Tensor(kTask, 2, R::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_INT8, {4}, "", 4);
  const Capture capture = Open(c, "shapes");
  auto get = [&](uint32_t arg) {
    auto a = capture.Get(ArgQuery().Arg(arg));
    EXPECT_TRUE(a.ok()) << a.status();
    return *a;
  };
  EXPECT_EQ(*get(4).Values(), std::vector<double>{0.5});
  EXPECT_EQ(get(4).kind, testing::Kind::kScalar);
  EXPECT_EQ(*get(5).Integers(), std::vector<int64_t>{-7});
  EXPECT_EQ(*get(6).Unsigned(), std::vector<uint64_t>{UINT64_MAX});
  EXPECT_EQ(*get(7).Integers(), std::vector<int64_t>{1});
  EXPECT_TRUE(std::isnan((*get(8).Values())[0]));
  EXPECT_EQ(*get(4).Bytes(), "");

  const CapturedArg truncated = get(0);
  EXPECT_TRUE(truncated.truncated);
  EXPECT_EQ(truncated.numel, 8u);
  EXPECT_EQ(*truncated.Values(), (std::vector<double>{1, 2, 3, 4}));
  auto [ok, why] = Explain(testing::IsCloseTo({1, 2, 3, 4, 5, 6, 7, 8}), truncated);
  EXPECT_FALSE(ok);
  EXPECT_EQ(why, "has 4 elements (truncated), the golden 8");

  const CapturedArg view = get(1);
  EXPECT_FALSE(view.is_contiguous);
  EXPECT_EQ(view.strides, (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(view.start_offset, 1u);
  EXPECT_EQ(*view.Integers(), (std::vector<int64_t>{1, 5, 9, 2, 6, 10}));

  const CapturedArg meta = get(2);
  EXPECT_EQ(meta.bin_size, 0u);
  EXPECT_TRUE(meta.Values()->empty());
}

TEST(TestingLibraryTest, QueriesNameWhatTheyFound) {
  const Capture scene = Open(ViewerScene(false), "queries");
  EXPECT_EQ(scene.Find(ArgQuery().Task(0x100000000)).size(), 3u);
  EXPECT_EQ(scene.Find(ArgQuery().Stage(Stage::kAfterCompletion).Role(Role::kOutput)).size(), 5u);
  EXPECT_EQ(scene.Find(ArgQuery().Kind(testing::Kind::kScalar)).size(), 2u);
  EXPECT_EQ(scene.Find(ArgQuery().FuncId(6)).size(), scene.Find(ArgQuery().Task(0x100000001)).size());
  auto none = scene.Get(ArgQuery().Task(0x77));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("no arg matches task 0x0000000000000077 (of 12 args)"));
  auto many = scene.Get(ArgQuery().Task(0x100000000));
  EXPECT_EQ(many.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(many.status().message()), HasSubstr("3 args match task 0x0000000100000000"));
  // Func names come from a registry when the capture did not come from a session.
  Capture named = scene;
  named.SetKernelNames({{5, "copy"}, {6, "scale"}});
  EXPECT_EQ(named.Find(ArgQuery().Func("scale")).size(), 3u);
  EXPECT_EQ(named.Get(ArgQuery().Func("scale").Arg(2))->func, "scale");
}

TEST(TestingLibraryTest, EachMatcherPassesAndFailsWithItsMessage) {
  const Capture scene = Open(ViewerScene(false), "matchers");
  const Capture variant = Open(ViewerScene(true), "matchers_variant");
  const Capture again = Open(ViewerScene(false), "matchers_again");

  // IsFinite.
  const CapturedArg clean = *scene.Get(ArgQuery().Task(0x100000000).Arg(0));
  const CapturedArg dirty =
      *scene.Get(ArgQuery().Task(0x100000002).Stage(Stage::kAfterCompletion).Arg(0));
  EXPECT_THAT(clean, testing::IsFinite());
  auto [finite, finite_why] = Explain(testing::IsFinite(), dirty);
  EXPECT_FALSE(finite);
  EXPECT_EQ(finite_why, "holds 2 NaN/Inf of 3 elements; the first: element [1] = nan");
  EXPECT_EQ(::testing::DescribeMatcher<const CapturedArg&>(testing::IsFinite()),
            "holds no NaN or infinity");

  // HasNoNonFiniteOutputs: task 2's inout and task 3's FP8 output hold some.
  auto [outputs, outputs_why] = Explain(testing::HasNoNonFiniteOutputs(), scene);
  EXPECT_FALSE(outputs);
  EXPECT_EQ(outputs_why,
            "2 of 6 outputs hold a NaN or an infinity; the first: task 0x0000000100000002 after "
            "inout arg 0 FLOAT32 [3]: 2 NaN/Inf, the first element [1] = nan");
  TestCapture fine;
  fine.Tensor(kTask, 0, v1::ROLE_OUTPUT, v1::STAGE_AFTER_COMPLETION, v1::DTYPE_FLOAT32, {2},
              Bytes(std::vector<float>{1, 2}));
  fine.Tensor(kTask, 1, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_FLOAT32, {1},
              Bytes(std::vector<float>{NAN}));  // an input: not an output
  EXPECT_THAT(Open(fine, "finite_outputs"), testing::HasNoNonFiniteOutputs());

  // IsCloseTo (NumPy isclose rules).
  const CapturedArg doubled = *scene.Get(ArgQuery().Task(0x100000000).Arg(1));
  EXPECT_THAT(doubled, testing::IsCloseTo({2, 4, 6, 8, 10, 12}));
  EXPECT_THAT(doubled, testing::IsCloseTo({2, 4, 6, 8, 10, 12.0001}, 0, 1e-5));
  auto [close, close_why] = Explain(testing::IsCloseTo({2, 4, 6, 8, 10, 12.5}, 0.1), doubled);
  EXPECT_FALSE(close);
  EXPECT_EQ(close_why,
            "1 of 6 elements differ beyond atol 0.1 + rtol 1e-05 * |golden|; the first: element "
            "[1, 2] = 12, golden 12.5 (max abs error 0.5, max rel error 0.04)");
  EXPECT_THAT(dirty, testing::IsCloseTo({1, kNaN, INFINITY}));  // NaN = NaN, Inf = Inf
  EXPECT_THAT(dirty, ::testing::Not(testing::IsCloseTo({1, kNaN, -INFINITY})));
  EXPECT_EQ(::testing::DescribeMatcher<const CapturedArg&>(testing::IsCloseTo({1, 2}, 1e-3)),
            "is within atol 0.001 + rtol 1e-05 * |golden| of the 2 golden values");

  // MatchesCapture / FirstDivergence: the variant's bfloat16 [1, 0] is 2.5.
  EXPECT_THAT(scene, testing::MatchesCapture(again));
  auto [same, same_why] = Explain(testing::MatchesCapture(variant), scene);
  EXPECT_FALSE(same);
  EXPECT_EQ(same_why,
            "first divergence: task 0x0000000100000001 after output arg 1: element [1, 0] = 2, "
            "golden 2.5");
  EXPECT_THAT(scene, testing::MatchesCapture(variant, 0.6));  // within atol 0.6
  TestCapture fewer = ViewerScene(false);
  fewer.Tensor(0x100000009, 0, v1::ROLE_OUTPUT, v1::STAGE_AFTER_COMPLETION, v1::DTYPE_FLOAT32, {1},
               Bytes(std::vector<float>{1}));
  auto first = testing::FirstDivergence(Open(fewer, "extra"), again);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->value_or(""), "task 0x0000000100000009 after output arg 0: not in the golden");
  first = testing::FirstDivergence(again, Open(fewer, "extra2"));
  EXPECT_EQ(first->value_or(""), "task 0x0000000100000009 after output arg 0: only in the golden");
}

TEST(TestingLibraryTest, CheckCaptureFilesHoldsCapturesToTheSchema) {
  const std::string dir = AbsentTempPath("schema") + "/args_dump";
  ASSERT_TRUE(ViewerScene(false).WriteTo(dir).ok());
  EXPECT_TRUE(testing::CheckCaptureFiles(dir).ok()) << testing::CheckCaptureFiles(dir);
  const std::string manifest = ReadFileOrEmpty(dir + "/args_dump.json");
  auto with = [&](const std::string& text) {
    std::ofstream(dir + "/args_dump.json", std::ios::trunc) << text;
    return testing::CheckCaptureFiles(dir);
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = manifest;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return with(t.replace(at, from.size(), to));
  };
  const std::vector<std::pair<absl::Status, std::string>> cases = {
      {replaced("\"total_args\"", "\"colour\": 1, \"total_args\""), "not the manifest schema"},
      {replaced("\"total_args\": 12", "\"total_args\": 11"), "summary counters disagree"},
      {replaced("\"task_id\": \"0x0000000100000000\"", "\"task_id\": \"0x1\""),
       "is not 0x + 16 hex digits"},
      {replaced("\"dtype\": \"FLOAT32\"", "\"dtype\": \"float32\""), "not the schema's"},
      {replaced("\"run_dir\": \"args_dump\"", "\"run_dir\": \"elsewhere\""), "run_dir"},
      {with(manifest.substr(0, manifest.size() / 2)), "not the manifest schema"},
  };
  for (const auto& [status, says] : cases) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << says << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(says));
    EXPECT_THAT(std::string(status.message()), HasSubstr(dir + "/args_dump.json: "));
  }
  // The manifest right, args.bin cut short.
  EXPECT_TRUE(with(manifest).ok());
  ASSERT_EQ(::truncate((dir + "/args.bin").c_str(), 10), 0);
  const absl::Status cut = testing::CheckCaptureFiles(dir);
  EXPECT_THAT(std::string(cut.message()), HasSubstr("is not inside args.bin (10 bytes)"));
  EXPECT_EQ(testing::CheckCaptureFiles(AbsentTempPath("nothing")).code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace argsdump
