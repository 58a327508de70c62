// libFuzzer target: any bytes as a --workload JSON file. Parsing and
// validation must give a workload or InvalidArgument naming the file and
// the field, never a crash or an unbounded allocation.
//   bazel build --config=fuzz //device:workload_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "device/sim/kernels.h"
#include "device/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = argsdump::ParseWorkloadJson(text, "workload file fuzz.json", "fuzz",
                                          argsdump::BuiltinKernels());
  if (!spec.ok() && spec.status().message().rfind("workload file fuzz.json", 0) != 0) {
    std::abort();  // every error names the file
  }
  return 0;
}
