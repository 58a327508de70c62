#include "server/http/tensor_view.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "server/http/proto_json.h"

namespace argsdump {
namespace {

v1::ArgRecord Tensor(std::vector<uint32_t> shape, v1::DType dtype = v1::DTYPE_FLOAT32,
                     uint64_t element_bytes = 4) {
  v1::ArgRecord r;
  r.set_kind(v1::KIND_TENSOR);
  r.set_dtype(dtype);
  uint64_t n = 1;
  for (uint32_t d : shape) {
    r.add_shape(d);
    n *= d;
  }
  r.set_numel(n);
  r.set_bin_size(n * element_bytes);
  return r;
}

std::string Floats(const std::vector<float>& v) {
  std::string b(v.size() * 4, '\0');
  std::memcpy(&b[0], v.data(), b.size());
  return b;
}

TEST(TensorViewTest, ASmallTensorComesWholeWithItsStatsAndHistogram) {
  const v1::ArgRecord r = Tensor({2, 3});
  auto plan = PlanTensorSlice(r, {}, 0, TensorViewLimits());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->grid_rows, 2u);
  EXPECT_EQ(plan->grid_cols, 3u);
  EXPECT_EQ(plan->read_length, 24u);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::string json = TensorSliceJson(3, r, *plan, Floats({1, 2, nan, 0, -1.5f, 4}));
  EXPECT_NE(json.find("\"values\": [1,2,\"NaN\",0,-1.5,4]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"count\":\"6\",\"min\":-1.5,\"max\":4"), std::string::npos) << json;
  EXPECT_NE(json.find("\"nan\":\"1\""), std::string::npos);
  EXPECT_NE(json.find("\"zeros\":\"1\""), std::string::npos);
  EXPECT_NE(json.find("\"counts\": [1,"), std::string::npos) << json;
}

TEST(TensorViewTest, AGridKeepsEveryNonFiniteValue) {
  const v1::ArgRecord r = Tensor({4, 4});
  auto plan = PlanTensorSlice(r, {}, 4, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->block_rows, 2u);
  EXPECT_EQ(plan->block_cols, 2u);
  std::vector<float> v(16, 1.0f);
  v[0] = std::numeric_limits<float>::infinity();              // block (0,0)
  v[1] = std::numeric_limits<float>::quiet_NaN();             // block (0,0): NaN wins
  v[6] = -std::numeric_limits<float>::infinity();             // block (0,1)
  v[10] = 3.0f;                                              // block (1,1): mean 1.5
  const std::string json = TensorSliceJson(0, r, *plan, Floats(v));
  EXPECT_NE(json.find("\"values\": [\"NaN\",\"-Infinity\",1,1.5]"), std::string::npos) << json;
}

TEST(TensorViewTest, HigherRanksAreSlicedAndTruncatedPayloadsAreNull) {
  v1::ArgRecord r = Tensor({3, 2, 2});
  auto plan = PlanTensorSlice(r, {2}, 0, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->read_offset, 32u);
  EXPECT_EQ(plan->read_length, 16u);
  r.set_bin_size(40);  // 10 of 12 elements: the slice at 2 has 2 of 4
  r.set_truncated(true);
  plan = PlanTensorSlice(r, {2}, 0, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->captured, 2u);
  EXPECT_EQ(plan->read_length, 8u);
  const std::string json = TensorSliceJson(0, r, *plan, Floats({5, 6}));
  EXPECT_NE(json.find("\"values\": [5,6,null,null]"), std::string::npos) << json;
  EXPECT_FALSE(PlanTensorSlice(r, {3}, 0, TensorViewLimits()).ok());
  EXPECT_FALSE(PlanTensorSlice(r, {0, 0}, 0, TensorViewLimits()).ok());
}

TEST(TensorViewTest, FitGridsHaveEvenBlocks) {
  // 8 rows in 2 blocks are 4 and 4 (they were 7 and 1).
  auto plan = PlanTensorSlice(Tensor({8, 16}), {}, 3, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->grid_rows * plan->grid_cols, 2u);
  EXPECT_EQ(plan->block_rows, 4u);
  EXPECT_EQ(plan->block_cols, 16u);
  plan = PlanTensorSlice(Tensor({8, 8}), {}, 2, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->block_rows, 4u);
  EXPECT_EQ(plan->grid_rows, 2u);
  // Every shape and fit: at most fit cells, each element in one, no empty
  // row or column of cells.
  for (uint32_t rows = 1; rows <= 24; ++rows) {
    for (uint32_t cols = 1; cols <= 24; ++cols) {
      for (uint64_t fit = 1; fit <= 40; ++fit) {
        plan = PlanTensorSlice(Tensor({rows, cols}), {}, fit, TensorViewLimits());
        ASSERT_TRUE(plan.ok());
        const std::string at = absl::StrCat(rows, "x", cols, " fit ", fit);
        EXPECT_LE(plan->grid_rows * plan->grid_cols, std::max<uint64_t>(fit, 1)) << at;
        EXPECT_EQ(plan->grid_rows, (rows + plan->block_rows - 1) / plan->block_rows) << at;
        EXPECT_EQ(plan->grid_cols, (cols + plan->block_cols - 1) / plan->block_cols) << at;
        if (static_cast<uint64_t>(rows) * cols <= fit) {
          EXPECT_EQ(plan->grid_rows * plan->grid_cols, static_cast<uint64_t>(rows) * cols) << at;
        }
      }
    }
  }
}

TEST(TensorViewTest, ASliceWhollyPastTheCapturedBytesReadsNothing) {
  v1::ArgRecord r = Tensor({3, 2, 2});
  r.set_bin_size(8);  // 2 of 12 elements: slices 1 and 2 were not captured
  r.set_truncated(true);
  for (uint64_t slice : {1, 2}) {
    auto plan = PlanTensorSlice(r, {slice}, 0, TensorViewLimits());
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->captured, 0u);
    EXPECT_EQ(plan->read_length, 0u);
    EXPECT_LE(plan->read_offset, r.bin_size());  // nothing past the end is named
    const std::string json = TensorSliceJson(0, r, *plan, "");
    EXPECT_NE(json.find("\"values\": [null,null,null,null]"), std::string::npos) << json;
  }
}

