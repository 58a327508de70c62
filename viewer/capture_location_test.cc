// What a path names, on real folders and on zips made by the `zip` tool
// Bazel 4's test-setup.sh runs: test.outputs/outputs.zip, a folder in one,
// the newest under bazel-testlogs/, and the viewer on them.
#include "viewer/capture_location.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "viewer/test_capture.h"
#include "viewer/viewer.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;

void Sh(const std::string& cmd) { ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd; }

// A test's undeclared outputs: two cases' captures, the second newer.
std::string MakeTestOutputs(const std::string& dir) {
  Sh("rm -rf '" + dir + "' && mkdir -p '" + dir + "'");
  EXPECT_TRUE(ViewerScene(false).WriteTo(dir + "/Suite.Old/args_dump").ok());
  EXPECT_TRUE(ViewerScene(true).WriteTo(dir + "/Suite.New/args_dump").ok());
  Sh("touch -d '2024-01-01' '" + dir + "/Suite.Old/args_dump/args_dump.json'");
  return dir;
}

// What Bazel 4 leaves: test.outputs/outputs.zip (zip -qr of the folder).
std::string Zip(const std::string& outputs, const std::string& testlogs_dir) {
  Sh("mkdir -p '" + testlogs_dir + "/test.outputs'");
  const std::string zip = testlogs_dir + "/test.outputs/outputs.zip";
  Sh("rm -f '" + zip + "' && cd '" + outputs + "' && zip -qr '" + zip + "' -- *");
  return zip;
}

class CaptureLocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Extractions go to this test's own cache folder.
    cache_ = TempPath(std::string("cache_") +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ::setenv("XDG_CACHE_HOME", cache_.c_str(), 1);
  }
  std::string cache_;
};

TEST_F(CaptureLocationTest, FoldersOfEveryKind) {
  const std::string outputs = MakeTestOutputs(TempPath("kinds"));
  auto exact = LocateCapture(outputs + "/Suite.Old/args_dump");
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->dir, outputs + "/Suite.Old/args_dump");
  EXPECT_EQ(exact->note, "");
  auto parent = LocateCapture(outputs + "/Suite.Old/");
  ASSERT_TRUE(parent.ok());
  EXPECT_EQ(parent->dir, outputs + "/Suite.Old/args_dump");
  // A folder of captures: the newest, and how to pick another.
  auto folder = LocateCapture(outputs);
  ASSERT_TRUE(folder.ok());
  EXPECT_EQ(folder->dir, outputs + "/Suite.New/args_dump");
  EXPECT_THAT(folder->note, HasSubstr("the newest of 2 captures in " + outputs));
  EXPECT_THAT(folder->note, HasSubstr("others: " + outputs + "/Suite.Old/args_dump"));
  EXPECT_EQ(LocateCapture(TempPath("no_such_thing")).status().code(), absl::StatusCode::kNotFound);
  Sh("mkdir -p '" + TempPath("empty_folder") + "'");
  auto empty = LocateCapture(TempPath("empty_folder"));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("no capture in"));
}

TEST_F(CaptureLocationTest, OutputsZipTestOutputsFolderAndAFolderInTheZip) {
  const std::string outputs = MakeTestOutputs(TempPath("zipped_src"));
  const std::string logs = TempPath("testlogs/pkg/my_test");
  const std::string zip = Zip(outputs, logs);
  for (const std::string& path : {zip, logs + "/test.outputs", logs + "/test.outputs/"}) {
    auto at = LocateCapture(path);
    ASSERT_TRUE(at.ok()) << path << ": " << at.status();
    EXPECT_TRUE(at->from_zip);
    EXPECT_EQ(at->name, zip + "/Suite.New/args_dump");
    EXPECT_THAT(at->note, HasSubstr("the newest of 2 captures in " + zip));
    EXPECT_THAT(at->dir, ::testing::StartsWith(cache_ + "/argsdump/unzipped/"));
    // The same bytes as the files the test wrote.
    EXPECT_TRUE(ReadFileOrEmpty(at->dir + "/args.bin") == ReadFileOrEmpty(outputs + "/Suite.New/args_dump/args.bin"));
    EXPECT_EQ(ReadFileOrEmpty(at->dir + "/args_dump.json"),
              ReadFileOrEmpty(outputs + "/Suite.New/args_dump/args_dump.json"));
  }
  for (const char* inner : {"Suite.Old", "Suite.Old/args_dump", "Suite.Old/"}) {
    auto old = LocateCapture(zip + "/" + std::string(inner));
    ASSERT_TRUE(old.ok()) << inner << ": " << old.status();
    EXPECT_EQ(old->note, "");
    EXPECT_EQ(ReadFileOrEmpty(old->dir + "/args_dump.json"),
              ReadFileOrEmpty(outputs + "/Suite.Old/args_dump/args_dump.json"));
  }
  auto missing = LocateCapture(zip + "/Suite.Gone");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("holds no capture 'Suite.Gone'; it holds Suite.New/args_dump, "
                        "Suite.Old/args_dump"));
  // Extracted once: a second look reads the cache (the zip unchanged).
  auto first = LocateCapture(zip + "/Suite.Old");
  std::ofstream(first->dir + "/marker_of_this_extraction") << "x";
  auto second = LocateCapture(zip + "/Suite.Old");
  EXPECT_EQ(second->dir, first->dir);
  EXPECT_EQ(ReadFileOrEmpty(second->dir + "/marker_of_this_extraction"), "x");
  // A newer zip (a new test run) is another cache entry.
  Sh("touch -d '2099-01-01' '" + zip + "'");
  auto third = LocateCapture(zip + "/Suite.Old");
  EXPECT_NE(third->dir, first->dir);
}

