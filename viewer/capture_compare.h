// Comparing captured args with golden ones, arg by arg and capture against
// capture: what dump_viewer --compare prints and what the SDK's test
// matchers (sdk/testing.h) check, through one set of rules.
//   CompareArg   one arg against its golden: kind, shape, dtype (values are
//                compared across dtypes), overwritten payloads, payload
//                presence, then the elements by compare.h's rule
//   JoinCaptures two captures merge-joined in manifest order on
//                (task_id, stage, arg_index, role)
#ifndef ARGSDUMP_VIEWER_CAPTURE_COMPARE_H_
#define ARGSDUMP_VIEWER_CAPTURE_COMPARE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "viewer/arg_source.h"
#include "format/compare.h"
#include "viewer/manifest_reader.h"

namespace argsdump {

struct ArgVerdict {
  bool differs = false;
  // "ok", "ok (metadata only)", "DIFFERS (golden FLOAT16; ...)", or why the
  // elements were not compared ("shape [2,3] vs golden [3,2]").
  std::string status;
  // When it differs: where and what ("task 0x... after output arg 2:
  // element [1, 0] = 3, golden 4").
  std::string detail;
  std::optional<ElementDiff> diff;  // when elements or values were compared
  uint64_t numel = 0;               // of the arg's shape
};

// `a` with payload `pa` against golden `g` with `pg` (for a golden file,
// `g` is `a` with the file's dtype and shape).
ArgVerdict CompareArg(const ManifestEntry& a, const std::string& pa, const ManifestEntry& g,
                      const std::string& pg, const Tolerance& tolerance);

// The manifest's order of keys: (task_id, stage, arg_index, role).
std::tuple<uint64_t, int, uint32_t, int> ManifestKey(const ManifestEntry& e);
// "task 0x... before input arg 0".
std::string WhereIs(const ManifestEntry& e);
// Element `flat` of `shape` as "[i, j, ...]".
std::string ElementPosition(const std::vector<uint64_t>& shape, uint64_t flat);
// Elements of `e` that `bytes` payload bytes hold (a truncated tensor has
// fewer than its shape's).
uint64_t ElementsIn(const ManifestEntry& e, uint64_t bytes);

// Walks both sources in manifest order: `visit(a, g)` with both for a key
// on both sides, one null for a key on one side only. DataLoss when a
// source is out of manifest order; visit's error stops the walk.
absl::Status JoinCaptures(
    ArgSource& here, ArgSource& golden,
    const std::function<absl::Status(const ManifestEntry* a, const ManifestEntry* g)>& visit);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_CAPTURE_COMPARE_H_
