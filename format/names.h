// The manifest's spellings of a record's vocabulary, one place for every
// reader and writer: UPPERCASE dtypes, "input"/"before_dispatch"/"tensor",
// "0x" + 16 hex digit task ids (parsed back strictly), scalar values as
// JSON tokens with round-trip precision, and the rule for capture names. The proto enums are the vocabulary;
// DataType (format/dtype.h) is the proto's DType - 1.
#ifndef ARGSDUMP_FORMAT_NAMES_H_
#define ARGSDUMP_FORMAT_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "google/protobuf/map.h"
#include "absl/strings/string_view.h"
#include "format/dtype.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

v1::DType ToProtoDType(DataType dtype);
// nullopt for DTYPE_UNSPECIFIED or a value this build does not know.
std::optional<DataType> FromProtoDType(int dtype);

std::string TaskIdHex(uint64_t task_id);  // "0x0000000200000a00"
// "0x..." or bare hex, 1 to 16 digits, any letter case; nullopt otherwise.
std::optional<uint64_t> ParseTaskIdHex(absl::string_view text);

const char* RoleName(v1::Role role);      // "input" / "output" / "inout"
const char* StageName(v1::Stage stage);   // "before_dispatch" / "after_completion"
const char* KindName(v1::Kind kind);      // "tensor" / "scalar"
std::string DTypeName(int dtype);         // "FLOAT32", or "UNKNOWN(n)"

// The short spellings listings and file names use: "before" / "after",
// and "in" / "out" / "inout" (task_<id>_<stage>_<role><n>.txt).
const char* StageShortName(v1::Stage stage);
const char* RoleShortName(v1::Role role);

// Inverses of the names above (exact spellings); nullopt for anything else.
std::optional<v1::Role> RoleFromName(absl::string_view name);
std::optional<v1::Stage> StageFromName(absl::string_view name);
std::optional<v1::Kind> KindFromName(absl::string_view name);

// A capture's name (a folder under a capture service's root, and the name
// clients open it by): OK for 1-128 characters of [A-Za-z0-9._-] other than
// "." and ".."; InvalidArgument saying why otherwise (a name must not leave
// the root). The service checks every name it is given; clients check theirs
// at startup, before they wait for a service.
absl::Status ValidateCaptureName(const std::string& name);

// A capture's labels, as a service accepts them from a client: at most
// kMaxCaptureLabels, keys of 1-128 and values of at most 4096 bytes, both
// UTF-8 without control characters. Every summary and page of ListCaptures
// carries them: an unbounded label would make every listing too large to
// send, and a newline would forge lines in logs and listings.
inline constexpr int kMaxCaptureLabels = 64;
absl::Status ValidateCaptureLabel(absl::string_view key, absl::string_view value);
absl::Status ValidateCaptureLabels(const google::protobuf::Map<std::string, std::string>& labels);

// A scalar's value as a JSON token: the shortest decimal that reads back to
// the same value for floats, integers for integer types, true/false, and the
// strings "NaN", "Infinity", "-Infinity" (JSON has no such numbers).
std::string FormatScalarJson(int dtype, uint64_t bits);

// Whether `text` is the JSON token of this scalar: FormatScalarJson's, or,
// for FLOAT16 and BFLOAT16, the float32 digits captures wrote before 16-bit
// floats printed in their own format's digits.
bool ScalarJsonMatches(int dtype, uint64_t bits, absl::string_view text);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_NAMES_H_
