#include "format/kernel_table.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/utf8.h"
#include "format/names.h"

namespace argsdump {
namespace {

// Empty when `text` is a name or type the table may hold: UTF-8, no
// control characters, at most `max` bytes; else what is wrong.
std::string BadText(absl::string_view text, size_t max) {
  if (text.size() > max) return absl::StrCat(text.size(), " bytes, at most ", max);
  if (!IsValidUtf8(text)) return "not UTF-8";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) return absl::StrCat("a control character (", int{u}, ")");
  }
  return "";
}

constexpr char kUnknownKernelPayload[] = "argsdump/unknown-kernel";

absl::Status UnknownKernel(std::string message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kUnknownKernelPayload, absl::Cord("1"));
  return s;
}

// At most this many names in a message; the rest are counted.
constexpr size_t kNamesInMessage = 40;

std::string Known(std::vector<std::string> names) {
  if (names.empty()) return "none";
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const size_t more = names.size() > kNamesInMessage ? names.size() - kNamesInMessage : 0;
  names.resize(names.size() - more);
  std::string out = absl::StrJoin(names, ", ");
  if (more > 0) absl::StrAppend(&out, ", and ", more, " more");
  return out;
}

}  // namespace

absl::Status CheckKernelTable(const KernelTable& table) {
  if (table.size() > kMaxKernels) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernels: ", table.size(), " kernels, at most ", kMaxKernels));
  }
  absl::flat_hash_set<uint32_t> ids;
  absl::flat_hash_set<std::string> names;
  size_t bytes = 0;
  for (int i = 0; i < table.size(); ++i) {
    const v1::Kernel& k = table.Get(i);
    auto bad = [&](absl::string_view field, absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("kernels[", i, "].", field, ": ", why));
    };
    if (k.func_id() > kMaxKernelFuncId) {
      return bad("func_id", absl::StrCat(k.func_id(), ", at most ", kMaxKernelFuncId));
    }
    if (!ids.insert(k.func_id()).second) {
      return bad("func_id", absl::StrCat(k.func_id(), " is given twice"));
    }
    if (k.name().empty()) return bad("name", "empty");
    if (std::string why = BadText(k.name(), kMaxKernelNameBytes); !why.empty()) {
      return bad("name", why);
    }
    if (!names.insert(k.name()).second) {
      return bad("name", absl::StrCat("\"", k.name(), "\" is given twice"));
    }
    if (std::string why = BadText(k.type(), kMaxKernelTypeBytes); !why.empty()) {
      return bad("type", why);
    }
    if (k.signature_size() > kMaxKernelSignature) {
      return bad("signature", absl::StrCat(k.signature_size(), " entries, at most ",
                                           kMaxKernelSignature));
    }
    bool seen_scalar = false;
    for (int a = 0; a < k.signature_size(); ++a) {
      const v1::KernelArg& arg = k.signature(a);
      const std::string where = absl::StrCat("signature[", a, "]");
      if (arg.direction() == v1::ARG_DIRECTION_UNSPECIFIED ||
          !v1::ArgDirection_IsValid(arg.direction())) {
        return bad(where, absl::StrCat("direction ", static_cast<int>(arg.direction())));
      }
      if (arg.dtype() != v1::DTYPE_UNSPECIFIED && !FromProtoDType(arg.dtype())) {
        return bad(where, absl::StrCat("dtype ", static_cast<int>(arg.dtype())));
      }
      if (arg.direction() == v1::ARG_DIRECTION_SCALAR) {
        seen_scalar = true;
      } else if (seen_scalar) {
        return bad(where, "a tensor entry after a scalar entry");
      }
    }
    bytes += k.ByteSizeLong();
    if (bytes > kMaxKernelTableBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernels: more than ", kMaxKernelTableBytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

const v1::Kernel* FindKernel(const KernelTable& table, uint32_t func_id) {
  // Tables are in func_id order (the registry's): try the slot first.
  if (func_id < static_cast<uint32_t>(table.size()) && table.Get(func_id).func_id() == func_id) {
    return &table.Get(func_id);
  }
  for (const v1::Kernel& k : table) {
    if (k.func_id() == func_id) return &k;
  }
  return nullptr;
}

const char* ArgDirectionName(v1::ArgDirection direction) {
  switch (direction) {
    case v1::ARG_DIRECTION_IN: return "in";
    case v1::ARG_DIRECTION_OUT: return "out";
    case v1::ARG_DIRECTION_INOUT: return "inout";
    case v1::ARG_DIRECTION_SCALAR: return "scalar";
    default: return "";
  }
}

std::optional<v1::ArgDirection> ArgDirectionFromName(absl::string_view name) {
  for (v1::ArgDirection d : {v1::ARG_DIRECTION_IN, v1::ARG_DIRECTION_OUT,
                             v1::ARG_DIRECTION_INOUT, v1::ARG_DIRECTION_SCALAR}) {
    if (name == ArgDirectionName(d)) return d;
  }
  return std::nullopt;
}

std::string DescribeSignature(const v1::Kernel& kernel) {
  std::string out = "[";
  for (int a = 0; a < kernel.signature_size(); ++a) {
    const v1::KernelArg& arg = kernel.signature(a);
    absl::StrAppend(&out, a > 0 ? ", " : "", ArgDirectionName(arg.direction()));
    if (arg.dtype() != v1::DTYPE_UNSPECIFIED) absl::StrAppend(&out, " ", DTypeName(arg.dtype()));
  }
  out.push_back(']');
  return out;
}

std::string DescribeKernel(const v1::Kernel& kernel) {
  if (kernel.type().empty()) return absl::StrCat(kernel.name(), " ", DescribeSignature(kernel));
  return absl::StrCat(kernel.name(), " (", kernel.type(), ") ", DescribeSignature(kernel));
}

absl::Status ResolveKernelFilter(const KernelTable& table, ArgFilter* filter) {
  if (!filter->func_name && !filter->func_type) return absl::OkStatus();
  std::vector<uint32_t> ids;
  bool name_seen = false, type_seen = false;
  for (const v1::Kernel& k : table) {
    const bool name_ok = !filter->func_name || k.name() == *filter->func_name;
    const bool type_ok = !filter->func_type || k.type() == *filter->func_type;
    name_seen |= filter->func_name && name_ok;
    type_seen |= filter->func_type && type_ok;
    if (name_ok && type_ok) ids.push_back(k.func_id());
  }
  if (filter->func_name && !name_seen) {
    std::vector<std::string> known;
    for (const v1::Kernel& k : table) known.push_back(k.name());
    return UnknownKernel(absl::StrCat(
        "no kernel named \"", *filter->func_name, "\" in this capture; its kernels: ",
        table.empty() ? "none (the capture has no kernel table: filter by func id)"
                      : Known(std::move(known))));
  }
  if (filter->func_type && !type_seen) {
    std::vector<std::string> known;
    for (const v1::Kernel& k : table) {
      if (!k.type().empty()) known.push_back(k.type());
    }
    return UnknownKernel(absl::StrCat(
        "no kernel of type \"", *filter->func_type, "\" in this capture; its types: ",
        table.empty() ? "none (the capture has no kernel table: filter by func id)"
                      : Known(std::move(known))));
  }
  std::sort(ids.begin(), ids.end());
  filter->func_named = std::move(ids);
  return absl::OkStatus();
}

bool IsUnknownKernel(const absl::Status& status) {
  return status.GetPayload(kUnknownKernelPayload).has_value();
}

}  // namespace argsdump
