#include "base/files.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
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
  ASSERT_TRUE(WriteStringToFile(path, "no-newline").ok());
  EXPECT_EQ(ReadTokenFile(path).value(), "no-newline");
  ASSERT_TRUE(WriteStringToFile(path, "\ntoken on line two\n").ok());
  EXPECT_EQ(ReadTokenFile(path).status().message(),
            "cannot read a token from " + path + ": its first line is empty");
  ASSERT_TRUE(WriteStringToFile(path, "").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenFile(path).status()));
  EXPECT_EQ(ReadTokenFile(TempDir("no_token")).status().message(),
            "cannot read a token from " + TempDir("no_token") +
                ": cannot open: No such file or directory");
}

TEST(FilesTest, GoodTokensPassUnchanged) {
  std::string every_printable;
  for (int c = 0x21; c <= 0x7E; ++c) every_printable += static_cast<char>(c);
  const std::string longest(kMaxTokenBytes, 'k');
  for (const std::string& token : {std::string("s3cret"), std::string("a"), every_printable,
                                   longest, std::string("Zm9vYmFy+/==")}) {
    SCOPED_TRACE(token.substr(0, 40));
    for (const std::string& end : {std::string(), std::string("\n"), std::string("\r\n"),
                                   std::string("\nmore\0lines \x80\n", 14)}) {
      EXPECT_EQ(TokenFromFileBytes(token + end).value(), token);
    }
    const std::string path = TempDir("good_token");
    ASSERT_TRUE(WriteStringToFile(path, token + "\n").ok());
    EXPECT_EQ(ReadTokenFile(path).value(), token);
  }
}

// Every byte that cannot pass as an HTTP header or gRPC metadata value is
// refused, naming its offset in the file and what it is.
TEST(FilesTest, ATokenIsPrintableAsciiWithoutSpaces) {
  const std::string why = "; a token is printable ASCII without spaces (0x21..0x7e)";
  struct Case {
    std::string bytes;
    std::string error;
  };
  const Case cases[] = {
      {"abc\rdef\n", "byte 3 is 0x0d (a carriage return)" + why},
      {"abc\r", "byte 3 is 0x0d (a carriage return)" + why},
      {"abc\r\r\n", "byte 3 is 0x0d (a carriage return)" + why},
      {std::string("ab\0cd", 5), "byte 2 is 0x00 (NUL)" + why},
      {"tok\x80", "byte 3 is 0x80 (not ASCII)" + why},
      {"caf\xc3\xa9", "byte 3 is 0xc3 (not ASCII)" + why},
      {"\xff", "byte 0 is 0xff (not ASCII)" + why},
      {"token \n", "byte 5 is 0x20 (a space)" + why},
      {" token", "byte 0 is 0x20 (a space)" + why},
      {"to\tken", "byte 2 is 0x09 (a tab)" + why},
      {"tok\x7f", "byte 3 is 0x7f (DEL, a control character)" + why},
      {"tok\x1b[0m", "byte 3 is 0x1b (a control character)" + why},
      {"", "it is empty"},
      {"\n", "its first line is empty"},
      {"\r\n", "its first line is empty"},
      {std::string(kMaxTokenBytes + 1, 'k'),
       "its first line is longer than 4096 bytes (byte 4096 is still in it), the longest token"},
      {std::string(8 * 1024 + 1, 'k') + "\n",
       "its first line is longer than 4096 bytes (byte 4096 is still in it), the longest token"},
      {std::string(kMaxTokenBytes, 'k') + " ", "byte 4096 is 0x20 (a space)" + why},
  };
  const std::string path = TempDir("bad_token");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    const absl::StatusOr<std::string> direct = TokenFromFileBytes(c.bytes);
    EXPECT_TRUE(absl::IsInvalidArgument(direct.status())) << direct.status();
    EXPECT_EQ(direct.status().message(), c.error);
    ASSERT_TRUE(WriteStringToFile(path, c.bytes).ok());
    const absl::StatusOr<std::string> read = ReadTokenFile(path);
    EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
    EXPECT_EQ(read.status().message(), "cannot read a token from " + path + ": " + c.error);
  }
  ASSERT_TRUE(WriteStringToFile(path, "k\n" + std::string(kMaxTokenFileBytes, '#')).ok());
  EXPECT_EQ(ReadTokenFile(path).status().message(),
            absl::StrCat("cannot read a token from ", path, ": is ", kMaxTokenFileBytes + 2,
                         " bytes, more than the ", kMaxTokenFileBytes,
                         " bytes read from one file"));
}

