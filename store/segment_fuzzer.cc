// libFuzzer target: any bytes as a segment object read back from the store
// (ParseSegment). It must never crash; a segment it accepts splits into a
// journal and a payload part that fill the object exactly, and encoding its
// header again over those parts gives back the same object.
//   bazel build --config=fuzz //store:segment_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "store/remote_captures.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string object(reinterpret_cast<const char*>(data), size);
  absl::string_view journal, bin;
  auto header = argsdump::ParseSegment(object, "fuzz/segment", &journal, &bin);
  if (!header.ok()) {
    if (header.status().code() != absl::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  if (argsdump::kSegmentHeaderBytes + journal.size() + bin.size() != object.size()) std::abort();
  if (header->journal_bytes != journal.size() || header->bin_bytes != bin.size()) std::abort();
  std::string again = argsdump::EncodeSegmentHeader(*header, journal, bin);
  again.append(journal.data(), journal.size());
  again.append(bin.data(), bin.size());
  if (again != object) std::abort();
  return 0;
}
