#include "viewer/text_export.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "format/dtype.h"
#include "format/names.h"

namespace argsdump {
namespace {

// ---- elements -------------------------------------------------------------

// Python's format(v, ".<digits>g"): C's %g, except that a NaN is "nan"
// whatever its sign bit (glibc prints "-nan").
void AppendG(double v, int digits, std::string* out) {
  if (std::isnan(v)) {
    out->append("nan");
    return;
  }
  char buf[40];
  const int n = std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  out->append(buf, static_cast<size_t>(n));
}

// How a dtype's elements print, resolved once per entry from the dtype
// table (format/dtype.h): floats %.<TextDigits>g, integers in decimal,
// bool True/False.
struct ElementFormat {
  DataType dtype;
  ElementKind kind;
  int digits;
  uint32_t bits;  // per element

  // Element `i` of a densely packed payload.
  void Append(const unsigned char* p, uint64_t i, std::string* out) const {
    char buf[absl::numbers_internal::kFastToBufferSize];
    switch (kind) {
      case ElementKind::kFloat:
        AppendG(ElementAsDouble(dtype, p, i), digits, out);
        return;
      case ElementKind::kSigned: {
        const char* end = absl::numbers_internal::FastIntToBuffer(ElementAsInt64(dtype, p, i), buf);
        out->append(buf, static_cast<size_t>(end - buf));
        return;
      }
      case ElementKind::kUnsigned: {
        const char* end = absl::numbers_internal::FastIntToBuffer(ElementAsUint64(dtype, p, i), buf);
        out->append(buf, static_cast<size_t>(end - buf));
        return;
      }
      case ElementKind::kBool:
        out->append(p[i] != 0 ? "True" : "False");
        return;
    }
  }
};

ElementFormat FormatOf(DataType dtype) {
  return {dtype, KindOf(dtype), TextDigits(dtype), ElementBits(dtype)};
}

// ---- scalar values: what Python's str() makes of the JSON value -------------

// repr(float): the shortest digits that read back to `v`, in fixed
// notation when the decimal point falls within 16 digits of them ("100.0",
// "0.0001"), else "1e+16", "1.5e-05"; "nan", "inf", "-inf".
std::string PythonFloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  absl::string_view sci(buf, static_cast<size_t>(r.ptr - buf));  // "-1.5e-05"
  std::string sign;
  if (absl::ConsumePrefix(&sci, "-")) sign = "-";
  const size_t e = sci.find('e');
  std::string digits(sci.substr(0, e));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = 0;
  (void)absl::SimpleAtoi(sci.substr(e + 1), &exponent);
  const int point = exponent + 1;  // digits are 0.<digits> x 10^point
  const int n = static_cast<int>(digits.size());
  if (point <= -4 || point > 16) {
    std::string mantissa = digits.substr(0, 1);
    if (n > 1) absl::StrAppend(&mantissa, ".", digits.substr(1));
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return absl::StrCat(sign, mantissa, exp);
  }
  if (point <= 0) return absl::StrCat(sign, "0.", std::string(-point, '0'), digits);
  if (point >= n) return absl::StrCat(sign, digits, std::string(point - n, '0'), ".0");
  return absl::StrCat(sign, digits.substr(0, point), ".", digits.substr(point));
}

// str(int(token)): JSON integers have no leading zeros; "-0" is 0.
std::string PythonInt(absl::string_view token) {
  const bool negative = absl::ConsumePrefix(&token, "-");
  while (token.size() > 1 && token.front() == '0') token.remove_prefix(1);
  if (token == "0") return "0";
  return absl::StrCat(negative ? "-" : "", token);
}

// The reference writes `# value: {arg.get("value")}` after json.load, and
// for a BOOL scalar "true"/"false" by the value's truthiness. Our reader
// keeps the JSON token (a string with its quotes).
std::string ScalarValueText(const ManifestEntry& e) {
  const absl::string_view t = e.value;
  const bool is_string = t.size() >= 2 && t.front() == '"' && t.back() == '"';
  const bool is_float = !is_string && (absl::StrContains(t, '.') || absl::StrContains(t, 'e') ||
                                       absl::StrContains(t, 'E') || absl::StrContains(t, "NaN") ||
                                       absl::StrContains(t, "Infinity"));
  const auto as_double = [&] {
    if (t == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (t == "Infinity" || t == "-Infinity") {
      return t[0] == '-' ? -std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::infinity();
    }
    return std::strtod(std::string(t).c_str(), nullptr);
  };
  if (e.dtype == DataType::kBool) {
    bool truthy;
    if (!e.has_value || t == "null" || t == "false") {
      truthy = false;
    } else if (t == "true") {
      truthy = true;
    } else if (is_string) {
      truthy = t.size() > 2;
    } else {
      truthy = is_float ? as_double() != 0 : PythonInt(t) != "0";
    }
    return truthy ? "true" : "false";
  }
  if (!e.has_value || t == "null") return "None";
  if (t == "true") return "True";
  if (t == "false") return "False";
  if (is_string) return std::string(t.substr(1, t.size() - 2));
  return is_float ? PythonFloatRepr(as_double()) : PythonInt(t);
}

// ---- the file ---------------------------------------------------------------

std::string PythonList(const std::vector<uint64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

void HeaderLine(absl::string_view key, absl::string_view value, std::string* out) {
  absl::StrAppend(out, "# ", key, ": ", value, "\n");
}

std::string TaskIdText(const ManifestEntry& e) {
  return e.task_id_text.empty() ? TaskIdHex(e.task_id) : e.task_id_text;
}

// The overview and detail blocks for `present` elements.
void AppendValues(const ManifestEntry& e, const unsigned char* p, uint64_t present,
                  ElementFormat format, std::string* out) {
  // Every element's text once, back to back; a length each (a float's %g
  // text is at most 24 characters, a hex byte 4, an integer 20).
  std::string texts;
  std::vector<uint8_t> lengths(present);
  size_t width = 0;
  for (uint64_t i = 0; i < present; ++i) {
    const size_t before = texts.size();
    format.Append(p, i, &texts);
    lengths[i] = static_cast<uint8_t>(texts.size() - before);
    width = std::max<size_t>(width, lengths[i]);
  }
  uint64_t row = e.shape.empty() ? present : e.shape.back();
  if (row == 0) row = present;
  out->reserve(out->size() + 32 + present * (2 * width + 8 + 4 * e.shape.size()));
  out->append("\n# Overview:\n");
  size_t at = 0;
  for (uint64_t i = 0; i < present; ++i) {
    if (i > 0) out->push_back(i % row == 0 ? '\n' : ' ');
    out->append(width - lengths[i], ' ');
    out->append(texts, at, lengths[i]);
    at += lengths[i];
  }
  out->append("\n\n# Detail:\n");
  // Row-major indices; with a 0 in the shape only element 0 is shown
  // (the count above), at index 0 in every dimension.
  std::vector<uint64_t> index(e.shape.size(), 0);
  char number[absl::numbers_internal::kFastToBufferSize];
  at = 0;
  for (uint64_t i = 0; i < present; ++i) {
    out->push_back('[');
    for (size_t d = 0; d < index.size(); ++d) {
      if (d > 0) out->append(", ");
      const char* end = absl::numbers_internal::FastIntToBuffer(index[d], number);
      out->append(number, static_cast<size_t>(end - number));
    }
    out->append("] ");
    out->append(texts, at, lengths[i]);
    out->push_back('\n');
    at += lengths[i];
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < e.shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

std::string TextFileName(const ManifestEntry& e) {
  return absl::StrCat("task_", TaskIdText(e), "_", StageShortName(e.stage), "_",
                      RoleShortName(e.role), e.arg_index, ".txt");
}

std::string FormatArgText(const ManifestEntry& e, absl::string_view payload) {
  std::string out;
  HeaderLine("task_id", TaskIdText(e), &out);
  HeaderLine("role", RoleName(e.role), &out);
  HeaderLine("stage", StageName(e.stage), &out);
  HeaderLine("arg_index", absl::StrCat(e.arg_index), &out);
  HeaderLine("dtype", DataTypeName(e.dtype).data(), &out);
  HeaderLine("kind", KindName(e.kind), &out);
  HeaderLine("is_contiguous", e.is_contiguous ? "True" : "False", &out);
  HeaderLine("shape", PythonList(e.shape), &out);
  HeaderLine("strides", PythonList(e.strides), &out);
  HeaderLine("start_offset", absl::StrCat(e.start_offset), &out);
  // Facts the reference has no record for (so no golden of it breaks).
  if (e.step != 0) HeaderLine("step", absl::StrCat(e.step), &out);
  if (e.overflow) {
    HeaderLine("overflow", "True (captured by the overflow check: the task's output held a NaN "
                           "or an Inf; inputs are as they were at completion)",
               &out);
  }
  if (e.overwritten) {
    out.append("# DATA OVERWRITTEN (host too slow)\n");
    return out;
  }
  if (e.truncated) out.append("# DATA TRUNCATED (tensor too large for arena)\n");
  if (e.is_scalar()) {
    HeaderLine("value", ScalarValueText(e), &out);
    return out;
  }
  if (e.bin_size == 0) {
    out.append("# (no data)\n");
    return out;
  }
  const ElementFormat format = FormatOf(e.dtype);
  uint64_t numel = 1;
  for (uint64_t d : e.shape) {
    numel = d != 0 && numel > std::numeric_limits<uint64_t>::max() / d
                ? std::numeric_limits<uint64_t>::max()
                : numel * d;
  }
  if (numel == 0) numel = 1;  // the reference's rule: shows element 0
  const uint64_t present = std::min<uint64_t>(numel, payload.size() * 8 / format.bits);
  AppendValues(e, reinterpret_cast<const unsigned char*>(payload.data()), present, format, &out);
  return out;
}

ElementStats ComputeStats(const ManifestEntry& e, absl::string_view payload) {
  if (!e.is_tensor()) return ElementStats();
  uint64_t numel = 1;
  for (uint64_t d : e.shape) numel *= d;
  const uint64_t present = std::min<uint64_t>(
      numel, payload.size() * 8 / std::max<uint32_t>(1, ElementBits(e.dtype)));
  return ComputeElementStats(e.dtype, reinterpret_cast<const uint8_t*>(payload.data()), present);
}

}  // namespace argsdump
