#include "format/arg_filter_params.h"

#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"
#include "format/dtype.h"
#include "format/kernel_table.h"
#include "format/names.h"
#include "google/protobuf/descriptor.h"

namespace argsdump {
namespace {

template <FilterKind>
inline constexpr bool kUnhandledKind = false;

absl::Status Expected(absl::string_view what) { return absl::InvalidArgumentError(what); }

// The enum's descriptor and the prefix of its value names ("STAGE_").
template <FilterKind K>
std::pair<const google::protobuf::EnumDescriptor*, absl::string_view> EnumOf() {
  if constexpr (K == FilterKind::kStage) return {v1::Stage_descriptor(), "STAGE_"};
  if constexpr (K == FilterKind::kRole) return {v1::Role_descriptor(), "ROLE_"};
  if constexpr (K == FilterKind::kKind) return {v1::Kind_descriptor(), "KIND_"};
  if constexpr (K == FilterKind::kDType) return {v1::DType_descriptor(), "DTYPE_"};
}

// A value by the manifest's name (before, input, tensor, FLOAT32) or the
// proto's (STAGE_BEFORE_DISPATCH, or before_dispatch in any case); 0
// (UNSPECIFIED) for none.
template <FilterKind K>
int EnumFromText(absl::string_view text) {
  if constexpr (K == FilterKind::kStage) {
    if (text == "before") return v1::STAGE_BEFORE_DISPATCH;
    if (text == "after") return v1::STAGE_AFTER_COMPLETION;
  } else if constexpr (K == FilterKind::kRole) {
    if (std::optional<v1::Role> r = RoleFromName(text)) return *r;
  } else if constexpr (K == FilterKind::kKind) {
    if (std::optional<v1::Kind> k = KindFromName(text)) return *k;
  } else if constexpr (K == FilterKind::kDType) {
    if (std::optional<DataType> d = DataTypeFromName(std::string(text))) return ToProtoDType(*d);
  }
  const auto [descriptor, prefix] = EnumOf<K>();
  std::string upper = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(upper, prefix)) upper = absl::StrCat(prefix, upper);
  const google::protobuf::EnumValueDescriptor* value = descriptor->FindValueByName(upper);
  return value == nullptr ? 0 : value->number();
}

std::optional<bool> BoolFromText(absl::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return std::nullopt;
}

std::optional<uint64_t> TaskIdFromText(FilterDialect dialect, absl::string_view text) {
  if (dialect == FilterDialect::kParams) {
    if (absl::StartsWithIgnoreCase(text, "0x")) {
      return ParseTaskIdHex(absl::AsciiStrToLower(text));
    }
    uint64_t v;
    if (!absl::SimpleAtoi(text, &v)) return std::nullopt;
    return v;
  }
  const std::optional<uint64_t> v = ParseTaskIdHex(text);
  if (!v) return std::nullopt;
  // A task id is the run id (high word) and the task's number in the run,
  // from 0 in submission order (low word). Every run argsdump's runtime
  // makes has run id 1 (SimConfig::run_id), so no task has a high word of
  // 0: 1 to 8 digits are the low word, the number people read off a
  // listing or count in their code.
  constexpr uint64_t kRunId = 1;
  const size_t digits = text.size() - (absl::StartsWithIgnoreCase(text, "0x") ? 2 : 0);
  return digits <= 8 ? (kRunId << 32) | *v : *v;
}

// A kernel's name, its func id, or -1 for args whose kernel is not known.
absl::Status FuncRefFromText(absl::string_view text, ArgFilter* f) {
  int64_t v;
  if (absl::SimpleAtoi(text, &v)) {
    if (v < -1 || v > int64_t{0xFFFFFFFF}) {
      return Expected(
          "a kernel name, or a func id (0, 1, ..., or -1 for args whose kernel is not known)");
    }
    if (v == -1) {
      f->func_unknown = true;
    } else {
      f->func_id = static_cast<uint32_t>(v);
    }
    return absl::OkStatus();
  }
  if (text.empty() || text.size() > kMaxKernelNameBytes || !IsValidUtf8(text)) {
    return Expected(absl::StrCat("a kernel name (1 to ", kMaxKernelNameBytes,
                                 " bytes of UTF-8) or a func id (0, 1, ..., or -1)"));
  }
  f->func_name = std::string(text);
  return absl::OkStatus();
}

// One field of kind K from its text into `out` (a member of `f`).
template <FilterKind K, typename Member>
absl::Status ParseField(FilterDialect dialect, absl::string_view text, absl::string_view expected,
                        ArgFilter* f, Member* out) {
  if constexpr (K == FilterKind::kTaskId) {
    *out = TaskIdFromText(dialect, text);
    if (*out) return absl::OkStatus();
    return Expected(dialect == FilterDialect::kParams
                        ? "a task id (0x and up to 16 hex digits, or decimal)"
                        : expected);
  } else if constexpr (K == FilterKind::kUint32 || K == FilterKind::kUint64) {
    typename Member::value_type v;
    if (!absl::SimpleAtoi(text, &v)) return Expected(expected);
    *out = v;
    return absl::OkStatus();
  } else if constexpr (K == FilterKind::kStage || K == FilterKind::kRole ||
                       K == FilterKind::kKind || K == FilterKind::kDType) {
    *out = EnumFromText<K>(text);
    return *out != 0 ? absl::OkStatus() : Expected(expected);
  } else if constexpr (K == FilterKind::kBool || K == FilterKind::kFlag) {
    const std::optional<bool> v = BoolFromText(text);
    if (!v) return Expected(expected);
    *out = *v;  // kFlag: false is unset
    return absl::OkStatus();
  } else if constexpr (K == FilterKind::kText) {
    if (text.empty() || text.size() > kMaxKernelTypeBytes || !IsValidUtf8(text)) {
      return Expected(
          absl::StrCat("a kernel type (1 to ", kMaxKernelTypeBytes, " bytes of UTF-8)"));
    }
    *out = std::string(text);
    return absl::OkStatus();
  } else if constexpr (K == FilterKind::kFuncRef) {
    return FuncRefFromText(text, f);
  } else {
    static_assert(kUnhandledKind<K>, "a FilterKind without its text");
    return absl::OkStatus();
  }
}

// The schema's kind, and its values for an enum.
template <FilterKind K>
std::pair<absl::string_view, std::vector<std::string>> SchemaKind() {
  if constexpr (K == FilterKind::kUint32 || K == FilterKind::kUint64) {
    return {"number", {}};
  } else if constexpr (K == FilterKind::kTaskId || K == FilterKind::kText ||
                       K == FilterKind::kFuncRef) {
    return {"text", {}};
  } else if constexpr (K == FilterKind::kBool || K == FilterKind::kFlag) {
    return {"bool", {}};
  } else if constexpr (K == FilterKind::kStage || K == FilterKind::kRole ||
                       K == FilterKind::kKind || K == FilterKind::kDType) {
    const auto [descriptor, prefix] = EnumOf<K>();
    std::vector<std::string> values;
    for (int i = 0; i < descriptor->value_count(); ++i) {
      if (descriptor->value(i)->number() == 0) continue;
      values.push_back(absl::AsciiStrToLower(descriptor->value(i)->name().substr(prefix.size())));
    }
    return {"enum", std::move(values)};
  } else {
    static_assert(kUnhandledKind<K>, "a FilterKind the schema does not name");
    return {};
  }
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

const std::vector<ArgFilterFieldInfo>& ArgFilterFields() {
  static const auto* fields = new std::vector<ArgFilterFieldInfo>{
#define ARGSDUMP_FILTER_INFO(member, kind, subject, test, param, viewer, flag, label, expected, \
                             help)                                                            \
  {#member,                                                                                   \
   param,                                                                                     \
   absl::string_view(#viewer) == "Flag",                                                      \
   #flag,                                                                                     \
   FilterKind::kind,                                                                          \
   help,                                                                                      \
   [](FilterDialect dialect, absl::string_view text, ArgFilter* f) {                          \
     return ParseField<FilterKind::kind>(dialect, text, expected, f, &f->member);             \
   }},
      ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_INFO)
#undef ARGSDUMP_FILTER_INFO
  };
  return *fields;
}

absl::StatusOr<ArgFilter> ArgFilterFromParams(const ParamGetter& get) {
  ArgFilter f;
  for (const ArgFilterFieldInfo& field : ArgFilterFields()) {
    const std::optional<std::string> value = get(field.param);
    if (!value) continue;
    if (absl::Status s = field.parse(FilterDialect::kParams, *value, &f); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field.param, "=", *value, ": expected ", s.message()));
    }
  }
  return f;
}

std::vector<std::string> ArgFilterParamNames() {
  std::vector<std::string> names;
  for (const ArgFilterFieldInfo& field : ArgFilterFields()) names.emplace_back(field.param);
  return names;
}

std::string ArgFilterSchemaJson() {
  std::string out = "[";
#define ARGSDUMP_FILTER_SCHEMA(member, kind, subject, test, param, viewer, flag, label, expected, \
                               help)                                                            \
  {                                                                                             \
    const auto [schema_kind, values] = SchemaKind<FilterKind::kind>();                          \
    std::string list;                                                                           \
    for (const std::string& v : values) absl::StrAppend(&list, list.empty() ? "" : ", ",       \
                                                        JsonString(v));                          \
    absl::StrAppend(&out, out.size() > 1 ? ",\n " : "", "{\"name\": ", JsonString(param),       \
                    ", \"kind\": ", JsonString(schema_kind), ", \"values\": [", list,           \
                    "], \"help\": ", JsonString(help), "}");                                    \
  }
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_SCHEMA)
#undef ARGSDUMP_FILTER_SCHEMA
  return out + "]";
}

}  // namespace argsdump
