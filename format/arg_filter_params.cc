#include "format/arg_filter_params.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/utf8.h"
#include "format/dtype.h"
#include "format/kernel_table.h"
#include "format/names.h"
#include "google/protobuf/descriptor.h"

namespace argsdump {
namespace {

template <FilterKind>
inline constexpr bool kUnhandledKind = false;

absl::Status Bad(absl::string_view why) { return absl::InvalidArgumentError(why); }

// The enum's descriptor and the prefix of its value names ("STAGE_").
template <FilterKind K>
std::pair<const google::protobuf::EnumDescriptor*, absl::string_view> EnumOf() {
  if constexpr (K == FilterKind::kStage) return {v1::Stage_descriptor(), "STAGE_"};
  if constexpr (K == FilterKind::kRole) return {v1::Role_descriptor(), "ROLE_"};
  if constexpr (K == FilterKind::kKind) return {v1::Kind_descriptor(), "KIND_"};
  if constexpr (K == FilterKind::kDType) return {v1::DType_descriptor(), "DTYPE_"};
}

// The command line's spelling of an enum value: the manifest's (before or
// before_dispatch, input, tensor, FLOAT32 in any case); 0 for none.
template <FilterKind K>
int EnumFromManifestName(absl::string_view text) {
  if constexpr (K == FilterKind::kStage) {
    if (text == "before") return v1::STAGE_BEFORE_DISPATCH;
    if (text == "after") return v1::STAGE_AFTER_COMPLETION;
    return StageFromName(text).value_or(v1::STAGE_UNSPECIFIED);
  } else if constexpr (K == FilterKind::kRole) {
    return RoleFromName(text).value_or(v1::ROLE_UNSPECIFIED);
  } else if constexpr (K == FilterKind::kKind) {
    return KindFromName(text).value_or(v1::KIND_UNSPECIFIED);
  } else {
    const std::optional<DataType> d = DataTypeFromName(std::string(text));
    return d ? ToProtoDType(*d) : v1::DTYPE_UNSPECIFIED;
  }
}

// The parameters' spelling of an enum value: the proto's name
// (STAGE_BEFORE_DISPATCH) or the part after its prefix, in any case; 0
// (UNSPECIFIED too) for none.
template <FilterKind K>
int EnumFromProtoName(absl::string_view text) {
  const auto [descriptor, prefix] = EnumOf<K>();
  std::string upper = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(upper, prefix)) upper = absl::StrCat(prefix, upper);
  const google::protobuf::EnumValueDescriptor* value = descriptor->FindValueByName(upper);
  return value == nullptr ? 0 : value->number();
}

// The values EnumFromProtoName takes, as the schema and its errors list them.
template <FilterKind K>
std::vector<std::string> EnumValueNames() {
  const auto [descriptor, prefix] = EnumOf<K>();
  std::vector<std::string> values;
  for (int i = 0; i < descriptor->value_count(); ++i) {
    if (descriptor->value(i)->number() == 0) continue;
    values.push_back(absl::AsciiStrToLower(descriptor->value(i)->name().substr(prefix.size())));
  }
  return values;
}

// Decimal digits only (the parameters: no sign, no spaces).
template <typename T>
bool DigitsFromText(absl::string_view text, T* out) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) &&
         absl::SimpleAtoi(text, out);
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
    if (!DigitsFromText(text, &v)) return std::nullopt;
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

// The command line's --func: a kernel's name, its func id, or -1 for args
// whose kernel is not known.
absl::Status FuncRefFromFlag(absl::string_view text, absl::string_view expected, ArgFilter* f) {
  int64_t v;
  if (absl::SimpleAtoi(text, &v)) {
    if (v < -1 || v > int64_t{0xFFFFFFFF}) return Bad(absl::StrCat("expected ", expected));
    if (v == -1) {
      f->func_unknown = true;
    } else {
      f->func_id = static_cast<uint32_t>(v);
    }
    return absl::OkStatus();
  }
  if (text.empty() || text.size() > kMaxKernelNameBytes || !IsValidUtf8(text)) {
    return Bad(absl::StrCat("expected a kernel name (1 to ", kMaxKernelNameBytes,
                            " bytes of UTF-8) or a func id (0, 1, ..., or -1)"));
  }
  f->func_name = std::string(text);
  return absl::OkStatus();
}

// The parameters' func=: a func id (digits), else a kernel's name (the
// service refuses a name its kernel table lacks).
void FuncRefFromParam(absl::string_view text, ArgFilter* f) {
  uint64_t id;
  if (DigitsFromText(text, &id) && id <= 0xFFFFFFFF) {
    f->func_id = static_cast<uint32_t>(id);
  } else {
    f->func_name = std::string(text);
  }
}

