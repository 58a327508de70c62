// NumPy .npy files (format version 1.0): what dump_viewer --npy writes and
// what --compare reads as a golden. A tensor keeps its shape and, where
// NumPy has the type, its dtype; BFLOAT16 and the FP8/FP4 formats (NumPy
// has none of them) are widened exactly to float32, and the file name says
// so: task_<id>_<before|after>_<in|out|inout><n>.<DTYPE>_as_float32.npy.
#ifndef ARGSDUMP_VIEWER_NPY_H_
#define ARGSDUMP_VIEWER_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "viewer/manifest_reader.h"

namespace argsdump {

// task_<16 hex>_<before|after>_<in|out|inout><n>[.<DTYPE>_as_float32].npy
std::string NpyFileName(const ManifestEntry& entry);

// The whole .npy file for a tensor entry and its payload. FailedPrecondition
// saying why for what cannot be one: scalars, payload-less, truncated or
// overwritten tensors, unknown dtypes.
absl::StatusOr<std::string> EncodeNpy(const ManifestEntry& entry, absl::string_view payload);

// A parsed .npy: its header and where the data starts.
struct NpyArray {
  std::string descr;  // "<f4", "|u1", ...
  bool fortran_order = false;
  std::vector<uint64_t> shape;
  uint64_t data_offset = 0;  // header included
  uint64_t numel() const;
};

// Parses a .npy header (versions 1.0 to 3.0) and checks the data that
// follows is whole. InvalidArgument naming what is wrong.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view file);

// The manifest dtype name of an .npy descr ("<f4" -> "FLOAT32"); empty for
// one we do not read (big endian, complex, strings, ...).
std::string DtypeOfNpyDescr(const std::string& descr);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_NPY_H_
