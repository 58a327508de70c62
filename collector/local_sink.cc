#include "collector/local_sink.h"

namespace argsdump {

absl::StatusOr<std::unique_ptr<LocalSink>> LocalSink::Create(const std::string& dir,
                                                             const v1::CaptureInfo& info,
                                                             bool keep_journal) {
  auto store = CaptureStore::Create(dir, info);
  if (!store.ok()) return store.status();
  (*store)->set_keep_journal(keep_journal);
  return std::unique_ptr<LocalSink>(new LocalSink(std::move(store).value()));
}

}  // namespace argsdump
