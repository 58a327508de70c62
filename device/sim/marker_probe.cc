// What CoreTaskArgs::dump(...) compiles to, for dump_markers_compiled_out_test.
// argsdump_marker_probe holds nothing but marker calls: built with the
// markers compiled out its machine code is a bare return, which the test
// reads with objdump. main checks the markers' behaviour in this build:
//   marker_probe on|off   exits 0 when the build's markers are as named
// and they behave so (selected, or nothing selected and OK returned).
#include <cstdio>
#include <cstring>
#include <memory>

#include "device/recorder.h"
#include "device/region.h"
#include "device/sim/core_task_args.h"
#include "device/sim/kernels.h"
#include "device/sim/sim_runtime.h"
#include "device/sim/tensor.h"

extern "C" __attribute__((noinline, used)) void argsdump_marker_probe(
    argsdump::CoreTaskArgs* args, const argsdump::Tensor* x, const float* scale) {
  (void)args->dump(*x, *scale);
  (void)args->dump();
}

namespace {

int failures = 0;

void Expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "marker_probe: FAILED: %s\n", what);
  ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  using argsdump::CoreTaskArgs;
  if (argc != 2 || (std::strcmp(argv[1], "on") != 0 && std::strcmp(argv[1], "off") != 0)) {
    std::fprintf(stderr, "usage: marker_probe on|off\n");
    return 2;
  }
  const bool on = std::strcmp(argv[1], "on") == 0;
  Expect(CoreTaskArgs::kDumpMarkers == on, "CoreTaskArgs::kDumpMarkers is as the build switch");

  auto tensor = [](uint64_t id) {
    return *argsdump::Tensor::Whole(
        std::make_shared<argsdump::DeviceBuffer>(id, argsdump::DataType::kFloat32, 4), {4});
  };
  const argsdump::Tensor x = tensor(1), y = tensor(2), never_added = tensor(3);
  const float scale = 0.5f;
  CoreTaskArgs args;
  Expect(args.add_input(x).ok(), "add_input");
  Expect(args.add_output(y).ok(), "add_output");
  Expect(args.add_scalar(scale).ok(), "add_scalar");
  // Called through a volatile pointer: a call the compiler sees to do
  // nothing would be dropped, and the linker would drop the function.
  void (*volatile probe)(CoreTaskArgs*, const argsdump::Tensor*, const float*) =
      argsdump_marker_probe;
  probe(&args, &x, &scale);
  Expect(args.has_marker() == on, "has_marker() after dump(x, scale) and dump()");
  Expect(args.whole_task_marked() == on, "whole_task_marked() after dump()");
  Expect(args.tensors()[0].marked == on, "the tensor passed to dump(...) is marked");
  Expect(!args.tensors()[1].marked, "a tensor not passed to dump(...) is not marked");
  Expect(args.scalars()[0].marked == on, "the scalar passed to dump(...) is marked");
  // A misuse is an error only where the markers exist; compiled out, the
  // call does nothing at all.
  Expect(args.dump(never_added).ok() == !on, "dump(a tensor never added)");
  Expect(args.status().ok() == !on, "status() after the misuse");
  // Level 1 selects by markers: a runtime built without them says so.
  argsdump::DumpRegionConfig rc;
  rc.level = argsdump::abi::DumpLevel::kPartial;
  rc.num_threads = 1;
  rc.arena_bytes = 1 << 16;
  auto region = argsdump::DumpRegion::Create(rc);
  Expect(region.ok(), "a dump region");
  if (region.ok()) {
    argsdump::DumpRecorder recorder(**region);
    argsdump::SimConfig config;
    config.scheduler_threads = 1;
    config.worker_threads = 1;
    argsdump::DumpConfig level1;
    level1.level = 1;
    config.dump = level1;
    argsdump::SimRuntime runtime(config, argsdump::BuiltinKernels(), &recorder);
    bool warned = false;
    for (const std::string& w : runtime.warnings()) {
      warned = warned || w.find("compiled them out") != std::string::npos;
    }
    Expect(warned == !on, "a level 1 runtime warns exactly when the markers are compiled out");
  }
  if (failures == 0) std::printf("marker_probe: markers %s: OK\n", on ? "on" : "off");
  return failures == 0 ? 0 : 1;
}
