#include "collector/local_sink.h"

namespace argsdump {

absl::StatusOr<std::unique_ptr<LocalSink>> LocalSink::Create(const std::string& dir,
                                                             const v1::CaptureInfo& info) {
  auto store = CaptureStore::Create(dir, info);
  if (!store.ok()) return store.status();
  return std::unique_ptr<LocalSink>(new LocalSink(std::move(store).value()));
}

}  // namespace argsdump
