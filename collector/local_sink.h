// The embedded default sink: a CaptureStore writing the capture directory
// in this process (no server). Files are byte-identical to what the capture
// service writes for the same records, since both use the same store.
#ifndef ARGSDUMP_COLLECTOR_LOCAL_SINK_H_
#define ARGSDUMP_COLLECTOR_LOCAL_SINK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collector/sink.h"
#include "store/capture_store.h"

namespace argsdump {

struct LocalSinkOptions {
  // args.journal stays beside the finished capture (CaptureStore::Finish
  // removes it otherwise).
  bool keep_journal = false;
  // Equal payloads are stored once (CaptureStore::set_payload_dedup).
  bool payload_dedup = true;
};

// The embedded default: a CaptureStore writing <dir> directly.
class LocalSink : public CaptureSink {
 public:
  static absl::StatusOr<std::unique_ptr<LocalSink>> Create(const std::string& dir,
                                                           const v1::CaptureInfo& info,
                                                           LocalSinkOptions options = {});
  absl::Status Write(const v1::ArgRecord& record, absl::string_view payload) override {
    return store_->Append(record, payload);
  }
  absl::Status WriteBatch(const std::vector<const v1::ArgRecord*>& records,
                          const std::vector<absl::string_view>& payloads) override {
    return store_->AppendBatch(records, payloads);
  }
  bool TakesPrepared() const override { return true; }
  absl::Status WritePrepared(const PreparedRecords& records,
                             const std::vector<absl::string_view>& payloads) override {
    return store_->AppendPrepared(records, payloads);
  }
  absl::Status Amend(const v1::CaptureInfo& end) override { return store_->Amend(end); }
  absl::Status Finish(const v1::CaptureCounters& losses) override {
    return store_->Finish(losses);
  }
  const CaptureStore& store() const { return *store_; }

 private:
  explicit LocalSink(std::unique_ptr<CaptureStore> store) : store_(std::move(store)) {}
  std::unique_ptr<CaptureStore> store_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_LOCAL_SINK_H_
