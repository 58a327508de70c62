#include "collector/local_sink.h"

namespace argsdump {

absl::StatusOr<std::unique_ptr<LocalSink>> LocalSink::Create(const std::string& dir,
                                                             const v1::CaptureInfo& info,
                                                             LocalSinkOptions options) {
  auto store = CaptureStore::Create(dir, info);
  if (!store.ok()) return store.status();
  (*store)->set_keep_journal(options.keep_journal);
  (*store)->set_payload_dedup(options.payload_dedup);
  return std::unique_ptr<LocalSink>(new LocalSink(std::move(store).value()));
}

}  // namespace argsdump
