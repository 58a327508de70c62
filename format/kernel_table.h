// A capture's kernel table (v1::CaptureInfo.kernels): what each func_id of
// its records names -- the kernel's name, its type, its signature. The
// table travels with the capture (IngestOpen, the journal, args.index, the
// manifest's "kernels") and is read back from files and streams nobody
// vouches for: CheckKernelTable is the one bound every reader applies.
// Name and type filters (ArgFilter::func_name/func_type) are resolved
// against it into func ids here.
#ifndef ARGSDUMP_FORMAT_KERNEL_TABLE_H_
#define ARGSDUMP_FORMAT_KERNEL_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "format/arg_filter.h"
#include "google/protobuf/repeated_field.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

using KernelTable = google::protobuf::RepeatedPtrField<v1::Kernel>;

// The bounds: kernels (func ids are 16 bits, 0xFFFF meaning unknown),
// bytes of a name (1 or more) and of a type, signature entries, and the
// serialized whole (it rides in one IngestOpen and in the journal's and
// args.index's capture header).
inline constexpr int kMaxKernels = 4096;
inline constexpr size_t kMaxKernelNameBytes = 128;
inline constexpr size_t kMaxKernelTypeBytes = 64;
inline constexpr int kMaxKernelSignature = 64;
inline constexpr uint32_t kMaxKernelFuncId = 0xFFFE;
inline constexpr size_t kMaxKernelTableBytes = 1 << 20;

// InvalidArgument naming the entry and field ("kernels[3].name: 200 bytes,
// at most 128") for more kernels than kMaxKernels, an empty name, a name or
// type that is not UTF-8 or holds a control character, longer ones, a
// func id past kMaxKernelFuncId, a func id or name given twice, a
// direction or dtype outside the schema, a scalar entry before a tensor
// entry, or a longer signature.
absl::Status CheckKernelTable(const KernelTable& table);

// The kernel of `func_id`; null when the table has none.
const v1::Kernel* FindKernel(const KernelTable& table, uint32_t func_id);

// "in" / "out" / "inout" / "scalar" (the manifest's spelling); nullopt /
// "" for anything else.
const char* ArgDirectionName(v1::ArgDirection direction);
std::optional<v1::ArgDirection> ArgDirectionFromName(absl::string_view name);

// "[in FLOAT32, in FLOAT32, out, scalar FLOAT32]": directions, and dtypes
// where declared.
std::string DescribeSignature(const v1::Kernel& kernel);

// "add (elementwise) [in, in, out]", or "add [in, out]" without a type.
std::string DescribeKernel(const v1::Kernel& kernel);

// The names of `func_ids` as the listing shows them: "add", a mix task's
// "mix_sum+mix_prod"; an id the table does not name as "#7"; "" for no ids.
template <typename It>
std::string KernelNames(const KernelTable& table, It first, It last) {
  std::string out;
  for (It it = first; it != last; ++it) {
    if (!out.empty()) out.push_back('+');
    const int64_t id = static_cast<int64_t>(*it);  // the manifest's -1: no kernel
    const v1::Kernel* k = id < 0 ? nullptr : FindKernel(table, static_cast<uint32_t>(id));
    out += k != nullptr ? k->name() : "#" + std::to_string(id);
  }
  return out;
}

// Sets `filter->func_named` to the func ids its func_name (exact) and
// func_type select in `table` (both given: kernels with that name and that
// type). InvalidArgument listing the table's names ("no kernel named
// \"x\" in this capture; its kernels: add, mul, ...") or types when none
// does; OK and nothing changed when the filter has neither.
// The error carries a payload IsUnknownKernel recognises (a caller may
// name its own flag or parameter in front of it).
absl::Status ResolveKernelFilter(const KernelTable& table, ArgFilter* filter);
bool IsUnknownKernel(const absl::Status& status);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_KERNEL_TABLE_H_
