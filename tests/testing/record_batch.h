// Records with their payloads, in the order a sink or the capture store
// takes them: each payload goes right after the one before it in args.bin,
// so bin_offset and bin_size always say where a record's bytes are.
#ifndef ARGSDUMP_TESTS_TESTING_RECORD_BATCH_H_
#define ARGSDUMP_TESTS_TESTING_RECORD_BATCH_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

class RecordBatch {
 public:
  // The first payload lands at `first_bin_offset` (where an earlier batch
  // of the same capture ended).
  explicit RecordBatch(uint64_t first_bin_offset = 0) : end_bin_offset_(first_bin_offset) {}

  // Appends `record` with `payload`: bin_size is the payload's length,
  // bin_offset where the previous payload ended (0 without a payload).
  // The returned reference stays valid while the batch lives.
  v1::ArgRecord& Add(v1::ArgRecord record, std::string payload = "");

  size_t size() const { return records_.size(); }
  std::deque<v1::ArgRecord>& records() { return records_; }
  const std::deque<v1::ArgRecord>& records() const { return records_; }
  const std::string& payload(size_t i) const { return payloads_[i]; }
  // Where the next payload goes: the first offset of a following batch.
  uint64_t end_bin_offset() const { return end_bin_offset_; }

  // Records [from, to) and their payloads, as CaptureSink::WriteBatch and
  // CaptureStore::AppendBatch take them (views into this batch).
  std::vector<const v1::ArgRecord*> RecordPtrs(size_t from = 0, size_t to = SIZE_MAX) const;
  std::vector<absl::string_view> PayloadViews(size_t from = 0, size_t to = SIZE_MAX) const;

 private:
  std::deque<v1::ArgRecord> records_;  // a deque: references stay valid
  std::deque<std::string> payloads_;
  uint64_t end_bin_offset_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_RECORD_BATCH_H_