TEST_F(CaptureLocationTest, DamagedAndHostileZips) {
  const std::string dir = TempPath("hostile");
  Sh("rm -rf '" + dir + "' && mkdir -p '" + dir + "'");
  // Not a zip, a cut zip: DataLoss naming the file and the byte.
  std::ofstream(dir + "/outputs.zip") << "PK\3\4 this is not a zip";
  auto bad = LocateCapture(dir + "/outputs.zip");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(dir + "/outputs.zip: byte "));
  const std::string good_src = MakeTestOutputs(dir + "/src");
  const std::string zip = Zip(good_src, dir + "/cut");
  const std::string bytes = ReadFileOrEmpty(zip);
  std::ofstream(zip, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_EQ(LocateCapture(zip).status().code(), absl::StatusCode::kDataLoss);
  // A zip whose members try to leave the folder they are extracted to:
  // names patched (same length) to "../.." forms after zip wrote them.
  // Refused whole, naming the member; nothing written beside the cache.
  const std::string evil = dir + "/evil";
  Sh("mkdir -p '" + evil + "/x/args_dump' && echo '{}' > '" + evil + "/x/args_dump/args_dump.json'");
  Sh("echo owned > '" + evil + "/x/args_dump/ABCDEFGHIJK' && echo owned > '" + evil +
     "/x/args_dump/ZZ'");
  Sh("cd '" + evil + "' && zip -qr '" + dir + "/evil.zip' x");
  std::string z = ReadFileOrEmpty(dir + "/evil.zip");
  auto patch = [&](const std::string& from, const std::string& to) {
    for (size_t at = z.find(from); at != std::string::npos; at = z.find(from, at + 1)) {
      z.replace(at, from.size(), to);
    }
  };
  patch("x/args_dump/ABCDEFGHIJK", "x/args_dump/../../victi");
  patch("x/args_dump/ZZ", "x/args_dump/..");
  std::ofstream(dir + "/evil.zip", std::ios::binary | std::ios::trunc) << z;
  auto at = LocateCapture(dir + "/evil.zip");
  EXPECT_EQ(at.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(at.status().message()),
              HasSubstr(dir + "/evil.zip: byte "));
  EXPECT_THAT(std::string(at.status().message()), HasSubstr("member 'x/args_dump/..' has a '..' part at its byte 12"));
  struct stat st;
  EXPECT_NE(::stat((cache_ + "/argsdump/victi").c_str(), &st), 0);
  EXPECT_NE(::stat((cache_ + "/argsdump/unzipped/victi").c_str(), &st), 0);
}

