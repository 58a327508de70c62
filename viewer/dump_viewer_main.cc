// dump_viewer: lists and filters the args of a capture (see viewer.h).
//   bazel run //viewer:dump_viewer -- outputs/<run>/args_dump -t 0x100000003 -s after
#include <iostream>
#include <string>
#include <vector>

#include "viewer/viewer.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return argsdump::RunViewer(args, std::cout, std::cerr);
}
