#include "viewer/npy.h"

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "format/dtype.h"
#include "format/names.h"

namespace argsdump {
namespace {

constexpr char kMagic[] = "\x93NUMPY";  // six bytes

std::string ShapeTuple(const std::vector<uint64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

}  // namespace

uint64_t NpyArray::numel() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string NpyFileName(const ManifestEntry& e) {
  return absl::StrFormat(
      "task_%016x_%s_%s%d%s.npy", e.task_id, StageShortName(e.stage), RoleShortName(e.role),
      e.arg_index,
      NpyWidened(e.dtype) ? absl::StrCat(".", DataTypeName(e.dtype).data(), "_as_float32") : "");
}

absl::StatusOr<std::string> EncodeNpy(const ManifestEntry& e, absl::string_view payload) {
  if (!e.is_tensor()) {
    return absl::FailedPreconditionError("a scalar (its value is in the listing)");
  }
  if (e.overwritten) {
    return absl::FailedPreconditionError("overwritten before it was copied: bytes untrustworthy");
  }
  if (e.bin_size == 0) return absl::FailedPreconditionError("no payload was captured");
  const DataType dtype = e.dtype;
  uint64_t numel = 1;
  for (uint64_t d : e.shape) numel *= d;
  const uint64_t need = PayloadBytes(dtype, numel);
  if (e.truncated || payload.size() < need) {
    return absl::FailedPreconditionError(
        absl::StrCat("truncated: ", payload.size(), " of ", need, " bytes captured"));
  }
  std::string header =
      absl::StrCat("{'descr': '", std::string(NpyDescriptor(dtype)), "', 'fortran_order': False, 'shape': ",
                   ShapeTuple(e.shape), ", }");
  // Magic, version, length, header, spaces, '\n': a multiple of 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xFF));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  if (!NpyWidened(dtype)) {
    out.append(payload.data(), need);
    return out;
  }
  const size_t at = out.size();
  out.resize(at + numel * 4);
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  for (uint64_t i = 0; i < numel; ++i) {
    const float v = static_cast<float>(ElementAsDouble(dtype, p, i));
    std::memcpy(&out[at + i * 4], &v, 4);
  }
  return out;
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view file) {
  if (file.size() < 10 || file.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return absl::InvalidArgumentError("not an .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<uint8_t>(file[6]);
  uint64_t header_len = 0, at = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(file[8]) | static_cast<uint8_t>(file[9]) << 8;
    at = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return absl::InvalidArgumentError("header cut short");
    for (int i = 3; i >= 0; --i) header_len = header_len << 8 | static_cast<uint8_t>(file[8 + i]);
    at = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown .npy version ", major));
  }
  if (file.size() < at + header_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("header of ", header_len, " bytes, the file has ", file.size() - at));
  }
  absl::string_view h = file.substr(at, header_len);
  NpyArray a;
  a.data_offset = at + header_len;
  auto value_of = [&](absl::string_view key) -> absl::string_view {
    const std::string quoted = absl::StrCat("'", key, "':");
    const size_t k = h.find(quoted);
    if (k == absl::string_view::npos) return {};
    absl::string_view v = h.substr(k + quoted.size());
    return absl::StripLeadingAsciiWhitespace(v);
  };
  absl::string_view descr = value_of("descr");
  if (descr.size() < 2 || descr[0] != '\'' || descr.find('\'', 1) == absl::string_view::npos) {
    return absl::InvalidArgumentError("header: no 'descr' string");
  }
  a.descr = std::string(descr.substr(1, descr.find('\'', 1) - 1));
  absl::string_view fortran = value_of("fortran_order");
  if (absl::StartsWith(fortran, "True")) {
    a.fortran_order = true;
  } else if (!absl::StartsWith(fortran, "False")) {
    return absl::InvalidArgumentError("header: no 'fortran_order' True/False");
  }
  absl::string_view shape = value_of("shape");
  if (shape.empty() || shape[0] != '(' || shape.find(')') == absl::string_view::npos) {
    return absl::InvalidArgumentError("header: no 'shape' tuple");
  }
  for (absl::string_view d : absl::StrSplit(shape.substr(1, shape.find(')') - 1), ',')) {
    d = absl::StripAsciiWhitespace(d);
    if (d.empty()) continue;
    uint64_t v;
    if (!absl::SimpleAtoi(d, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("header: shape dimension '", d, "'"));
    }
    a.shape.push_back(v);
  }
  const std::string dtype = DtypeOfNpyDescr(a.descr);
  if (!dtype.empty()) {
    const uint64_t need = PayloadBytes(*DataTypeFromName(dtype), a.numel());
    if (file.size() - a.data_offset != need) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeTuple(a.shape), " of ",
                                                     a.descr, " needs ", need,
                                                     " data bytes, the file has ",
                                                     file.size() - a.data_offset));
    }
  }
  return a;
}

std::string DtypeOfNpyDescr(const std::string& descr) {
  // One-byte types are written '|' by NumPy, but '<' and '=' mean the same.
  std::string d = descr;
  // '=' is native order: little endian on every platform we build for.
  if (d.size() == 3 && d[2] == '1' && (d[0] == '<' || d[0] == '=')) d[0] = '|';
  if (!d.empty() && d[0] == '=') d[0] = '<';
  for (int i = 0; i < kDataTypeCount; ++i) {
    const auto t = static_cast<DataType>(i);
    if (!NpyWidened(t) && d == NpyDescriptor(t)) return std::string(DataTypeName(t));
  }
  return "";
}

}  // namespace argsdump
