// A tensor record's values as JSON for the web view and for scripts (the
// HTTP face's /tensor endpoint, server/http/gateway.h): one 1-D or 2-D
// slice of the logical view (higher ranks: the last two dimensions at
// chosen leading indices), optionally summarised into a grid of at most
// `fit` cells, with the slice's statistics and a histogram. Plain code over
// a record and its payload bytes: the gateway reads both through the
// capture service, this only plans and formats. Every input is untrusted
// (the record's shape, the query's index and fit, the bytes).
#ifndef ARGSDUMP_SERVER_HTTP_TENSOR_VIEW_H_
#define ARGSDUMP_SERVER_HTTP_TENSOR_VIEW_H_

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

inline constexpr int kHistogramBins = 64;

// The answer built from the plan's bytes as they are read, in chunks of
// any size (an element may straddle two), never holding the slice: the
// grid's cells and the statistics in a first pass, then the histogram,
// whose bins need the slice's min and max, in a second pass over the same
// bytes. What it holds is the grid, the histogram and one element carried
// between chunks, whatever the slice's size (peak_bytes).
//   TensorSliceReducer r(plan);
//   for (chunk : bytes) r.AddValues(chunk);
//   if (r.NeedsHistogramPass()) for (chunk : the same bytes) r.AddHistogram(chunk);
//   if (r.histogram_complete()) answer = r.Json(id, record);
class TensorSliceReducer {
 public:
  explicit TensorSliceReducer(const TensorSlicePlan& plan);

  void AddValues(absl::string_view chunk);
  // Some value is finite: the histogram needs the second pass.
  bool NeedsHistogramPass() const { return finite_ > 0; }
  void AddHistogram(absl::string_view chunk);
  // The second pass saw every element the first did (or none was needed).
  bool histogram_complete() const;

  // The answer (TensorSliceJson's).
  std::string Json(uint64_t record_id, const v1::ArgRecord& record) const;

  // The most bytes it has held (its buffers' capacities): they do not grow
  // with the slice or the chunks. HeldBytes: what they are for a plan,
  // before any byte is read.
  size_t peak_bytes() const { return peak_bytes_; }
  static uint64_t HeldBytes(const TensorSlicePlan& plan);
  // An upper bound of the answer's size (for a memory budget).
  static uint64_t AnswerBytes(const TensorSlicePlan& plan);

 private:
  struct Cell {
    double sum = 0;
    uint64_t finite = 0, captured = 0;
    bool nan = false, pos_inf = false, neg_inf = false;
  };
  // Where a pass is in the bytes: elements walked, bytes seen, and the
  // first bytes of an element the next chunk ends.
  struct Walk {
    uint64_t elements = 0;
    uint64_t bytes = 0;
    uint8_t carry[8] = {};
    size_t carried = 0;
  };
  size_t HeldNow() const;
  template <typename Visit>
  void Step(absl::string_view chunk, Walk& walk, Visit&& visit);

  const TensorSlicePlan plan_;
  std::vector<Cell> cells_;
  std::vector<uint64_t> histogram_;
  Walk values_, histogram_walk_;
  uint64_t nan_ = 0, pos_inf_ = 0, neg_inf_ = 0, zeros_ = 0, finite_ = 0;
  double min_ = 0, max_ = 0, sum_ = 0, sq_ = 0;
  size_t peak_bytes_ = 0;
};

// The answer: {"record_id", "dtype", "shape", "index", "rows", "cols",
// "grid_rows", "grid_cols", "block_rows", "block_cols", "captured",
// "values": [row-major grid; numbers, "NaN", "Infinity", "-Infinity" (a
// block with any NaN is NaN, else any +Inf, else any -Inf, else the mean),
// null where nothing was captured], "stats": TensorStats over the captured
// elements of the slice, "histogram": {"min", "max", "counts": [64]} of its
// finite values}. `bytes`: what the plan said to read (shorter: the rest
// counts as not captured), reduced as one chunk.
std::string TensorSliceJson(uint64_t record_id, const v1::ArgRecord& record,
                            const TensorSlicePlan& plan, absl::string_view bytes);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_TENSOR_VIEW_H_
