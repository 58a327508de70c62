#include "format/manifest_fields.h"

#include <cstring>

namespace argsdump {

ManifestField ManifestFieldOf(absl::string_view key, ManifestField after) {
  auto is = [&](size_t i) {
    const absl::string_view k = kManifestFields[i].key;
    return k.size() == key.size() && std::memcmp(k.data(), key.data(), key.size()) == 0;
  };
  for (size_t i = static_cast<size_t>(after) + 1; i < kManifestFieldCount; ++i) {
    if (is(i)) return static_cast<ManifestField>(i);
    if (kManifestFields[i].presence != FieldPresence::kSometimes) break;
  }
  for (size_t i = 0; i < kManifestFieldCount; ++i) {
    if (is(i)) return static_cast<ManifestField>(i);
  }
  return ManifestField::kUnknown;
}

}  // namespace argsdump