TEST(TensorViewTest, Fp4SlicesStartMidByte) {
  const v1::ArgRecord r = Tensor({3, 1}, v1::DTYPE_FP4E2M1, 0);
  v1::ArgRecord packed = r;
  packed.set_bin_size(2);  // 3 nibbles in 2 bytes
  auto plan = PlanTensorSlice(packed, {}, 0, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  // 0x21: element 0 = 0.5 (nibble 1), element 1 = 1 (nibble 2); 0x03: 1.5.
  const std::string json = TensorSliceJson(0, packed, *plan, std::string("\x21\x03", 2));
  EXPECT_NE(json.find("\"values\": [0.5,1,1.5]"), std::string::npos) << json;
}

// The reference: the whole-slice formatter as it was before the answer was
// reduced in chunks (verbatim but for its name), kept here as the oracle
// the streaming reducer must agree with byte for byte.
struct Cell {
  double sum = 0;
  uint64_t finite = 0, captured = 0;
  bool nan = false, pos_inf = false, neg_inf = false;
};

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

std::string WholeSliceJson(uint64_t record_id, const v1::ArgRecord& r,
                           const TensorSlicePlan& p, absl::string_view bytes) {
  const uint64_t bits = ElementBits(p.dtype);
  // Elements the bytes hold from the slice's first one on.
  const uint64_t have_elements = bytes.size() * 8 / bits;
  const uint64_t captured =
      have_elements <= p.first_in_read ? 0 : std::min(p.captured, have_elements - p.first_in_read);
  const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
  std::vector<Cell> cells(p.grid_rows * p.grid_cols);
  v1::TensorStats stats;
  double min = 0, max = 0, sum = 0, sq = 0;
  uint64_t finite = 0;
  for (uint64_t i = 0; i < captured; ++i) {
    const double v = ElementAsDouble(p.dtype, base, p.first_in_read + i);
    Cell& cell = cells[(i / p.cols / p.block_rows) * p.grid_cols + (i % p.cols) / p.block_cols];
    ++cell.captured;
    if (std::isnan(v)) {
      cell.nan = true;
      stats.set_nan(stats.nan() + 1);
    } else if (std::isinf(v)) {
      (v > 0 ? cell.pos_inf : cell.neg_inf) = true;
      if (v > 0) {
        stats.set_pos_inf(stats.pos_inf() + 1);
      } else {
        stats.set_neg_inf(stats.neg_inf() + 1);
      }
    } else {
      cell.sum += v;
      ++cell.finite;
      min = finite == 0 ? v : std::min(min, v);
      max = finite == 0 ? v : std::max(max, v);
      sum += v;
      sq += v * v;
      ++finite;
      if (v == 0) stats.set_zeros(stats.zeros() + 1);
    }
  }
  stats.set_count(captured);
  stats.set_min(min);
  stats.set_max(max);
  stats.set_mean(finite > 0 ? sum / finite : 0);
  stats.set_l2(std::sqrt(sq));
  std::vector<uint64_t> histogram(kHistogramBins, 0);
  if (finite > 0) {
    const double width = (max - min) / kHistogramBins;
    for (uint64_t i = 0; i < captured; ++i) {
      const double v = ElementAsDouble(p.dtype, base, p.first_in_read + i);
      if (!std::isfinite(v)) continue;
      int bin = width > 0 ? static_cast<int>((v - min) / width) : 0;
      histogram[std::clamp(bin, 0, kHistogramBins - 1)]++;
    }
  }
  const bool wide = Wide(p.dtype);
  std::string out = absl::StrCat("{\"record_id\": \"", record_id, "\", \"dtype\": \"",
                                 v1::DType_Name(r.dtype()), "\", \"shape\": [",
                                 absl::StrJoin(r.shape(), ", "), "], \"index\": [",
                                 absl::StrJoin(p.index, ", "), "], \"rows\": ", p.rows,
                                 ", \"cols\": ", p.cols, ", \"grid_rows\": ", p.grid_rows,
                                 ", \"grid_cols\": ", p.grid_cols, ", \"block_rows\": ",
                                 p.block_rows, ", \"block_cols\": ", p.block_cols,
                                 ", \"captured\": ", captured, ", \"values\": [");
  out.reserve(out.size() + cells.size() * 12);
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) out.append(",");
    const Cell& c = cells[i];
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
  AppendNumber(min, wide, &out);
  out.append(", \"max\": ");
  AppendNumber(max, wide, &out);
  absl::StrAppend(&out, ", \"counts\": [", absl::StrJoin(histogram, ","), "]}}");
  return out;
}

