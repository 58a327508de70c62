// Query parameters as the endpoints read them: duplicates seen in the raw
// query, unknown names, bad values named, and the ArgFilter's parameters.
#include "server/http/params.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "format/arg_filter_params.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/argsdump/v1/capture.pb.h"

namespace argsdump {
namespace {

// A request as httplib parses "path?query" (its params keep one of
// identical pairs).
httplib::Request RequestFor(const std::string& target) {
  httplib::Request req;
  req.target = target;
  const size_t q = target.find('?');
  req.path = target.substr(0, q);
  if (q != std::string::npos) httplib::detail::parse_query_text(target.substr(q + 1), req.params);
  return req;
}

TEST(ParseDecimalTest, DigitsOnlyWithin64Bits) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseDecimal("18446744073709551615", &v));
  EXPECT_EQ(v, UINT64_MAX);
  EXPECT_FALSE(ParseDecimal("18446744073709551616", &v));
  for (const char* bad : {"", "+1", " 1", "1 ", "-1", "0x1", "1e3"}) {
    EXPECT_FALSE(ParseDecimal(bad, &v)) << bad;
  }
}

TEST(ParseIndexListTest, CommaSeparatedIndices) {
  std::vector<uint64_t> out;
  EXPECT_TRUE(ParseIndexList("", &out));
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(ParseIndexList("0,12,3", &out));
  EXPECT_EQ(out, (std::vector<uint64_t>{0, 12, 3}));
  for (const char* bad : {",", "1,", "a", "1,,2", "-1"}) {
    std::vector<uint64_t> ignored;
    EXPECT_FALSE(ParseIndexList(bad, &ignored)) << bad;
  }
}

TEST(ParamsTest, AGivenTwiceIsAnErrorEvenWhenHttplibKeptOne) {
  httplib::Request req = RequestFor("/v1/captures?state=live&state=live");
  Params p(req, {"state"});
  EXPECT_FALSE(p.Single("state").has_value());
  EXPECT_FALSE(p.Finish());
  EXPECT_EQ(p.error(), "parameter 'state' is given 2 times");
}

TEST(ParamsTest, UnknownParametersNameWhatTheEndpointTakes) {
  httplib::Request req = RequestFor("/x?bogus=1");
  Params p(req, {"b", "a"});
  EXPECT_FALSE(p.Finish());
  EXPECT_EQ(p.error(), "unknown parameter 'bogus' (this endpoint takes a, b)");
  Params none(req, {});
  EXPECT_FALSE(none.Finish());
  EXPECT_EQ(none.error(), "unknown parameter 'bogus' (this endpoint takes none)");
}

TEST(ParamsTest, ValuesAreCheckedAndTheFirstErrorKept) {
  httplib::Request req = RequestFor("/x?n=5&m=x&b=maybe&t=0xZZ");
  Params p(req, {"n", "m", "b", "t"});
  EXPECT_EQ(p.Uint("n", 4), std::nullopt);
  EXPECT_EQ(p.Uint("m", 10), std::nullopt);
  EXPECT_EQ(p.Bool("b"), std::nullopt);
  EXPECT_EQ(p.TaskId("t"), std::nullopt);
  EXPECT_FALSE(p.Finish());
  EXPECT_EQ(p.error(), "n=5: not an integer in 0..4");
}

TEST(ParamsTest, NotUtf8IsRefusedAtOnce) {
  httplib::Request req = RequestFor("/x?a=%FF");
  Params p(req, {"a"});
  EXPECT_EQ(p.error(), "parameter 'a': its value is not UTF-8 (percent-encode UTF-8 bytes)");
}

