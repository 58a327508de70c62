// The fields of the records' filter (v1::ArgFilter), described once. The
// filter's members, its proto conversion both ways, its predicate, its
// description, dump_viewer's filter flags, the HTTP-style parameters and
// the schema a web form is built from are all generated from this list: a
// field added here and not handled by one of them does not build.
//
// X(member, kind, subject, test, param, viewer, flag, label, expected, help):
//   member    ArgFilter's member and v1::ArgFilter's field (the same name)
//   kind      FilterKind: the member's type, how its text parses, how the
//             proto holds it and how a description prints it
//   subject   the manifest field (ManifestField::k<subject>) the test
//             looks at last: the record's value is known once that field
//             is read, so a reader may drop a record there. Records give it
//             through a method of that name (ManifestRowView::TaskId()).
//             has_nonfinite reads the nonfinite flag and the stats: Stats.
//   test      FilterTest: how the record's value passes
//   param     its name among HTTP-style parameters (and in the schema)
//   viewer    Flag: dump_viewer has flag --<flag> for it; NoFlag: none
//             (func_id and func_unknown: --func takes an id and -1)
//   label     how Describe() names it ("task 0x..."); kBool: "yes|no"
//   expected  what a bad value is told it should be
//   help      what it selects (dump_viewer --help, the schema)
//
// A new field: its v1::ArgFilter field, a line here, a test.
#ifndef ARGSDUMP_FORMAT_ARG_FILTER_FIELDS_H_
#define ARGSDUMP_FORMAT_ARG_FILTER_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "format/manifest_fields.h"

namespace argsdump {

#define ARGSDUMP_ARG_FILTER_FIELDS(X)                                                          \
  X(task_id, kTaskId, TaskId, kEqual, "task_id", Flag, task, "task",                           \
    "a hex task id such as 0x0000000100000003 or 100000003", "the task id")                    \
  X(step, kUint32, Step, kEqual, "step", Flag, step, "step", "a step (0, 1, ...)",            \
    "the step (0, 1, ...)")                                                                    \
  X(stage, kStage, Stage, kEqual, "stage", Flag, stage, "stage", "before or after",            \
    "before (before_dispatch) or after (after_completion)")                                    \
  X(role, kRole, Role, kEqual, "role", Flag, role, "role", "input, output or inout",           \
    "input, output or inout")                                                                  \
  X(kind, kKind, Kind, kEqual, "kind", Flag, kind, "kind", "tensor or scalar",                 \
    "tensor or scalar")                                                                        \
  X(arg_index, kUint32, ArgIndex, kEqual, "arg_index", Flag, arg, "arg",                       \
    "an arg index (0, 1, ...)", "the arg index (0, 1, ...)")                                   \
  X(func_id, kUint32, FuncId, kHasFuncId, "func_id", NoFlag, func_id, "func",                  \
    "a func id (0, 1, ...)", "the task's kernel by its func id")                               \
  X(func_unknown, kFlag, FuncId, kNoFuncId, "func_unknown", NoFlag, func_unknown,              \
    "func unknown", "true or false", "only args whose kernel is not known")                   \
  X(func_name, kFuncRef, FuncId, kNamedFunc, "func", Flag, func, "func",                       \
    "a kernel name, or a func id (0, 1, ..., or -1 for args whose kernel is not known)",       \
    "the task's kernel: its name in the capture's kernel table (exact), or its func id")      \
  X(func_type, kText, FuncId, kNamedFunc, "func_type", Flag, func_type, "func type",           \
    "a kernel type", "the type of the task's kernel in the capture's kernel table "            \
    "(elementwise, matmul, ...)")                                                              \
  X(dtype, kDType, Dtype, kEqual, "dtype", Flag, dtype, "dtype",                               \
    "a dtype such as FLOAT32, BFLOAT16 or INT8",                                               \
    "the element type, as the listing spells it (FLOAT32, INT8, ...)")                         \
  X(overflow, kBool, Overflow, kEqual, "overflow", Flag, overflow, "overflow|not overflow",     \
    "true or false", "only the records the overflow check captured")                          \
  X(has_nonfinite, kBool, Stats, kEqual, "has_nonfinite", Flag, nonfinite,                     \
    "non-finite|finite", "true or false",                                                      \
    "only records whose captured elements hold a NaN or an Inf (every payload is looked "      \
    "at when captured; stats not needed)")

// What a field holds, and so its member's type, its text and its proto.
enum class FilterKind {
  kTaskId,   // a task id; text: hex (the viewer: 1-8 digits the low word) or decimal
  kUint32,   // a number
  kUint64,   // a number
  kStage,    // a v1::Stage (0: any)
  kRole,     // a v1::Role (0: any)
  kKind,     // a v1::Kind (0: any)
  kDType,    // a v1::DType (0: any)
  kBool,     // selects the records where it is true, or those where false
  kFlag,     // set or not (false: any)
  kText,     // text (a kernel type)
  kFuncRef,  // a kernel name; its text may also be a func id or -1
};

// How the record's value passes a set field.
enum class FilterTest {
  kEqual,      // value == field
  kAtMost,     // value <= field
  kAtLeast,    // value >= field
  kHasFuncId,  // the record's func ids hold the field
  kNoFuncId,   // the record has no func id
  kNamedFunc,  // the record's func ids hold one of ArgFilter::func_named
};

// Per kind: the member's type, and whether the proto field is `optional`
// (has_x()) or a plain one whose zero value means "any".
template <FilterKind K>
struct FilterKindTraits;
#define ARGSDUMP_FILTER_KIND(kind, member_type, optional_in_proto)        \
  template <>                                                             \
  struct FilterKindTraits<FilterKind::kind> {                             \
    using Member = member_type;                                           \
    static constexpr bool kProtoOptional = optional_in_proto;             \
  };
ARGSDUMP_FILTER_KIND(kTaskId, std::optional<uint64_t>, true)
ARGSDUMP_FILTER_KIND(kUint32, std::optional<uint32_t>, true)
ARGSDUMP_FILTER_KIND(kUint64, std::optional<uint64_t>, true)
ARGSDUMP_FILTER_KIND(kStage, int, false)
ARGSDUMP_FILTER_KIND(kRole, int, false)
ARGSDUMP_FILTER_KIND(kKind, int, false)
ARGSDUMP_FILTER_KIND(kDType, int, false)
ARGSDUMP_FILTER_KIND(kBool, std::optional<bool>, true)
ARGSDUMP_FILTER_KIND(kFlag, bool, false)
ARGSDUMP_FILTER_KIND(kText, std::optional<std::string>, true)
ARGSDUMP_FILTER_KIND(kFuncRef, std::optional<std::string>, true)
#undef ARGSDUMP_FILTER_KIND

// Every member, in table order, for code that walks the fields at run time.
enum class ArgFilterField : int {
#define ARGSDUMP_FILTER_FIELD_ENUM(member, ...) k_##member,
  ARGSDUMP_ARG_FILTER_FIELDS(ARGSDUMP_FILTER_FIELD_ENUM)
#undef ARGSDUMP_FILTER_FIELD_ENUM
  kCount,
};
inline constexpr size_t kArgFilterFieldCount = static_cast<size_t>(ArgFilterField::kCount);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_ARG_FILTER_FIELDS_H_
