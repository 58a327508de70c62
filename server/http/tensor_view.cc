#include "server/http/tensor_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "format/names.h"
#include "server/http/proto_json.h"

namespace argsdump {
namespace {

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// a * b, or false when it does not fit 64 bits.
bool MulFits(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// The grid: blocks of br x bc elements, at most `fit` cells.
void FitGrid(uint64_t fit, TensorSlicePlan* p) {
  const uint64_t n = p->rows * p->cols;
  p->grid_rows = p->rows;
  p->grid_cols = p->cols;
  if (fit == 0 || n <= fit) return;
  uint64_t br = static_cast<uint64_t>(std::ceil(std::sqrt(static_cast<double>(n) / fit)));
  br = std::max<uint64_t>({br, 1, CeilDiv(p->rows, fit)});
  br = std::min(br, p->rows);
  const uint64_t gr = CeilDiv(p->rows, br);  // <= fit
  const uint64_t gc_max = std::max<uint64_t>(1, fit / gr);
  const uint64_t gc = CeilDiv(p->cols, CeilDiv(p->cols, gc_max));
  // Even blocks for that grid (8 rows in 2 are 4 and 4, not 7 and 1); never
  // more cells than before.
  p->block_rows = CeilDiv(p->rows, gr);
  p->block_cols = CeilDiv(p->cols, gc);
  p->grid_rows = CeilDiv(p->rows, p->block_rows);
  p->grid_cols = CeilDiv(p->cols, p->block_cols);
}

void AppendNumber(double v, bool wide, std::string* out) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    char buf[40];
    std::snprintf(buf, sizeof buf, wide ? "%.17g" : "%.9g", v);
    out->append(buf);
  }
}

// Dtypes whose values need more than float32's 9 digits to round-trip.
bool Wide(DataType t) {
  switch (t) {
    case DataType::kFloat64:
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kInt64:
    case DataType::kUint64:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<TensorSlicePlan> PlanTensorSlice(const v1::ArgRecord& r,
                                                const std::vector<uint64_t>& index, uint64_t fit,
                                                const TensorViewLimits& limits) {
  if (r.kind() != v1::KIND_TENSOR) {
    return absl::InvalidArgumentError("the record is not a tensor (its value is scalar_bits)");
  }
  const std::optional<DataType> dtype = FromProtoDType(r.dtype());
  if (!dtype) {
    return absl::InvalidArgumentError(absl::StrCat("the record's dtype ", DTypeName(r.dtype()),
                                                   " has no element format"));
  }
  TensorSlicePlan p;
  p.dtype = *dtype;
  const int rank = r.shape_size();
  uint64_t numel = 1;
  for (uint32_t d : r.shape()) {
    if (!MulFits(numel, d, &numel)) {
      return absl::InvalidArgumentError("the record's shape overflows 64 bits");
    }
  }
  if (numel != r.numel()) {
    return absl::InvalidArgumentError(absl::StrCat("the record's shape [",
                                                   absl::StrJoin(r.shape(), ", "), "] holds ",
                                                   numel, " elements but numel is ", r.numel()));
  }
  const size_t leading = rank > 2 ? static_cast<size_t>(rank - 2) : 0;
  if (!index.empty() && index.size() != leading) {
    return absl::InvalidArgumentError(absl::StrCat(
        "index: ", index.size(), " values for a rank ", rank, " tensor (it takes ", leading,
        leading == 0 ? ": a rank <= 2 tensor is one slice)" : ", one per leading dimension)"));
  }
  p.index = index.empty() ? std::vector<uint64_t>(leading, 0) : index;
  if (rank >= 2) {
    p.rows = r.shape(rank - 2);
    p.cols = r.shape(rank - 1);
  } else if (rank == 1) {
    p.cols = r.shape(0);
  }
  // Row-major: the slice starts at sum(index[k] * prod(shape[k+1:])).
  uint64_t first = 0;
  uint64_t stride = p.rows * p.cols;  // fits: it divides numel
  for (size_t k = leading; k-- > 0;) {
    const uint64_t i = p.index[k];
    if (i >= r.shape(static_cast<int>(k))) {
      return absl::InvalidArgumentError(absl::StrCat("index[", k, "] = ", i,
                                                     " is past dimension ", k, "'s ",
                                                     r.shape(static_cast<int>(k)), " entries"));
    }
    first += i * stride;
    stride *= r.shape(static_cast<int>(k));
  }
  const uint64_t n = p.rows * p.cols;
  if (fit == 0 && n > limits.max_elements) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the slice has ", n, " elements; at most ", limits.max_elements,
        " come as JSON numbers: pass fit=N for a grid of at most N cells (block means, "
        "non-finite values kept), index= for another slice, or read /payload"));
  }
  // Bits, then bytes (FP4 packs two elements in a byte).
  const uint64_t bits = ElementBits(p.dtype);
  const uint64_t captured_elements = r.bin_size() * 8 / bits;
  p.captured = first >= captured_elements ? 0 : std::min(n, captured_elements - first);
  const uint64_t begin_byte = first * bits / 8;
  const uint64_t end_byte = CeilDiv((first + p.captured) * bits, 8);
  // A slice wholly past what was captured reads nothing (its cells are null):
  // the plan then names no offset either, so no caller reads past the end.
  if (p.captured > 0) {
    p.read_offset = begin_byte;
    p.read_length = end_byte - begin_byte;
    p.first_in_read = first - begin_byte * 8 / bits;
  }
  if (p.read_length > limits.max_read_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the slice is ", p.read_length, " payload bytes; at most ", limits.max_read_bytes,
        " are read for one answer: pick a smaller slice with index=, or read /payload"));
  }
  FitGrid(fit, &p);
  return p;
}

