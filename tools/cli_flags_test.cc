#include "tools/cli_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::string, output_prefix, "outputs", "where the capture goes");
ABSL_FLAG(int, worker_count, 4, "worker threads");
ABSL_FLAG(bool, export_text, false, "write each arg as a text file");
ABSL_FLAG(int, level, 0, "dump level (a bare --level is 1)");
ABSL_FLAG(std::vector<std::string>, label, {}, "key=value labels, comma separated");
ABSL_FLAG(double, tolerance, 0.5, "how close is close enough");
ABSL_FLAG(std::string, wait_ms, "500", "how long to wait");

namespace argsdump {
namespace {

CommandLineSpec Spec() {
  CommandLineSpec spec;
  spec.program = "demo";
  spec.synopsis = "demo: a tool of the test.\n  demo [DIR] [flags]";
  spec.flags_file = __FILE__;
  spec.short_names = {{'e', "export_text"}, {'w', "worker_count"}};
  spec.bare_values = {{"level", "1"}};
  spec.quantities = {{"wait_ms", Quantity::Milliseconds(0, 3600000, "never")}};
  return spec;
}

// Parses `args` from the defaults; the error text, or "" on success.
std::string Parse(const std::vector<std::string>& args, CommandLine* line = nullptr) {
  ResetCommandLineFlags(Spec());
  absl::StatusOr<CommandLine> parsed = ParseCommandLineFlags(Spec(), args);
  if (!parsed.ok()) {
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status()));
    return std::string(parsed.status().message());
  }
  if (line != nullptr) *line = *parsed;
  return "";
}

// A quantity flag: its text through the one parser, given or not; errors
// name the flag as typed and the range; --help states the range.
TEST(CliFlagsTest, QuantityFlagsAreParsedAndRangeChecked) {
  CommandLine line;
  ASSERT_EQ(Parse({}, &line), "");
  EXPECT_EQ(line.Quantity("wait_ms"), 500);
  ASSERT_EQ(Parse({"--wait-ms", "90s"}, &line), "");
  EXPECT_EQ(line.Quantity("wait_ms"), 90000);
  EXPECT_EQ(line.Duration("wait_ms"), absl::Seconds(90));
  EXPECT_EQ(Parse({"--wait-ms=3600001"}),
            "--wait-ms: '3600001' is over the maximum of 1h; it takes 0..1h; 0: never");
  EXPECT_EQ(Parse({"--wait_ms=inf"}).rfind("--wait_ms: 'inf' is not a number", 0), 0u);
  const std::string help = CommandLineHelp(Spec());
  EXPECT_NE(help.find("--wait-ms=DURATION  (default: 500)"), std::string::npos) << help;
  EXPECT_NE(help.find("[range 0..1h; 0: never]"), std::string::npos) << help;
}

TEST(CliFlagsTest, DashesAndUnderscoresNameOneFlag) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--output-prefix=/a", "--worker_count", "7"},
        {"--output_prefix", "/a", "--worker-count=7"},
        {"-output-prefix=/a", "-w", "7"}}) {
    CommandLine line;
    ASSERT_EQ(Parse(args, &line), "") << args[0];
    EXPECT_EQ(absl::GetFlag(FLAGS_output_prefix), "/a");
    EXPECT_EQ(absl::GetFlag(FLAGS_worker_count), 7);
    EXPECT_TRUE(line.Given("worker_count"));
    EXPECT_FALSE(line.Given("level"));
  }
  CommandLine line;
  ASSERT_EQ(Parse({"--output-prefix=/b", "-w", "2"}, &line), "");
  EXPECT_EQ(line.Spelling("output_prefix"), "--output-prefix");
  EXPECT_EQ(line.Spelling("worker_count"), "-w");
  EXPECT_EQ(line.Spelling("export_text"), "--export-text");  // not given
}

TEST(CliFlagsTest, BoolsTakeEveryForm) {
  ASSERT_EQ(Parse({"--export-text"}), "");
  EXPECT_TRUE(absl::GetFlag(FLAGS_export_text));
  ASSERT_EQ(Parse({"-e", "--noexport_text"}), "");
  EXPECT_FALSE(absl::GetFlag(FLAGS_export_text));
  ASSERT_EQ(Parse({"--export_text", "--no-export-text"}), "");
  EXPECT_FALSE(absl::GetFlag(FLAGS_export_text));
  ASSERT_EQ(Parse({"--export-text=true"}), "");
  EXPECT_TRUE(absl::GetFlag(FLAGS_export_text));
  // A bool never takes the next argument: it is positional.
  CommandLine line;
  ASSERT_EQ(Parse({"-e", "false"}, &line), "");
  EXPECT_TRUE(absl::GetFlag(FLAGS_export_text));
  EXPECT_EQ(line.positional, std::vector<std::string>{"false"});
  EXPECT_EQ(Parse({"--noexport-text=1"}), "--noexport-text=1: --noexport-text takes no value");
  EXPECT_EQ(Parse({"--export-text=maybe"}), "--export-text: 'maybe': expected true or false");
  EXPECT_EQ(Parse({"--nolevel"}),
            "--nolevel: no such flag (unknown flag '--nolevel'; demo --help lists them)");
}

