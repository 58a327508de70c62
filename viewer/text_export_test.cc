#include "viewer/text_export.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "format/dtype.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

// The reference viewer's files for whole captures: viewer_test's
// ExportsWhatTheReferenceViewerWrites (testdata/reference_export). Here,
// each rule on its own.

ManifestEntry Tensor(const std::string& dtype, std::vector<uint64_t> shape) {
  ManifestEntry e;
  e.task_id = 0x100000003ull;
  e.role = v1::ROLE_OUTPUT;
  e.stage = v1::STAGE_AFTER_COMPLETION;
  e.arg_index = 1;
  e.kind = v1::KIND_TENSOR;
  e.dtype = *DataTypeFromName(dtype);
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
  if (!b.empty()) std::memcpy(&b[0], v.data(), b.size());
  return b;
}

// FormatArgText with bin_size set from the payload.
std::string Text(ManifestEntry e, const std::string& payload) {
  e.bin_size = payload.size();
  return FormatArgText(e, payload);
}

const char kHeader[] =
    "# task_id: 0x0000000100000003\n"
    "# role: output\n"
    "# stage: after_completion\n"
    "# arg_index: 1\n";

TEST(TextExportTest, Float32MatrixWholeFile) {
  ManifestEntry e = Tensor("FLOAT32", {2, 3});
  EXPECT_EQ(Text(e, Bytes<float>({1.5f, -2, 0.1f, 100, 0, -0.25f})),
            std::string(kHeader) +
                "# dtype: FLOAT32\n"
                "# kind: tensor\n"
                "# is_contiguous: True\n"
                "# shape: [2, 3]\n"
                "# strides: [3, 1]\n"
                "# start_offset: 0\n"
                "\n"
                "# Overview:\n"
                "  1.5    -2   0.1\n"
                "  100     0 -0.25\n"
                "\n"
                "# Detail:\n"
                "[0, 0] 1.5\n"
                "[0, 1] -2\n"
                "[0, 2] 0.1\n"
                "[1, 0] 100\n"
                "[1, 1] 0\n"
                "[1, 2] -0.25\n");
  EXPECT_EQ(TextFileName(e), "task_0x0000000100000003_after_out1.txt");
}

// The overview block of an export, "# Overview:" up to the empty line.
std::string Overview(const std::string& text) {
  const size_t at = text.find("# Overview:\n");
  if (at == std::string::npos) return "(none)";
  return text.substr(at + 12, text.find("\n\n# Detail:", at) - at - 11);
}

TEST(TextExportTest, EveryDtypeAtItsPrecision) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::string dtype;
    std::string bytes;
    std::string overview;
  };
  const std::vector<Case> cases = {
      // The reference's: float32 %.6g, float16 %.4g, bfloat16 %.3g.
      {"FLOAT32", Bytes<float>({1.0f / 3, 123456789.0f, 1e-5f, -nan, -inf, -0.0f}),
       "   0.333333 1.23457e+08       1e-05         nan        -inf          -0\n"},
      {"FLOAT16", Bytes<uint16_t>({0x3C00, 0xC000, 0x7C00, 0x7BFF, 0x0001, 0xFE00}),
       "       1       -2      inf 6.55e+04 5.96e-08      nan\n"},
      {"BFLOAT16", Bytes<uint16_t>({0x3F80, 0xC0A0, 0x7FC0, 0x7F7F, 0x3EAB, 0x8000}),
       "       1       -5      nan 3.39e+38    0.334       -0\n"},
      {"INT8", Bytes<int8_t>({-128, 0, 127, 1, 2, 3}), "-128    0  127    1    2    3\n"},
      {"INT16", Bytes<int16_t>({-32768, 1, 2, 3, 4, 32767}),
       "-32768      1      2      3      4  32767\n"},
      {"INT32", Bytes<int32_t>({-7, 0, 2147483647, 1, 2, 3}),
       "        -7          0 2147483647          1          2          3\n"},
      {"INT64", Bytes<int64_t>({-(1ll << 62), 0, 9007199254740993ll, 1, 2, 3}),
       "-4611686018427387904                    0     9007199254740993                    1"
       "                    2                    3\n"},
      {"UINT8", Bytes<uint8_t>({0, 200, 255, 1, 2, 3}), "  0 200 255   1   2   3\n"},
      {"UINT16", Bytes<uint16_t>({0, 60000, 1, 2, 3, 65535}),
       "    0 60000     1     2     3 65535\n"},
      {"UINT32", Bytes<uint32_t>({4000000000u, 0, 1, 2, 3, 4}),
       "4000000000          0          1          2          3          4\n"},
      {"UINT64", Bytes<uint64_t>({18446744073709551615ull, 0, 1, 2, 3, 4}),
       "18446744073709551615                    0                    1                    2"
       "                    3                    4\n"},
      // Python's struct "?": any byte but 0 is True.
      {"BOOL", Bytes<uint8_t>({1, 0, 7, 255, 0, 1}), " True False  True  True False  True\n"},
      // Ours (text_export.h): float64 %.15g, FP8E4M3FN %.3g, FP8E8M0 and
      // FP4E2M1 %.2g.
      {"FLOAT64", Bytes<double>({0.1, -1e300, 2, 1.0 / 3, -0.0, 1e-300}),
       "              0.1           -1e+300                 2 0.333333333333333"
       "                -0            1e-300\n"},
      {"FP8E4M3FN", Bytes<uint8_t>({0x38, 0x7E, 0x7F, 0x01, 0xB9, 0x80}),
       "      1     448     nan 0.00195   -1.12      -0\n"},
      {"FP8E8M0", Bytes<uint8_t>({127, 130, 0xFF, 0, 134, 128}),
       "      1       8     nan 5.9e-39 1.3e+02       2\n"},
      // Two per byte, low nibble first: 0x2F = (-6, 1), 0x09 = (-0.5, 0),
      // 0x73 = (1.5, 6).
      {"FP4E2M1", Bytes<uint8_t>({0x2F, 0x09, 0x73}), "  -6    1 -0.5    0  1.5    6\n"},
  };
  std::set<std::string> covered;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dtype);
    covered.insert(c.dtype);
    EXPECT_EQ(Overview(Text(Tensor(c.dtype, {6}), c.bytes)), c.overview);
  }
  EXPECT_EQ(covered.size(), static_cast<size_t>(kDataTypeCount));
}

