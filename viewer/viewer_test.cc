#include "viewer/viewer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "viewer/npy.h"
#include "viewer/test_capture.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

std::string Root() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

// Tasks 0x100000000..2: an input tensor before, an int32 scalar, an output
// after (task 1's output truncated); func ids 5, 6, 7.
std::string MakeCapture(const std::string& dir) {
  TestCapture c;
  for (uint64_t t = 0; t < 3; ++t) {
    const uint64_t task = 0x100000000ull + t;
    c.Tensor(task, 0, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_FLOAT32, {2, 4},
             std::string(32, 'a'));
    c.Scalar(task, 2, v1::DTYPE_INT32, 40 + t);
    c.Tensor(task, 1, v1::ROLE_OUTPUT, v1::STAGE_AFTER_COMPLETION, v1::DTYPE_FLOAT32, {2, 4},
             std::string(t == 1 ? 16 : 32, 'b'), 32);
  }
  EXPECT_TRUE(c.WriteTo(dir).ok());
  return dir;
}

struct Result {
  int code;
  std::string out, err;
};

Result Viewer(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = RunViewer(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(ViewerTest, ListsEveryArgInManifestOrder) {
  const std::string dir = MakeCapture(Root() + "/list/args_dump");
  const Result r = Viewer({dir});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string golden =
      "  index  task_id             stage   role    arg  kind    dtype      shape                  bytes  flags\n"
      "      0  0x0000000100000000  before  input     0  tensor  FLOAT32    [2,4]                     32\n"
      "      1  0x0000000100000000  before  input     2  scalar  INT32      =40                        0\n"
      "      2  0x0000000100000000  after   output    1  tensor  FLOAT32    [2,4]                     32\n"
      "      3  0x0000000100000001  before  input     0  tensor  FLOAT32    [2,4]                     32\n"
      "      4  0x0000000100000001  before  input     2  scalar  INT32      =41                        0\n"
      "      5  0x0000000100000001  after   output    1  tensor  FLOAT32    [2,4]                     16  truncated\n"
      "      6  0x0000000100000002  before  input     0  tensor  FLOAT32    [2,4]                     32\n"
      "      7  0x0000000100000002  before  input     2  scalar  INT32      =42                        0\n"
      "      8  0x0000000100000002  after   output    1  tensor  FLOAT32    [2,4]                     32\n"
      "9 args\n";
  EXPECT_EQ(r.out, golden);
  // The parent folder works too.
  EXPECT_EQ(Viewer({Root() + "/list"}).out, r.out);
}

// CrashScene in `dir`.
std::string MakeCrashCapture(const std::string& dir) {
  EXPECT_TRUE(CrashScene().WriteTo(dir).ok());
  return dir;
}

// The crash summary comes first; the crashing task's entries and the
// other running task's are marked. Filters keep the summary.
TEST(ViewerTest, ACrashedCaptureSaysHowAndMarksTheTasks) {
  const std::string dir = MakeCrashCapture(Root() + "/crashed/args_dump");
  const Result r = Viewer({dir});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string summary =
      "device crash: SIGSEGV at 0x0 (task 0x0000000100000001, func crash_segv, type aiv, "
      "worker 2, thread 1, step 0); 3 tasks in flight\n"
      "  the device process died of SIGSEGV in kernel crash_segv\n";
  const std::string golden = summary +
      "  index  task_id             stage   role    arg  kind    dtype      shape                  bytes  flags\n"
      "      0  0x0000000100000000  before  input     0  tensor  FLOAT32    [2]                        8\n"
      "      1  0x0000000100000000  after   output    1  tensor  FLOAT32    [2]                        8\n"
      "      2  0x0000000100000001  before  input     0  tensor  FLOAT32    [2]                        8  [crashed task]\n"
      "      3  0x0000000100000001  after   output    1  tensor  FLOAT32    [2]                        8  in-flight [crashed task]\n"
      "      4  0x0000000100000002  before  input     0  tensor  FLOAT32    [2]                        8  [in-flight]\n"
      "      5  0x0000000100000002  after   output    1  tensor  FLOAT32    [2]                        8  in-flight [in-flight]\n"
      "6 args\n";
  EXPECT_EQ(r.out, golden);
  const Result one = Viewer({dir, "-t", "0x100000001", "-s", "before"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(one.out.substr(0, summary.size()), summary);
  EXPECT_NE(one.out.find("      2  0x0000000100000001  before  input     0  tensor  FLOAT32    "
                         "[2]                        8  [crashed task]\n1 args\n"),
            std::string::npos)
      << one.out;
  // Nothing selected: still how it died, then the suggestions.
  const Result none = Viewer({dir, "-t", "0x7"});
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.out.substr(0, summary.size()), summary);
}

// A manifest that names the crash only after args[] (any layout is read)
// gets its summary at the end; the entries are not marked.
TEST(ViewerTest, ACrashNamedAfterTheArgsIsSummarizedAtTheEnd) {
  const std::string dir = MakeCrashCapture(Root() + "/crashed_late/args_dump");
  const std::string path = dir + "/args_dump.json";
  std::string text = ReadFileToString(path).value_or("");
  const size_t from = text.find("  \"device_crash\"");
  const size_t to = text.find("  \"bin_file\"");
  ASSERT_NE(from, std::string::npos);
  std::string crash = text.substr(from, to - from);
  text.erase(from, to - from);
  crash.erase(crash.size() - 2);  // ",\n"
  text.insert(text.rfind('}'), ",\n" + crash + "\n");
  std::ofstream(path, std::ios::trunc) << text;
  const Result r = Viewer({dir});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("[crashed task]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6 args\ndevice crash: SIGSEGV at 0x0"), std::string::npos) << r.out;
}

// The indices a listing shows.
std::vector<int> Indices(const Result& r) {
  std::vector<int> out;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    if (line.find(" args") != std::string::npos) break;
    out.push_back(std::atoi(line.c_str()));
  }
  return out;
}

TEST(ViewerTest, FiltersCombine) {
  const std::string dir = MakeCapture(Root() + "/filters/args_dump");
  EXPECT_EQ(Indices(Viewer({dir, "-t", "0x0000000100000001"})), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(Indices(Viewer({dir, "--task", "100000001"})), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(Indices(Viewer({dir, "--task=0x100000002", "-s", "after"})), (std::vector<int>{8}));
  EXPECT_EQ(Indices(Viewer({dir, "-r", "output"})), (std::vector<int>{2, 5, 8}));
  EXPECT_EQ(Indices(Viewer({dir, "-a", "2"})), (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(Indices(Viewer({dir, "--func", "6"})), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(Indices(Viewer({dir, "-i", "5"})), (std::vector<int>{5}));
  EXPECT_EQ(Indices(Viewer({dir, "-s", "before_dispatch", "-r", "input", "-a", "0"})),
            (std::vector<int>{0, 3, 6}));
}

// MakeCapture's records with a kernel table (SceneKernels: 5 layer_norm,
// 6 saxpy, 7 strided_affine).
std::string MakeNamedCapture(const std::string& dir) {
  TestCapture c;
  for (uint64_t t = 0; t < 3; ++t) {
    const uint64_t task = 0x100000000ull + t;
    c.Tensor(task, 0, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_FLOAT32, {2, 4},
             std::string(32, 'a'));
    c.Scalar(task, 2, v1::DTYPE_INT32, 40 + t);
    c.Tensor(task, 1, v1::ROLE_OUTPUT, v1::STAGE_AFTER_COMPLETION, v1::DTYPE_FLOAT32, {2, 4},
             std::string(32, 'b'));
  }
  c.SetKernels(SceneKernels());
  EXPECT_TRUE(c.WriteTo(dir).ok());
  return dir;
}

TEST(ViewerTest, FuncTakesAKernelNameOrAnId) {
  const std::string dir = MakeNamedCapture(Root() + "/named/args_dump");
  EXPECT_EQ(Indices(Viewer({dir, "--func", "saxpy"})), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(Indices(Viewer({dir, "--func", "6"})), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(Indices(Viewer({dir, "--func=strided_affine", "-r", "output"})),
            (std::vector<int>{8}));
  EXPECT_EQ(Indices(Viewer({dir, "--func-type", "elementwise", "-a", "0"})),
            (std::vector<int>{3, 6}));
  EXPECT_EQ(Indices(Viewer({dir, "--func_type=norm"})), (std::vector<int>{0, 1, 2}));
  // Through args.index (a task query) the name selects the same way.
  EXPECT_EQ(Indices(Viewer({dir, "-t", "0x100000001", "--func", "saxpy"})),
            (std::vector<int>{3, 4, 5}));
  const Result none = Viewer({dir, "-t", "0x100000001", "--func", "layer_norm"});
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("funcs 5=layer_norm 6=saxpy 7=strided_affine"), std::string::npos)
      << none.err;
  // The listing ends with the kernels of the args it listed.
  const Result r = Viewer({dir, "--func", "saxpy"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("3 args\nkernels:\n      6  saxpy (elementwise) [in FLOAT32, out, "
                       "scalar]\n"),
            std::string::npos)
      << r.out;
  const Result all = Viewer({dir});
  EXPECT_NE(all.out.find("kernels:\n      5  layer_norm (norm) [in FLOAT32, out, scalar]\n"
                         "      6  saxpy (elementwise) [in FLOAT32, out, scalar]\n"
                         "      7  strided_affine (elementwise) [in FLOAT32, out, scalar]\n"),
            std::string::npos)
      << all.out;
  // --stats names each tensor's kernel.
  const Result stats = Viewer({dir, "--func", "strided_affine", "--stats"});
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_NE(stats.out.find("zeros  (kernel)\n      6  "), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("0         0  strided_affine\n      8  "), std::string::npos)
      << stats.out;
}

// A name the capture's kernel table does not have is exit 2, naming the
// flag as typed and the names it has; so is a capture with no table.
TEST(ViewerTest, AnUnknownKernelNameNamesTheFlagAndTheKnownNames) {
  const std::string dir = MakeNamedCapture(Root() + "/named_unknown/args_dump");
  Result r = Viewer({dir, "--func", "strided_afine"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "dump_viewer: --func 'strided_afine': no kernel named \"strided_afine\" in this "
            "capture; its kernels: layer_norm, saxpy, strided_affine\n");
  r = Viewer({dir, "-t", "0x100000001", "--func", "nope"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--func 'nope': no kernel named"), std::string::npos) << r.err;
  r = Viewer({dir, "--func-type", "conv"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "dump_viewer: --func-type 'conv': no kernel of type \"conv\" in this capture; its "
            "types: elementwise, norm\n");
  r = Viewer({dir, "--first-nonfinite", "--func", "nope"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--func 'nope'"), std::string::npos) << r.err;
  const std::string old = MakeCapture(Root() + "/unnamed/args_dump");
  r = Viewer({old, "--func", "saxpy"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("its kernels: none (the capture has no kernel table: filter by func id)"),
            std::string::npos)
      << r.err;
  // A name that cannot be one is refused before the capture is read.
  r = Viewer({dir, "--func", std::string(129, 'k')});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("expected a kernel name (1 to 128 bytes of UTF-8)"), std::string::npos)
      << r.err;
}

TEST(ViewerTest, NoMatchSaysSoAndSuggests) {
  const std::string dir = MakeCapture(Root() + "/nomatch/args_dump");
  const Result r = Viewer({dir, "-t", "0x77"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no arg matches"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0x0000000100000000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("funcs 5 6 7"), std::string::npos) << r.err;
  // What the capture has, and only that: no inout, one step.
  EXPECT_NE(r.err.find("; stages before, after; roles input, output; kinds tensor, scalar; "
                       "steps 0\n"),
            std::string::npos)
      << r.err;
}

// The hint lists the steps there are and the roles and stages there are.
TEST(ViewerTest, NoMatchOffersTheCapturesOwnStepsAndRoles) {
  TestCapture c;
  for (uint32_t step = 0; step < 3; ++step) {
    c.Add(TensorRecord(0x100000000ull + step).FuncIds({1}).Role(v1::ROLE_INOUT)
              .Stage(v1::STAGE_AFTER_COMPLETION).Shape({2}).Step(step),
          std::string(8, 'a'));
  }
  const std::string dir = Root() + "/nomatch_steps/args_dump";
  ASSERT_TRUE(c.WriteTo(dir).ok());
  const Result r = Viewer({dir, "--step", "7"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("; stages after; roles inout; kinds tensor; steps 0 1 2\n"),
            std::string::npos)
      << r.err;
}

// --geometry: each tensor's strides, start offset and contiguity in the
// listing (a strided view from element 3; a dense one; a scalar).
TEST(ViewerTest, GeometryListsStridesStartOffsetAndContiguity) {
  TestCapture c;
  c.Add(TensorRecord(0x100000000ull).FuncIds({1}).Shape({3, 4}).Strides({20, 2}).StartOffset(3)
            .Contiguous(false),
        std::string(48, 'a'));
  c.Add(TensorRecord(0x100000000ull).FuncIds({1}).Arg(1).Shape({2, 4}).Contiguous(),
        std::string(32, 'b'));
  c.Scalar(0x100000000ull, 2, v1::DTYPE_INT32, 5);
  const std::string dir = Root() + "/geometry/args_dump";
  ASSERT_TRUE(c.WriteTo(dir).ok());
  const Result r = Viewer({dir, "--geometry"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "  index  task_id             stage   role    arg  kind    dtype      shape             "
            "strides             start  contig       bytes  flags\n"
            "      0  0x0000000100000000  before  input     0  tensor  FLOAT32    [3,4]             "
            "[20,2]                  3  no              48\n"
            "      1  0x0000000100000000  before  input     1  tensor  FLOAT32    [2,4]             "
            "[4,1]                   0  yes             32\n"
            "      2  0x0000000100000000  before  input     2  scalar  INT32      =5                "
            "-                       -  -                0\n"
            "3 args\n");
  // Without the flag, the listing is as before (no view columns).
  EXPECT_EQ(Viewer({dir}).out.find("strides"), std::string::npos);
}

TEST(ViewerTest, BadArgumentsNameTheFlag) {
  const std::string dir = MakeCapture(Root() + "/badargs/args_dump");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{dir, "-t", "0xzz"}, "-t '0xzz': expected a hex task id"},
      {{dir, "-s", "middle"}, "-s 'middle': expected before or after"},
      {{dir, "--role", "in"}, "--role 'in': expected input, output or inout"},
      {{dir, "-a", "x"}, "-a 'x'"},
      {{dir, "--bogus", "1"}, "unknown flag '--bogus'"},
      {{dir, "-t"}, "-t needs a value"},
      {{dir, dir}, "one capture directory at a time"},
      {{Root() + "/nowhere"}, "nowhere/args_dump.json: cannot open"},
  };
  for (const Case& c : cases) {
    const Result r = Viewer(c.args);
    EXPECT_EQ(r.code, 2) << c.says;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

TEST(ViewerTest, CorruptManifestIsAnErrorNamingTheByte) {
  const std::string dir = MakeCapture(Root() + "/corrupt/args_dump");
  const std::string path = dir + "/args_dump.json";
  std::string text = ReadFileToString(path).value_or("");
  std::ofstream(path, std::ios::trunc) << text.substr(0, text.size() / 2);
  const Result r = Viewer({dir});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("args_dump.json: byte "), std::string::npos) << r.err;
}

// A manifest may claim anything: sizes beyond args.bin, shapes of 2^32
// elements with a few bytes, a bin_file outside the folder. Every command
// that reads payloads answers exit 2 naming the file, never an abort.
TEST(ViewerTest, HostileSizesShapesAndPathsAreErrorsNotAborts) {
  const std::string dir = MakeCapture(Root() + "/hostile/args_dump");
  const std::string path = dir + "/args_dump.json";
  const std::string good = ReadFileToString(path).value_or("");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(path, std::ios::trunc) << text;
  };
  const std::string golden = MakeCapture(Root() + "/hostile_golden/args_dump");
  for (const std::string& size : {std::string("1099511627776"), std::string("18446744073709551615"),
                                  std::string("9223372036854775807")}) {
    with("\"bin_size\": 32", "\"bin_size\": " + size);
    for (const std::vector<std::string>& command :
         {std::vector<std::string>{dir, "--stats"}, {dir, "-e"}, {dir, "--npy"},
          {dir, "--compare", golden}}) {
      const Result r = Viewer(command);
      EXPECT_EQ(r.code, 2) << size << " " << command[1] << ": " << r.err;
      EXPECT_NE(r.err.find("args.bin: entry 0 needs bytes 0.."), std::string::npos) << r.err;
    }
  }
  // 2^32 x 2^32 elements claimed with 32 bytes captured.
  with("\"shape\": [2, 4]", "\"shape\": [4294967295, 4294967295]");
  for (const char* flag : {"--stats", "-e", "--npy"}) {
    const Result r = Viewer({dir, "-i", "0", flag});
    EXPECT_TRUE(r.code == 0 || r.code == 2) << flag << ": " << r.code << " " << r.err;
  }
  with("\"bin_file\": \"args.bin\"", "\"bin_file\": \"../../../../etc/passwd\"");
  const Result escape = Viewer({dir, "-e"});
  EXPECT_EQ(escape.code, 2);
  EXPECT_NE(escape.err.find("bin_file '../../../../etc/passwd' is not a file of the capture folder"),
            std::string::npos)
      << escape.err;
  // A name of the folder, but a FIFO (reading it would wait forever for a
  // writer), a device through a link: refused. (A link to a regular file
  // is read: Bazel's runfiles are links.)
  ASSERT_EQ(::mkfifo((dir + "/fifo.bin").c_str(), 0644), 0);
  ASSERT_EQ(::symlink("/dev/zero", (dir + "/zero.bin").c_str()), 0);
  ASSERT_EQ(::symlink(dir.c_str(), (dir + "/self").c_str()), 0);
  for (const auto& [name, why] :
       {std::make_pair("fifo.bin", "fifo.bin is a FIFO, not a regular file"),
        std::make_pair("zero.bin", "zero.bin leads to a device, not a regular file"),
        std::make_pair("self", "self leads to a folder, not a regular file")}) {
    with("\"bin_file\": \"args.bin\"", absl::StrCat("\"bin_file\": \"", name, "\""));
    const Result r = Viewer({dir, "-e"});
    EXPECT_EQ(r.code, 2) << name;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
}

// A capture's files, or a golden, that are no files: refused by what they
// are, never waited on (a FIFO with no writer) or read without end
// (/dev/zero). A FIFO in place of args.index is passed over for the
// manifest, as a missing index is.
TEST(ViewerTest, SpecialFilesAreRefusedNotWaitedOn) {
  const std::string dir = MakeCapture(Root() + "/special/args_dump");
  const std::string bin = dir + "/args.bin", index = dir + "/args.index";
  const std::string listed = Viewer({dir, "-t", "100000001"}).out;
  ASSERT_FALSE(listed.empty());
  ASSERT_EQ(std::remove(index.c_str()), 0);
  ASSERT_EQ(::mkfifo(index.c_str(), 0600), 0);
  Result r = Viewer({dir, "-t", "100000001"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, listed);
  ASSERT_EQ(std::remove(bin.c_str()), 0);
  ASSERT_EQ(::mkfifo(bin.c_str(), 0600), 0);
  r = Viewer({dir, "--stats"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(bin + " is a FIFO, not a regular file"), std::string::npos) << r.err;
  ASSERT_EQ(std::remove(bin.c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", bin.c_str()), 0);
  r = Viewer({dir, "--stats"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(bin + " leads to a device, not a regular file"), std::string::npos)
      << r.err;
  const std::string golden_fifo = Root() + "/special_golden";
  ::unlink(golden_fifo.c_str());
  ASSERT_EQ(::mkfifo(golden_fifo.c_str(), 0600), 0);
  const std::string actual = MakeCapture(Root() + "/special_actual/args_dump");
  for (const std::string& golden : {golden_fifo, std::string("/dev/zero")}) {
    r = Viewer({actual, "-i", "0", "--compare", golden});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("dump_viewer: --compare '" + golden + "': no such capture directory or file"),
              std::string::npos)
        << r.err;
  }
}

TEST(ViewerTest, PicksTheNewestCaptureUnderOutputs) {
  const std::string base = Root() + "/cwd";
  ASSERT_EQ(std::system(("mkdir -p " + base).c_str()), 0);
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof(old)), nullptr);
  ASSERT_EQ(::chdir(base.c_str()), 0);
  Result none = Viewer({});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("no outputs/*/args_dump"), std::string::npos) << none.err;
  MakeCapture(base + "/outputs/older/args_dump");
  MakeCapture(base + "/outputs/newer/args_dump");
  // Make "older" clearly older.
  ASSERT_EQ(std::system("touch -d '2020-01-01' outputs/older/args_dump/args_dump.json"), 0);
  const Result r = Viewer({"-i", "0"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("capture: outputs/newer/args_dump (the newest under outputs/)"),
            std::string::npos)
      << r.out;
  ASSERT_EQ(::chdir(old), 0);
}

TEST(ViewerTest, ExportsTheSelectedArgsAsText) {
  const std::string dir = MakeCapture(Root() + "/export/args_dump");
  const Result r = Viewer({dir, "-t", "0x100000001", "--export"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The reference's lines: a "Saved:" per file, then the count.
  const std::string txt = dir + "/txt/";
  EXPECT_EQ(r.out.substr(r.out.find("3 args\n")),
            "3 args\n"
            "Saved: " + txt + "task_0x0000000100000001_before_in0.txt\n"
            "Saved: " + txt + "task_0x0000000100000001_before_in2.txt\n"
            "Saved: " + txt + "task_0x0000000100000001_after_out1.txt\n"
            "\n"
            "Exported 3 arg(s) to " + dir + "/txt\n");
  const std::string text = ReadFileOrEmpty(txt + "task_0x0000000100000001_after_out1.txt");
  // Task 1's output: 16 of 32 bytes ("bbbb..." = 0x62626262 as float32).
  EXPECT_NE(text.find("# start_offset: 0\n# DATA TRUNCATED (tensor too large for arena)\n\n"
                      "# Overview:\n1.04401e+21 1.04401e+21 1.04401e+21 1.04401e+21\n\n"
                      "# Detail:\n[0, 0] 1.04401e+21\n"),
            std::string::npos)
      << text;
  EXPECT_NE(ReadFileOrEmpty(txt + "task_0x0000000100000001_before_in2.txt").find("# value: 41\n"),
            std::string::npos);
  // args.bin cut short: the error names the file and the bytes.
  ASSERT_EQ(::truncate((dir + "/args.bin").c_str(), 40), 0);
  const Result cut = Viewer({dir, "-i", "8", "-e"});
  EXPECT_EQ(cut.code, 2);
  EXPECT_NE(cut.err.find("args.bin: entry 8 needs bytes"), std::string::npos) << cut.err;
}

// testdata/reference_export: a capture and the text files the reference
// viewer wrote for it (README.md there). Ours must be byte-identical.
TEST(ViewerTest, ExportsWhatTheReferenceViewerWrites) {
  const std::string golden = "viewer/testdata/reference_export";
  const std::string out = Root() + "/reference_export";
  const Result r = Viewer({golden + "/args_dump", "--export", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream saved(r.out.substr(r.out.find(" args\n") + 6));
  std::string line;
  int files = 0;
  while (std::getline(saved, line) && !line.empty()) {
    ASSERT_EQ(line.rfind("Saved: " + out + "/txt/", 0), 0u) << line;
    const std::string name = line.substr(line.rfind('/') + 1);
    SCOPED_TRACE(name);
    const std::string want = ReadFileOrEmpty(golden + "/txt/" + name);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(ReadFileOrEmpty(out + "/txt/" + name), want);
    ++files;
  }
  EXPECT_EQ(files, 33);
  EXPECT_TRUE(std::getline(saved, line));
  EXPECT_EQ(line, "Exported 33 arg(s) to " + out + "/txt");
}

TEST(ViewerTest, IndexAlwaysExportsThatEntry) {
  const std::string dir = MakeCapture(Root() + "/index_export/args_dump");
  const Result r = Viewer({dir, "-i", "5"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 args\nSaved: " + dir + "/txt/task_0x0000000100000001_after_out1.txt\n\n"
                       "Exported 1 arg(s) to " + dir + "/txt\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(ReadFileOrEmpty(dir + "/txt/task_0x0000000100000001_after_out1.txt").find("# arg_index: 1\n"),
            std::string::npos);
  // A comparison picks its arg with -i: it compares, exports nothing.
  const std::string golden = MakeCapture(Root() + "/index_golden/args_dump");
  const Result cmp = Viewer({golden, "-i", "2", "--compare", dir});
  EXPECT_EQ(cmp.code, 0) << cmp.err;
  EXPECT_EQ(cmp.out.find("Saved:"), std::string::npos) << cmp.out;
  struct stat st;
  EXPECT_NE(::stat((golden + "/txt").c_str(), &st), 0);
}

// Progress goes to stderr only, and only when asked (these streams are no
// terminal): stdout is the same with it or without it.
TEST(ViewerTest, ProgressOnStderrWhenForced) {
  const std::string dir = MakeCapture(Root() + "/progress/args_dump");
  const std::string golden = MakeCapture(Root() + "/progress_golden/args_dump");
  const Result quiet = Viewer({dir, "--export", "--npy"});
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  const Result off = Viewer({dir, "--export", "--npy", "--noprogress"});
  EXPECT_EQ(off.out, quiet.out);
  EXPECT_EQ(off.err, "");
  const Result on = Viewer({dir, "--export", "--npy", "--progress"});
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_EQ(on.out, quiet.out);
  // The final line: 9 args, 5 tensors of 32 bytes and the truncated 16.
  EXPECT_NE(on.err.find("export: 9/9 args ("), std::string::npos) << on.err;
  EXPECT_NE(on.err.find(", 176 B/176 B ("), std::string::npos) << on.err;
  EXPECT_EQ(on.err.back(), '\n');
  const Result cmp = Viewer({dir, "--compare", golden, "--progress"});
  EXPECT_EQ(cmp.out, Viewer({dir, "--compare", golden}).out);
  EXPECT_NE(cmp.err.find("compare: 9 args"), std::string::npos) << cmp.err;
  // On a terminal the line is redrawn in place and ended at the finish.
  std::ostringstream out, err;
  ASSERT_EQ(RunViewer({dir, "--stats", "--progress"}, out, err, ViewerTerminals{false, true}), 0);
  const std::string drawn = err.str();
  EXPECT_EQ(drawn.rfind("\rstats: ", 0), 0u) << drawn;
  EXPECT_NE(drawn.find("\rstats: 6/6 args ("), std::string::npos) << drawn;
  EXPECT_EQ(drawn.substr(drawn.size() - 4), "\x1b[K\n") << drawn;
  EXPECT_EQ(std::count(drawn.begin(), drawn.end(), '\n'), 1) << drawn;
}

TEST(ViewerTest, StatsForTheSelectedTensors) {
  const std::string dir = MakeCapture(Root() + "/stats/args_dump");
  const Result r = Viewer({dir, "-t", "0x100000001", "--stats"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The two tensors ("aaaa..." and "bbbb..." as float32); the scalar (4) has
  // no stats line; the truncated output (5) counts the 4 elements it holds.
  const std::string table = r.out.substr(r.out.find("  index             min"));
  EXPECT_EQ(table,
            "  index             min             max            mean         abs_max     nan    "
            "+inf    -inf     zeros\n"
            "      3    2.598459e+20    2.598459e+20    2.598459e+20    2.598459e+20       0       "
            "0       0         0\n"
            "      5    1.044013e+21    1.044013e+21    1.044013e+21    1.044013e+21       0       "
            "0       0         0\n");
}

// Task 1's output holds a NaN and an Inf (task 2's too, later): the first
// task is named, with its inputs.
TEST(ViewerTest, FirstNonFiniteNamesTheTaskAndItsInputs) {
  const std::string dir = MakeCapture(Root() + "/nonfinite/args_dump");
  EXPECT_NE(Viewer({dir, "--first-nonfinite"}).out.find("no output holds a NaN or an Inf"),
            std::string::npos);
  // Entries 5 (task 1's output, 16 bytes at its bin_offset) and 8: poke
  // NaN and -Inf floats into args.bin.
  auto poke = [&](uint64_t offset, float v) {
    std::fstream f(dir + "/args.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(reinterpret_cast<const char*>(&v), 4);
  };
  // Layout: per task 32 (input) + output; task 0: 0..31, 32..63; task 1:
  // 64..95, 96..111 (truncated); task 2: 112..143, 144..175.
  poke(100, std::numeric_limits<float>::quiet_NaN());
  poke(104, -std::numeric_limits<float>::infinity());
  poke(148, std::numeric_limits<float>::infinity());
  const Result r = Viewer({dir, "--first-nonfinite"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("first non-finite output: index 5  task 0x0000000100000001  "
                       "after_completion output arg 1  FLOAT32 [2,4]: 1 NaN, 0 +Inf, 1 -Inf of 4"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("inputs of task 0x0000000100000001:\n  index 3  task 0x0000000100000001  "
                       "before_dispatch input arg 0  FLOAT32 [2,4]: 0 NaN, 0 +Inf, 0 -Inf of 8\n"
                       "  index 4  input arg 2  scalar INT32 = 41\n"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace argsdump
namespace argsdump {
namespace {

std::string Scene(const std::string& name, bool variant) {
  const std::string dir = Root() + "/" + name + "/args_dump";
  EXPECT_TRUE(ViewerScene(variant).WriteTo(dir).ok());
  return dir;
}

TEST(ViewerSceneTest, ListsEveryKindOfArgInManifestOrder) {
  const Result r = Viewer({Scene("scene_list", false)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "  index  task_id             stage   role    arg  kind    dtype      shape                  bytes  flags\n"
            "      0  0x0000000100000000  before  input     0  tensor  FLOAT32    [2,3]                     24\n"
            "      1  0x0000000100000000  before  input     2  scalar  FLOAT32    =0.5                       0\n"
            "      2  0x0000000100000000  after   output    1  tensor  FLOAT32    [2,3]                     24\n"
            "      3  0x0000000100000001  before  input     0  tensor  FLOAT16    [4]                        8\n"
            "      4  0x0000000100000001  before  input     2  scalar  INT64      =-7                        0\n"
            "      5  0x0000000100000001  after   output    1  tensor  BFLOAT16   [2,2]                      8\n"
            "      6  0x0000000100000002  before  inout     0  tensor  FLOAT32    [3]                       12\n"
            "      7  0x0000000100000002  before  input     1  tensor  FLOAT64    []                         8\n"
            "      8  0x0000000100000002  after   inout     0  tensor  FLOAT32    [3]                       12\n"
            "      9  0x0000000100000003  after   output    0  tensor  FP8E4M3FN  [1,1,2,1,2]                4\n"
            "     10  0x0000000100000003  after   output    2  tensor  FLOAT32    [8]                       16  truncated\n"
            "     11  0x0000000100000003  after   output    3  tensor  INT8       [4]                        0  no-data\n"
            "12 args\n");
}

TEST(ViewerSceneTest, NpyFilesKeepShapeAndDtype) {
  const std::string dir = Scene("scene_npy", false);
  const std::string out = Root() + "/scene_npy_out";
  const Result r = Viewer({dir, "--npy", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote 8 .npy files to " + out + "/npy/\n"
                       "  index 10 not exported: truncated: 16 of 32 bytes captured\n"
                       "  index 11 not exported: no payload was captured\n"),
            std::string::npos)
      << r.out;
  struct Want {
    std::string file, descr;
    std::vector<uint64_t> shape;
    std::vector<double> values;  // as float32/float64 (compared as doubles)
  };
  const std::vector<Want> wants = {
      {"task_0000000100000000_before_in0.npy", "<f4", {2, 3}, {1, 2, 3, 4, 5, 6}},
      {"task_0000000100000001_after_out1.BFLOAT16_as_float32.npy", "<f4", {2, 2}, {1, 3, 2, 4}},
      {"task_0000000100000002_before_in1.npy", "<f8", {}, {3.25}},
      {"task_0000000100000003_after_out0.FP8E4M3FN_as_float32.npy", "<f4", {1, 1, 2, 1, 2},
       {1, 2, -1, NAN}},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.file);
    const std::string file = ReadFileOrEmpty(out + "/npy/" + w.file);
    const NpyArray a = ParseNpy(file).value();
    EXPECT_EQ(a.descr, w.descr);
    EXPECT_EQ(a.shape, w.shape);
    const size_t width = w.descr == "<f8" ? 8 : 4;
    ASSERT_EQ(file.size() - a.data_offset, w.values.size() * width);
    for (size_t i = 0; i < w.values.size(); ++i) {
      double v;
      if (width == 8) {
        std::memcpy(&v, file.data() + a.data_offset + i * 8, 8);
      } else {
        float f;
        std::memcpy(&f, file.data() + a.data_offset + i * 4, 4);
        v = f;
      }
      if (std::isnan(w.values[i])) {
        EXPECT_TRUE(std::isnan(v)) << i;
      } else {
        EXPECT_EQ(v, w.values[i]) << i;
      }
    }
  }
  // The float16 input keeps its dtype: the payload bytes as they are.
  const std::string half = ReadFileOrEmpty(out + "/npy/task_0000000100000001_before_in0.npy");
  const NpyArray h = ParseNpy(half).value();
  EXPECT_EQ(h.descr, "<f2");
  EXPECT_EQ(half.substr(h.data_offset), std::string("\x00\x3c\x00\x40\x00\x42\x00\x44", 8));
}

constexpr char kRow5[] =
    "      5  0x0000000100000001  after   output    1  BFLOAT16           4           0.5          "
    "0.25   0.996635           1  DIFFERS\n";

TEST(ViewerSceneTest, CompareAgainstAnotherCaptureNamesTheFirstDivergence) {
  const std::string golden = Scene("cmp_golden", false), actual = Scene("cmp_actual", true);
  Result r = Viewer({actual, "--compare", golden});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find(kRow5), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("     11  0x0000000100000003  after   output    3  INT8               4      "
                       "       -             -          -           -  ok (metadata only)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("     10  0x0000000100000003  after   output    2  FLOAT32            8"),
            std::string::npos);
  EXPECT_NE(r.out.find("ok (truncated: 4 of 8 compared)"), std::string::npos);
  EXPECT_NE(r.out.find("compared 12 args (atol 1e-08, rtol 1e-05): 11 match, 1 differ\n"
                       "first divergence: task 0x0000000100000001 after output arg 1: element "
                       "[1, 0] = 2.5, golden 2\n"),
            std::string::npos)
      << r.out;
  // NaN and Inf at the same places match (index 8); the same capture: 0.
  r = Viewer({golden, "--compare", golden});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("compared 12 args (atol 1e-08, rtol 1e-05): 12 match, 0 differ\n"),
            std::string::npos);
  EXPECT_EQ(r.out.find("first divergence"), std::string::npos);
  // Within tolerance: 0.5 <= 1 + 1e-5 * 2.
  r = Viewer({actual, "--compare", golden, "--atol", "1"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("0.996635           0  ok\n"), std::string::npos) << r.out;
  // Only a tolerance relative to the golden: 0.25 <= rtol.
  EXPECT_EQ(Viewer({actual, "--compare", golden, "--rtol", "0.25", "--atol=0"}).code, 0);
  EXPECT_EQ(Viewer({actual, "--compare", golden, "--rtol", "0.24", "--atol=0"}).code, 1);
  // Filters select what is compared.
  r = Viewer({actual, "--compare", golden, "-t", "100000000"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("compared 3 args"), std::string::npos) << r.out;
  r = Viewer({actual, "--compare", golden, "-i", "5"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("compared 1 args"), std::string::npos) << r.out;
}

TEST(ViewerSceneTest, CompareCountsArgsOnlyOnOneSide) {
  const std::string golden = Scene("cmp_side_golden", false);
  const std::string actual = Root() + "/cmp_side_actual/args_dump";
  {
    TestCapture c = ViewerScene(false);
    c.records()[0].set_task_id(0x100000009);  // moved to a task the golden lacks
    ASSERT_TRUE(c.WriteTo(actual).ok());
  }
  const Result r = Viewer({actual, "--compare", golden});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("task 0x0000000100000003 after output arg 0  ONLY IN THE GOLDEN (golden "
                       "index 9)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ONLY HERE (not in the golden)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compared 11 args (atol 1e-08, rtol 1e-05): 11 match, 0 differ; 1 only "
                       "in this capture, 1 only in the golden\n"
                       "first divergence: task 0x0000000100000003 after output arg 0: only in "
                       "the golden\n"),
            std::string::npos)
      << r.out;
}

TEST(ViewerSceneTest, CompareAgainstRawAndNpyFiles) {
  const std::string golden = Scene("file_golden", false), actual = Scene("file_actual", true);
  // Raw bfloat16 bytes as a kernel's reference would write them.
  const std::string raw = Root() + "/golden_out1.bf16";
  std::ofstream(raw, std::ios::binary) << std::string("\x80\x3f\x40\x40\x00\x40\x80\x40", 8);
  Result r = Viewer({actual, "-i", "5", "--compare", raw});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find(kRow5), std::string::npos) << r.out;
  EXPECT_EQ(Viewer({golden, "-i", "5", "--compare", raw}).code, 0);
  // The golden's own .npy export (bfloat16 widened to float32).
  ASSERT_EQ(Viewer({golden, "--npy", "--out", Root() + "/file_npy"}).code, 0);
  const std::string npy =
      Root() + "/file_npy/npy/task_0000000100000001_after_out1.BFLOAT16_as_float32.npy";
  r = Viewer({actual, "-t", "100000001", "-s", "after", "--compare", npy});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("1  DIFFERS (golden FLOAT32)\n"), std::string::npos) << r.out;
  EXPECT_EQ(Viewer({golden, "-i", "5", "--compare", npy}).code, 0);
  // A file against the wrong arg, or too many args, or a scalar: errors.
  r = Viewer({actual, "-i", "2", "--compare", raw});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("golden_out1.bf16: 8 bytes; index 2 (FLOAT32 [2,3]) needs 24"),
            std::string::npos)
      << r.err;
  r = Viewer({actual, "-i", "0", "--compare", npy});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("shape [2,3] vs golden [2,2]"), std::string::npos) << r.out;
  r = Viewer({actual, "-t", "100000001", "--compare", raw});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("compares one arg; the filters select 3"), std::string::npos) << r.err;
  r = Viewer({actual, "-i", "4", "--compare", raw});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("index 4 is a scalar"), std::string::npos) << r.err;
  std::ofstream(Root() + "/bad.npy", std::ios::binary) << std::string("\x93NUMPY\x01\x00\x05\x00{'x'", 15);
  r = Viewer({actual, "-i", "5", "--compare", Root() + "/bad.npy"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.npy: header: no 'descr'"), std::string::npos) << r.err;
}

TEST(ViewerSceneTest, FlagCombinationsAreChecked) {
  const std::string dir = Scene("flags", false);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{dir, "--atol", "1"}, "--atol/--rtol need --compare"},
      {{dir, "--compare", dir, "--rtol", "-1"}, "--rtol '-1': expected a tolerance"},
      {{dir, "--compare", Root() + "/none"}, "--compare '" + Root() + "/none': no such"},
      {{dir, "--compare", "capture:x"}, "add --server host:port"},
      {{dir, "--compare", dir, "--stats"}, "--compare runs alone"},
      {{"--server", "127.0.0.1:1"}, "--server needs --capture"},
      {{"--capture", "x"}, "--capture needs --server"},
      {{dir, "--server", "h:1", "--capture", "x"}, "not both"},
      {{"--server", "nohostport", "--capture", "x"}, "--server 'nohostport': expected host:port"},
      {{"--server", "h:1", "--capture", "x", "--auth_token_file", Root() + "/no_token"},
       "--auth_token_file: cannot read a token from"},
  };
  for (const auto& [args, says] : cases) {
    const Result r = Viewer(args);
    EXPECT_EQ(r.code, 2) << says;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace argsdump
