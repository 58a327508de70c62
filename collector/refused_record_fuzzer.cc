// libFuzzer target: any bytes as one record out of shared memory (the first
// 128 bytes, zero-padded) and the start of its thread's payload arena (the
// rest). ConvertRecordInto converts or refuses it; a refused one is saved by
// RefusedRecordDump, whose record.bin must hold exactly those 128 bytes and
// whose context.json must be written, whatever the fields say (a payload
// anywhere, of any size). Never a crash, a hang or an unbounded write.
//   bazel build --config=fuzz //collector:refused_record_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "base/files.h"
#include "collector/collector.h"
#include "collector/refused_record_dump.h"
#include "collector/transport.h"
#include "device/region.h"
#include "tests/fuzz_scratch.h"

namespace {

struct Fixture {
  std::unique_ptr<argsdump::DumpRegion> region;
  std::unique_ptr<argsdump::RegionTransport> transport;
};

Fixture& Shared() {
  static Fixture* f = [] {
    auto* fixture = new Fixture;
    argsdump::DumpRegionConfig c;
    c.num_threads = 1;
    c.records_per_buffer = 1;
    c.buffers_per_thread = 2;
    c.ready_queue_depth = 2;
    c.arena_bytes = 4096;
    auto region = argsdump::DumpRegion::Create(c);
    if (!region.ok()) std::abort();
    fixture->region = *std::move(region);
    auto transport = argsdump::MakeTransport(argsdump::Platform::kA2a3Sim, *fixture->region);
    if (!transport.ok()) std::abort();
    fixture->transport = *std::move(transport);
    return fixture;
  }();
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = Shared();
  argsdump::abi::ArgsDumpRecord record;
  std::memset(&record, 0, sizeof(record));
  std::memcpy(&record, data, std::min(size, sizeof(record)));
  const size_t rest = size > sizeof(record) ? size - sizeof(record) : 0;
  std::memset(f.region->arena(0), 0, f.region->arena_bytes());
  std::memcpy(f.region->arena(0), data + (size - rest),
              std::min<size_t>(rest, f.region->arena_bytes()));

  argsdump::v1::ArgRecord converted;
  const absl::Status status = argsdump::ConvertRecordInto(record, 0, &converted);
  if (status.ok()) return 0;
  const std::string& root = argsdump::FuzzScratch();
  argsdump::EmptyFolder(root);
  argsdump::RefusedRecordDump dump(argsdump::RefusedRecordDumpOptions{root, 1, 64});
  dump.Dump(*f.transport, record, argsdump::RefusedRecordPlace{0, 7, 0}, status);
  if (dump.folders().size() != 1) std::abort();
  auto raw = argsdump::ReadFileToString(dump.folders()[0] + "/record.bin");
  if (!raw.ok() || raw->size() != sizeof(record) ||
      std::memcmp(raw->data(), &record, sizeof(record)) != 0) {
    std::abort();
  }
  auto context = argsdump::ReadFileToString(dump.folders()[0] + "/context.json");
  if (!context.ok() || context->size() > 4096) std::abort();
  return 0;
}
