#include "viewer/viewer_options.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "viewer/viewer.h"

namespace argsdump {
namespace {

ViewerOptions Parse(const std::vector<std::string>& args) {
  absl::StatusOr<ViewerOptions> o = ParseViewerCommandLine(args);
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : ViewerOptions();
}

std::string Error(const std::vector<std::string>& args) {
  absl::StatusOr<ViewerOptions> o = ParseViewerCommandLine(args);
  EXPECT_FALSE(o.ok());
  return o.ok() ? "" : std::string(o.status().message());
}

TEST(ViewerOptionsTest, EveryFlagTakesDashesAndUnderscores) {
  const std::string token = std::string(std::getenv("TEST_TMPDIR")) + "/token";
  std::ofstream(token) << "s3cret\n";
  for (const std::string sep : {"-", "_"}) {
    SCOPED_TRACE(sep);
    ViewerOptions o = Parse({"dir", "--first" + sep + "nonfinite", "--task=0x100000001"});
    EXPECT_TRUE(o.first_nonfinite);
    EXPECT_EQ(o.selection.args.task_id, 0x100000001u);
    o = Parse({"--server", "h:1", "--capture", "c", "--auth" + sep + "token" + sep + "file",
               token});
    EXPECT_EQ(o.remote.auth_token, "s3cret");
    EXPECT_EQ(o.remote.target, "h:1");
    EXPECT_EQ(o.remote.capture, "c");
  }
}

TEST(ViewerOptionsTest, ShortAndLongNamesAreOneFlag) {
  const ViewerOptions a = Parse({"d", "-t", "5", "-s", "after", "-r", "output", "-a", "1", "-i",
                                 "7", "-e"});
  const ViewerOptions b = Parse({"d", "--task", "5", "--stage=after_completion", "--role=output",
                                 "--arg=1", "--index", "7", "--export"});
  for (const ViewerOptions* o : {&a, &b}) {
    EXPECT_EQ(o->dir, "d");
    EXPECT_EQ(o->selection.args.task_id, 0x100000005u);  // the low word: task 5 of the run
    EXPECT_EQ(o->selection.args.stage, v1::STAGE_AFTER_COMPLETION);
    EXPECT_EQ(o->selection.args.role, v1::ROLE_OUTPUT);
    EXPECT_EQ(o->selection.args.arg_index, 1u);
    EXPECT_EQ(o->selection.index, 7u);
    EXPECT_TRUE(o->export_text);
  }
}

TEST(ViewerOptionsTest, TaskIdsAsPeopleTypeThem) {
  // The whole id, 9 to 16 hex digits, with or without 0x.
  for (const char* whole : {"0x0000000100000005", "100000005", "0x100000005", "0X100000005"}) {
    EXPECT_EQ(Parse({"d", "-t", whole}).selection.args.task_id, 0x100000005u) << whole;
  }
  // 1 to 8 digits: the task's number in the run (the low word, hex).
  for (const char* number : {"5", "0x5", "00000005", "0x00000005"}) {
    EXPECT_EQ(Parse({"d", "-t", number}).selection.args.task_id, 0x100000005u) << number;
  }
  EXPECT_EQ(Parse({"d", "-t", "1a"}).selection.args.task_id, 0x10000001au);
  EXPECT_EQ(Parse({"d", "-t", "ffffffff"}).selection.args.task_id, 0x1ffffffffu);
  // A high word written out is kept, 0 too.
  EXPECT_EQ(Parse({"d", "-t", "0x0000000000000005"}).selection.args.task_id, 5u);
  EXPECT_EQ(Parse({"d", "-t", "200000005"}).selection.args.task_id, 0x200000005u);
  EXPECT_NE(Error({"d", "-t", "5.0"}).find("expected a hex task id"), std::string::npos);
}

TEST(ViewerOptionsTest, EachCallStartsFromTheDefaults) {
  ViewerOptions o = Parse({"d", "-e", "--npy", "--stats", "--func", "3", "--step=2", "--overflow",
                           "--out", "x"});
  EXPECT_TRUE(o.export_text && o.npy && o.stats && o.selection.args.overflow.has_value());
  o = Parse({"d"});
  EXPECT_FALSE(o.export_text || o.npy || o.stats || o.selection.args.overflow.has_value());
  EXPECT_FALSE(o.selection.any());
  EXPECT_EQ(o.out_dir, "");
  EXPECT_FALSE(o.tolerance_set);
  EXPECT_EQ(o.tolerance.atol, Tolerance().atol);
}

TEST(ViewerOptionsTest, KindDtypeAndUnknownFuncsAreFilters) {
  const ViewerOptions o = Parse({"d", "--kind", "scalar", "--dtype=bfloat16", "--func", "-1"});
  EXPECT_EQ(o.selection.args.kind, v1::KIND_SCALAR);
  EXPECT_EQ(o.selection.args.dtype, v1::DTYPE_BFLOAT16);
  EXPECT_TRUE(o.selection.args.func_unknown);
  EXPECT_FALSE(o.selection.args.func_id.has_value());
  EXPECT_EQ(Parse({"d", "--func", "7"}).selection.args.func_id, 7u);
  EXPECT_EQ(Error({"d", "--kind", "vector"}), "--kind 'vector': expected tensor or scalar");
  EXPECT_EQ(Error({"d", "--dtype", "FLOAT8"}),
            "--dtype 'FLOAT8': expected a dtype such as FLOAT32, BFLOAT16 or INT8");
  EXPECT_EQ(Error({"d", "--func", "-2"}),
            "--func '-2': expected a kernel name, or a func id (0, 1, ..., or -1 for args whose "
            "kernel is not known)");
  EXPECT_EQ(Error({"d", "--func", "4294967296"}),
            "--func '4294967296': expected a kernel name, or a func id (0, 1, ..., or -1 for args "
            "whose kernel is not known)");
}

// --func takes a kernel's name too (resolved against the capture's kernel
// table once it is open), --func-type a type; how the flag was spelled is
// kept for the message when the capture has no such kernel.
TEST(ViewerOptionsTest, FuncTakesAKernelNameAndFuncTypeAType) {
  const ViewerOptions o = Parse({"d", "--func", "strided_affine", "--func_type=elementwise"});
  EXPECT_EQ(o.selection.args.func_name, "strided_affine");
  EXPECT_EQ(o.selection.args.func_type, "elementwise");
  EXPECT_FALSE(o.selection.args.func_id.has_value());
  EXPECT_FALSE(o.selection.args.func_named.has_value());  // not resolved yet
  EXPECT_EQ(o.func_flag, "--func");
  EXPECT_EQ(o.func_type_flag, "--func_type");
  EXPECT_TRUE(o.selection.any());
  EXPECT_EQ(Parse({"d", "--func-type", "mix"}).func_type_flag, "--func-type");
  EXPECT_EQ(Error({"d", "--func", ""}),
            "--func '': expected a kernel name (1 to 128 bytes of UTF-8) or a func id (0, 1, "
            "..., or -1)");
  EXPECT_EQ(Error({"d", "--func", "a\xff"}),
            "--func 'a\xff': expected a kernel name (1 to 128 bytes of UTF-8) or a func id (0, 1, "
            "..., or -1)");
  EXPECT_EQ(Error({"d", "--func-type", std::string(65, 't')}),
            "--func-type '" + std::string(65, 't') +
                "': expected a kernel type (1 to 64 bytes of UTF-8)");
}

TEST(ViewerOptionsTest, ProgressIsAutoOnOrOff) {
  EXPECT_EQ(Parse({"d"}).progress, ProgressMode::kAuto);
  EXPECT_EQ(Parse({"d", "--progress"}).progress, ProgressMode::kAlways);
  EXPECT_EQ(Parse({"d", "--noprogress"}).progress, ProgressMode::kNever);
  EXPECT_EQ(Parse({"d", "--progress", "--no-progress"}).progress, ProgressMode::kNever);
  EXPECT_EQ(Parse({"d", "--progress=false"}).progress, ProgressMode::kNever);
}

TEST(ViewerOptionsTest, LabelsAddUp) {
  const ViewerOptions o =
      Parse({"--server", "h:1", "--captures", "--label", "a=1", "--label=b=2,c=3"});
  EXPECT_EQ(o.labels, (std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
}

TEST(ViewerOptionsTest, ErrorsNameTheFlagAsTyped) {
  EXPECT_EQ(Error({"-i", "x"}), "-i 'x': expected a manifest index (0, 1, ...)");
  EXPECT_EQ(Error({"--index=x"}), "--index 'x': expected a manifest index (0, 1, ...)");
  EXPECT_EQ(Error({"--first_nonfinite=maybe"}), "--first_nonfinite: 'maybe': expected true or false");
  EXPECT_EQ(Error({"--atol", "big"}), "--atol 'big': expected a tolerance >= 0 such as 1e-3");
  EXPECT_EQ(Error({"--compare="}),
            "--compare '': expected a capture directory, a raw or .npy file, or capture:NAME");
  EXPECT_EQ(Error({"--bogus"}),
            "--bogus: no such flag (unknown flag '--bogus'; dump_viewer --help lists them)");
}

TEST(ViewerOptionsTest, HelpListsEveryFlagAndBothSpellings) {
  std::ostringstream out, err;
  ASSERT_EQ(RunViewer({"--help"}, out, err), 0) << err.str();
  const std::string help = out.str();
  EXPECT_EQ(help, ViewerHelp());
  EXPECT_NE(help.find("--a-b and --a_b are the same flag"), std::string::npos);
  for (const char* flag :
       {"-t, --task=VALUE", "-s, --stage=VALUE", "-r, --role=VALUE", "-a, --arg=VALUE",
        "-i, --index=VALUE", "-e, --[no]export", "--func=VALUE", "--step=VALUE", "--[no]overflow",
        "--[no]nonfinite", "--[no]npy", "--[no]stats", "--[no]first-nonfinite", "--compare=VALUE",
        "--atol=VALUE", "--rtol=VALUE", "--out=VALUE", "--[no]progress", "--server=VALUE",
        "--capture=VALUE", "--auth-token-file=VALUE", "--[no]captures", "--label=VALUE"}) {
    EXPECT_NE(help.find(std::string("  ") + flag), std::string::npos) << flag << "\n" << help;
  }
  EXPECT_EQ(RunViewer({"-h"}, out, err), 0);
}

// The flags are the process's; parses on several threads each get their own.
TEST(ViewerOptionsTest, ParsesOnSeveralThreadsDoNotMix) {
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int k = 0; k < 200; ++k) {
        const std::vector<std::string> args =
            t % 2 == 0 ? std::vector<std::string>{"d", "-i", std::to_string(t), "-e"}
                       : std::vector<std::string>{"d", "--step", std::to_string(t)};
        absl::StatusOr<ViewerOptions> o = ParseViewerCommandLine(args);
        const bool right = o.ok() && (t % 2 == 0 ? o->selection.index == uint64_t(t) &&
                                                       !o->selection.args.step && o->export_text
                                                 : o->selection.args.step == uint32_t(t) &&
                                                       !o->selection.index && !o->export_text);
        wrong[t] += !right;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace argsdump
