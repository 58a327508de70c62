// A tensor record's values as JSON for the web view and for scripts (the
// HTTP face's /tensor endpoint, server/http_gateway.h): one 1-D or 2-D
// slice of the logical view (higher ranks: the last two dimensions at
// chosen leading indices), optionally summarised into a grid of at most
// `fit` cells, with the slice's statistics and a histogram. Plain code over
// a record and its payload bytes: the gateway reads both through the
// capture service, this only plans and formats. Every input is untrusted
// (the record's shape, the query's index and fit, the bytes).
#ifndef ARGSDUMP_SERVER_TENSOR_VIEW_H_
#define ARGSDUMP_SERVER_TENSOR_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "format/dtype.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

struct TensorViewLimits {
  // A slice of more elements is refused without `fit` (the gateway answers
  // 413): JSON numbers are ~10 bytes each.
  uint64_t max_elements = 1 << 18;
  // Payload bytes one answer may read, with or without `fit`.
  uint64_t max_read_bytes = 64ull << 20;
};

struct TensorSlicePlan {
  DataType dtype = DataType::kFloat32;
  std::vector<uint64_t> index;  // the leading indices (rank - 2 of them)
  uint64_t rows = 1, cols = 1;  // the slice
  uint64_t block_rows = 1, block_cols = 1;
  uint64_t grid_rows = 1, grid_cols = 1;
  // The payload bytes to read: [read_offset, read_offset + read_length) of
  // the record's payload (clamped to what was captured), and where in them
  // the slice's first element is (in elements from read_offset).
  uint64_t read_offset = 0, read_length = 0;
  uint64_t first_in_read = 0;
  // Elements of the slice the payload holds (fewer when truncated).
  uint64_t captured = 0;
};

// InvalidArgument: a scalar, no dtype, a shape that disagrees with numel,
// an index of the wrong length or out of range, fit 0 when given.
// ResourceExhausted (413): more than limits.max_elements without fit, or
// more than limits.max_read_bytes to read.
// `fit` 0: no grid (every element).
absl::StatusOr<TensorSlicePlan> PlanTensorSlice(const v1::ArgRecord& record,
                                                const std::vector<uint64_t>& index, uint64_t fit,
                                                const TensorViewLimits& limits);

// The answer: {"record_id", "dtype", "shape", "index", "rows", "cols",
// "grid_rows", "grid_cols", "block_rows", "block_cols", "captured",
// "values": [row-major grid; numbers, "NaN", "Infinity", "-Infinity" (a
// block with any NaN is NaN, else any +Inf, else any -Inf, else the mean),
// null where nothing was captured], "stats": TensorStats over the captured
// elements of the slice, "histogram": {"min", "max", "counts": [64]} of its
// finite values}. `bytes`: what the plan said to read (shorter: the rest
// counts as not captured).
std::string TensorSliceJson(uint64_t record_id, const v1::ArgRecord& record,
                            const TensorSlicePlan& plan, absl::string_view bytes);

inline constexpr int kHistogramBins = 64;

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_TENSOR_VIEW_H_