// A short folder of our own under /tmp: a socket's path must fit in
// sockaddr_un, which TEST_TMPDIR may not.
class SpecialFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/argsdump_files_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const char* name : {"/fifo", "/socket", "/zero", "/dir"}) {
      ::unlink((dir_ + name).c_str());
      ::rmdir((dir_ + name).c_str());
    }
    ::rmdir(dir_.c_str());
  }
  std::string dir_;
};

// Refused by type, on the descriptor: nothing blocks (a FIFO with no
// writer), nothing reads without end (/dev/zero), for the reader and the
// token file alike.
TEST_F(SpecialFilesTest, OnlyRegularFilesAreRead) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string socket_path = dir_ + "/socket";
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string zero_link = dir_ + "/zero";
  ASSERT_EQ(::symlink("/dev/zero", zero_link.c_str()), 0);
  const std::string dir = dir_ + "/dir";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::pair<std::string, std::string> cases[] = {
      {fifo, "a FIFO"},
      {socket_path, "a socket"},
      {"/dev/zero", "a character device"},
      {"/dev/null", "a character device"},
      {"/dev/urandom", "a character device"},
      {zero_link, "a character device"},
      {dir, "a directory"},
      {"/", "a directory"},
  };
  for (const auto& [path, what] : cases) {
    SCOPED_TRACE(path);
    const absl::StatusOr<std::string> r = ReadFileToString(path);
    EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
    EXPECT_EQ(r.status().message(), path + ": is " + what + ", not a regular file");
    EXPECT_EQ(ReadTokenFile(path).status().message(),
              "cannot read a token from " + path + ": is " + what + ", not a regular file");
    EXPECT_EQ(OpenRegularFile(path).status().message(),
              path + ": is " + what + ", not a regular file");
  }
  ::close(sock);
  // A regular file opens, for reading.
  const std::string file = dir_ + "/dir/file";
  ASSERT_TRUE(WriteStringToFile(file, "abc").ok());
  const absl::StatusOr<int> fd = OpenRegularFile(file);
  ASSERT_TRUE(fd.ok()) << fd.status();
  char buf[4] = {};
  EXPECT_EQ(::read(*fd, buf, sizeof(buf)), 3);
  EXPECT_EQ(::write(*fd, "x", 1), -1);
  ::close(*fd);
  ::unlink(file.c_str());
  EXPECT_TRUE(absl::IsNotFound(OpenRegularFile(file).status()));
}

TEST(FilesTest, ReadsUpToItsBound) {
  const std::string path = TempDir("bounded");
  ASSERT_TRUE(WriteStringToFile(path, std::string(100, 'x')).ok());
  EXPECT_EQ(ReadFileToString(path, 100).value(), std::string(100, 'x'));
  absl::StatusOr<std::string> r = ReadFileToString(path, 99);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_EQ(r.status().message(),
            path + ": is 100 bytes, more than the 99 bytes read from one file");
  EXPECT_EQ(ReadFileToString(path, 0).status().message(),
            path + ": is 100 bytes, more than the 0 bytes read from one file");
  ASSERT_TRUE(WriteStringToFile(path, "").ok());
  EXPECT_EQ(ReadFileToString(path, 0).value(), "");
  // The default bound.
  EXPECT_EQ(kDefaultMaxFileBytes, uint64_t{64} << 20);
  ASSERT_TRUE(WriteStringToFile(path, std::string(kDefaultMaxFileBytes + 1, 'x')).ok());
  EXPECT_EQ(ReadFileToString(path).status().message(),
            absl::StrCat(path, ": is ", kDefaultMaxFileBytes + 1, " bytes, more than the ",
                         kDefaultMaxFileBytes, " bytes read from one file"));
  ::unlink(path.c_str());
}

// A file whose size says 0 (as under /proc) is still read no further than
// one byte past the bound.
TEST(FilesTest, AFileThatSaysNoSizeIsStillBounded) {
  const absl::StatusOr<std::string> whole = ReadFileToString("/proc/self/maps");
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_GT(whole->size(), 64u);
  const absl::StatusOr<std::string> cut = ReadFileToString("/proc/self/maps", 64);
  EXPECT_TRUE(absl::IsFailedPrecondition(cut.status())) << cut.status();
  EXPECT_EQ(cut.status().message(),
            "/proc/self/maps: grew past the 64 bytes read from one file while it was read");
}

}  // namespace
}  // namespace argsdump
