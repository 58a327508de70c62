// args_dump.json: the reference's schema (DESIGN.md §6), written from
// argsdump.v1 records. Top level: run_dir, bin_format, dump_args_level,
// summary counters, bin_file ("args.bin" or null), args[] in ManifestOrder
// order. Extra fields (loss causes, in-flight snapshots) are additions only.
#ifndef ARGSDUMP_SERVER_MANIFEST_H_
#define ARGSDUMP_SERVER_MANIFEST_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/argsdump/v1/record.pb.h"
#include "server/record_format.h"

namespace argsdump {

// Fills the counters that follow from the records (totals, stages, roles,
// truncated, overwritten, payload bytes, in-flight snapshots) into `counters`,
// keeping its device loss counters.
void CountRecords(const RecordList& records, v1::CaptureCounters* counters);

struct ManifestContents {
  v1::DumpLevel level = v1::DUMP_LEVEL_FULL;
  v1::CaptureCounters counters;
  bool has_bin_file = false;
  bool recovered = false;  // rebuilt from the journal after a crash
  const RecordList* records = nullptr;
  const std::vector<uint32_t>* order = nullptr;  // indices into records, in manifest order
};

// Writes `path` atomically (a temporary file renamed over it).
absl::Status WriteManifest(const std::string& path, const ManifestContents& contents);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_MANIFEST_H_
