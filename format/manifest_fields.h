// The fields of one args[] entry of args_dump.json, described once, in the
// order the store writes them. The writer (store/manifest.cc) has one
// `Put` per field and the reader (viewer/manifest_reader.cc) one case per
// field, both generated from this list: a field added here and not written
// or not read does not build.
//
// X(id, key, presence): `id` names it in code (ManifestField::k<id>), `key`
// is its JSON key, `presence` says which entries carry it:
//   kRequired   every entry; a reader refuses an entry without it
//   kAlways     every entry the store writes; readers tolerate its absence
//               (manifests of older builds, other writers)
//   kSometimes  only some entries (step: captures with steps; value:
//               scalars; the flags: when true; the task times: when
//               known; stats: when stored)
#ifndef ARGSDUMP_FORMAT_MANIFEST_FIELDS_H_
#define ARGSDUMP_FORMAT_MANIFEST_FIELDS_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace argsdump {

#define ARGSDUMP_MANIFEST_FIELDS(X)                       \
  X(TaskId, "task_id", kRequired)                         \
  X(Step, "step", kSometimes)                             \
  X(FuncId, "func_id", kAlways)                           \
  X(Role, "role", kRequired)                              \
  X(Stage, "stage", kRequired)                            \
  X(ArgIndex, "arg_index", kAlways)                       \
  X(Kind, "kind", kRequired)                              \
  X(Dtype, "dtype", kRequired)                            \
  X(Value, "value", kSometimes)                           \
  X(Shape, "shape", kAlways)                              \
  X(Strides, "strides", kAlways)                          \
  X(StartOffset, "start_offset", kAlways)                 \
  X(IsContiguous, "is_contiguous", kAlways)               \
  X(Numel, "numel", kAlways)                              \
  X(ArgIndexAmbiguous, "arg_index_ambiguous", kSometimes) \
  X(InFlightSnapshot, "in_flight_snapshot", kSometimes)   \
  X(Overflow, "overflow", kSometimes)                     \
  X(Nonfinite, "nonfinite", kSometimes)                   \
  X(Truncated, "truncated", kAlways)                      \
  X(Overwritten, "overwritten", kAlways)                  \
  X(BinOffset, "bin_offset", kAlways)                     \
  X(BinSize, "bin_size", kAlways)                         \
  X(DispatchNs, "dispatch_ns", kSometimes)                \
  X(CompleteNs, "complete_ns", kSometimes)                \
  X(Stats, "stats", kSometimes)

// The simple fields among them: one value each, the same name in the
// record (v1::ArgRecord), the row (ManifestRow), the viewer's entry
// (ManifestEntry) and here. Their writer, reader, entry member and copy
// from a record are generated from this list; the others are written and
// read by hand. S(id, style, member), style:
//   kUint32, kUint64  a number
//   kBool             true / false, always written
//   kTrueFlag         written only when true (absent: false)
//   kNonZero          a uint64 written only when not 0 (absent: 0)
// A new simple field: its proto field, its ManifestRow member and row-list
// line (format/record.h), its lines here - nothing else to write.
#define ARGSDUMP_SIMPLE_MANIFEST_FIELDS(S)            \
  S(ArgIndex, kUint32, arg_index)                     \
  S(StartOffset, kUint64, start_offset)               \
  S(IsContiguous, kBool, is_contiguous)               \
  S(Numel, kUint64, numel)                            \
  S(ArgIndexAmbiguous, kTrueFlag, arg_index_ambiguous) \
  S(InFlightSnapshot, kTrueFlag, in_flight_snapshot)  \
  S(Overflow, kTrueFlag, overflow)                    \
  S(Nonfinite, kTrueFlag, nonfinite)                  \
  S(Truncated, kBool, truncated)                      \
  S(Overwritten, kBool, overwritten)                  \
  S(BinOffset, kUint64, bin_offset)                   \
  S(BinSize, kUint64, bin_size)                       \
  S(DispatchNs, kNonZero, dispatch_ns)                \
  S(CompleteNs, kNonZero, complete_ns)

enum class FieldStyle { kUint32, kUint64, kBool, kTrueFlag, kNonZero };

// The fields of an entry's "stats" object, in the order the store writes
// them: the same names in v1::TensorStats, the index's StatsRow and the
// viewer's entry, whose copies and readers are generated from this list.
// T(member, type): type uint64_t (a count) or double.
#define ARGSDUMP_MANIFEST_STATS_FIELDS(T) \
  T(count, uint64_t)                      \
  T(min, double)                          \
  T(max, double)                          \
  T(mean, double)                         \
  T(l2, double)                           \
  T(nan, uint64_t)                        \
  T(pos_inf, uint64_t)                    \
  T(neg_inf, uint64_t)                    \
  T(zeros, uint64_t)

// The C++ type a simple field's style holds.
template <FieldStyle S>
struct FieldType;
template <> struct FieldType<FieldStyle::kUint32> { using type = uint32_t; };
template <> struct FieldType<FieldStyle::kUint64> { using type = uint64_t; };
template <> struct FieldType<FieldStyle::kBool> { using type = bool; };
template <> struct FieldType<FieldStyle::kTrueFlag> { using type = bool; };
template <> struct FieldType<FieldStyle::kNonZero> { using type = uint64_t; };

// The members a struct gets for the simple fields (the viewer's entry).
#define ARGSDUMP_SIMPLE_FIELD_MEMBER(id, style, member) \
  ::argsdump::FieldType<::argsdump::FieldStyle::style>::type member = {};

enum class ManifestField : int {
#define ARGSDUMP_FIELD_ENUM(id, key, presence) k##id,
  ARGSDUMP_MANIFEST_FIELDS(ARGSDUMP_FIELD_ENUM)
#undef ARGSDUMP_FIELD_ENUM
  kUnknown,  // a key this build does not know (skipped by readers)
};

inline constexpr size_t kManifestFieldCount = static_cast<size_t>(ManifestField::kUnknown);

enum class FieldPresence : uint8_t { kRequired, kAlways, kSometimes };

struct ManifestFieldInfo {
  absl::string_view key;
  FieldPresence presence;
};

inline constexpr ManifestFieldInfo kManifestFields[kManifestFieldCount] = {
#define ARGSDUMP_FIELD_INFO(id, key, presence) {key, FieldPresence::presence},
    ARGSDUMP_MANIFEST_FIELDS(ARGSDUMP_FIELD_INFO)
#undef ARGSDUMP_FIELD_INFO
};

inline constexpr const ManifestFieldInfo& InfoOf(ManifestField f) {
  return kManifestFields[static_cast<size_t>(f)];
}

// The field whose key is `key`, trying the one written after `after` first
// (and past the ones written only sometimes): a manifest the store wrote
// is read with one comparison per field. kUnknown for other keys.
ManifestField ManifestFieldOf(absl::string_view key, ManifestField after);

// One bit per field (bit i: field i), for "which fields has this entry".
using ManifestFieldSet = uint32_t;
static_assert(kManifestFieldCount <= 32, "ManifestFieldSet holds one bit per field");
inline constexpr ManifestFieldSet Bit(ManifestField f) {
  return ManifestFieldSet{1} << static_cast<int>(f);
}
// The kRequired fields.
inline constexpr ManifestFieldSet kRequiredManifestFields = [] {
  ManifestFieldSet set = 0;
  for (size_t i = 0; i < kManifestFieldCount; ++i) {
    if (kManifestFields[i].presence == FieldPresence::kRequired) set |= ManifestFieldSet{1} << i;
  }
  return set;
}();

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_MANIFEST_FIELDS_H_