// Bytes that decode to a mix of values (NaN, infinities, zeros, repeats)
// for any dtype.
std::string MixedBytes(size_t n, uint32_t seed) {
  std::string b(n, '\0');
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    b[i] = static_cast<char>(x >> 16);
    if (i % 97 == 0) b[i] = 0;
  }
  return b;
}

TEST(TensorViewTest, StreamingAgreesWithTheWholeSliceForEveryDtypeAndChunking) {
  const std::vector<std::pair<v1::DType, uint64_t>> dtypes = {
      {v1::DTYPE_FLOAT32, 32}, {v1::DTYPE_FLOAT16, 16},     {v1::DTYPE_BFLOAT16, 16},
      {v1::DTYPE_FLOAT64, 64}, {v1::DTYPE_INT8, 8},         {v1::DTYPE_UINT8, 8},
      {v1::DTYPE_INT16, 16},   {v1::DTYPE_UINT16, 16},      {v1::DTYPE_INT32, 32},
      {v1::DTYPE_UINT32, 32},  {v1::DTYPE_INT64, 64},       {v1::DTYPE_UINT64, 64},
      {v1::DTYPE_BOOL, 8},     {v1::DTYPE_FP8E4M3FN, 8},    {v1::DTYPE_FP8E8M0, 8},
      {v1::DTYPE_FP4E2M1, 4}};
  int compared = 0;
  for (const auto& [dtype, bits] : dtypes) {
    // 3 slices of 37x53 (odd sizes: FP4 slices start mid-byte), the
    // payload cut short in the last one.
    v1::ArgRecord r = Tensor({3, 37, 53}, dtype, 0);
    const uint64_t full = (3 * 37 * 53 * bits + 7) / 8;
    r.set_bin_size(full - full / 7);
    r.set_truncated(true);
    const std::string payload = MixedBytes(r.bin_size(), static_cast<uint32_t>(bits * 31 + dtype));
    for (uint64_t slice : {0, 1, 2}) {
      for (uint64_t fit : {0, 1, 7, 100, 5000}) {
        auto plan = PlanTensorSlice(r, {slice}, fit, TensorViewLimits());
        ASSERT_TRUE(plan.ok()) << plan.status();
        const absl::string_view bytes =
            absl::string_view(payload).substr(plan->read_offset, plan->read_length);
        const std::string want = WholeSliceJson(9, r, *plan, bytes);
        for (size_t chunk : {1, 2, 3, 5, 7, 8, 13, 4096, 1 << 20}) {
          TensorSliceReducer reducer(*plan);
          for (size_t at = 0; at < bytes.size(); at += chunk) reducer.AddValues(bytes.substr(at, chunk));
          if (reducer.NeedsHistogramPass()) {
            // The second pass in other chunks than the first.
            for (size_t at = 0; at < bytes.size(); at += chunk + 1) {
              reducer.AddHistogram(bytes.substr(at, chunk + 1));
            }
          }
          ASSERT_TRUE(reducer.histogram_complete());
          ASSERT_EQ(reducer.Json(9, r), want)
              << v1::DType_Name(dtype) << " slice " << slice << " fit " << fit << " chunk " << chunk;
          ++compared;
        }
        EXPECT_EQ(TensorSliceJson(9, r, *plan, bytes), want);
      }
    }
  }
  EXPECT_EQ(compared, 16 * 3 * 5 * 9);
}

