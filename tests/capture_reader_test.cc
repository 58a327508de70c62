// The test reader reads role, stage, kind and dtype with the store's
// spellings only: another spelling fails the test that reads it.
#include "tests/capture_reader.h"

#include <string>

#include "base/files.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

// A capture folder whose manifest holds one entry with these names.
std::string CaptureWith(const std::string& name, const std::string& role,
                        const std::string& stage, const std::string& kind,
                        const std::string& dtype) {
  const std::string dir = FreshTempDir(name);
  const std::string manifest = "{\"args\": [{\"task_id\": \"0x0000000100000002\", \"role\": \"" +
                               role + "\", \"stage\": \"" + stage + "\", \"kind\": \"" + kind +
                               "\", \"dtype\": \"" + dtype + "\", \"arg_index\": 3}]}";
  EXPECT_TRUE(WriteStringToFile(dir + "/args_dump.json", manifest).ok());
  EXPECT_TRUE(WriteStringToFile(dir + "/args.bin", "").ok());
  return dir;
}

TEST(CaptureReaderTest, ReadsTheStoreSpellingsIntoEnums) {
  const CaptureFiles c =
      ReadCapture(CaptureWith("spelt", "inout", "after_completion", "scalar", "BFLOAT16"));
  ASSERT_EQ(c.entries.size(), 1u);
  const Entry& e = c.entries[0];
  EXPECT_EQ(e.role, v1::ROLE_INOUT);
  EXPECT_EQ(e.stage, v1::STAGE_AFTER_COMPLETION);
  EXPECT_EQ(e.kind, v1::KIND_SCALAR);
  EXPECT_EQ(e.dtype, DataType::kBfloat16);
  EXPECT_EQ(e.arg_index, 3u);
  EXPECT_EQ(e.Key(), EntryKey("0x0000000100000002", v1::STAGE_AFTER_COMPLETION, 3u,
                              v1::ROLE_INOUT));
}

TEST(CaptureReaderTest, AnotherSpellingFailsTheTest) {
  const std::string role = CaptureWith("role", "Input", "before_dispatch", "tensor", "FLOAT32");
  EXPECT_NONFATAL_FAILURE(ReadCapture(role), "role \"Input\"");
  const std::string stage = CaptureWith("stage", "input", "before", "tensor", "FLOAT32");
  EXPECT_NONFATAL_FAILURE(ReadCapture(stage), "stage \"before\"");
  const std::string kind = CaptureWith("kind", "input", "before_dispatch", "tensors", "FLOAT32");
  EXPECT_NONFATAL_FAILURE(ReadCapture(kind), "kind \"tensors\"");
  // DataTypeFromName takes any letter case; the store writes upper case.
  const std::string dtype = CaptureWith("dtype", "input", "before_dispatch", "tensor", "float32");
  EXPECT_NONFATAL_FAILURE(ReadCapture(dtype), "dtype \"float32\"");
}

}  // namespace
}  // namespace argsdump
