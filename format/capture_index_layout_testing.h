// Where the sections of an args.index of `rows` rows start (the layout the
// header comment of capture_index.h gives), for tests that damage chosen
// bytes. Test-only.
#ifndef ARGSDUMP_FORMAT_CAPTURE_INDEX_LAYOUT_TESTING_H_
#define ARGSDUMP_FORMAT_CAPTURE_INDEX_LAYOUT_TESTING_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "format/record.h"

namespace argsdump {

struct IndexLayout {
  uint64_t rows_at, record_ids_at, positions_at, tasks_at, stats_at;
};

inline IndexLayout IndexLayoutOf(const std::string& bytes, uint64_t rows) {
  uint32_t info_bytes, counters_bytes;
  std::memcpy(&info_bytes, bytes.data() + 12, 4);
  std::memcpy(&counters_bytes, bytes.data() + 24, 4);
  IndexLayout l;
  l.rows_at = 64 + ((uint64_t{info_bytes} + counters_bytes + 7) & ~uint64_t{7});
  l.record_ids_at = l.rows_at + rows * sizeof(ManifestRow);
  l.positions_at = l.record_ids_at + rows * 4;
  l.tasks_at = l.positions_at + rows * 4;
  l.stats_at = l.tasks_at + rows * 8;
  return l;
}

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_CAPTURE_INDEX_LAYOUT_TESTING_H_
