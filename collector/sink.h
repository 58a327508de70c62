// Where the collector's (record, payload) pairs go. Pairs arrive in args.bin
// order (record.bin_offset assigned by the collector's payload writer); Write
// returns once the pair is durable or held by the sink until it is (a
// stream's window of unacknowledged batches, resent after a break), and only
// then does the collector let the device reuse that payload's arena space.
// Finish returns once every pair is durable.
#ifndef ARGSDUMP_COLLECTOR_SINK_H_
#define ARGSDUMP_COLLECTOR_SINK_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

class PreparedRecords;  // store/capture_store.h

class CaptureSink {
 public:
  virtual ~CaptureSink() = default;
  virtual absl::Status Write(const v1::ArgRecord& record, absl::string_view payload) = 0;
  // Many pairs in order; durable (or held) when it returns.
  virtual absl::Status WriteBatch(const std::vector<const v1::ArgRecord*>& records,
                                  const std::vector<absl::string_view>& payloads) {
    for (size_t i = 0; i < records.size(); ++i) {
      if (absl::Status s = Write(*records[i], payloads[i]); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // A sink that stores records itself (the local store) takes them
  // prepared (PreparedRecords: checked and encoded as journal entries), so
  // that the collector's shard threads do that work side by side and its
  // one writer only writes. `payloads`: the records' payloads, in order.
  virtual bool TakesPrepared() const { return false; }
  virtual absl::Status WritePrepared(const PreparedRecords& /*records*/,
                                     const std::vector<absl::string_view>& /*payloads*/) {
    return absl::UnimplementedError("this sink takes records, not prepared records");
  }
  // What is known only at the end, stored with the capture by Finish
  // (CaptureStore::Amend): labels (the SDK's step count; a key already
  // there is replaced), the levels per step, and how the device process
  // died (device_crash). Before Finish.
  virtual absl::Status Amend(const v1::CaptureInfo& end) = 0;
  // End of the capture: the device's loss counters; the manifest is written.
  virtual absl::Status Finish(const v1::CaptureCounters& losses) = 0;
};

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_SINK_H_
