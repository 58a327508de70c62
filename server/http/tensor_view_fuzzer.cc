// libFuzzer target: the tensor view's planner and formatter over a record
// and a query built from the input (shape, numel, bin_size, index and fit
// are untrusted: they come from a capture and from a URL), with its
// payload bytes the rest of the input; the answer reduced in chunks must be
// the answer reduced whole.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "server/http/tensor_view.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t at = 0;
  auto next = [&]() -> uint32_t { return at < size ? data[at++] : 0; };
  argsdump::v1::ArgRecord r;
  r.set_kind(next() % 4 == 0 ? argsdump::v1::KIND_SCALAR : argsdump::v1::KIND_TENSOR);
  r.set_dtype(static_cast<argsdump::v1::DType>(next() % 18));
  const uint32_t rank = next() % 5;
  uint64_t numel = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    const uint32_t d = next() % 2 == 0 ? next() % 9 : (next() << 8 | next()) + 1;
    r.add_shape(d);
    numel *= d;
  }
  r.set_numel(next() % 16 == 0 ? numel + next() : numel);
  std::vector<uint64_t> index;
  const uint32_t indices = next() % 4;
  for (uint32_t i = 0; i < indices; ++i) index.push_back(next() % 10);
  const uint64_t fit = next() % 3 == 0 ? 0 : next() + 1;
  argsdump::TensorViewLimits limits;
  limits.max_elements = 1 + next() * 64;
  limits.max_read_bytes = 1 + (next() << 8);
  const std::string payload(reinterpret_cast<const char*>(data) + at, size - at);
  r.set_bin_size(next() % 2 == 0 ? payload.size() : next());
  auto plan = argsdump::PlanTensorSlice(r, index, fit, limits);
  if (!plan.ok()) return 0;
  if (plan->read_offset + plan->read_length > r.bin_size()) std::abort();
  if (plan->read_length > limits.max_read_bytes) std::abort();
  if (fit > 0 && plan->grid_rows * plan->grid_cols > fit) std::abort();
  if (fit == 0 && plan->rows * plan->cols > limits.max_elements) std::abort();
  if (plan->captured > plan->rows * plan->cols) std::abort();
  // Every element falls in a cell.
  if (plan->rows > 0 && plan->cols > 0 &&
      ((plan->rows - 1) / plan->block_rows >= plan->grid_rows ||
       (plan->cols - 1) / plan->block_cols >= plan->grid_cols)) {
    std::abort();
  }
  // The bytes actually read may be fewer than planned (a short args.bin).
  const size_t have = std::min<size_t>(payload.size(), plan->read_length);
  const std::string json = argsdump::TensorSliceJson(7, r, *plan, absl::string_view(payload).substr(0, have));
  if (json.empty() || json.front() != '{' || json.back() != '}') std::abort();
  // The same bytes reduced in chunks (an element may straddle two) give
  // the same answer, holding no more than the plan's grid.
  const absl::string_view bytes = absl::string_view(payload).substr(0, have);
  const size_t chunk = 1 + (size > 0 ? data[0] % 11 : 0);
  argsdump::TensorSliceReducer reducer(*plan);
  for (size_t i = 0; i < bytes.size(); i += chunk) reducer.AddValues(bytes.substr(i, chunk));
  if (reducer.NeedsHistogramPass()) {
    for (size_t i = 0; i < bytes.size(); i += chunk + 2) {
      reducer.AddHistogram(bytes.substr(i, chunk + 2));
    }
  }
  if (!reducer.histogram_complete() || reducer.Json(7, r) != json) std::abort();
  if (reducer.peak_bytes() != argsdump::TensorSliceReducer::HeldBytes(*plan)) std::abort();
  return 0;
}