TEST(ParamsTest, EnumsByNameOrShortNameInAnyCase) {
  httplib::Request req = RequestFor("/x?a=before_dispatch&b=STAGE_AFTER_COMPLETION&c=never");
  Params p(req, {"a", "b", "c"});
  EXPECT_EQ(p.EnumValue<v1::Stage>("a", v1::Stage_descriptor(), "STAGE_"),
            v1::STAGE_BEFORE_DISPATCH);
  EXPECT_EQ(p.EnumValue<v1::Stage>("b", v1::Stage_descriptor(), "STAGE_"),
            v1::STAGE_AFTER_COMPLETION);
  EXPECT_EQ(p.EnumValue<v1::Stage>("c", v1::Stage_descriptor(), "STAGE_"), std::nullopt);
  EXPECT_EQ(p.error(), "c=never: not one of before_dispatch, after_completion");
}

TEST(ParseArgFilterParamsTest, EveryFilterParameterFillsItsField) {
  httplib::Request req = RequestFor(
      "/x?task_id=0x100000003&stage=after_completion&role=output&kind=tensor&dtype=float32"
      "&arg_index=2&func_id=7&func_type=vector&step=9&overflow=true&has_nonfinite=0"
      "&func_unknown=1");
  Params p(req, ArgFilterParamNames());
  v1::ArgFilter f;
  ParseArgFilterParams(p, &f);
  ASSERT_TRUE(p.Finish()) << p.error();
  EXPECT_EQ(f.task_id(), 0x100000003u);
  EXPECT_EQ(f.stage(), v1::STAGE_AFTER_COMPLETION);
  EXPECT_EQ(f.role(), v1::ROLE_OUTPUT);
  EXPECT_EQ(f.kind(), v1::KIND_TENSOR);
  EXPECT_EQ(f.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(f.arg_index(), 2u);
  EXPECT_EQ(f.func_id(), 7u);
  EXPECT_EQ(f.func_type(), "vector");
  EXPECT_EQ(f.step(), 9u);
  EXPECT_TRUE(f.overflow());
  EXPECT_FALSE(f.has_nonfinite());
  EXPECT_TRUE(f.has_has_nonfinite());
  EXPECT_TRUE(f.func_unknown());
}

TEST(ParseArgFilterParamsTest, ReadsEveryParameterItsEndpointTakes) {
  // Each listed name, given alone, either fills a field or is refused by
  // name: ParseArgFilterParams reads it.
  for (const std::string& name : ArgFilterParamNames()) {
    httplib::Request req = RequestFor("/x?" + name + "=1");
    Params p(req, ArgFilterParamNames());
    v1::ArgFilter f;
    ParseArgFilterParams(p, &f);
    EXPECT_TRUE(f.ByteSizeLong() > 0 || p.error().rfind(name + "=1: ", 0) == 0)
        << name << ": " << p.error();
  }
}

TEST(ParseArgFilterParamsTest, FuncIsAnIdOrAName) {
  {
    httplib::Request req = RequestFor("/x?func=12");
    Params p(req, ArgFilterParamNames());
    v1::ArgFilter f;
    ParseArgFilterParams(p, &f);
    EXPECT_EQ(f.func_id(), 12u);
    EXPECT_TRUE(f.func_name().empty());
  }
  {
    httplib::Request req = RequestFor("/x?func=axpb&task_id=17");
    Params p(req, ArgFilterParamNames());
    v1::ArgFilter f;
    ParseArgFilterParams(p, &f);
    EXPECT_EQ(f.func_name(), "axpb");
    EXPECT_EQ(f.task_id(), 17u);
  }
}

TEST(ParseArgFilterParamsTest, TheFirstBadParameterInTableOrderIsTheError) {
  httplib::Request req = RequestFor("/x?step=x&stage=sideways");
  Params p(req, ArgFilterParamNames());
  v1::ArgFilter f;
  ParseArgFilterParams(p, &f);
  EXPECT_FALSE(p.Finish());
  const std::vector<std::string> names = ArgFilterParamNames();
  const auto step = std::find(names.begin(), names.end(), "step");
  const auto stage = std::find(names.begin(), names.end(), "stage");
  ASSERT_TRUE(step != names.end() && stage != names.end());
  EXPECT_EQ(p.error(), step < stage ? "step=x: not an integer in 0..4294967295"
                                    : "stage=sideways: not one of before_dispatch, after_completion");
}

}  // namespace
}  // namespace argsdump