TEST(CliFlagsTest, BadFlagsAndValuesNameTheFlagAsTyped) {
  EXPECT_EQ(Parse({"--bogus=1"}),
            "--bogus=1: no such flag (unknown flag '--bogus'; demo --help lists them)");
  EXPECT_EQ(Parse({"-x"}), "-x: no such flag (unknown flag '-x'; demo --help lists them)");
  EXPECT_EQ(Parse({"--worker-count=many"}),
            "--worker-count: 'many': expected a whole number the flag can hold");
  EXPECT_EQ(Parse({"-w", "99999999999"}),
            "-w: '99999999999': expected a whole number the flag can hold");
  EXPECT_EQ(Parse({"--tolerance", "close"}), "--tolerance: 'close': expected a number");
  EXPECT_EQ(Parse({"--worker_count"}), "--worker_count needs a value");
  // A value may start with '-'.
  ASSERT_EQ(Parse({"--tolerance", "-1"}), "");
  EXPECT_EQ(absl::GetFlag(FLAGS_tolerance), -1);
}

TEST(CliFlagsTest, OnlyTheToolsOwnFlagsAreAccepted) {
  ASSERT_NE(absl::FindCommandLineFlag("other_tools_flag"), nullptr);
  EXPECT_EQ(Parse({"--other-tools-flag=3"}),
            "--other-tools-flag=3: no such flag (unknown flag '--other-tools-flag'; demo --help "
            "lists them)");
  EXPECT_EQ(CommandLineHelp(Spec()).find("other"), std::string::npos);
}

TEST(CliFlagsTest, BareValues) {
  ASSERT_EQ(Parse({"--level"}), "");
  EXPECT_EQ(absl::GetFlag(FLAGS_level), 1);
  ASSERT_EQ(Parse({"--level", "3"}), "");
  EXPECT_EQ(absl::GetFlag(FLAGS_level), 3);
  ASSERT_EQ(Parse({"--level", "-w", "2"}), "");
  EXPECT_EQ(absl::GetFlag(FLAGS_level), 1);
  EXPECT_EQ(absl::GetFlag(FLAGS_worker_count), 2);
  CommandLine line;
  ASSERT_EQ(Parse({"--level", "dir"}, &line), "");  // not a level: the directory
  EXPECT_EQ(absl::GetFlag(FLAGS_level), 1);
  EXPECT_EQ(line.positional, std::vector<std::string>{"dir"});
  EXPECT_EQ(Parse({"--level=x"}), "--level: 'x': expected a whole number the flag can hold");
}

TEST(CliFlagsTest, AListGivenTwiceHoldsBoth) {
  ASSERT_EQ(Parse({"--label", "a=1", "--label=b=2,c=3"}), "");
  EXPECT_EQ(absl::GetFlag(FLAGS_label), (std::vector<std::string>{"a=1", "b=2", "c=3"}));
  ASSERT_EQ(Parse({"--label", "d=4"}), "");  // a new parse starts from the default
  EXPECT_EQ(absl::GetFlag(FLAGS_label), (std::vector<std::string>{"d=4"}));
}

TEST(CliFlagsTest, PositionalsAndTheEndOfFlags) {
  CommandLine line;
  ASSERT_EQ(Parse({"dir", "-", "--level=2", "--", "--level=3", "-e"}, &line), "");
  EXPECT_EQ(line.positional, (std::vector<std::string>{"dir", "-", "--level=3", "-e"}));
  EXPECT_EQ(absl::GetFlag(FLAGS_level), 2);
  EXPECT_FALSE(absl::GetFlag(FLAGS_export_text));
  EXPECT_FALSE(line.help);
  ASSERT_EQ(Parse({"-h"}, &line), "");
  EXPECT_TRUE(line.help);
  ASSERT_EQ(Parse({"--help"}, &line), "");
  EXPECT_TRUE(line.help);
}

TEST(CliFlagsTest, ResetRestoresTheDefaults) {
  ASSERT_EQ(Parse({"--output-prefix=/x", "-w", "9", "-e", "--label=a=1", "--tolerance=2"}), "");
  ResetCommandLineFlags(Spec());
  EXPECT_EQ(absl::GetFlag(FLAGS_output_prefix), "outputs");
  EXPECT_EQ(absl::GetFlag(FLAGS_worker_count), 4);
  EXPECT_FALSE(absl::GetFlag(FLAGS_export_text));
  EXPECT_TRUE(absl::GetFlag(FLAGS_label).empty());
  EXPECT_EQ(absl::GetFlag(FLAGS_tolerance), 0.5);
}

TEST(CliFlagsTest, HelpListsEveryFlagWithItsMeaning) {
  const std::string help = CommandLineHelp(Spec());
  EXPECT_EQ(help.find("demo: a tool of the test.\n  demo [DIR] [flags]\n"), 0u) << help;
  EXPECT_NE(help.find("--a-b and --a_b are the same flag"), std::string::npos) << help;
  for (const char* line :
       {"  -e, --[no]export-text\n      write each arg as a text file\n",
        "  --label=VALUE\n      key=value labels, comma separated\n",
        "  --level=VALUE  (default: 0)\n      dump level (a bare --level is 1)\n",
        "  --output-prefix=VALUE  (default: outputs)\n      where the capture goes\n",
        "  --tolerance=VALUE  (default: 0.5)\n", "  -w, --worker-count=VALUE  (default: 4)\n",
        "  -h, --help\n"}) {
    EXPECT_NE(help.find(line), std::string::npos) << line << "\nin:\n" << help;
  }
}

}  // namespace
}  // namespace argsdump
