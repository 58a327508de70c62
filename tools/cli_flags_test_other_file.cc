// A flag of another file: not the test tool's (cli_flags_test.cc).
#include "absl/flags/flag.h"

ABSL_FLAG(int, other_tools_flag, 0, "a flag some other part of the binary defines");
