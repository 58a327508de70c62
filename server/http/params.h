// The query strings of the HTTP face's endpoints, checked: every parameter
// known, single ones given once, values parsed with errors that name the
// parameter. The first problem found is the request's 400.
#ifndef ARGSDUMP_SERVER_HTTP_PARAMS_H_
#define ARGSDUMP_SERVER_HTTP_PARAMS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "httplib.h"
#include "proto/argsdump/v1/capture.pb.h"

namespace argsdump {

inline constexpr uint32_t kMaxUint32 = 0xffffffffu;

// Digits only (SimpleAtoi alone takes "+1" and " 1 "), within 64 bits.
bool ParseDecimal(absl::string_view text, uint64_t* out);

// "a,b,c" of non-negative integers (the tensor's leading indices); "" is
// none. False for anything else.
bool ParseIndexList(const std::string& text, std::vector<uint64_t>* out);

class Params {
 public:
  // `known`: the parameters the endpoint takes. A name or value that is
  // not UTF-8 is an error at once.
  Params(const httplib::Request& req, std::vector<std::string> known);

  // The first problem found, in order of the calls; empty when none.
  const std::string& error() const { return error_; }

  // Unknown parameters are an error too. True when there was none.
  bool Finish();

  // Every accessor: nullopt when the parameter is absent or bad (the error
  // kept).
  std::optional<std::string> Single(const std::string& name);
  std::vector<std::string> All(const std::string& name) const;
  std::optional<uint64_t> Uint(const std::string& name, uint64_t max);
  // true / 1, false / 0.
  std::optional<bool> Bool(const std::string& name);
  // "0x..." hex (the manifest's spelling) or decimal.
  std::optional<uint64_t> TaskId(const std::string& name);

  // An enum value by its name ("STAGE_BEFORE_DISPATCH") or the part after
  // the prefix in any case ("before_dispatch"); UNSPECIFIED is refused.
  template <typename Enum>
  std::optional<Enum> EnumValue(const std::string& name,
                                const google::protobuf::EnumDescriptor* descriptor,
                                absl::string_view prefix) {
    std::optional<int> number = EnumNumber(name, descriptor, prefix);
    if (!number) return std::nullopt;
    return static_cast<Enum>(*number);
  }

  void Fail(std::string message);

 private:
  std::optional<int> EnumNumber(const std::string& name,
                                const google::protobuf::EnumDescriptor* descriptor,
                                absl::string_view prefix);
  size_t Given(const std::string& name) const;

  const httplib::Request& req_;
  std::set<std::string> known_;
  std::map<std::string, size_t> given_;  // from the raw query
  std::string error_;
};

// Fills `filter` from the ArgFilter's parameters: every field of
// format/arg_filter_fields.h, by ArgFilterFromParams (their names:
// ArgFilterParamNames); the first bad one goes to `p`.
void ParseArgFilterParams(Params& p, v1::ArgFilter* filter);

// What GET /v1/schema answers: {"filter": ArgFilterSchemaJson()}.
std::string SchemaBody();

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_PARAMS_H_