// Why those digits: with them every finite value of our 8- and 4-bit
// formats prints apart from every other (FP8E4M3FN's 0.1171875 and 0.125
// are both "0.12" at two digits; FP4's 1.5 and 2 both "2" at one).
TEST(TextExportTest, NarrowFloatsPrintEveryValueDistinctly) {
  for (const std::string dtype : {"FP8E4M3FN", "FP8E8M0", "FP4E2M1"}) {
    SCOPED_TRACE(dtype);
    const int codes = dtype == "FP4E2M1" ? 16 : 256;
    std::set<double> values;
    std::set<std::string> texts;
    for (int code = 0; code < codes; ++code) {
      const uint8_t byte = static_cast<uint8_t>(code);
      const std::string text = Overview(Text(Tensor(dtype, {1}), std::string(1, byte)));
      double v;
      if (dtype == "FP4E2M1") {
        v = Fp4E2M1ToFloat(byte);
      } else {
        v = dtype == "FP8E8M0" ? Fp8E8M0ToFloat(byte) : Fp8E4M3FnToFloat(byte);
      }
      if (std::isnan(v) || v == 0) continue;  // NaNs and the two zeros
      values.insert(v);
      texts.insert(text);
    }
    EXPECT_EQ(texts.size(), values.size());
  }
}

TEST(TextExportTest, OverviewAlignsToTheWidestElementAndBreaksRows) {
  // Widest anywhere, not per column; a line per last-dimension row.
  EXPECT_EQ(Overview(Text(Tensor("INT32", {3, 2}), Bytes<int32_t>({1, -1000, 22, 3, 4, 5}))),
            "    1 -1000\n"
            "   22     3\n"
            "    4     5\n");
  // 1-d: one line.
  EXPECT_EQ(Overview(Text(Tensor("UINT8", {5}), Bytes<uint8_t>({9, 10, 11, 12, 13}))),
            " 9 10 11 12 13\n");
}

TEST(TextExportTest, ZeroDimensionalTensor) {
  ManifestEntry e = Tensor("FLOAT32", {});
  EXPECT_EQ(Text(e, Bytes<float>({3})),
            std::string(kHeader) +
                "# dtype: FLOAT32\n"
                "# kind: tensor\n"
                "# is_contiguous: True\n"
                "# shape: []\n"
                "# strides: []\n"
                "# start_offset: 0\n"
                "\n"
                "# Overview:\n"
                "3\n"
                "\n"
                "# Detail:\n"
                "[] 3\n");
}

