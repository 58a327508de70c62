#include "tests/testing/record_batch.h"

#include <algorithm>
#include <utility>

namespace argsdump {

v1::ArgRecord& RecordBatch::Add(v1::ArgRecord record, std::string payload) {
  record.set_bin_offset(payload.empty() ? 0 : end_bin_offset_);
  record.set_bin_size(payload.size());
  end_bin_offset_ += payload.size();
  records_.push_back(std::move(record));
  payloads_.push_back(std::move(payload));
  return records_.back();
}

std::vector<const v1::ArgRecord*> RecordBatch::RecordPtrs(size_t from, size_t to) const {
  std::vector<const v1::ArgRecord*> out;
  for (size_t i = from; i < std::min(to, records_.size()); ++i) out.push_back(&records_[i]);
  return out;
}

std::vector<absl::string_view> RecordBatch::PayloadViews(size_t from, size_t to) const {
  std::vector<absl::string_view> out;
  for (size_t i = from; i < std::min(to, payloads_.size()); ++i) out.push_back(payloads_[i]);
  return out;
}

}  // namespace argsdump
