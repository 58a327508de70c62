#include "viewer/viewer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/capture_store.h"

namespace argsdump {
namespace {

std::string Root() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

// Tasks 0x100000000..2: an input tensor before, an int32 scalar, an output
// after (task 1's output truncated); func ids 5, 6, 7.
std::string MakeCapture(const std::string& dir) {
  v1::CaptureInfo info;
  info.set_name("viewer");
  info.set_level(v1::DUMP_LEVEL_FULL);
  auto store = std::move(CaptureStore::Create(dir, info)).value();
  uint64_t offset = 0;
  for (uint64_t t = 0; t < 3; ++t) {
    v1::ArgRecord in;
    in.set_task_id(0x100000000ull + t);
    in.add_func_ids(5 + t);
    in.set_arg_index(0);
    in.set_role(v1::ROLE_INPUT);
    in.set_stage(v1::STAGE_BEFORE_DISPATCH);
    in.set_kind(v1::KIND_TENSOR);
    in.set_dtype(v1::DTYPE_FLOAT32);
    in.add_shape(2);
    in.add_shape(4);
    in.add_strides(4);
    in.add_strides(1);
    in.set_numel(8);
    in.set_logical_bytes(32);
    in.set_is_contiguous(true);
    in.set_bin_offset(offset);
    in.set_bin_size(32);
    offset += 32;
    EXPECT_TRUE(store->Append(in, std::string(32, 'a')).ok());
    v1::ArgRecord s = in;
    s.clear_shape();
    s.clear_strides();
    s.set_arg_index(2);
    s.set_kind(v1::KIND_SCALAR);
    s.set_dtype(v1::DTYPE_INT32);
    s.set_numel(1);
    s.set_logical_bytes(0);
    s.set_bin_offset(0);
    s.set_bin_size(0);
    s.set_scalar_bits(40 + t);
    EXPECT_TRUE(store->Append(s, "").ok());
    v1::ArgRecord out = in;
    out.set_arg_index(1);
    out.set_role(v1::ROLE_OUTPUT);
    out.set_stage(v1::STAGE_AFTER_COMPLETION);
    out.set_bin_offset(offset);
    out.set_bin_size(t == 1 ? 16 : 32);
    out.set_truncated(t == 1);
    offset += out.bin_size();
    EXPECT_TRUE(store->Append(out, std::string(out.bin_size(), 'b')).ok());
  }
  EXPECT_TRUE(store->Finish(v1::CaptureCounters()).ok());
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

TEST(ViewerTest, NoMatchSaysSoAndSuggests) {
  const std::string dir = MakeCapture(Root() + "/nomatch/args_dump");
  const Result r = Viewer({dir, "-t", "0x77"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no arg matches"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0x0000000100000000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("funcs 5 6 7"), std::string::npos) << r.err;
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
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(path, std::ios::trunc) << text.substr(0, text.size() / 2);
  const Result r = Viewer({dir});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("args_dump.json: byte "), std::string::npos) << r.err;
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
  EXPECT_NE(r.out.find("exported 3 files to " + dir + "/txt/"), std::string::npos) << r.out;
  std::ifstream in(dir + "/txt/task_0000000100000001_after_out1.txt");
  ASSERT_TRUE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  // Task 1's output: 16 of 32 bytes ("bbbb..." = 0x62626262 as float32).
  EXPECT_NE(text.find("# note: truncated: 16 bytes captured, elements 0..3 of 8"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# Detail:\n[0, 0] 1.04401335e+21\n"), std::string::npos) << text;
  std::ifstream scalar(dir + "/txt/task_0000000100000001_before_in2.txt");
  const std::string s2((std::istreambuf_iterator<char>(scalar)), {});
  EXPECT_NE(s2.find("# value: 41\n"), std::string::npos) << s2;
  // args.bin cut short: the error names the file and the bytes.
  ASSERT_EQ(::truncate((dir + "/args.bin").c_str(), 40), 0);
  const Result cut = Viewer({dir, "-i", "8", "-e"});
  EXPECT_EQ(cut.code, 2);
  EXPECT_NE(cut.err.find("args.bin: entry 8 needs bytes"), std::string::npos) << cut.err;
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