TEST(TextExportTest, FiveDimensionalTensorIndicesRowMajor) {
  const std::string text =
      Text(Tensor("UINT8", {1, 2, 1, 2, 2}), Bytes<uint8_t>({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NE(text.find("# shape: [1, 2, 1, 2, 2]\n# strides: [8, 4, 4, 2, 1]\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.substr(text.find("# Overview:")),
            "# Overview:\n0 1\n2 3\n4 5\n6 7\n\n# Detail:\n"
            "[0, 0, 0, 0, 0] 0\n[0, 0, 0, 0, 1] 1\n[0, 0, 0, 1, 0] 2\n[0, 0, 0, 1, 1] 3\n"
            "[0, 1, 0, 0, 0] 4\n[0, 1, 0, 0, 1] 5\n[0, 1, 0, 1, 0] 6\n[0, 1, 0, 1, 1] 7\n");
}

TEST(TextExportTest, EmptyDimension) {
  // No elements, so no payload: "(no data)", as the reference says.
  ManifestEntry e = Tensor("INT32", {2, 0});
  EXPECT_EQ(Text(e, ""), std::string(kHeader) +
                             "# dtype: INT32\n"
                             "# kind: tensor\n"
                             "# is_contiguous: True\n"
                             "# shape: [2, 0]\n"
                             "# strides: [0, 1]\n"
                             "# start_offset: 0\n"
                             "# (no data)\n");
  // A manifest that claims bytes anyway: the reference's rule (a 0 count
  // shows one element), at index 0 everywhere; a 0 last dimension is one
  // row of what is shown.
  EXPECT_EQ(Text(e, Bytes<int32_t>({7, 8})).substr(Text(e, Bytes<int32_t>({7, 8})).find("\n\n")),
            "\n\n# Overview:\n7\n\n# Detail:\n[0, 0] 7\n");
}

TEST(TextExportTest, NonContiguousViewPrintsItsGeometryAndLogicalOrder) {
  ManifestEntry e = Tensor("FLOAT32", {2, 2});
  e.strides = {1, 2};
  e.is_contiguous = false;
  e.start_offset = 3;
  const std::string text = Text(e, Bytes<float>({1, 2, 3, 4}));
  EXPECT_NE(text.find("# is_contiguous: False\n# shape: [2, 2]\n# strides: [1, 2]\n"
                      "# start_offset: 3\n\n# Overview:\n1 2\n3 4\n"),
            std::string::npos)
      << text;
}

TEST(TextExportTest, TruncatedShowsWhatThePayloadHolds) {
  ManifestEntry t = Tensor("INT32", {2, 2});
  t.truncated = true;
  EXPECT_EQ(Text(t, Bytes<int32_t>({1, 2, 3})), std::string(kHeader) +
                                                    "# dtype: INT32\n"
                                                    "# kind: tensor\n"
                                                    "# is_contiguous: True\n"
                                                    "# shape: [2, 2]\n"
                                                    "# strides: [2, 1]\n"
                                                    "# start_offset: 0\n"
                                                    "# DATA TRUNCATED (tensor too large for arena)\n"
                                                    "\n"
                                                    "# Overview:\n"
                                                    "1 2\n"
                                                    "3\n"
                                                    "\n"
                                                    "# Detail:\n"
                                                    "[0, 0] 1\n"
                                                    "[0, 1] 2\n"
                                                    "[1, 0] 3\n");
  // Less than one element: empty blocks, as the reference writes them.
  ManifestEntry short_one = Tensor("FLOAT32", {4});
  short_one.truncated = true;
  const std::string text = Text(short_one, std::string(2, '\0'));
  EXPECT_EQ(text.substr(text.find("# DATA")),
            "# DATA TRUNCATED (tensor too large for arena)\n\n# Overview:\n\n\n# Detail:\n");
}

TEST(TextExportTest, OverwrittenSaysSoAndStops) {
  ManifestEntry over = Tensor("FLOAT32", {1});
  over.overwritten = true;
  over.truncated = true;
  const std::string text = Text(over, Bytes<float>({1}));
  EXPECT_EQ(text.substr(text.find("# start_offset")),
            "# start_offset: 0\n# DATA OVERWRITTEN (host too slow)\n");
}

TEST(TextExportTest, NoDataSaysSo) {
  ManifestEntry none = Tensor("FLOAT16", {8});
  const std::string text = Text(none, "");
  EXPECT_EQ(text.substr(text.find("# start_offset")), "# start_offset: 0\n# (no data)\n");
}

ManifestEntry Scalar(const std::string& dtype, const std::string& token) {
  ManifestEntry s = Tensor(dtype, {});
  s.kind = v1::KIND_SCALAR;
  s.stage = v1::STAGE_BEFORE_DISPATCH;
  s.role = v1::ROLE_INPUT;
  s.arg_index = 2;
  s.has_value = !token.empty();
  s.value = token;
  return s;
}

TEST(TextExportTest, ScalarWholeFile) {
  ManifestEntry s = Scalar("FLOAT32", "0.5");
  s.arg_index_ambiguous = true;  // the reference does not print it either
  EXPECT_EQ(FormatArgText(s, ""),
            "# task_id: 0x0000000100000003\n"
            "# role: input\n"
            "# stage: before_dispatch\n"
            "# arg_index: 2\n"
            "# dtype: FLOAT32\n"
            "# kind: scalar\n"
            "# is_contiguous: True\n"
            "# shape: []\n"
            "# strides: []\n"
            "# start_offset: 0\n"
            "# value: 0.5\n");
  EXPECT_EQ(TextFileName(s), "task_0x0000000100000003_before_in2.txt");
}

// The reference prints str() of what json.load made of the manifest's
// token: Python's int and float spellings, strings unquoted.
TEST(TextExportTest, ScalarValuesAsPythonPrintsThem) {
  struct Case {
    std::string dtype, token, printed;
  };
  const std::vector<Case> cases = {
      {"INT32", "42", "42"},
      {"INT32", "-7", "-7"},
      {"FLOAT32", "1", "1"},  // an int token stays an int
      {"FLOAT32", "-0", "0"},
      {"INT64", "9007199254740993", "9007199254740993"},
      {"UINT64", "18446744073709551615", "18446744073709551615"},
      {"FLOAT32", "0.5", "0.5"},
      {"FLOAT32", "1e+02", "100.0"},
      {"FLOAT32", "16777216", "16777216"},
      {"FLOAT32", "3.14159274", "3.14159274"},
      {"FLOAT32", "-0.0", "-0.0"},
      {"FLOAT64", "1.5e+15", "1500000000000000.0"},
      {"FLOAT64", "1234567890123456.5", "1234567890123456.5"},
      {"FLOAT64", "1e+16", "1e+16"},
      {"FLOAT64", "2.5e+16", "2.5e+16"},
      {"FLOAT64", "0.0001", "0.0001"},
      {"FLOAT64", "1e-05", "1e-05"},
      {"FLOAT64", "-2.5e-08", "-2.5e-08"},
      {"FLOAT64", "1e-310", "1e-310"},
      {"FLOAT64", "0.1", "0.1"},
      {"FLOAT64", "1E400", "inf"},
      {"FLOAT32", "\"NaN\"", "NaN"},
      {"FLOAT32", "\"Infinity\"", "Infinity"},
      {"FLOAT64", "\"-Infinity\"", "-Infinity"},
      {"BOOL", "true", "true"},
      {"BOOL", "false", "false"},
      {"INT32", "true", "True"},
      {"FLOAT32", "", "None"},  // no value in the manifest
      {"BOOL", "", "false"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dtype + " " + c.token);
    const std::string text = FormatArgText(Scalar(c.dtype, c.token), "");
    EXPECT_EQ(text.substr(text.find("# value: ")), "# value: " + c.printed + "\n");
  }
}

TEST(TextExportTest, FileNameSpellsTheTaskIdAsTheManifestDoes) {
  ManifestEntry e = Tensor("INT32", {2});
  e.task_id_text = "0x00000001000000AB";
  e.task_id = 0x1000000ABull;
  e.role = v1::ROLE_INOUT;
  e.stage = v1::STAGE_BEFORE_DISPATCH;
  e.arg_index = 12;
  EXPECT_EQ(TextFileName(e), "task_0x00000001000000AB_before_inout12.txt");
  EXPECT_EQ(Text(e, Bytes<int32_t>({1, 2})).rfind("# task_id: 0x00000001000000AB\n", 0), 0u);
  e.task_id_text.clear();  // a remote entry: the service's spelling
  EXPECT_EQ(TextFileName(e), "task_0x00000001000000ab_before_inout12.txt");
}

TEST(TextExportTest, OurExtraFactsFollowTheReferenceHeader) {
  ManifestEntry e = Tensor("FLOAT32", {1});
  e.step = 3;
  e.overflow = true;
  e.in_flight_snapshot = true;  // the listing says it; the reference text has no line for it
  const std::string text = Text(e, Bytes<float>({1}));
  EXPECT_NE(text.find("# start_offset: 0\n# step: 3\n# overflow: True (captured by the overflow "
                      "check: the task's output held a NaN or an Inf; inputs are as they were "
                      "at completion)\n\n# Overview:\n1\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("in_flight"), std::string::npos) << text;
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
