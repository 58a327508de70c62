// Which records a query selects: the one predicate behind v1::ArgFilter,
// used by the finished index, live captures, watches, the viewer's local
// reader and its remote source. Every set field must match; unset fields
// match everything. The fields, their proto conversion, their tests and
// their description are generated from format/arg_filter_fields.h; a
// reader may test one manifest field's worth of them (AdmitsAt) to drop a
// record at the first field it has read that rules it out.
#ifndef ARGSDUMP_FORMAT_ARG_FILTER_H_
#define ARGSDUMP_FORMAT_ARG_FILTER_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/arg_filter_fields.h"
#include "format/manifest_fields.h"
#include "format/record.h"
#include "proto/argsdump/v1/capture.pb.h"

namespace argsdump {

// A record's func ids, [first, last): none when its kernel is not known.
template <typename It>
struct FuncIdRange {
  It first, last;
};

// The manifest's func_id array (ManifestEntry, the SDK's CapturedArg) as a
// range: [-1] says the kernel is not known (no ids).
inline FuncIdRange<std::vector<int64_t>::const_iterator> ManifestFuncIdRange(
    const std::vector<int64_t>& ids) {
  const bool unknown = ids.size() == 1 && ids[0] == -1;
  return {ids.begin(), unknown ? ids.begin() : ids.end()};
}

struct ArgFilter {
#define ARGSDUMP_FILTER_MEMBER(member, kind, ...) \
  FilterKindTraits<FilterKind::kind>::Member member = {};
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_MEMBER)
#undef ARGSDUMP_FILTER_MEMBER
  // The func ids ResolveKernelFilter (format/kernel_table.h) found for
  // func_name / func_type, sorted. Unresolved, those match nothing.
  std::optional<std::vector<uint32_t>> func_named;

  static ArgFilter FromProto(const v1::ArgFilter& f);
  v1::ArgFilter ToProto() const;
  bool any() const;
  // "task 0x... stage after_completion role output": what a user asked.
  std::string Describe() const;

  // The whole predicate over a record seen through `rec`, which has one
  // method per subject of the table (TaskId(), FuncId(), Stats(), ...).
  template <typename Record>
  bool MatchesRecord(const Record& rec) const;
  // The fields whose subject is `F` only: the record's value for F is
  // known. `rec` needs only the method for F.
  template <ManifestField F, typename Record>
  bool AdmitsAt(const Record& rec) const;
  // As AdmitsAt, F known at run time (`rec` needs every subject's method).
  template <typename Record>
  bool AdmitsAt(ManifestField f, const Record& rec) const;

  // The whole predicate over a stored row (`stats`: null when none stored).
  bool Matches(const ManifestRow& r, const StatsRow* stats = nullptr) const;

  // The func-id fields over the manifest's func_id array, where [-1] says
  // the kernel is not known (no ids).
  bool ManifestFuncIdsOk(const std::vector<int64_t>& func_ids) const {
    struct Ids {
      const std::vector<int64_t>& ids;
      auto FuncId() const { return ManifestFuncIdRange(ids); }
    };
    return AdmitsAt<ManifestField::kFuncId>(Ids{func_ids});
  }
};

// A stored row (and its stats) as a record the filter tests.
struct ManifestRowView {
  const ManifestRow& row;
  const StatsRow* stats;

  uint64_t TaskId() const { return row.task_id; }
  uint32_t Step() const { return row.step; }
  int Stage() const { return row.stage; }
  int Role() const { return row.role; }
  int Kind() const { return row.kind; }
  int Dtype() const { return row.dtype; }
  FuncIdRange<const uint16_t*> FuncId() const {
    return {row.func_ids, row.func_ids + std::min<uint32_t>(row.func_count, kMaxRecordFuncIds)};
  }
  // Whether its elements hold a NaN or an Inf: flagged, or counted.
  bool Stats() const { return row.nonfinite || (stats != nullptr && stats->has_nonfinite()); }
#define ARGSDUMP_ROW_SUBJECT(id, style, member) \
  auto id() const { return row.member; }
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_ROW_SUBJECT)
#undef ARGSDUMP_ROW_SUBJECT
};

