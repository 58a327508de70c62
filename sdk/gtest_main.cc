// main() for argsdump_sim_test (and any test of the SDK's users): takes the
// dump flags (--dump-args [N], --dump-config F, --output-prefix D,
// --capture-server H:P, --dump-args-default N, --dump-verbose,
// --dump-snapshot-inputs) off argv
// before gtest and gmock read it, names sessions after the running test
// case, and runs the tests. A bad dump flag or value is a WARNING naming it and the fallback
// (printed when a session opens); the dump never fails a test by itself.
#include <cstdio>

#include "gmock/gmock.h"
#include "sdk/testing.h"

int main(int argc, char** argv) {
  if (absl::Status s = argsdump::testing::InitTestMain(&argc, argv); !s.ok()) {
    std::fprintf(stderr, "argsdump: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  return RUN_ALL_TESTS();
}
