#include "base/files.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return std::string(root != nullptr ? root : "/tmp") + "/" + name;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(FilesTest, WritesAndReadsBackEveryByte) {
  const std::string path = TempDir("bytes.bin");
  std::string bytes(1 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(WriteStringToFile(path, bytes).ok());
  EXPECT_EQ(ReadFileToString(path).value(), bytes);
  // A second write replaces the file, it does not append.
  ASSERT_TRUE(WriteStringToFile(path, "short").ok());
  EXPECT_EQ(ReadFileToString(path).value(), "short");
  ASSERT_TRUE(WriteStringToFile(path, "").ok());
  EXPECT_EQ(ReadFileToString(path).value(), "");
}

TEST(FilesTest, ReadsFilesThatClaimNoSize) {
  // /proc files report size 0 and still hold bytes.
  const absl::StatusOr<std::string> cmdline = ReadFileToString("/proc/self/cmdline");
  ASSERT_TRUE(cmdline.ok()) << cmdline.status();
  EXPECT_NE(cmdline->find("files_test"), std::string::npos);
}

TEST(FilesTest, ErrorsNameThePath) {
  const std::string missing = TempDir("no_such_file");
  absl::StatusOr<std::string> r = ReadFileToString(missing);
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_EQ(r.status().message(), missing + ": cannot open: No such file or directory");
  r = ReadFileToString(TempDir(""));
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("is a directory"), std::string::npos);
  const absl::Status w = WriteStringToFile(TempDir("no_dir/file"), "x");
  EXPECT_TRUE(absl::IsUnavailable(w)) << w;
  EXPECT_NE(w.message().find("cannot write " + TempDir("no_dir/file")), std::string::npos);
}

TEST(FilesTest, CreatesEveryMissingFolder) {
  const std::string deep = TempDir("a/b/c");
  ASSERT_TRUE(CreateDirectories(deep).ok());
  EXPECT_TRUE(IsDirectory(deep));
  EXPECT_TRUE(CreateDirectories(deep).ok());  // already there
  EXPECT_TRUE(CreateDirectories(TempDir("a/b/")).ok());
  ASSERT_TRUE(WriteStringToFile(TempDir("a/file"), "x").ok());
  const absl::Status below = CreateDirectories(TempDir("a/file/d"));
  EXPECT_TRUE(absl::IsUnavailable(below)) << below;
  EXPECT_NE(below.message().find("cannot create directory " + TempDir("a/file/d")),
            std::string::npos)
      << below;
  const absl::Status is_file = CreateDirectories(TempDir("a/file"));
  EXPECT_EQ(is_file.message(), TempDir("a/file") + " is not a directory");
}

TEST(FilesTest, ATokenIsTheFirstLine) {
  const std::string path = TempDir("token");
  ASSERT_TRUE(WriteStringToFile(path, "s3cret\nsecond line\n").ok());
  EXPECT_EQ(ReadTokenFile(path).value(), "s3cret");
  ASSERT_TRUE(WriteStringToFile(path, "no newline").ok());
  EXPECT_EQ(ReadTokenFile(path).value(), "no newline");
  ASSERT_TRUE(WriteStringToFile(path, "\ntoken on line two\n").ok());
  EXPECT_EQ(ReadTokenFile(path).status().message(),
            "cannot read a token from " + path + ": its first line is empty");
  ASSERT_TRUE(WriteStringToFile(path, "").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenFile(path).status()));
  EXPECT_EQ(ReadTokenFile(TempDir("no_token")).status().message(),
            "cannot read a token from " + TempDir("no_token") +
                ": cannot open: No such file or directory");
}

}  // namespace
}  // namespace argsdump
