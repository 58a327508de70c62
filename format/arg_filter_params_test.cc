#include "format/arg_filter_params.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

absl::StatusOr<ArgFilter> FromParams(const std::map<std::string, std::string>& params) {
  return ArgFilterFromParams([&](absl::string_view name) -> std::optional<std::string> {
    auto it = params.find(std::string(name));
    if (it == params.end()) return std::nullopt;
    return it->second;
  });
}

std::string Error(const std::map<std::string, std::string>& params) {
  absl::StatusOr<ArgFilter> f = FromParams(params);
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(f.status().message());
}

TEST(ArgFilterParamsTest, EveryParameterSetsItsField) {
  absl::StatusOr<ArgFilter> f =
      FromParams({{"task_id", "0x0000000100000003"}, {"step", "2"}, {"stage", "after_completion"},
                  {"role", "OUTPUT"}, {"kind", "KIND_TENSOR"}, {"arg_index", "1"},
                  {"func_type", "matmul"}, {"dtype", "bfloat16"}, {"overflow", "false"},
                  {"has_nonfinite", "1"}, {"func", "gemm"}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->task_id, 0x100000003u);
  EXPECT_EQ(f->step, 2u);
  EXPECT_EQ(f->stage, v1::STAGE_AFTER_COMPLETION);
  EXPECT_EQ(f->role, v1::ROLE_OUTPUT);
  EXPECT_EQ(f->kind, v1::KIND_TENSOR);
  EXPECT_EQ(f->arg_index, 1u);
  EXPECT_EQ(f->func_type, "matmul");
  EXPECT_EQ(f->func_name, "gemm");
  EXPECT_EQ(f->dtype, v1::DTYPE_BFLOAT16);
  EXPECT_EQ(f->overflow, false);
  EXPECT_EQ(f->has_nonfinite, true);
  EXPECT_EQ(f->Describe(),
            "task 0x0000000100000003 step 2 stage after_completion role output kind tensor arg 1 "
            "func gemm func type matmul dtype BFLOAT16 not overflow non-finite");
}

TEST(ArgFilterParamsTest, NumbersAndKernels) {
  // Decimal task ids are the whole id (the viewer's 1-8 hex digits are not).
  EXPECT_EQ(FromParams({{"task_id", "4294967299"}})->task_id, 0x100000003u);
  EXPECT_EQ(FromParams({{"task_id", "0X100000003"}})->task_id, 0x100000003u);
  // func= takes a func id, or else a kernel's name.
  EXPECT_EQ(FromParams({{"func", "7"}})->func_id, 7u);
  EXPECT_EQ(FromParams({{"func", "-1"}})->func_name, "-1");
  EXPECT_TRUE(FromParams({{"func_unknown", "true"}})->func_unknown);
  EXPECT_FALSE(FromParams({{"func_unknown", "false"}})->any());
  EXPECT_EQ(FromParams({{"func_id", "9"}})->func_id, 9u);
  EXPECT_EQ(FromParams({{"dtype", "DTYPE_INT8"}})->dtype, v1::DTYPE_INT8);
  EXPECT_FALSE(FromParams({})->any());
}

TEST(ArgFilterParamsTest, ErrorsNameTheParameter) {
  EXPECT_EQ(Error({{"step", "x"}}), "step=x: not an integer in 0..4294967295");
  EXPECT_EQ(Error({{"arg_index", "4294967296"}}),
            "arg_index=4294967296: not an integer in 0..4294967295");
  // Digits only: no sign, no spaces.
  EXPECT_EQ(Error({{"step", "+1"}}), "step=+1: not an integer in 0..4294967295");
  EXPECT_EQ(Error({{"task_id", "1 "}}),
            "task_id=1 : not a task id (0x + up to 16 hex digits, or decimal)");
  EXPECT_EQ(Error({{"task_id", "-5"}}),
            "task_id=-5: not a task id (0x + up to 16 hex digits, or decimal)");
  EXPECT_EQ(Error({{"stage", "bogus"}}),
            "stage=bogus: not one of before_dispatch, after_completion");
  EXPECT_EQ(Error({{"stage", "unspecified"}}),
            "stage=unspecified: not one of before_dispatch, after_completion");
  EXPECT_EQ(Error({{"role", "in"}}), "role=in: not one of input, output, inout");
  EXPECT_EQ(Error({{"overflow", "maybe"}}), "overflow=maybe: not true or false");
  // The first bad one, in table order.
  EXPECT_EQ(Error({{"has_nonfinite", "x"}, {"task_id", "y"}}),
            "task_id=y: not a task id (0x + up to 16 hex digits, or decimal)");
}

// The same field through the command line's dialect: the viewer's
// spellings and words.
TEST(ArgFilterParamsTest, CommandLineDialect) {
  auto parse = [](ArgFilterField field, absl::string_view text, ArgFilter* f) {
    return ArgFilterFields()[static_cast<size_t>(field)].parse(FilterDialect::kCommandLine,
                                                               text, f);
  };
  ArgFilter f;
  ASSERT_TRUE(parse(ArgFilterField::k_task_id, "3", &f).ok());
  EXPECT_EQ(f.task_id, 0x100000003u);
  ASSERT_TRUE(parse(ArgFilterField::k_stage, "before", &f).ok());
  EXPECT_EQ(f.stage, v1::STAGE_BEFORE_DISPATCH);
  ASSERT_TRUE(parse(ArgFilterField::k_func_name, "-1", &f).ok());
  EXPECT_TRUE(f.func_unknown);
  EXPECT_EQ(parse(ArgFilterField::k_step, "x", &f).message(), "expected a step (0, 1, ...)");
  EXPECT_EQ(parse(ArgFilterField::k_stage, "STAGE_AFTER_COMPLETION", &f).message(),
            "expected before or after");
  EXPECT_EQ(parse(ArgFilterField::k_func_name, "-2", &f).message(),
            "expected a kernel name, or a func id (0, 1, ..., or -1 for args whose kernel is not "
            "known)");
  EXPECT_EQ(parse(ArgFilterField::k_func_type, std::string(65, 't'), &f).message(),
            "expected a kernel type (1 to 64 bytes of UTF-8)");
}

// The HTTP gateway's parameters are among them, each name once.
TEST(ArgFilterParamsTest, ParamNamesAreUnique) {
  const std::vector<std::string> names = ArgFilterParamNames();
  for (const char* gateway : {"task_id", "step", "stage", "role", "kind", "arg_index", "func_id",
                              "func_unknown", "func", "func_type", "dtype", "overflow",
                              "has_nonfinite"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), gateway), names.end()) << gateway;
  }
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_EQ(names.size(), kArgFilterFieldCount);
}