namespace arg_filter_internal {

template <typename T>
bool IsSet(const std::optional<T>& v) { return v.has_value(); }
inline bool IsSet(int v) { return v != 0; }
inline bool IsSet(bool v) { return v; }

template <typename T>
const T& ValueOf(const std::optional<T>& v) { return *v; }
inline int ValueOf(int v) { return v; }
inline bool ValueOf(bool v) { return v; }

template <typename It, typename Ids>
bool AnyIdIn(const FuncIdRange<It>& r, const Ids& sorted) {
  for (It it = r.first; it != r.last; ++it) {
    const int64_t id = static_cast<int64_t>(*it);  // the manifest's -1: no kernel
    if (id >= 0 && std::binary_search(sorted.begin(), sorted.end(), static_cast<uint32_t>(id))) {
      return true;
    }
  }
  return false;
}

template <FilterTest>
inline constexpr bool kUnhandledTest = false;

// Whether the record's value `v` passes the field `want` (set).
template <FilterTest T, typename W, typename V>
bool Passes(const ArgFilter& f, const W& want, const V& v) {
  if constexpr (T == FilterTest::kEqual) {
    return v == ValueOf(want);
  } else if constexpr (T == FilterTest::kAtMost) {
    return v <= ValueOf(want);
  } else if constexpr (T == FilterTest::kAtLeast) {
    return v >= ValueOf(want);
  } else if constexpr (T == FilterTest::kHasFuncId) {
    return std::find(v.first, v.last, ValueOf(want)) != v.last;
  } else if constexpr (T == FilterTest::kNoFuncId) {
    return v.first == v.last;
  } else if constexpr (T == FilterTest::kNamedFunc) {
    return f.func_named.has_value() && AnyIdIn(v, *f.func_named);
  } else {
    static_assert(kUnhandledTest<T>, "a FilterTest without its rule");
    return false;
  }
}

}  // namespace arg_filter_internal

// Each field: unset, or the record's value for its subject passes.
#define ARGSDUMP_FILTER_PASSES(member, kind, subject, test, ...)          \
  (!arg_filter_internal::IsSet(member) ||                                 \
   arg_filter_internal::Passes<FilterTest::test>(*this, member, rec.subject()))

template <typename Record>
bool ArgFilter::MatchesRecord(const Record& rec) const {
#define ARGSDUMP_FILTER_AND(...) ARGSDUMP_FILTER_PASSES(__VA_ARGS__) &&
  return ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_AND) true;
#undef ARGSDUMP_FILTER_AND
}

template <ManifestField F, typename Record>
bool ArgFilter::AdmitsAt(const Record& rec) const {
#define ARGSDUMP_FILTER_AT(member, kind, subject, ...)                                   \
  if constexpr (F == ManifestField::k##subject) {                                        \
    if (!ARGSDUMP_FILTER_PASSES(member, kind, subject, __VA_ARGS__)) return false;       \
  }
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_AT)
#undef ARGSDUMP_FILTER_AT
  return true;
}

template <typename Record>
bool ArgFilter::AdmitsAt(ManifestField f, const Record& rec) const {
#define ARGSDUMP_FILTER_AT(member, kind, subject, ...)                                     \
  if (f == ManifestField::k##subject && !ARGSDUMP_FILTER_PASSES(member, kind, subject,     \
                                                                __VA_ARGS__)) {           \
    return false;                                                                          \
  }
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_AT)
#undef ARGSDUMP_FILTER_AT
  return true;
}

#undef ARGSDUMP_FILTER_PASSES

inline bool ArgFilter::Matches(const ManifestRow& r, const StatsRow* stats) const {
  return MatchesRecord(ManifestRowView{r, stats});
}

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_ARG_FILTER_H_
