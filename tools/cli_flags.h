// Command lines checked before absl::ParseCommandLine sees them: it exits 1
// on an unknown flag or a value that does not parse, and 1 is what our tools
// return for a device hang or a failed comparison. Bad flags are exit 2,
// naming the flag (the project's rule for bad input).
#ifndef ARGSDUMP_TOOLS_CLI_FLAGS_H_
#define ARGSDUMP_TOOLS_CLI_FLAGS_H_

#include <string>
#include <vector>

namespace argsdump {

// `args` is argv without argv[0]. "" when every flag is one of the
// binary's (absl) flags with a value its type reads ("--name=value",
// "--name value", "--name"/"--noname" for bools); otherwise what is wrong,
// naming the flag. Stops at "--"; arguments that are not flags are left to
// the program.
std::string CheckCommandLineFlags(const std::vector<std::string>& args);

}  // namespace argsdump

#endif  // ARGSDUMP_TOOLS_CLI_FLAGS_H_
