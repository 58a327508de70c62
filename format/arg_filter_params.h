// The records' filter as text: each field of format/arg_filter_fields.h
// parsed from what a person types (dump_viewer's flags, HTTP query
// parameters), and described for a web form. Generated from the one table:
// a field there is a parameter here, with its name, kind, values and help.
#ifndef ARGSDUMP_FORMAT_ARG_FILTER_PARAMS_H_
#define ARGSDUMP_FORMAT_ARG_FILTER_PARAMS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "format/arg_filter.h"

namespace argsdump {

// Where the text comes from; each keeps the spellings its users know.
//   kCommandLine (dump_viewer): task ids in hex, 1 to 8 digits the task's
//     number in the run (the id's low word, run id 1); the manifest's names
//     (before, output, tensor, FLOAT32); --func a name, an id or -1 (not
//     known), names and types checked for length and UTF-8. Errors say
//     "expected <the table's words>".
//   kParams (HTTP): numbers as decimal digits only (a task id also 0x and
//     hex); the proto's names with or without their prefix, in any case
//     (STAGE_BEFORE_DISPATCH, before_dispatch); true/false/1/0; func= a
//     func id (digits) or else a kernel's name. Errors say "not ...".
enum class FilterDialect { kCommandLine, kParams };

struct ArgFilterFieldInfo {
  absl::string_view member;  // ArgFilter's member, v1::ArgFilter's field
  absl::string_view param;   // its parameter name
  FilterKind kind;
  absl::string_view help;
  // Sets the field of `f` from `text`. InvalidArgument saying what is wrong
  // with it ("expected a step (0, 1, ...)", "not true or false"), without
  // the field's name.
  absl::Status (*parse)(FilterDialect dialect, absl::string_view text, ArgFilter* f);
};

// The table's fields, in its order.
const std::vector<ArgFilterFieldInfo>& ArgFilterFields();

// A filter from HTTP-style parameters (kParams): `get(name)` is the
// parameter's one value, or nullopt when it was not given. InvalidArgument
// "<name>=<value>: <why>" for the first bad one, in table order.
using ParamGetter = std::function<std::optional<std::string>(absl::string_view name)>;
absl::StatusOr<ArgFilter> ArgFilterFromParams(const ParamGetter& get);

// The parameters ArgFilterFromParams reads, in table order.
std::vector<std::string> ArgFilterParamNames();

// A JSON array a web page builds its filter form from: one object per
// parameter, {"name", "kind": "text"|"number"|"enum"|"bool"|"flag",
// "values" (enum: the names it takes; others: []), "help"}. A bool is
// true or false when given; a flag only ever true (given or not).
std::string ArgFilterSchemaJson();

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_ARG_FILTER_PARAMS_H_
