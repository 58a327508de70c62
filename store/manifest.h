// args_dump.json: the reference's schema (proto/argsdump/v1/manifest.proto
// is its contract for readers), written from
// argsdump.v1 records. Top level: run_dir, bin_format, dump_args_level,
// summary counters, bin_file ("args.bin" or null), args[] in ManifestOrder
// order. Extra fields (loss causes, in-flight snapshots) are additions only.
#ifndef ARGSDUMP_STORE_MANIFEST_H_
#define ARGSDUMP_STORE_MANIFEST_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/argsdump/v1/record.pb.h"
#include "format/record.h"

namespace argsdump {

struct RecoveryReport;  // capture_store.h

// The counters that follow from the records (totals, stages, roles,
// truncated, overwritten, payload bytes, in-flight snapshots, overflow), kept as rows
// are appended so that the export does not walk every row again.
class RecordTally {
 public:
  void Add(const ManifestRow& r) {
    ++total_;
    before_ += r.stage == v1::STAGE_BEFORE_DISPATCH;
    input_ += r.role == v1::ROLE_INPUT;
    output_ += r.role == v1::ROLE_OUTPUT;
    inout_ += r.role == v1::ROLE_INOUT;
    truncated_ += r.truncated;
    overwritten_ += r.overwritten;
    bytes_ += r.bin_size;
    in_flight_ += r.in_flight_snapshot;
    if (r.overflow) {
      ++overflow_;
      if (overflow_ == 1 || r.task_id < first_overflow_) first_overflow_ = r.task_id;
    }
  }
  // Sets them in `counters`, keeping its device loss counters.
  void FillInto(v1::CaptureCounters* counters) const;

 private:
  uint64_t total_ = 0, before_ = 0, input_ = 0, output_ = 0, inout_ = 0, truncated_ = 0,
           overwritten_ = 0, bytes_ = 0, in_flight_ = 0, overflow_ = 0;
  uint64_t first_overflow_ = 0;  // the lowest overflow task id, once overflow_ > 0
};

// RecordTally over `records`, into `counters`.
void CountRecords(const RecordList& records, v1::CaptureCounters* counters);

struct ManifestContents {
  v1::DumpLevel level = v1::DUMP_LEVEL_FULL;
  v1::CaptureCounters counters;
  bool has_bin_file = false;
  bool recovered = false;  // rebuilt from the journal after a crash
  const RecordList* records = nullptr;
  const std::vector<uint32_t>* order = nullptr;  // indices into records, in manifest order
  // Some record is of a step other than 0: every entry then carries
  // "step" (single-step manifests stay as they were). WriteManifest works
  // it out when the caller leaves it unset.
  std::optional<bool> has_steps;
  // The stats dump mode's numbers by record id (null: none).
  const StatsTable* stats = nullptr;
  // The capture's labels, written as "labels" when there are any.
  std::vector<std::pair<std::string, std::string>> labels;
  // A recovery that dropped something: written as "recovery" (null: none).
  const RecoveryReport* recovery = nullptr;
  // The levels per step when the dynamic switch changed the level: written
  // as "dump_levels" when there is more than one.
  std::vector<v1::StepLevel> step_levels;
  // How the device process died: written as "device_crash" when set.
  std::optional<v1::DeviceCrash> device_crash;
  // What the dump ran with: dump_args_level is then the level reported
  // (format/record.h: ReportedLevel), and "dump_scope" says the rest.
  std::optional<v1::DumpScope> scope;
  uint32_t reported_level = 2;
  // The kernel table: written as "kernels" (before args[]) when it has
  // any kernel.
  google::protobuf::RepeatedPtrField<v1::Kernel> kernels;
  // The job the capture is a rank of: written as "job" when set.
  std::optional<v1::JobMember> job;
  // What the entries' times count from: written as "clock" when set.
  std::optional<v1::CaptureClock> clock;

  // level, labels, step_levels, device_crash, kernels, job and clock from
  // the capture's info.
  void SetInfo(const v1::CaptureInfo& info);
};

// The labels of a capture's info, sorted by key (for the manifest).
std::vector<std::pair<std::string, std::string>> SortedLabels(const v1::CaptureInfo& info);

// `text` as a JSON string (quotes included) appended to `out`: quotes,
// backslashes and control characters escaped, invalid UTF-8 bytes replaced
// by U+FFFD so that the file stays valid JSON whatever a label holds.
void AppendJsonString(absl::string_view text, std::string* out);

// Writes `path` atomically (a temporary file renamed over it).
// `before_rename`, when given, runs once the text is whole in the
// temporary file and before the rename: an error from it leaves no
// manifest (the temporary is removed) and is returned.
absl::Status WriteManifest(const std::string& path, const ManifestContents& contents,
                           const std::function<absl::Status()>& before_rename = nullptr);

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_MANIFEST_H_