TEST(TensorViewTest, ALargeSliceStreamsInTheMemoryOfItsGrid) {
  // 2048 x 2048 float32: a 16 MiB slice, fed in 64 KiB chunks.
  const v1::ArgRecord r = Tensor({2048, 2048});
  std::vector<float> values(2048 * 2048);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) - 500.0f;
  values[12345] = std::numeric_limits<float>::quiet_NaN();
  values[2048 * 1500 + 7] = -std::numeric_limits<float>::infinity();
  const std::string bytes = Floats(values);
  for (uint64_t fit : {1, 64, 4096}) {
    auto plan = PlanTensorSlice(r, {}, fit, TensorViewLimits());
    ASSERT_TRUE(plan.ok());
    TensorSliceReducer reducer(*plan);
    const absl::string_view all(bytes);
    for (size_t at = 0; at < all.size(); at += 65536) reducer.AddValues(all.substr(at, 65536));
    ASSERT_TRUE(reducer.NeedsHistogramPass());
    for (size_t at = 0; at < all.size(); at += 65536) reducer.AddHistogram(all.substr(at, 65536));
    ASSERT_TRUE(reducer.histogram_complete());
    const std::string json = reducer.Json(1, r);
    EXPECT_EQ(json, WholeSliceJson(1, r, *plan, all)) << "fit " << fit;
    // What it held: the grid, the histogram and two carried elements, the
    // same as for any slice of that grid; not the slice's 16 MiB.
    EXPECT_EQ(reducer.peak_bytes(), TensorSliceReducer::HeldBytes(*plan)) << "fit " << fit;
    EXPECT_LE(reducer.peak_bytes(), fit * 48 + 64 * 8 + 16) << "fit " << fit;
    EXPECT_LE(json.size(), TensorSliceReducer::AnswerBytes(*plan));
  }
}

TEST(TensorViewTest, ASecondPassThatEndsShortIsIncomplete) {
  const v1::ArgRecord r = Tensor({4, 4});
  auto plan = PlanTensorSlice(r, {}, 4, TensorViewLimits());
  ASSERT_TRUE(plan.ok());
  const std::string bytes = Floats(std::vector<float>(16, 2.5f));
  TensorSliceReducer reducer(*plan);
  reducer.AddValues(bytes);
  ASSERT_TRUE(reducer.NeedsHistogramPass());
  reducer.AddHistogram(absl::string_view(bytes).substr(0, 30));  // 7.5 elements
  EXPECT_FALSE(reducer.histogram_complete());
  reducer.AddHistogram(absl::string_view(bytes).substr(30));
  EXPECT_TRUE(reducer.histogram_complete());
}

TEST(TensorViewTest, RefusalsSayWhy) {
  v1::ArgRecord scalar;
  scalar.set_kind(v1::KIND_SCALAR);
  EXPECT_TRUE(absl::IsInvalidArgument(PlanTensorSlice(scalar, {}, 0, {}).status()));
  v1::ArgRecord lying = Tensor({4, 4});
  lying.set_numel(17);
  EXPECT_TRUE(absl::IsInvalidArgument(PlanTensorSlice(lying, {}, 0, {}).status()));
  TensorViewLimits small;
  small.max_elements = 8;
  const v1::ArgRecord big = Tensor({4, 4});
  auto refused = PlanTensorSlice(big, {}, 0, small);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status()));
  EXPECT_NE(refused.status().message().find("fit=N"), std::string::npos);
  EXPECT_TRUE(PlanTensorSlice(big, {}, 8, small).ok());
  small.max_read_bytes = 32;
  EXPECT_TRUE(absl::IsResourceExhausted(PlanTensorSlice(big, {}, 8, small).status()));
  v1::ArgRecord overflow = Tensor({65536, 65536});
  overflow.add_shape(65536);
  overflow.add_shape(65536);
  EXPECT_TRUE(absl::IsInvalidArgument(PlanTensorSlice(overflow, {}, 8, {}).status()));
}

}  // namespace
}  // namespace argsdump
