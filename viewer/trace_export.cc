#include "viewer/trace_export.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "format/capture_index.h"
#include "format/names.h"
#include "format/record.h"
#include "viewer/arg_source.h"
#include "viewer/remote_source.h"

namespace argsdump {
namespace {

// What a trace needs of an entry, as the record it came from.
v1::ArgRecord RecordOfEntry(const ManifestEntry& e) {
  v1::ArgRecord r;
  r.set_task_id(e.task_id);
  r.set_step(e.step);
  for (int64_t f : e.func_ids) {
    if (f >= 0) r.add_func_ids(static_cast<uint32_t>(f));
  }
  r.set_role(e.role);
  r.set_stage(e.stage);
  r.set_kind(e.kind);
  r.set_dtype(ToProtoDType(e.dtype));
  for (uint64_t d : e.shape) r.add_shape(d);
  r.set_device_thread(e.device_thread);
#define ARGSDUMP_COPY(id, style, member) r.set_##member(e.member);
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_COPY)
#undef ARGSDUMP_COPY
  return r;
}

// A local capture through its args.index: every row checked as read;
// nullopt when it has none (or one that does not open: the manifest is
// then the answer, as for the viewer's other reads).
absl::StatusOr<std::optional<TraceRank>> FromIndex(const ViewerOptions& o,
                                                   const TraceSourcePlace& place) {
  absl::StatusOr<std::unique_ptr<IndexFile>> index =
      IndexFile::Open(place.dir + "/" + kIndexName, IndexChecks::kRowsRead);
  if (!index.ok()) return std::optional<TraceRank>();
  const IndexFile& f = **index;
  TraceRank rank;
  rank.label = place.label;
  rank.clock = f.info().clock();
  rank.kernels = f.info().kernels();
  ArgFilter filter = o.selection.args;
  if (absl::Status s = ResolveKernelFilter(rank.kernels, &filter); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(place.dir, ": ", s.message()));
  }
  for (uint64_t i = 0; i < f.size(); ++i) {
    if (o.selection.index && *o.selection.index != i) continue;
    absl::StatusOr<ManifestRow> row = f.CheckedRow(i);
    if (!row.ok()) return row.status();
    const std::optional<StatsRow> stats = f.StatsOf(i);
    if (!filter.Matches(*row, stats ? &*stats : nullptr)) continue;
    rank.records.push_back(RecordFromRow(*row));
  }
  return std::optional<TraceRank>(std::move(rank));
}

}  // namespace

absl::StatusOr<TraceRank> ReadTraceRank(const ViewerOptions& o, const TraceSourcePlace& place) {
  if (place.capture.empty()) {
    absl::StatusOr<std::optional<TraceRank>> indexed = FromIndex(o, place);
    if (!indexed.ok()) return indexed.status();
    if (*indexed) return **std::move(indexed);
  }
  absl::StatusOr<std::unique_ptr<ArgSource>> source;
  if (place.capture.empty()) {
    source = OpenLocalCapture(place.dir, o.selection);
  } else {
    RemoteCapture remote = o.remote;
    remote.capture = place.capture;
    source = OpenRemoteCapture(remote, o.selection);
  }
  if (!source.ok()) return source.status();
  TraceRank rank;
  rank.label = place.label;
  ManifestEntry e;
  for (;;) {
    absl::StatusOr<bool> got = (*source)->Next(&e);
    if (!got.ok()) return got.status();
    if (!*got) break;
    rank.records.push_back(RecordOfEntry(e));
  }
  rank.clock = (*source)->Clock().value_or(v1::CaptureClock());
  rank.kernels = (*source)->Kernels();
  return rank;
}

int WriteTrace(const ViewerOptions& o, const std::vector<TraceSourcePlace>& places,
               std::ostream& out, std::ostream& err) {
  std::vector<TraceRank> ranks;
  for (const TraceSourcePlace& place : places) {
    absl::StatusOr<TraceRank> rank = ReadTraceRank(o, place);
    if (!rank.ok()) {
      err << "dump_viewer: " << rank.status().message() << "\n";
      return 2;
    }
    ranks.push_back(*std::move(rank));
  }
  TraceCounts counts;
  const std::string json = TraceJson(ranks, &counts);
  if (absl::Status s = WriteStringToFile(o.trace, json); !s.ok()) {
    err << "dump_viewer: --trace " << o.trace << ": cannot write it: " << s.message() << "\n";
    return 2;
  }
  out << "trace: " << counts.slices << " tasks (" << counts.incomplete << " without a completion, "
      << counts.untimed << " without times) of " << ranks.size()
      << (ranks.size() == 1 ? " process" : " processes") << " written to " << o.trace << "\n";
  return 0;
}

}  // namespace argsdump
