#include "sdk/exception_dump.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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

// With the task's inputs as dispatched (snapshot_inputs): its inout as the
// kernel received it (before_dispatch, the copy) and as the failure left
// it (after_completion, the tensor), each an entry of the dump's capture.
TEST(ExceptionDumpTest, KeepsTheInputsAsDispatchedBesideTheTaskAsItIs) {
  const std::string root = FreshTempDir("exception_dump_inputs_test");
  float now[4] = {10, 20, 30, 40};                      // what the kernel left
  const float received[4] = {1, 2, 3, 4};               // what it was given
  const float nan_out[2] = {0, std::nanf("")};
  DumpTensorArg args[2];
  args[0].view.ndims = 1;
  args[0].view.shape[0] = 4;
  args[0].view.strides[0] = 1;
  args[0].view.data = reinterpret_cast<const uint8_t*>(now);
  args[0].role = abi::ArgRole::kInOut;
  args[1].view.ndims = 1;
  args[1].view.shape[0] = 2;
  args[1].view.strides[0] = 1;
  args[1].view.data = reinterpret_cast<const uint8_t*>(nan_out);
  args[1].role = abi::ArgRole::kOutput;
  args[1].arg_index = 1;
  DumpTask task;
  task.tensors = args;
  task.tensor_count = 2;
  // What SnapshotInputs made before dispatch: the inout alone.
  std::vector<uint8_t> copies(InputSnapshotBytes(args, 2));
  ASSERT_EQ(copies.size(), 64u);
  float before_kernel[4] = {1, 2, 3, 4};
  args[0].view.data = reinterpret_cast<const uint8_t*>(before_kernel);
  std::vector<DispatchedInput> inputs;
  SnapshotInputs(args, 2, copies.data(), &inputs);
  args[0].view.data = reinterpret_cast<const uint8_t*>(now);
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(std::memcmp(inputs[0].copy, received, sizeof(received)), 0);
  FailedTask f = Failed("scale_inout", "test");
  f.task = &task;
  f.inputs = &inputs;
  auto dir = WriteExceptionDump(root, "inputs", f);
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto manifest = ReadFileToString(*dir + "/args_dump.json");
  auto bin = ReadFileToString(*dir + "/args.bin");
  auto context = ReadFileToString(*dir + "/context.json");
  ASSERT_TRUE(manifest.ok() && bin.ok() && context.ok());
  EXPECT_NE(context->find("\"records_before_dispatch\": 1"), std::string::npos) << *context;
  // Entries in manifest order: the inout before dispatch, then at
  // completion the inout and the output (flagged: it holds a NaN).
  const size_t before = manifest->find("\"stage\": \"before_dispatch\"");
  ASSERT_NE(before, std::string::npos) << *manifest;
  EXPECT_NE(manifest->find("\"role\": \"inout\"", before), std::string::npos);
  EXPECT_NE(manifest->find("\"nonfinite\": true"), std::string::npos) << *manifest;
  EXPECT_EQ(manifest->find("\"nonfinite\": true"), manifest->rfind("\"nonfinite\": true"));
  // args.bin holds both states of the inout.
  const std::string as_received(reinterpret_cast<const char*>(received), sizeof(received));
  const std::string as_left(reinterpret_cast<const char*>(now), sizeof(now));
  EXPECT_NE(bin->find(as_received), std::string::npos);
  EXPECT_NE(bin->find(as_left), std::string::npos);
  // Without them (the option off): no before_dispatch entry at all.
  FailedTask off = Failed("scale_inout", "test");
  off.task = &task;
  auto plain = WriteExceptionDump(FreshTempDir("exception_dump_no_inputs_test"), "inputs", off);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto plain_manifest = ReadFileToString(*plain + "/args_dump.json");
  ASSERT_TRUE(plain_manifest.ok());
  EXPECT_EQ(plain_manifest->find("\"stage\": \"before_dispatch\""), std::string::npos) << *plain_manifest;
}

}  // namespace
}  // namespace argsdump
