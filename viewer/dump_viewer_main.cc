// dump_viewer: lists, filters, exports and compares captures (see viewer.h).
//   bazel run //viewer:dump_viewer -- outputs/<run>/args_dump -t 0x100000003 -s after
//   bazel run //viewer:dump_viewer -- --server 127.0.0.1:50051 --capture run1 --stats
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tools/progress.h"
#include "viewer/viewer.h"

int main(int argc, char** argv) {
  // Under `bazel run` paths are the user's: resolve them where bazel ran.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr && *dir) {
    if (::chdir(dir) != 0) {
      std::cerr << "dump_viewer: cannot enter " << dir << ": " << std::strerror(errno) << "\n";
      return 2;
    }
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  return argsdump::RunViewer(args, std::cout, std::cerr,
                             {argsdump::IsTerminal(STDOUT_FILENO), argsdump::IsTerminal(STDERR_FILENO)});
}
