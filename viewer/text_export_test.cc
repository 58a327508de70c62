#include "viewer/text_export.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

ManifestEntry Tensor(const std::string& dtype, std::vector<uint64_t> shape) {
  ManifestEntry e;
  e.task_id = 0x100000003ull;
  e.role = "output";
  e.stage = "after_completion";
  e.arg_index = 1;
  e.kind = "tensor";
  e.dtype = dtype;
  e.shape = shape;
  e.strides.assign(shape.size(), 1);
  uint64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    e.strides[d] = stride;
    stride *= shape[d];
  }
  e.is_contiguous = true;
  return e;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  std::string b(v.size() * sizeof(T), '\0');
  std::memcpy(&b[0], v.data(), b.size());
  return b;
}

const char kHeader[] =
    "# task_id: 0x0000000100000003\n"
    "# role: output\n"
    "# stage: after_completion\n"
    "# arg_index: 1\n";

TEST(TextExportTest, Float32MatrixOverviewAndDetail) {
  ManifestEntry e = Tensor("FLOAT32", {2, 3});
  e.bin_size = 24;
  const std::string text = FormatArgText(e, Bytes<float>({1.5f, -2, 0.1f, 100, 0, -0.25f}));
  EXPECT_EQ(text, std::string(kHeader) +
                      "# dtype: FLOAT32\n"
                      "# kind: tensor\n"
                      "# is_contiguous: true\n"
                      "# shape: [2, 3]\n"
                      "# strides: [3, 1]\n"
                      "# start_offset: 0\n"
                      "# Overview:\n"
                      "  1.5     -2    0.1\n"
                      "  100      0  -0.25\n"
                      "# Detail:\n"
                      "[0, 0] 1.5\n"
                      "[0, 1] -2\n"
                      "[0, 2] 0.1\n"
                      "[1, 0] 100\n"
                      "[1, 1] 0\n"
                      "[1, 2] -0.25\n");
  EXPECT_EQ(TextFileName(e), "task_0000000100000003_after_out1.txt");
}

// The values block of an export (from "# Overview:").
std::string Values(const std::string& text) { return text.substr(text.find("# Overview:")); }

