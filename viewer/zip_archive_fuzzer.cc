// libFuzzer target: any bytes as a zip archive. Opening and reading every
// member must give members or a DataLoss, never a crash, a leak, a hang or
// an unbounded allocation.
//   bazel build --config=fuzz //viewer:zip_archive_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <string>

#include "viewer/zip_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto zip = argsdump::ZipArchive::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.zip");
  if (!zip.ok()) return 0;
  uint64_t total = 0;
  for (const argsdump::ZipMember& m : (*zip)->members()) {
    // A member may claim any size: stop once 64 MiB came out in all.
    (*zip)->Read(m, [&](absl::string_view piece) {
      total += piece.size();
      return total > (64u << 20) ? absl::ResourceExhaustedError("enough")
                                 : absl::OkStatus();
    }).IgnoreError();
  }
  return 0;
}
