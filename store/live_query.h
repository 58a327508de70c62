// The query side of a live capture: the filter over its rows in arrival
// order. A finished capture is queried through args.index
// (format/capture_index.h: its format, writer and reader).
#ifndef ARGSDUMP_STORE_LIVE_QUERY_H_
#define ARGSDUMP_STORE_LIVE_QUERY_H_

#include <cstdint>
#include <vector>

#include "format/arg_filter.h"
#include "format/capture_index.h"
#include "format/record.h"

namespace argsdump {

// The same query over a live capture's rows (arrival order `records`), given
// a task index when the query has a task_id: `task_rows` = the record ids of
// that task. Without a task_id, matches come in arrival order (the manifest
// order is known only at the end).
QueryPage QueryLive(const RecordList& records, const std::vector<uint32_t>* task_rows,
                    const ArgFilter& query, uint64_t from, size_t limit, size_t budget,
                    const StatsTable* stats = nullptr);

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_LIVE_QUERY_H_