TEST(ArgFilterParamsTest, SchemaNamesEveryParameterWithItsKind) {
  const std::string schema = ArgFilterSchemaJson();
  EXPECT_EQ(schema.front(), '[');
  EXPECT_EQ(schema.back(), ']');
  for (const std::string& name : ArgFilterParamNames()) {
    EXPECT_NE(schema.find("{\"name\": \"" + name + "\", \"kind\": "), std::string::npos) << name;
  }
  EXPECT_NE(schema.find("{\"name\": \"stage\", \"kind\": \"enum\", \"values\": "
                        "[\"before_dispatch\", \"after_completion\"], \"help\": "),
            std::string::npos)
      << schema;
  EXPECT_NE(schema.find("{\"name\": \"step\", \"kind\": \"number\", \"values\": []"),
            std::string::npos);
  EXPECT_NE(schema.find("{\"name\": \"overflow\", \"kind\": \"bool\""), std::string::npos);
  EXPECT_NE(schema.find("{\"name\": \"func_unknown\", \"kind\": \"flag\""), std::string::npos);
  EXPECT_NE(schema.find("{\"name\": \"func\", \"kind\": \"text\""), std::string::npos);
  // The help is JSON: a quote inside would be escaped.
  EXPECT_EQ(schema.find("\n\""), std::string::npos);
}

}  // namespace
}  // namespace argsdump
