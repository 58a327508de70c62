#include "format/names.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace argsdump {
namespace {

// The device enum is DType - 1 (static_asserts below keep them in step).
static_assert(v1::DTYPE_FLOAT32 == static_cast<int>(DataType::kFloat32) + 1, "");
static_assert(v1::DTYPE_FP4E2M1 == static_cast<int>(DataType::kFp4E2M1) + 1, "");
static_assert(v1::DTYPE_FLOAT64 == static_cast<int>(DataType::kFloat64) + 1, "");
static_assert(v1::DType_MAX == kDataTypeCount, "a dtype is missing on one side");

template <typename F>
std::string ShortestRoundTrip(F value, int max_digits) {
  char buf[64];
  for (int digits = 1; digits <= max_digits; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(value));
    F back = static_cast<F>(std::strtod(buf, nullptr));
    if (back == value) break;
  }
  return buf;
}


// The shortest "%.*g" text of a 16-bit float (FLOAT16, BFLOAT16) that
// reads back as the same value of its format: nearer to it than to either
// neighbour (the format's next values toward zero and away from it), so
// 0.1 in FLOAT16 prints "0.1", not float32's "0.099975586".
std::string ShortestRoundTrip16(DataType dtype, uint16_t bits, int max_digits) {
  auto decode = [dtype](uint16_t b) {
    return static_cast<double>(dtype == DataType::kFloat16 ? HalfToFloat(b) : Bfloat16ToFloat(b));
  };
  const double v = decode(bits);
  const uint16_t magnitude = bits & 0x7FFF;
  if (magnitude == 0) return std::signbit(v) ? "-0" : "0";
  const double toward = decode(static_cast<uint16_t>(bits - 1));
  double away = decode(static_cast<uint16_t>(bits + 1));
  if (!std::isfinite(away)) away = v + (v - toward);  // the largest finite value
  const double room = std::min(std::fabs(v - toward), std::fabs(away - v)) / 2;
  char buf[64];
  for (int digits = 1; digits <= max_digits; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::fabs(std::strtod(buf, nullptr) - v) < room) break;
  }
  return buf;
}

std::string FloatJson(double v, std::string finite) {
  if (std::isnan(v)) return "\"NaN\"";
  if (std::isinf(v)) return v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  return finite;
}

}  // namespace

v1::DType ToProtoDType(DataType dtype) {
  return static_cast<v1::DType>(static_cast<int>(dtype) + 1);
}

std::optional<DataType> FromProtoDType(int dtype) {
  if (dtype < 1 || dtype > kDataTypeCount) return std::nullopt;
  return static_cast<DataType>(dtype - 1);
}

std::string TaskIdHex(uint64_t task_id) {
  return absl::StrCat("0x", absl::Hex(task_id, absl::kZeroPad16));
}