TensorSliceReducer::TensorSliceReducer(const TensorSlicePlan& plan)
    : plan_(plan),
      cells_(plan.grid_rows * plan.grid_cols),
      histogram_(kHistogramBins, 0),
      peak_bytes_(HeldNow()) {}

size_t TensorSliceReducer::HeldNow() const {
  return cells_.capacity() * sizeof(Cell) + histogram_.capacity() * sizeof(uint64_t) +
         sizeof(values_.carry) + sizeof(histogram_walk_.carry);
}

uint64_t TensorSliceReducer::HeldBytes(const TensorSlicePlan& plan) {
  return plan.grid_rows * plan.grid_cols * sizeof(Cell) + kHistogramBins * sizeof(uint64_t) +
         sizeof(Walk::carry) * 2;
}

uint64_t TensorSliceReducer::AnswerBytes(const TensorSlicePlan& plan) {
  // A cell is at most 24 characters ("%.17g") and a comma; the rest (the
  // shape, index, stats and histogram) well under 4 KiB.
  return plan.grid_rows * plan.grid_cols * 25 + 4096;
}

// Visits each element of the slice the chunk completes, in order: `visit(i,
// value)` for slice element i. Elements of 8 bits or more may straddle
// chunks (their first bytes wait in the carry); FP4's never do (two in a
// byte, the slice starting at either nibble).
template <typename Visit>
void TensorSliceReducer::Step(absl::string_view chunk, Walk& walk, Visit&& visit) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(chunk.data());
  const size_t n = chunk.size();
  const uint64_t chunk_start = walk.bytes;
  walk.bytes += n;
  const uint64_t bits = ElementBits(plan_.dtype);
  if (bits < 8) {
    const uint64_t per_byte = 8 / bits;
    const uint64_t end = (chunk_start + n) * per_byte;  // elements from the read's start
    while (walk.elements < plan_.captured) {
      const uint64_t at = plan_.first_in_read + walk.elements;
      if (at >= end) break;
      visit(walk.elements, ElementAsDouble(plan_.dtype, bytes, at - chunk_start * per_byte));
      ++walk.elements;
    }
    return;
  }
  // Whole bytes: the slice starts at the read's first byte.
  const size_t size = bits / 8;
  size_t pos = 0;
  if (walk.carried > 0) {
    const size_t take = std::min(size - walk.carried, n);
    std::memcpy(walk.carry + walk.carried, bytes, take);
    walk.carried += take;
    pos = take;
    if (walk.carried < size) return;
    walk.carried = 0;
    if (walk.elements < plan_.captured) {
      visit(walk.elements, ElementAsDouble(plan_.dtype, walk.carry, 0));
      ++walk.elements;
    }
  }
  while (pos + size <= n && walk.elements < plan_.captured) {
    visit(walk.elements, ElementAsDouble(plan_.dtype, bytes + pos, 0));
    ++walk.elements;
    pos += size;
  }
  if (pos < n && walk.elements < plan_.captured) {
    walk.carried = n - pos;  // < size
    std::memcpy(walk.carry, bytes + pos, walk.carried);
  }
}

