#include "format/manifest_fields.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

TEST(ManifestFieldsTest, KeysAreUniqueAndFoundFromAnywhere) {
  std::set<std::string> keys;
  for (size_t i = 0; i < kManifestFieldCount; ++i) {
    const auto f = static_cast<ManifestField>(i);
    EXPECT_TRUE(keys.insert(std::string(InfoOf(f).key)).second) << InfoOf(f).key;
    // Whatever came before it (also nothing: the start of an entry).
    for (int after = -1; after < static_cast<int>(kManifestFieldCount); ++after) {
      EXPECT_EQ(ManifestFieldOf(InfoOf(f).key, static_cast<ManifestField>(after)), f);
    }
  }
  EXPECT_EQ(ManifestFieldOf("no_such_field", ManifestField::kTaskId), ManifestField::kUnknown);
  EXPECT_EQ(ManifestFieldOf("", static_cast<ManifestField>(-1)), ManifestField::kUnknown);
  EXPECT_EQ(ManifestFieldOf("task_i", ManifestField::kTaskId), ManifestField::kUnknown);
}

TEST(ManifestFieldsTest, WhatEveryReaderNeedsIsRequired) {
  for (ManifestField f : {ManifestField::kTaskId, ManifestField::kRole, ManifestField::kStage,
                          ManifestField::kKind, ManifestField::kDtype}) {
    EXPECT_NE(kRequiredManifestFields & Bit(f), 0u) << InfoOf(f).key;
  }
  EXPECT_EQ(kRequiredManifestFields & Bit(ManifestField::kStats), 0u);
  EXPECT_EQ(InfoOf(ManifestField::kTaskId).key, "task_id");
  EXPECT_EQ(InfoOf(ManifestField::kFuncId).key, "func_id");  // the reference's spelling
}

}  // namespace
}  // namespace argsdump
