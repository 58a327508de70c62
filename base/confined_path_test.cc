// Names from data against a real folder: what CheckConfinedName refuses,
// and links, FIFOs, devices and ".." on disk met by every operation, with
// the folder beside the root checked untouched.
#include "base/confined_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

std::string Fresh(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(root != nullptr ? root : "/tmp") + "/confined_" + name;
  EXPECT_EQ(std::system(("rm -rf '" + path + "' && mkdir -p '" + path + "'").c_str()), 0);
  return path;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(CheckConfinedNameTest, PlainNamesPass) {
  for (const char* ok : {"a", "a/b", "Suite.Case/args_dump/args.bin", "..a", "a..", ".hidden",
                         "a b", "caf\xC3\xA9", "x/...", "-"}) {
    EXPECT_TRUE(CheckConfinedName(ok).ok()) << ok << ": " << CheckConfinedName(ok);
  }
  EXPECT_TRUE(CheckConfinedName(std::string(255, 'a')).ok());
  EXPECT_TRUE(CheckConfinedName(std::string(255, 'a') + "/" + std::string(255, 'b')).ok());
}

TEST(CheckConfinedNameTest, EveryWayOutIsRefusedNamingTheByte) {
  struct Case {
    std::string name, why;
  } cases[] = {
      {"", "is empty at its byte 0"},
      {"/etc/passwd", "is absolute at its byte 0"},
      {"..", "has a '..' part at its byte 0"},
      {"../x", "has a '..' part at its byte 0"},
      {"a/../../x", "has a '..' part at its byte 2"},
      {"a/b/..", "has a '..' part at its byte 4"},
      {".", "has a '.' part at its byte 0"},
      {"a/./b", "has a '.' part at its byte 2"},
      {"a//b", "has an empty part at its byte 2"},
      {"a/", "has an empty part at its byte 2"},
      {std::string("a\0/../b", 7), "holds a NUL byte at its byte 1"},
      {"a\n.bashrc", "holds a control byte at its byte 1"},
      {"a\x7f", "holds a control byte at its byte 1"},
      {"..\\..\\x", "holds a backslash at its byte 2"},
      {"a/" + std::string(256, 'b'), "has a part longer than 255 bytes at its byte 2"},
      {std::string(4096, 'a'), "is longer than 4095 bytes at its byte 4095"},
  };
  for (const Case& c : cases) {
    const absl::Status s = CheckConfinedName(c.name);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.why;
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s;
  }
}

TEST(ConfinedDirTest, WritesReadsAndMakesFoldersBelowTheRoot) {
  const std::string root = Fresh("plain");
  auto dir = ConfinedDir::Open(root + "/made/here", ConfinedDir::Missing::kCreate);
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_TRUE(dir->WriteFile("a/b/c.txt", "hello").ok());
  EXPECT_EQ(Slurp(root + "/made/here/a/b/c.txt"), "hello");
  ASSERT_TRUE(dir->WriteFile("a/b/c.txt", "again").ok());  // replaced whole
  EXPECT_EQ(Slurp(root + "/made/here/a/b/c.txt"), "again");
  auto fd = dir->OpenFile("a/b/c.txt");
  ASSERT_TRUE(fd.ok()) << fd.status();
  char buf[16] = {};
  EXPECT_EQ(::read(fd->get(), buf, sizeof(buf)), 5);
  EXPECT_EQ(dir->EntryAt("a/b/c.txt").value(), ConfinedEntry::kFile);
  EXPECT_EQ(dir->EntryAt("a/b").value(), ConfinedEntry::kDir);
  EXPECT_EQ(dir->EntryAt("nothing/here").value(), ConfinedEntry::kNone);
  auto sub = dir->Subdir("a/b", ConfinedDir::Missing::kFail);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->path(), root + "/made/here/a/b");
  EXPECT_EQ(sub->PathOf("c.txt"), root + "/made/here/a/b/c.txt");
  EXPECT_EQ(dir->Subdir("zz", ConfinedDir::Missing::kFail).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(dir->OpenFile("zz").status().code(), absl::StatusCode::kNotFound);
  // A fill error leaves nothing behind, not even the temporary file.
  absl::Status s = dir->WriteFileWith("fails.txt", [](int fd) {
    (void)!::write(fd, "half", 4);
    return absl::DataLossError("the source broke");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(std::system(("test -z \"$(ls -A '" + root + "/made/here' | grep -v '^a$')\"").c_str()),
            0);
  // "." names the working folder; its paths print without "./".
  auto here = ConfinedDir::Open(".", ConfinedDir::Missing::kFail);
  ASSERT_TRUE(here.ok());
  EXPECT_EQ(here->PathOf("x/y"), "x/y");
}

TEST(ConfinedDirTest, NamesThatLeaveAreRefusedBeforeAnythingIsTouched) {
  const std::string root = Fresh("names");
  auto dir = ConfinedDir::Open(root + "/in", ConfinedDir::Missing::kCreate);
  ASSERT_TRUE(dir.ok());
  for (const std::string name : {"../out.txt", "/tmp/out.txt", "a/../../out.txt", "a/", ".."}) {
    EXPECT_EQ(dir->WriteFile(name, "x").code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(dir->OpenFile(name).status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(dir->Subdir(name, ConfinedDir::Missing::kCreate).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
  EXPECT_EQ(std::system(("test \"$(ls -A '" + root + "')\" = in").c_str()), 0);
  EXPECT_EQ(std::system(("test -z \"$(ls -A '" + root + "/in')\"").c_str()), 0);
}

TEST(ConfinedDirTest, LinksOnDiskAreNeverFollowed) {
  const std::string root = Fresh("links");
  const std::string outside = root + "/outside";
  ASSERT_EQ(::mkdir(outside.c_str(), 0755), 0);
  std::ofstream(outside + "/victim") << "precious";
  auto dir = ConfinedDir::Open(root + "/in", ConfinedDir::Missing::kCreate);
  ASSERT_TRUE(dir.ok());
  // A link to a folder outside, as a folder part; a link to a file outside,
  // as the file; a dangling link (what a create would follow).
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/in/up").c_str()), 0);
  ASSERT_EQ(::symlink((outside + "/victim").c_str(), (root + "/in/file").c_str()), 0);
  ASSERT_EQ(::symlink((outside + "/new").c_str(), (root + "/in/dangling").c_str()), 0);
  for (const char* name : {"up/victim", "up/new", "file", "dangling"}) {
    const absl::Status w = dir->WriteFile(name, "owned");
    EXPECT_EQ(w.code(), absl::StatusCode::kFailedPrecondition) << name << ": " << w;
    EXPECT_NE(w.message().find("is a symbolic link"), std::string::npos) << w;
    EXPECT_EQ(dir->OpenFile(name).status().code(), absl::StatusCode::kFailedPrecondition) << name;
  }
  EXPECT_EQ(dir->Subdir("up", ConfinedDir::Missing::kCreate).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir->Subdir("up/deeper", ConfinedDir::Missing::kCreate).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir->EntryAt("file").value(), ConfinedEntry::kSymlink);
  EXPECT_EQ(Slurp(outside + "/victim"), "precious");
  EXPECT_EQ(std::system(("test \"$(ls -A '" + outside + "')\" = victim").c_str()), 0);
  // The root itself may be reached through a link: it is trusted.
  ASSERT_EQ(::symlink((root + "/in").c_str(), (root + "/via").c_str()), 0);
  auto via = ConfinedDir::Open(root + "/via", ConfinedDir::Missing::kFail);
  ASSERT_TRUE(via.ok()) << via.status();
  EXPECT_TRUE(via->WriteFile("ok.txt", "fine").ok());
  EXPECT_EQ(Slurp(root + "/in/ok.txt"), "fine");
}

TEST(ConfinedDirTest, FifosAndDevicesAreNeitherOpenedNorReplaced) {
  const std::string root = Fresh("special");
  auto dir = ConfinedDir::Open(root, ConfinedDir::Missing::kFail);
  ASSERT_TRUE(dir.ok());
  ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0644), 0);
  // Opening a FIFO with no writer would block: refused before it is opened.
  const auto fifo = dir->OpenFile("fifo");
  EXPECT_EQ(fifo.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(fifo.status().message().find("is a FIFO"), std::string::npos) << fifo.status();
  const absl::Status w = dir->WriteFile("fifo", "x");
  EXPECT_EQ(w.code(), absl::StatusCode::kFailedPrecondition) << w;
  struct stat st;
  ASSERT_EQ(::lstat((root + "/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // A device (/dev as the trusted root): refused, not opened.
  auto dev = ConfinedDir::Open("/dev", ConfinedDir::Missing::kFail);
  ASSERT_TRUE(dev.ok());
  const auto zero = dev->OpenFile("zero");
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(zero.status().message().find("/dev/zero is a device"), std::string::npos)
      << zero.status();
  EXPECT_EQ(dir->OpenFile("").status().code(), absl::StatusCode::kInvalidArgument);
  // Followed as the last part when asked (runfiles): to a regular file
  // only, never through a folder link.
  std::ofstream(root + "/real") << "data";
  ASSERT_EQ(::mkdir((root + "/sub").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((root + "/real").c_str(), (root + "/sub/link").c_str()), 0);
  ASSERT_EQ(::symlink("/dev/null", (root + "/null").c_str()), 0);
  ASSERT_EQ(::symlink((root + "/sub").c_str(), (root + "/sublink").c_str()), 0);
  using L = ConfinedDir::LastLink;
  EXPECT_TRUE(dir->OpenFile("sub/link", L::kFollow).ok());
  EXPECT_EQ(dir->OpenFile("sub/link").status().code(), absl::StatusCode::kFailedPrecondition);
  const auto null = dir->OpenFile("null", L::kFollow);
  EXPECT_NE(null.status().message().find("null leads to a device"), std::string::npos)
      << null.status();
  EXPECT_NE(dir->OpenFile("fifo", L::kFollow).status().message().find("fifo is a FIFO"),
            std::string::npos);
  EXPECT_EQ(dir->OpenFile("sublink/link", L::kFollow).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace argsdump