void TensorSliceReducer::AddValues(absl::string_view chunk) {
  peak_bytes_ = std::max(peak_bytes_, HeldNow());
  Step(chunk, values_, [this](uint64_t i, double v) {
    Cell& cell =
        cells_[(i / plan_.cols / plan_.block_rows) * plan_.grid_cols + (i % plan_.cols) / plan_.block_cols];
    ++cell.captured;
    if (std::isnan(v)) {
      cell.nan = true;
      ++nan_;
    } else if (std::isinf(v)) {
      (v > 0 ? cell.pos_inf : cell.neg_inf) = true;
      ++(v > 0 ? pos_inf_ : neg_inf_);
    } else {
      cell.sum += v;
      ++cell.finite;
      min_ = finite_ == 0 ? v : std::min(min_, v);
      max_ = finite_ == 0 ? v : std::max(max_, v);
      sum_ += v;
      sq_ += v * v;
      ++finite_;
      if (v == 0) ++zeros_;
    }
  });
}

void TensorSliceReducer::AddHistogram(absl::string_view chunk) {
  peak_bytes_ = std::max(peak_bytes_, HeldNow());
  if (finite_ == 0) return;
  const double width = (max_ - min_) / kHistogramBins;
  // Only the elements the first pass saw.
  Step(chunk.substr(0, static_cast<size_t>(
                           std::min<uint64_t>(chunk.size(), values_.bytes - histogram_walk_.bytes))),
       histogram_walk_, [&](uint64_t i, double v) {
         if (i >= values_.elements || !std::isfinite(v)) return;
         const int bin = width > 0 ? static_cast<int>((v - min_) / width) : 0;
         histogram_[std::clamp(bin, 0, kHistogramBins - 1)]++;
       });
}

bool TensorSliceReducer::histogram_complete() const {
  return finite_ == 0 || histogram_walk_.elements == values_.elements;
}

std::string TensorSliceReducer::Json(uint64_t record_id, const v1::ArgRecord& r) const {
  const TensorSlicePlan& p = plan_;
  const uint64_t captured = values_.elements;
  v1::TensorStats stats;
  stats.set_nan(nan_);
  stats.set_pos_inf(pos_inf_);
  stats.set_neg_inf(neg_inf_);
  stats.set_zeros(zeros_);
  stats.set_count(captured);
  stats.set_min(min_);
  stats.set_max(max_);
  stats.set_mean(finite_ > 0 ? sum_ / finite_ : 0);
  stats.set_l2(std::sqrt(sq_));
  const bool wide = Wide(p.dtype);
  std::string out = absl::StrCat("{\"record_id\": \"", record_id, "\", \"dtype\": \"",
                                 v1::DType_Name(r.dtype()), "\", \"shape\": [",
                                 absl::StrJoin(r.shape(), ", "), "], \"index\": [",
                                 absl::StrJoin(p.index, ", "), "], \"rows\": ", p.rows,
                                 ", \"cols\": ", p.cols, ", \"grid_rows\": ", p.grid_rows,
                                 ", \"grid_cols\": ", p.grid_cols, ", \"block_rows\": ",
                                 p.block_rows, ", \"block_cols\": ", p.block_cols,
                                 ", \"captured\": ", captured, ", \"values\": [");
  out.reserve(out.size() + cells_.size() * 12);
  for (size_t i = 0; i < cells_.size(); ++i) {
    if (i > 0) out.append(",");
    const Cell& c = cells_[i];
    if (c.captured == 0) {
      out.append("null");
    } else if (c.nan) {
      out.append("\"NaN\"");
    } else if (c.pos_inf) {
      out.append("\"Infinity\"");
    } else if (c.neg_inf) {
      out.append("\"-Infinity\"");
    } else {
      AppendNumber(c.finite == 1 ? c.sum : c.sum / c.finite, wide && c.finite == 1, &out);
    }
  }
  absl::StrAppend(&out, "], \"stats\": ", ProtoToJson(stats), ", \"histogram\": {\"min\": ");
  AppendNumber(min_, wide, &out);
  out.append(", \"max\": ");
  AppendNumber(max_, wide, &out);
  absl::StrAppend(&out, ", \"counts\": [", absl::StrJoin(histogram_, ","), "]}}");
  return out;
}

std::string TensorSliceJson(uint64_t record_id, const v1::ArgRecord& r,
                            const TensorSlicePlan& p, absl::string_view bytes) {
  TensorSliceReducer reducer(p);
  reducer.AddValues(bytes);
  if (reducer.NeedsHistogramPass()) reducer.AddHistogram(bytes);
  return reducer.Json(record_id, r);
}

}  // namespace argsdump
