#include "viewer/text_export.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "format/dtype.h"
#include "format/names.h"

namespace argsdump {
namespace {

template <typename F>
std::string Shortest(F v, int max_digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  // Whole numbers print as integers (100, not 1e+02) while exact.
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", static_cast<double>(v));
    return std::signbit(v) && v == 0 ? "-0" : buf;
  }
  for (int digits = 1; digits <= max_digits; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(v));
    if (static_cast<F>(std::strtod(buf, nullptr)) == v) break;
  }
  return buf;
}

template <typename T>
T Load(const unsigned char* p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

std::string TextFileName(const ManifestEntry& e) {
  const char* role = e.role == "input" ? "in" : e.role == "output" ? "out" : "inout";
  return absl::StrFormat("task_%016x_%s_%s%d.txt", e.task_id,
                         e.stage == "before_dispatch" ? "before" : "after", role, e.arg_index);
}

std::string FormatElement(const std::string& dtype_name, const unsigned char* p, uint64_t i) {
  const auto dtype = DataTypeFromName(dtype_name);
  if (!dtype) return "?";
  switch (*dtype) {
    case DataType::kInt8: return absl::StrCat(Load<int8_t>(p, i));
    case DataType::kInt16: return absl::StrCat(Load<int16_t>(p, i));
    case DataType::kInt32: return absl::StrCat(Load<int32_t>(p, i));
    case DataType::kInt64: return absl::StrCat(Load<int64_t>(p, i));
    case DataType::kUint8: return absl::StrCat(Load<uint8_t>(p, i));
    case DataType::kUint16: return absl::StrCat(Load<uint16_t>(p, i));
    case DataType::kUint32: return absl::StrCat(Load<uint32_t>(p, i));
    case DataType::kUint64: return absl::StrCat(Load<uint64_t>(p, i));
    case DataType::kBool: return Load<uint8_t>(p, i) ? "true" : "false";
    case DataType::kFloat64: return Shortest(Load<double>(p, i), 17);
    default:  // every narrower float widens exactly to float
      return Shortest(static_cast<float>(ElementAsDouble(*dtype, p, i)), 9);
  }
}

std::string FormatArgText(const ManifestEntry& e, absl::string_view payload) {
  std::string out;
  auto line = [&](const std::string& key, const std::string& value) {
    absl::StrAppend(&out, "# ", key, ": ", value, "\n");
  };
  line("task_id", TaskIdHex(e.task_id));
  if (e.step != 0) line("step", absl::StrCat(e.step));
  if (e.overflow) {
    line("overflow", "true (captured by the overflow check: the task's output held a NaN or an "
                     "Inf; inputs are as they were at completion)");
  }
  line("role", e.role);
  line("stage", e.stage);
  line("arg_index", absl::StrCat(e.arg_index));
  line("dtype", e.dtype);
  line("kind", e.kind);
  line("is_contiguous", e.is_contiguous ? "true" : "false");
  line("shape", absl::StrCat("[", absl::StrJoin(e.shape, ", "), "]"));
  line("strides", absl::StrCat("[", absl::StrJoin(e.strides, ", "), "]"));
  line("start_offset", absl::StrCat(e.start_offset));
  if (e.arg_index_ambiguous) line("arg_index_ambiguous", "true");
  if (e.in_flight_snapshot) line("in_flight_snapshot", "true (the task was still running)");
  if (e.kind == "scalar") {
    line("value", e.value);
    return out;
  }
  const auto dtype = DataTypeFromName(e.dtype);
  if (!dtype) {
    line("note", absl::StrCat("unknown dtype ", e.dtype, ": values not decoded"));
    return out;
  }
  uint64_t numel = 1;
  for (uint64_t d : e.shape) numel *= d;
  // Whole elements present in the payload.
  const uint64_t present = std::min<uint64_t>(
      numel, payload.size() * 8 / std::max<uint32_t>(1, ElementBits(*dtype)));
  if (e.overwritten) {
    line("note", "overwritten: the device reused the arena before the host copied it; "
                 "the values below are not trustworthy");
  }
  if (payload.empty()) {
    line("note", "no data: only metadata was captured for this arg");
    return out;
  }
  if (e.truncated || present < numel) {
    line("note", absl::StrCat("truncated: ", payload.size(), " bytes captured, elements 0..",
                              present == 0 ? 0 : present - 1, " of ", numel));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(payload.data());
  std::vector<std::string> values(present);
  size_t width = 1;
  for (uint64_t i = 0; i < present; ++i) {
    values[i] = FormatElement(e.dtype, p, i);
    width = std::max(width, values[i].size());
  }
  const uint64_t row = e.shape.empty() ? 1 : std::max<uint64_t>(1, e.shape.back());
  out += "# Overview:\n";
  for (uint64_t i = 0; i < present; ++i) {
    absl::StrAppend(&out, std::string(width - values[i].size(), ' '), values[i]);
    out += (i + 1) % row == 0 || i + 1 == present ? "\n" : "  ";
  }
  out += "# Detail:\n";
  std::vector<uint64_t> index(e.shape.size(), 0);
  for (uint64_t i = 0; i < present; ++i) {
    absl::StrAppend(&out, "[", absl::StrJoin(index, ", "), "] ", values[i], "\n");
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < e.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

ElementStats ComputeStats(const ManifestEntry& e, absl::string_view payload) {
  const auto dtype = DataTypeFromName(e.dtype);
  if (!dtype || e.kind != "tensor") return ElementStats();
  uint64_t numel = 1;
  for (uint64_t d : e.shape) numel *= d;
  const uint64_t present = std::min<uint64_t>(
      numel, payload.size() * 8 / std::max<uint32_t>(1, ElementBits(*dtype)));
  return ComputeElementStats(*dtype, reinterpret_cast<const uint8_t*>(payload.data()), present);
}

}  // namespace argsdump
