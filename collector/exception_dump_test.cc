#include "collector/exception_dump.h"

#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

FailedTask Failed(std::string func, std::string type) {
  FailedTask f;
  f.task_id = (uint64_t{1} << 32) | 3;
  f.step = 7;
  f.thread = 2;
  f.func_ids = {4};
  f.func = std::move(func);
  f.type = std::move(type);
  f.error = "injected failure";
  return f;
}

constexpr char kTaskId[] = "0x0000000100000003";

TEST(ExceptionDumpNameTest, ScenarioWorkloadFuncTypeStepThreadTask) {
  // [scenario]_[workload]_[func]_[func type]_[step]_[thread]_[task_id]
  EXPECT_EQ(ExceptionDumpName("vector_example", Failed("add", "elementwise")),
            absl::StrCat("exception_vector_example_add_elementwise_7_2_", kTaskId));
  EXPECT_EQ(ExceptionDumpName("crash", "crash_example", Failed("crash_segv", "test")),
            absl::StrCat("crash_crash_example_crash_segv_test_7_2_", kTaskId));
  EXPECT_EQ(ExceptionDumpName("exception", "w", Failed("f", "t")),
            ExceptionDumpName("w", Failed("f", "t")));
}

TEST(ExceptionDumpNameTest, EveryPartIsAFileNameAndAMissingTypeIsUntyped) {
  EXPECT_EQ(ExceptionDumpName("../x", "my/work load", Failed("k:1", "a/b c")),
            absl::StrCat(".._x_my_work_load_k_1_a_b_c_7_2_", kTaskId));
  EXPECT_EQ(ExceptionDumpName("w", Failed("broken", "")),
            absl::StrCat("exception_w_broken_untyped_7_2_", kTaskId));
  EXPECT_EQ(ExceptionDumpName("", Failed("", "")),
            absl::StrCat("exception_unnamed_unnamed_untyped_7_2_", kTaskId));
}

TEST(ExceptionDumpTest, WritesTheFolderUnderItsName) {
  const std::string root = FreshTempDir("exception_dump_test");
  const float values[4] = {1, 2, 3, 4};
  DumpTensorArg input;
  input.view.ndims = 1;
  input.view.shape[0] = 4;
  input.view.strides[0] = 1;
  input.view.data = reinterpret_cast<const uint8_t*>(values);
  DumpTask task;
  task.tensors = &input;
  task.tensor_count = 1;
  FailedTask f = Failed("fail", "test");
  f.task = &task;
  auto dir = WriteExceptionDump(root, "fail_at", f);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, absl::StrCat(root, "/exception_dump/exception_fail_at_fail_test_7_2_", kTaskId));
  auto context = ReadFileToString(*dir + "/context.json");
  ASSERT_TRUE(context.ok()) << context.status();
  for (const std::string& field :
       {std::string("\"scenario\": \"exception\""), std::string("\"func\": \"fail\""),
        std::string("\"func_type\": \"test\""), absl::StrCat("\"task_id\": \"", kTaskId, "\"")}) {
    EXPECT_NE(context->find(field), std::string::npos) << field << "\n" << *context;
  }
  struct stat st;
  EXPECT_EQ(::stat((*dir + "/args_dump.json").c_str(), &st), 0);
  EXPECT_EQ(::stat((*dir + "/args.index").c_str(), &st), 0);
  EXPECT_NE(::stat((*dir + "/args.journal").c_str(), &st), 0);  // a finished dump keeps none
}

}  // namespace
}  // namespace argsdump
