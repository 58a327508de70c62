#include "store/live_query.h"

#include <algorithm>

namespace argsdump {

QueryPage QueryLive(const RecordList& records, const std::vector<uint32_t>* task_rows,
                    const ArgFilter& query, uint64_t from, size_t limit, size_t budget,
                    const StatsTable* stats) {
  auto stats_of = [&](uint64_t id) { return stats != nullptr ? stats->Get(id) : nullptr; };
  auto hit = [&](uint64_t id) {
    QueryHit h{id, records[id]};
    if (const StatsRow* s = stats_of(id)) h.stats = *s;
    return h;
  };
  QueryPage page;
  if (query.task_id && task_rows != nullptr) {
    // A task's records, in manifest order; `from` indexes that order.
    std::vector<uint32_t> ids;
    for (uint32_t id : *task_rows) {
      if (id < records.size() && query.Matches(records[id], stats_of(id))) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
      return ManifestOrderKey(records[a], a) < ManifestOrderKey(records[b], b);
    });
    uint64_t i = from;
    for (; i < ids.size() && page.hits.size() < limit; ++i) {
      page.hits.push_back(hit(ids[i]));
    }
    if (i < ids.size()) page.next = i;
    return page;
  }
  uint64_t i = from;
  const uint64_t end = records.size();
  for (size_t looked = 0; i < end && page.hits.size() < limit && looked < budget; ++i, ++looked) {
    if (query.Matches(records[i], stats_of(i))) page.hits.push_back(hit(i));
  }
  if (i < end) page.next = i;
  return page;
}

}  // namespace argsdump