// One field of kind K from its text into `out` (a member of `f`).
// `expected`: the table's words for a bad value on the command line.
template <FilterKind K, typename Member>
absl::Status ParseField(FilterDialect dialect, absl::string_view text, absl::string_view expected,
                        ArgFilter* f, Member* out) {
  const bool params = dialect == FilterDialect::kParams;
  auto expect = [&] { return Bad(absl::StrCat("expected ", expected)); };
  if constexpr (K == FilterKind::kTaskId) {
    *out = TaskIdFromText(dialect, text);
    if (*out) return absl::OkStatus();
    return params ? Bad("not a task id (0x + up to 16 hex digits, or decimal)") : expect();
  } else if constexpr (K == FilterKind::kUint32 || K == FilterKind::kUint64) {
    typename Member::value_type v;
    if (params ? !DigitsFromText(text, &v) : !absl::SimpleAtoi(text, &v)) {
      return params ? Bad(absl::StrCat("not an integer in 0..",
                                       std::numeric_limits<typename Member::value_type>::max()))
                    : expect();
    }
    *out = v;
    return absl::OkStatus();
  } else if constexpr (K == FilterKind::kStage || K == FilterKind::kRole ||
                       K == FilterKind::kKind || K == FilterKind::kDType) {
    *out = params ? EnumFromProtoName<K>(text) : EnumFromManifestName<K>(text);
    if (*out != 0) return absl::OkStatus();
    return params ? Bad(absl::StrCat("not one of ", absl::StrJoin(EnumValueNames<K>(), ", ")))
                  : expect();
  } else if constexpr (K == FilterKind::kBool || K == FilterKind::kFlag) {
    const std::optional<bool> v = BoolFromText(text);
    if (!v) return params ? Bad("not true or false") : expect();
    *out = *v;  // kFlag: false is unset
    return absl::OkStatus();
  } else if constexpr (K == FilterKind::kText) {
    if (params) {
      *out = std::string(text);
      return absl::OkStatus();
    }
    if (text.empty() || text.size() > kMaxKernelTypeBytes || !IsValidUtf8(text)) {
      return Bad(absl::StrCat("expected ", expected, " (1 to ", kMaxKernelTypeBytes,
                              " bytes of UTF-8)"));
    }
    *out = std::string(text);
    return absl::OkStatus();
  } else if constexpr (K == FilterKind::kFuncRef) {
    if (!params) return FuncRefFromFlag(text, expected, f);
    FuncRefFromParam(text, f);
    return absl::OkStatus();
  } else {
    static_assert(kUnhandledKind<K>, "a FilterKind without its text");
    return absl::OkStatus();
  }
}

// The schema's kind, its values for an enum, and what the parameter's text
// adds to the field's help.
struct SchemaKind {
  absl::string_view kind;
  std::vector<std::string> values;
  absl::string_view help_suffix;
};
template <FilterKind K>
SchemaKind SchemaKindOf() {
  if constexpr (K == FilterKind::kUint32 || K == FilterKind::kUint64) {
    return {"number", {}, ""};
  } else if constexpr (K == FilterKind::kTaskId) {
    return {"text", {}, " (0x and up to 16 hex digits, or decimal)"};
  } else if constexpr (K == FilterKind::kText || K == FilterKind::kFuncRef) {
    return {"text", {}, ""};
  } else if constexpr (K == FilterKind::kBool) {
    return {"bool", {}, ""};
  } else if constexpr (K == FilterKind::kFlag) {
    return {"flag", {}, ""};
  } else if constexpr (K == FilterKind::kStage || K == FilterKind::kRole ||
                       K == FilterKind::kKind || K == FilterKind::kDType) {
    return {"enum", EnumValueNames<K>(), ""};
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
          absl::StrCat(field.param, "=", *value, ": ", s.message()));
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
  std::vector<std::string> entries;
  auto add = [&entries](absl::string_view param, const SchemaKind& k, absl::string_view help) {
    std::vector<std::string> values;
    for (const std::string& v : k.values) values.push_back(JsonString(v));
    entries.push_back(absl::StrCat("{\"name\": ", JsonString(param), ", \"kind\": ",
                                   JsonString(k.kind), ", \"values\": [",
                                   absl::StrJoin(values, ", "), "], \"help\": ",
                                   JsonString(absl::StrCat(help, k.help_suffix)), "}"));
  };
#define ARGSDUMP_FILTER_SCHEMA(member, kind, subject, test, param, viewer, flag, label, expected, \
                               help)                                                            \
  add(param, SchemaKindOf<FilterKind::kind>(), help);
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_SCHEMA)
#undef ARGSDUMP_FILTER_SCHEMA
  return absl::StrCat("[", absl::StrJoin(entries, ",\n "), "]");
}

}  // namespace argsdump