std::optional<uint64_t> ParseTaskIdHex(absl::string_view text) {
  if (absl::StartsWith(text, "0x") || absl::StartsWith(text, "0X")) text.remove_prefix(2);
  uint64_t v = 0;
  if (text.empty() || text.size() > 16 || !absl::SimpleHexAtoi(text, &v)) return std::nullopt;
  // SimpleHexAtoi accepts a sign and surrounding spaces: a task id has none.
  for (char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return v;
}

std::optional<v1::Role> RoleFromName(absl::string_view name) {
  for (v1::Role r : {v1::ROLE_INPUT, v1::ROLE_OUTPUT, v1::ROLE_INOUT}) {
    if (name == RoleName(r)) return r;
  }
  return std::nullopt;
}

std::optional<v1::Stage> StageFromName(absl::string_view name) {
  for (v1::Stage s : {v1::STAGE_BEFORE_DISPATCH, v1::STAGE_AFTER_COMPLETION}) {
    if (name == StageName(s)) return s;
  }
  return std::nullopt;
}

std::optional<v1::Kind> KindFromName(absl::string_view name) {
  for (v1::Kind k : {v1::KIND_TENSOR, v1::KIND_SCALAR}) {
    if (name == KindName(k)) return k;
  }
  return std::nullopt;
}

const char* RoleName(v1::Role role) {
  switch (role) {
    case v1::ROLE_INPUT: return "input";
    case v1::ROLE_OUTPUT: return "output";
    case v1::ROLE_INOUT: return "inout";
    default: return "unspecified";
  }
}

const char* StageName(v1::Stage stage) {
  switch (stage) {
    case v1::STAGE_BEFORE_DISPATCH: return "before_dispatch";
    case v1::STAGE_AFTER_COMPLETION: return "after_completion";
    default: return "unspecified";
  }
}

const char* StageShortName(v1::Stage stage) {
  switch (stage) {
    case v1::STAGE_BEFORE_DISPATCH: return "before";
    case v1::STAGE_AFTER_COMPLETION: return "after";
    default: return "unspecified";
  }
}

const char* RoleShortName(v1::Role role) {
  switch (role) {
    case v1::ROLE_INPUT: return "in";
    case v1::ROLE_OUTPUT: return "out";
    case v1::ROLE_INOUT: return "inout";
    default: return "unspecified";
  }
}

const char* KindName(v1::Kind kind) {
  switch (kind) {
    case v1::KIND_TENSOR: return "tensor";
    case v1::KIND_SCALAR: return "scalar";
    default: return "unspecified";
  }
}

std::string DTypeName(int dtype) {
  if (auto d = FromProtoDType(dtype)) return std::string(DataTypeName(*d));
  return absl::StrCat("UNKNOWN(", dtype, ")");
}

std::string FormatScalarJson(int dtype, uint64_t bits) {
  const std::optional<DataType> d = FromProtoDType(dtype);
  if (!d) return absl::StrCat(bits);
  // The scalar's value is in the low bytes of `bits` (little endian).
  unsigned char bytes[8];
  std::memcpy(bytes, &bits, 8);
  switch (KindOf(*d)) {
    case ElementKind::kFloat: {
      const int digits = ScalarJsonDigits(*d);
      if (digits == 0) return absl::StrCat(bits);  // no scalar of these: the raw bits
      const double v = ElementAsDouble(*d, bytes, 0);
      if (*d == DataType::kFloat16 || *d == DataType::kBfloat16) {
        uint16_t b16;
        std::memcpy(&b16, bytes, 2);
        return FloatJson(v, ShortestRoundTrip16(*d, b16, digits));
      }
      if (ElementBits(*d) <= 32) {
        const float f = static_cast<float>(v);
        return FloatJson(f, ShortestRoundTrip(f, digits));
      }
      return FloatJson(v, ShortestRoundTrip(v, digits));
    }
    case ElementKind::kSigned: return absl::StrCat(ElementAsInt64(*d, bytes, 0));
    case ElementKind::kUnsigned: return absl::StrCat(ElementAsUint64(*d, bytes, 0));
    case ElementKind::kBool: return bytes[0] != 0 ? "true" : "false";
  }
  return absl::StrCat(bits);
}



bool ScalarJsonMatches(int dtype, uint64_t bits, absl::string_view text) {
  if (text == FormatScalarJson(dtype, bits)) return true;
  const std::optional<DataType> d = FromProtoDType(dtype);
  if (!d || (*d != DataType::kFloat16 && *d != DataType::kBfloat16)) return false;
  unsigned char bytes[8];
  std::memcpy(bytes, &bits, 8);
  const float value = static_cast<float>(ElementAsDouble(*d, bytes, 0));
  return std::isfinite(value) && text == ShortestRoundTrip(value, 9);
}

namespace {

// Why `text` cannot be a label's key or value ("" when it can).
std::string LabelTextProblem(absl::string_view text) {
  if (!IsValidUtf8(text)) return "is not UTF-8";
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return absl::StrCat("holds control character ", static_cast<int>(c));
  }
  return "";
}

}  // namespace

absl::Status ValidateCaptureLabel(absl::string_view key, absl::string_view value) {
  if (key.empty() || key.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("a label key must be 1-128 bytes, got ", key.size()));
  }
  if (std::string why = LabelTextProblem(key); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("label key '", absl::CHexEscape(key), "' ", why));
  }
  if (value.size() > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("label '", key, "': a value is at most 4096 bytes, got ", value.size()));
  }
  if (std::string why = LabelTextProblem(value); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("label '", key, "': its value ", why));
  }
  return absl::OkStatus();
}

absl::Status ValidateCaptureLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.size() > static_cast<size_t>(kMaxCaptureLabels)) {
    return absl::InvalidArgumentError(absl::StrCat("a capture has at most ", kMaxCaptureLabels,
                                                   " labels, got ", labels.size()));
  }
  // Map order is unspecified: report the smallest offending key, so that
  // the same labels always get the same message.
  std::vector<const std::string*> keys;
  for (const auto& [key, value] : labels) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
  for (const std::string* key : keys) {
    if (absl::Status s = ValidateCaptureLabel(*key, labels.at(*key)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateCaptureName(const std::string& name) {
  if (name.empty() || name.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture name must be 1-128 characters, got ", name.size()));
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("capture name '", name, "' is not allowed"));
  }
  for (unsigned char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "capture name may only hold [A-Za-z0-9._-]; character ", static_cast<int>(c),
          " is not allowed (names are folders under the server's root)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace argsdump
