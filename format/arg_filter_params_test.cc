#include "format/arg_filter_params.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
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
  // func= takes a func id, -1 for "not known", or a name.
  EXPECT_EQ(FromParams({{"func", "7"}})->func_id, 7u);
  EXPECT_TRUE(FromParams({{"func", "-1"}})->func_unknown);
  EXPECT_TRUE(FromParams({{"func_unknown", "true"}})->func_unknown);
  EXPECT_FALSE(FromParams({{"func_unknown", "false"}})->any());
  EXPECT_EQ(FromParams({{"func_id", "9"}})->func_id, 9u);
  EXPECT_FALSE(FromParams({})->any());
}

TEST(ArgFilterParamsTest, ErrorsNameTheParameter) {
  EXPECT_EQ(Error({{"step", "x"}}), "step=x: expected a step (0, 1, ...)");
  EXPECT_EQ(Error({{"arg_index", "4294967296"}}),
            "arg_index=4294967296: expected an arg index (0, 1, ...)");
  EXPECT_EQ(Error({{"stage", "during"}}), "stage=during: expected before or after");
  EXPECT_EQ(Error({{"stage", "unspecified"}}), "stage=unspecified: expected before or after");
  EXPECT_EQ(Error({{"overflow", "maybe"}}), "overflow=maybe: expected true or false");
  EXPECT_EQ(Error({{"task_id", "0xzz"}}),
            "task_id=0xzz: expected a task id (0x and up to 16 hex digits, or decimal)");
  EXPECT_EQ(Error({{"func", "-2"}}),
            "func=-2: expected a kernel name, or a func id (0, 1, ..., or -1 for args whose "
            "kernel is not known)");
  EXPECT_EQ(Error({{"func_type", std::string(65, 't')}}),
            "func_type=" + std::string(65, 't') +
                ": expected a kernel type (1 to 64 bytes of UTF-8)");
}

TEST(ArgFilterParamsTest, ParamNamesAreTheTablesInOrder) {
  EXPECT_THAT(ArgFilterParamNames(),
              ::testing::ElementsAre("task_id", "step", "stage", "role", "kind", "arg_index",
                                     "func_id", "func_unknown", "func", "func_type", "dtype",
                                     "overflow", "has_nonfinite"));
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
  EXPECT_NE(schema.find("{\"name\": \"func\", \"kind\": \"text\""), std::string::npos);
  // The help is JSON: a quote inside would be escaped.
  EXPECT_EQ(schema.find("\n\""), std::string::npos);
}

}  // namespace
}  // namespace argsdump
