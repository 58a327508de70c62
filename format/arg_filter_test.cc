#include "format/arg_filter.h"

#include <vector>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

ManifestRow Row() {
  ManifestRow r;
  r.task_id = 0x100000002;
  r.arg_index = 1;
  r.role = v1::ROLE_OUTPUT;
  r.stage = v1::STAGE_AFTER_COMPLETION;
  r.kind = v1::KIND_TENSOR;
  r.dtype = v1::DTYPE_FLOAT32;
  r.func_ids[0] = 4;
  r.func_ids[1] = 9;
  r.func_count = 2;
  r.step = 3;
  return r;
}

TEST(ArgFilterTest, UnsetMatchesEverything) {
  const ArgFilter all;
  EXPECT_FALSE(all.any());
  EXPECT_TRUE(all.Matches(Row()));
  EXPECT_TRUE(all.Matches(ManifestRow()));
  EXPECT_EQ(all.Describe(), "all");
}

TEST(ArgFilterTest, EveryFieldSelectsAndRejects) {
  const ManifestRow row = Row();
  StatsRow nonfinite;
  nonfinite.present = true;
  nonfinite.nan = 1;
  struct Case {
    ArgFilter pass, fail;
  };
  std::vector<Case> cases(11);
  cases[0].pass.task_id = 0x100000002, cases[0].fail.task_id = 0x100000003;
  cases[1].pass.stage = v1::STAGE_AFTER_COMPLETION, cases[1].fail.stage = v1::STAGE_BEFORE_DISPATCH;
  cases[2].pass.role = v1::ROLE_OUTPUT, cases[2].fail.role = v1::ROLE_INOUT;
  cases[3].pass.kind = v1::KIND_TENSOR, cases[3].fail.kind = v1::KIND_SCALAR;
  cases[4].pass.arg_index = 1, cases[4].fail.arg_index = 0;
  cases[5].pass.func_id = 9, cases[5].fail.func_id = 5;
  cases[6].pass.dtype = v1::DTYPE_FLOAT32, cases[6].fail.dtype = v1::DTYPE_FLOAT16;
  cases[7].pass.step = 3, cases[7].fail.step = 0;
  cases[8].pass.overflow = false, cases[8].fail.overflow = true;
  cases[9].pass.has_nonfinite = true, cases[9].fail.has_nonfinite = false;
  cases[10].pass.func_id = 4, cases[10].fail.func_unknown = true;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(cases[i].pass.any()) << i;
    EXPECT_TRUE(cases[i].fail.any()) << i;
    EXPECT_TRUE(cases[i].pass.Matches(row, &nonfinite)) << i << " " << cases[i].pass.Describe();
    EXPECT_FALSE(cases[i].fail.Matches(row, &nonfinite)) << i << " " << cases[i].fail.Describe();
    // The proto carries each field both ways.
    EXPECT_EQ(ArgFilter::FromProto(cases[i].pass.ToProto()).Matches(row, &nonfinite), true) << i;
    EXPECT_EQ(ArgFilter::FromProto(cases[i].fail.ToProto()).Matches(row, &nonfinite), false) << i;
    EXPECT_EQ(ArgFilter::FromProto(cases[i].fail.ToProto()).Describe(), cases[i].fail.Describe());
  }
}

TEST(ArgFilterTest, StatsAndFuncsEdges) {
  ArgFilter finite;
  finite.has_nonfinite = false;
  EXPECT_TRUE(finite.Matches(Row()));  // no stats stored: not non-finite
  ArgFilter nonfinite;
  nonfinite.has_nonfinite = true;
  EXPECT_FALSE(nonfinite.Matches(Row()));
  StatsRow absent;  // present = false: nothing counted
  absent.nan = 5;
  EXPECT_FALSE(nonfinite.Matches(Row(), &absent));

  ManifestRow unknown = Row();
  unknown.func_count = 0;
  ArgFilter no_funcs;
  no_funcs.func_unknown = true;
  EXPECT_TRUE(no_funcs.Matches(unknown));
  EXPECT_FALSE(no_funcs.Matches(Row()));
  no_funcs.func_id = 4;  // both: nothing can match
  EXPECT_FALSE(no_funcs.Matches(unknown));
  EXPECT_FALSE(no_funcs.Matches(Row()));
  // func ids past func_count are not the record's.
  ArgFilter stale;
  stale.func_id = 9;
  ManifestRow one = Row();
  one.func_count = 1;
  EXPECT_FALSE(stale.Matches(one));
}

TEST(ArgFilterTest, DescribeSaysWhatWasAsked) {
  ArgFilter f;
  f.task_id = 0x100000003;
  f.stage = v1::STAGE_AFTER_COMPLETION;
  f.role = v1::ROLE_OUTPUT;
  f.dtype = v1::DTYPE_BFLOAT16;
  f.overflow = true;
  EXPECT_EQ(f.Describe(),
            "task 0x0000000100000003 stage after_completion role output dtype BFLOAT16 overflow");
}

// Every v1::ArgFilter field is a line of the table (a proto field the
// table lacks would be dropped by FromProto), and each survives the trip
// through the proto.
TEST(ArgFilterTest, TheTableHoldsEveryProtoField) {
  const google::protobuf::Descriptor* d = v1::ArgFilter::descriptor();
  ASSERT_EQ(static_cast<size_t>(d->field_count()), kArgFilterFieldCount);
  std::vector<std::string> members = {
#define ARGSDUMP_MEMBER_NAME(member, ...) #member,
      ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_MEMBER_NAME)
#undef ARGSDUMP_MEMBER_NAME
  };
  for (const std::string& m : members) EXPECT_NE(d->FindFieldByName(m), nullptr) << m;
}

TEST(ArgFilterTest, EachFieldAloneSurvivesTheProto) {
  ArgFilter set;
#define ARGSDUMP_SET_ONE(member, ...) \
  {                                   \
    ArgFilter one;                    \
    one.member = set.member;          \
    EXPECT_TRUE(one.any()) << #member; \
    EXPECT_EQ(ArgFilter::FromProto(one.ToProto()).Describe(), one.Describe()) << #member; \
    EXPECT_EQ(ArgFilter::FromProto(one.ToProto()).ToProto().SerializeAsString(), \
              one.ToProto().SerializeAsString()) << #member;                    \
  }
  set.task_id = 7;
  set.step = 3;
  set.stage = v1::STAGE_BEFORE_DISPATCH;
  set.role = v1::ROLE_INOUT;
  set.kind = v1::KIND_SCALAR;
  set.arg_index = 2;
  set.func_id = 5;
  set.func_unknown = true;
  set.func_name = "gemm";
  set.func_type = "matmul";
  set.dtype = v1::DTYPE_INT8;
  set.overflow = false;
  set.has_nonfinite = true;
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_SET_ONE)
#undef ARGSDUMP_SET_ONE
}

}  // namespace
}  // namespace argsdump
