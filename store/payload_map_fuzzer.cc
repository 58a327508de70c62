// libFuzzer target: any bytes as a journal's payload map (kPayloadMap, the
// entry that places a batch's shared payloads). Parse must never crash, and
// a map it accepts must place every payload inside what was stored: a
// written one inside the batch's stored range, a shared one before the
// place the batch had reached when it came, and nothing past stored_end.
//   bazel build --config=fuzz //server:payload_map_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/payload_dedup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto map = argsdump::PayloadMap::Parse(bytes);
  if (!map.ok()) return 0;
  if (argsdump::PayloadMap::Parse(map->Encode()).value().Encode() != map->Encode()) std::abort();
  const uint64_t end = map->stored_end();
  if (end < map->stored_begin) std::abort();
  // Every shared payload where it says, and a probe of written ones: the
  // start of the batch and just past each shared payload.
  std::vector<std::pair<uint64_t, uint64_t>> probes;
  for (const auto& s : map->shared) probes.emplace_back(s.stream, s.size);
  probes.emplace_back(map->stream_begin, 1);
  for (const auto& s : map->shared) probes.emplace_back(s.stream + s.size, 1);
  for (const auto& [stream, bytes_at] : probes) {
    bool shared = false;
    const std::optional<uint64_t> at = map->Place(stream, bytes_at, &shared);
    if (!at) continue;
    if (*at + bytes_at < *at) std::abort();
    if (shared ? *at + bytes_at > end : (*at < map->stored_begin || *at + bytes_at > end)) {
      std::abort();
    }
  }
  return 0;
}