TEST(TextExportTest, EveryDtypeDecodes) {
  struct Case {
    std::string dtype;
    std::string bytes;
    std::string overview;
  };
  const std::vector<Case> cases = {
      {"FLOAT16", Bytes<uint16_t>({0x3C00, 0xC000, 0x7C00}), "  1   -2  inf\n"},
      {"BFLOAT16", Bytes<uint16_t>({0x3F80, 0xC0A0, 0x7FC0}), "  1   -5  nan\n"},
      {"FLOAT64", Bytes<double>({0.1, -1e300, 2}), "    0.1  -1e+300        2\n"},
      {"INT8", Bytes<int8_t>({-128, 0, 127}), "-128     0   127\n"},
      {"INT16", Bytes<int16_t>({-300, 1, 2}), "-300     1     2\n"},
      {"INT32", Bytes<int32_t>({-7, 0, 2147483647}), "        -7           0  2147483647\n"},
      {"INT64", Bytes<int64_t>({-(1ll << 62), 0, 9007199254740993ll}),
       "-4611686018427387904                     0      9007199254740993\n"},
      {"UINT8", Bytes<uint8_t>({0, 200, 255}), "  0  200  255\n"},
      {"UINT16", Bytes<uint16_t>({0, 60000, 1}), "    0  60000      1\n"},
      {"UINT32", Bytes<uint32_t>({4000000000u, 0, 1}), "4000000000           0           1\n"},
      {"UINT64", Bytes<uint64_t>({18446744073709551615ull, 0, 1}),
       "18446744073709551615                     0                     1\n"},
      {"BOOL", Bytes<uint8_t>({1, 0, 7}), " true  false   true\n"},
      {"FP8E4M3FN", Bytes<uint8_t>({0x38, 0x7E, 0x7F}), "  1  448  nan\n"},
      {"FP8E8M0", Bytes<uint8_t>({127, 130, 0xFF}), "  1    8  nan\n"},
      // Two FP4 values per byte, low nibble first: 0x2F = (-6, 1), 0x09 = (-0.5, 0).
      {"FP4E2M1", Bytes<uint8_t>({0x2F, 0x09}), "  -6     1  -0.5\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dtype);
    ManifestEntry e = Tensor(c.dtype, {3});
    e.bin_size = c.bytes.size();
    const std::string v = Values(FormatArgText(e, c.bytes));
    EXPECT_EQ(v.substr(0, v.find("# Detail:")), "# Overview:\n" + c.overview);
  }
}

TEST(TextExportTest, ScalarsTruncatedNoDataAndOddShapes) {
  ManifestEntry s = Tensor("FLOAT32", {});
  s.kind = "scalar";
  s.stage = "before_dispatch";
  s.role = "input";
  s.arg_index = 2;
  s.value = "0.5";
  s.arg_index_ambiguous = true;
  const std::string scalar = FormatArgText(s, "");
  EXPECT_NE(scalar.find("# arg_index_ambiguous: true\n# value: 0.5\n"), std::string::npos)
      << scalar;
  EXPECT_EQ(scalar.find("Overview"), std::string::npos);
  EXPECT_EQ(TextFileName(s), "task_0000000100000003_before_in2.txt");

  ManifestEntry t = Tensor("INT32", {2, 2});
  t.truncated = true;
  t.bin_size = 12;
  const std::string cut = FormatArgText(t, Bytes<int32_t>({1, 2, 3}));
  EXPECT_NE(cut.find("# note: truncated: 12 bytes captured, elements 0..2 of 4\n"),
            std::string::npos)
      << cut;
  EXPECT_NE(cut.find("# Overview:\n1  2\n3\n# Detail:\n[0, 0] 1\n[0, 1] 2\n[1, 0] 3\n"),
            std::string::npos)
      << cut;

  ManifestEntry none = Tensor("FLOAT32", {4});
  none.bin_size = 0;
  EXPECT_NE(FormatArgText(none, "").find("# note: no data"), std::string::npos);

  ManifestEntry over = Tensor("FLOAT32", {1});
  over.overwritten = true;
  EXPECT_NE(FormatArgText(over, Bytes<float>({1})).find("# note: overwritten"),
            std::string::npos);

  ManifestEntry zero_d = Tensor("FLOAT32", {});
  EXPECT_NE(FormatArgText(zero_d, Bytes<float>({3})).find("# Overview:\n3\n# Detail:\n[] 3\n"),
            std::string::npos);

  ManifestEntry five_d = Tensor("UINT8", {1, 2, 1, 2, 2});
  const std::string five = FormatArgText(five_d, Bytes<uint8_t>({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NE(five.find("# Overview:\n0  1\n2  3\n4  5\n6  7\n"), std::string::npos) << five;
  EXPECT_NE(five.find("[0, 1, 0, 1, 1] 7\n"), std::string::npos) << five;
  EXPECT_NE(five.find("[0, 1, 0, 0, 0] 4\n"), std::string::npos) << five;

  ManifestEntry strided = Tensor("FLOAT32", {2, 2});
  strided.strides = {1, 2};
  strided.is_contiguous = false;
  strided.start_offset = 3;
  const std::string nc = FormatArgText(strided, Bytes<float>({1, 2, 3, 4}));
  EXPECT_NE(nc.find("# is_contiguous: false\n# shape: [2, 2]\n# strides: [1, 2]\n"
                    "# start_offset: 3\n"),
            std::string::npos)
      << nc;
  // The payload is the gathered logical view: printed in logical order.
  EXPECT_NE(nc.find("# Overview:\n1  2\n3  4\n"), std::string::npos) << nc;
}

TEST(TextExportTest, StatsCountNonFiniteValuesApart) {
  ManifestEntry e = Tensor("FLOAT32", {2, 4});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::string bytes = Bytes<float>({1.5f, -4, 0, nan, inf, -inf, 0, 2.5f});
  const ElementStats st = ComputeStats(e, bytes);
  EXPECT_EQ(st.count, 8u);
  EXPECT_EQ(st.finite, 5u);
  EXPECT_EQ(st.nan, 1u);
  EXPECT_EQ(st.pos_inf, 1u);
  EXPECT_EQ(st.neg_inf, 1u);
  EXPECT_EQ(st.zeros, 2u);
  EXPECT_EQ(st.min, -4);
  EXPECT_EQ(st.max, 2.5);
  EXPECT_EQ(st.abs_max, 4);
  EXPECT_DOUBLE_EQ(st.mean(), 0.0);
  // A truncated payload counts what it holds; FP4 decodes two per byte.
  ManifestEntry fp4 = Tensor("FP4E2M1", {4});
  const ElementStats f = ComputeStats(fp4, Bytes<uint8_t>({0x2F}));  // -6, 1
  EXPECT_EQ(f.count, 2u);
  EXPECT_EQ(f.min, -6);
  EXPECT_EQ(f.max, 1);
}

}  // namespace
}  // namespace argsdump