TEST_F(CaptureLocationTest, NewestUnderOutputsAndBazelTestlogs) {
  const std::string cwd = TempPath("cwd_newest");
  Sh("rm -rf '" + cwd + "' && mkdir -p '" + cwd + "/outputs'");
  ASSERT_TRUE(ViewerScene(false).WriteTo(cwd + "/outputs/run_a/args_dump").ok());
  Sh("touch -d '2024-01-01' '" + cwd + "/outputs/run_a/args_dump/args_dump.json'");
  const std::string outputs = MakeTestOutputs(TempPath("newest_src"));
  Zip(outputs, cwd + "/bazel-testlogs/examples/k/layer_norm_test");
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof(old)), nullptr);
  ASSERT_EQ(::chdir(cwd.c_str()), 0);
  auto at = LocateNewestCapture();
  ASSERT_EQ(::chdir(old), 0);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_TRUE(at->from_zip);
  EXPECT_EQ(at->name, "bazel-testlogs/examples/k/layer_norm_test/test.outputs/outputs.zip/"
                      "Suite.New/args_dump");
  EXPECT_THAT(at->note, HasSubstr("the newest under outputs/ and bazel-testlogs/"));
  // The viewer says which one it picked, and lists it.
  ASSERT_EQ(::chdir(cwd.c_str()), 0);
  std::ostringstream out, err;
  const int code = RunViewer({"-t", "0x100000001"}, out, err);
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("capture: bazel-testlogs/examples/k/layer_norm_test/"
                                   "test.outputs/outputs.zip/Suite.New/args_dump (the newest "
                                   "under outputs/ and bazel-testlogs/"));
  EXPECT_THAT(out.str(), HasSubstr("extracted to " + cache_));
  EXPECT_THAT(out.str(), HasSubstr("3 args"));
}

TEST_F(CaptureLocationTest, ViewerOnAZipExportsBesideTheZip) {
  const std::string outputs = MakeTestOutputs(TempPath("export_src"));
  const std::string zip = Zip(outputs, TempPath("export_logs/t"));
  const std::string cwd = TempPath("export_cwd");
  Sh("rm -rf '" + cwd + "' && mkdir -p '" + cwd + "'");
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof(old)), nullptr);
  ASSERT_EQ(::chdir(cwd.c_str()), 0);
  std::ostringstream out, err;
  const int code = RunViewer({zip + "/Suite.Old", "-t", "0x100000000", "--export"}, out, err);
  std::ostringstream cmp_out, cmp_err;
  const int cmp = RunViewer({zip + "/Suite.Old", "--compare", zip + "/Suite.New"}, cmp_out, cmp_err);
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(code, 0) << err.str();
  // Beside the zip (bazel-testlogs/<pkg>/<t>/test.outputs/<Suite.Case>/txt),
  // whatever the working folder.
  const std::string beside = zip.substr(0, zip.find_last_of('/'));
  EXPECT_THAT(out.str(), HasSubstr("Saved: " + beside + "/Suite.Old/txt/task_0x0000000100000000_"));
  EXPECT_THAT(out.str(), HasSubstr("\nExported 3 arg(s) to " + beside + "/Suite.Old/txt\n"));
  struct stat st;
  EXPECT_EQ(::stat((beside + "/Suite.Old/txt").c_str(), &st), 0);
  EXPECT_NE(::stat((cwd + "/Suite.Old").c_str(), &st), 0);
  // A capture at the zip's root (or in a bare args_dump/): named after
  // the zip file.
  const std::string root_src = TempPath("export_root_src");
  Sh("rm -rf '" + root_src + "' && mkdir -p '" + root_src + "'");
  ASSERT_TRUE(ViewerScene(false).WriteTo(root_src + "/args_dump").ok());
  const std::string root_zip = TempPath("export_logs/at_root.zip");
  Sh("rm -f '" + root_zip + "' && cd '" + root_src + "' && zip -qr '" + root_zip + "' args_dump");
  ASSERT_EQ(::chdir(cwd.c_str()), 0);
  std::ostringstream root_out, root_err;
  const int root_code = RunViewer({root_zip, "-t", "0x100000000", "--export"}, root_out, root_err);
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(root_code, 0) << root_err.str();
  EXPECT_THAT(root_out.str(),
              HasSubstr("\nExported 3 arg(s) to " + TempPath("export_logs/at_root/txt") + "\n"));
  // --out still chooses.
  const std::string chosen = TempPath("export_chosen");
  std::ostringstream out_out, out_err;
  EXPECT_EQ(RunViewer({zip + "/Suite.Old", "-t", "0", "--export", "--out", chosen}, out_out,
                      out_err),
            0)
      << out_err.str();
  EXPECT_THAT(out_out.str(), HasSubstr("\nExported 3 arg(s) to " + chosen + "/txt\n"));
  // Two zipped captures compared: the variant differs at task 1's output.
  EXPECT_EQ(cmp, 1) << cmp_err.str();
  EXPECT_THAT(cmp_out.str(), HasSubstr("first divergence: task 0x0000000100000001 after output "
                                       "arg 1: element [1, 0] = 2, golden 2.5"));
}

}  // namespace
}  // namespace argsdump
