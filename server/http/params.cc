#include "server/http/params.h"

#include "format/arg_filter_params.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/utf8.h"
#include "format/arg_filter_params.h"
#include "format/names.h"
#include "server/http/httplib_workarounds.h"

namespace argsdump {

bool ParseDecimal(absl::string_view text, uint64_t* out) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) &&
         absl::SimpleAtoi(text, out);
}

bool ParseIndexList(const std::string& text, std::vector<uint64_t>* out) {
  if (text.empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    uint64_t v = 0;
    if (!ParseDecimal(part, &v)) return false;
    out->push_back(v);
  }
  return true;
}

Params::Params(const httplib::Request& req, std::vector<std::string> known)
    : req_(req), known_(known.begin(), known.end()), given_(RawQueryNameCounts(req.target)) {
  for (const auto& [name, value] : req.params) {
    if (!IsValidUtf8(name) || !IsValidUtf8(value)) {
      Fail(IsValidUtf8(name)
               ? absl::StrCat("parameter '", name,
                              "': its value is not UTF-8 (percent-encode UTF-8 bytes)")
               : std::string("a parameter's name is not UTF-8"));
      break;
    }
  }
}

bool Params::Finish() {
  for (const auto& [name, value] : req_.params) {
    if (known_.count(name) == 0) {
      Fail(absl::StrCat("unknown parameter '", name, "' (this endpoint takes ",
                        known_.empty() ? "none" : absl::StrJoin(known_, ", "), ")"));
      break;
    }
  }
  return error_.empty();
}

std::optional<std::string> Params::Single(const std::string& name) {
  const size_t n = std::max(req_.params.count(name), Given(name));
  if (n == 0) return std::nullopt;
  if (n > 1) {
    Fail(absl::StrCat("parameter '", name, "' is given ", n, " times"));
    return std::nullopt;
  }
  return req_.params.find(name)->second;
}

std::vector<std::string> Params::All(const std::string& name) const {
  std::vector<std::string> out;
  auto range = req_.params.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

std::optional<uint64_t> Params::Uint(const std::string& name, uint64_t max) {
  std::optional<std::string> v = Single(name);
  if (!v) return std::nullopt;
  uint64_t out = 0;
  if (!ParseDecimal(*v, &out) || out > max) {
    Fail(absl::StrCat(name, "=", *v, ": not an integer in 0..", max));
    return std::nullopt;
  }
  return out;
}

std::optional<bool> Params::Bool(const std::string& name) {
  std::optional<std::string> v = Single(name);
  if (!v) return std::nullopt;
  if (*v == "true" || *v == "1") return true;
  if (*v == "false" || *v == "0") return false;
  Fail(absl::StrCat(name, "=", *v, ": not true or false"));
  return std::nullopt;
}

std::optional<uint64_t> Params::TaskId(const std::string& name) {
  std::optional<std::string> v = Single(name);
  if (!v) return std::nullopt;
  uint64_t out = 0;
  if (absl::StartsWithIgnoreCase(*v, "0x")) {
    if (std::optional<uint64_t> hex = ParseTaskIdHex(absl::AsciiStrToLower(*v))) return hex;
  } else if (ParseDecimal(*v, &out)) {
    return out;
  }
  Fail(absl::StrCat(name, "=", *v, ": not a task id (0x + up to 16 hex digits, or decimal)"));
  return std::nullopt;
}

std::optional<int> Params::EnumNumber(const std::string& name,
                                      const google::protobuf::EnumDescriptor* descriptor,
                                      absl::string_view prefix) {
  std::optional<std::string> v = Single(name);
  if (!v) return std::nullopt;
  std::string upper = absl::AsciiStrToUpper(*v);
  if (!absl::StartsWith(upper, prefix)) upper = absl::StrCat(prefix, upper);
  const google::protobuf::EnumValueDescriptor* value = descriptor->FindValueByName(upper);
  if (value == nullptr || value->number() == 0) {
    std::vector<std::string> names;
    for (int i = 1; i < descriptor->value_count(); ++i) {
      names.push_back(absl::AsciiStrToLower(descriptor->value(i)->name().substr(prefix.size())));
    }
    Fail(absl::StrCat(name, "=", *v, ": not one of ", absl::StrJoin(names, ", ")));
    return std::nullopt;
  }
  return value->number();
}

void Params::Fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

size_t Params::Given(const std::string& name) const {
  auto it = given_.find(name);
  return it == given_.end() ? 0 : it->second;
}

void ParseArgFilterParams(Params& p, v1::ArgFilter* filter) {
  absl::StatusOr<ArgFilter> f = ArgFilterFromParams(
      [&p](absl::string_view name) { return p.Single(std::string(name)); });
  if (!f.ok()) {
    p.Fail(std::string(f.status().message()));
    return;
  }
  *filter = f->ToProto();
}

std::string SchemaBody() { return absl::StrCat("{\"filter\":", ArgFilterSchemaJson(), "}"); }

}  // namespace argsdump
