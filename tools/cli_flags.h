// One command-line style for argsdump's binaries (sim_run, dump_viewer,
// capture_server). A tool's flags are the ABSL_FLAGs of one file (its
// spec names it); "--a-b" and "--a_b" name the same flag; a value is
// "--f=v" or "--f v"; a bool is "--f", "--nof" or "--f=true|false"; a tool
// may give flags short names ("-t"); a list flag given twice holds both;
// "--" ends the flags. --help lists every flag with its meaning.
// A bad flag or value is an InvalidArgument naming the flag as typed: the
// tools exit 2 on it (absl's own parser exits 1, which our tools use for a
// hang or a found difference). A duration, byte size or count flag is a
// string flag the spec lists in `quantities`: its text goes through the one
// parser (tools/quantity.h), --help states its unit and range, a value out
// of range is an error naming the flag and the maximum.
#ifndef ARGSDUMP_TOOLS_CLI_FLAGS_H_
#define ARGSDUMP_TOOLS_CLI_FLAGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tools/quantity.h"

namespace argsdump {

struct CommandLineSpec {
  std::string program;   // in messages and --help
  std::string synopsis;  // what --help prints before the flags
  // __FILE__ of the file defining the tool's ABSL_FLAGs: only those are the
  // tool's (a binary may link other flags, absl's own among them).
  std::string flags_file;
  std::map<char, std::string> short_names;  // 't' -> "task"
  // Flags that may stand without a value, and the value they take then
  // (sim_run: a bare --dump-args is 1). The next argument is their value
  // only when the flag reads it.
  std::map<std::string, std::string> bare_values;
  // Numeric flags (each an ABSL_FLAG(std::string, ...) of flags_file), by
  // name: what they take. Given or not, each is parsed (its default too).
  std::map<std::string, Quantity> quantities;
};

struct CommandLine {
  std::vector<std::string> positional;  // what is not a flag, in order
  // Each flag given (its absl name, "output_prefix"), with how it was
  // typed the last time ("-t", "--output-prefix"): messages name the flag
  // as the user wrote it.
  std::map<std::string, std::string> given;
  bool help = false;  // --help or -h: the caller prints CommandLineHelp
  // Every quantity flag of the spec, parsed: in milliseconds, bytes, items.
  std::map<std::string, int64_t> quantities;

  bool Given(absl::string_view name) const { return given.count(std::string(name)) > 0; }
  // How the flag was typed, or "--<name with dashes>" when it was not.
  std::string Spelling(absl::string_view name) const;
  // A quantity flag's value in its base unit (a name the spec does not list
  // is a programming error: it aborts).
  int64_t Quantity(absl::string_view name) const;
  // A duration flag's value.
  absl::Duration Duration(absl::string_view name) const {
    return absl::Milliseconds(Quantity(name));
  }
};

// Sets the spec's flags from `args` (argv without argv[0]); flags not in
// `args` keep their values (see ResetCommandLineFlags).
absl::StatusOr<CommandLine> ParseCommandLineFlags(const CommandLineSpec& spec,
                                                  const std::vector<std::string>& args);

// Every flag of the spec back to its default (a library that parses many
// command lines in one process, such as dump_viewer's, calls it first).
void ResetCommandLineFlags(const CommandLineSpec& spec);

// The synopsis, then every flag: its spellings, default and meaning.
std::string CommandLineHelp(const CommandLineSpec& spec);

// For main(): parses argv. --help prints the help on stdout and exits 0;
// a bad flag prints "<program>: <why>" on stderr and exits 2.
CommandLine ParseMainCommandLine(const CommandLineSpec& spec, int argc, char** argv);

}  // namespace argsdump

#endif  // ARGSDUMP_TOOLS_CLI_FLAGS_H_
