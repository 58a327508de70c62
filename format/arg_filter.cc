#include "format/arg_filter.h"

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "format/names.h"

namespace argsdump {
namespace {

template <FilterKind>
inline constexpr bool kUnhandledKind = false;

// A field from its proto: `has` is called only for `optional` fields.
template <FilterKind K, typename Proto, typename Has, typename Get>
void FieldFromProto(const Proto& p, Has has, Get get,
                    typename FilterKindTraits<K>::Member* out) {
  if constexpr (FilterKindTraits<K>::kProtoOptional) {
    if (has(p)) *out = get(p);
  } else {
    *out = get(p);
  }
}

// "<label> <value>" for a set field.
template <FilterKind K, typename M>
std::string DescribeField(absl::string_view label, const M& m) {
  if constexpr (K == FilterKind::kTaskId) {
    return absl::StrCat(label, " ", TaskIdHex(*m));
  } else if constexpr (K == FilterKind::kUint32 || K == FilterKind::kUint64 ||
                       K == FilterKind::kText || K == FilterKind::kFuncRef) {
    return absl::StrCat(label, " ", *m);
  } else if constexpr (K == FilterKind::kStage) {
    return absl::StrCat(label, " ", StageName(static_cast<v1::Stage>(m)));
  } else if constexpr (K == FilterKind::kRole) {
    return absl::StrCat(label, " ", RoleName(static_cast<v1::Role>(m)));
  } else if constexpr (K == FilterKind::kKind) {
    return absl::StrCat(label, " ", KindName(static_cast<v1::Kind>(m)));
  } else if constexpr (K == FilterKind::kDType) {
    return absl::StrCat(label, " ", DTypeName(m));
  } else if constexpr (K == FilterKind::kBool) {
    // "yes|no": what true and false say.
    const std::pair<absl::string_view, absl::string_view> said = absl::StrSplit(label, '|');
    return std::string(*m ? said.first : said.second);
  } else if constexpr (K == FilterKind::kFlag) {
    return std::string(label);
  } else {
    static_assert(kUnhandledKind<K>, "a FilterKind Describe does not print");
    return "";
  }
}

}  // namespace

ArgFilter ArgFilter::FromProto(const v1::ArgFilter& f) {
  ArgFilter q;
#define ARGSDUMP_FILTER_FROM_PROTO(member, kind, ...)                           \
  FieldFromProto<FilterKind::kind>(                                             \
      f, [](const auto& p) { return p.has_##member(); },                        \
      [](const auto& p) { return p.member(); }, &q.member);
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_FROM_PROTO)
#undef ARGSDUMP_FILTER_FROM_PROTO
  return q;
}

v1::ArgFilter ArgFilter::ToProto() const {
  v1::ArgFilter f;
#define ARGSDUMP_FILTER_TO_PROTO(member, kind, ...)                              \
  if (arg_filter_internal::IsSet(member)) {                                      \
    f.set_##member(static_cast<std::decay_t<decltype(f.member())>>(              \
        arg_filter_internal::ValueOf(member)));                                  \
  }
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_TO_PROTO)
#undef ARGSDUMP_FILTER_TO_PROTO
  return f;
}

bool ArgFilter::any() const {
#define ARGSDUMP_FILTER_ANY(member, ...) arg_filter_internal::IsSet(member) ||
  return ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_ANY) false;
#undef ARGSDUMP_FILTER_ANY
}

std::string ArgFilter::Describe() const {
  std::string out;
#define ARGSDUMP_FILTER_DESCRIBE(member, kind, subject, test, param, viewer, flag, label, ...) \
  if (arg_filter_internal::IsSet(member)) {                                                   \
    absl::StrAppend(&out, out.empty() ? "" : " ",                                             \
                    DescribeField<FilterKind::kind>(label, member));                          \
  }
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_DESCRIBE)
#undef ARGSDUMP_FILTER_DESCRIBE
  return out.empty() ? "all" : out;
}

}  // namespace argsdump
