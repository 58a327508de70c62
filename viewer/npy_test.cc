#include "viewer/npy.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "format/dtype.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

ManifestEntry Tensor(const std::string& dtype, std::vector<uint64_t> shape) {
  ManifestEntry e;
  e.task_id = 0x100000007;
  e.role = v1::ROLE_OUTPUT;
  e.stage = v1::STAGE_AFTER_COMPLETION;
  e.kind = v1::KIND_TENSOR;
  e.dtype = *DataTypeFromName(dtype);
  e.arg_index = 1;
  e.shape = std::move(shape);
  e.numel = 1;
  for (uint64_t d : e.shape) e.numel *= d;
  e.bin_size = PayloadBytes(*DataTypeFromName(dtype), e.numel);
  return e;
}

std::string Bytes(size_t n) {
  std::string b(n, '\0');
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>(i * 37 + 11);
  return b;
}

TEST(NpyTest, HeaderIsWhatNumpyReads) {
  const ManifestEntry e = Tensor("FLOAT32", {2, 3});
  const std::string payload = Bytes(24);
  const std::string file = EncodeNpy(e, payload).value();
  // Magic, version 1.0, little-endian header length, 64-byte alignment.
  ASSERT_GE(file.size(), 10u);
  EXPECT_EQ(file.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<uint8_t>(file[8]) | static_cast<uint8_t>(file[9]) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = file.substr(10, header_len);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u)
      << header;
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(file.substr(10 + header_len), payload);
  const NpyArray a = ParseNpy(file).value();
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_FALSE(a.fortran_order);
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a.data_offset, 10 + header_len);
  EXPECT_EQ(NpyFileName(e), "task_0000000100000007_after_out1.npy");
}

TEST(NpyTest, EveryDtypeRoundTripsItsShapeAndValues) {
  struct Case {
    const char* dtype;
    const char* descr;
    bool widened;
  };
  const Case cases[] = {
      {"FLOAT32", "<f4", false}, {"FLOAT16", "<f2", false},  {"FLOAT64", "<f8", false},
      {"INT8", "|i1", false},    {"INT16", "<i2", false},    {"INT32", "<i4", false},
      {"INT64", "<i8", false},   {"UINT8", "|u1", false},    {"UINT16", "<u2", false},
      {"UINT32", "<u4", false},  {"UINT64", "<u8", false},   {"BOOL", "|b1", false},
      {"BFLOAT16", "<f4", true}, {"FP8E4M3FN", "<f4", true}, {"FP8E8M0", "<f4", true},
      {"FP4E2M1", "<f4", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dtype);
    // 0-d, 1-d (a trailing comma in the tuple), 5-d.
    for (const std::vector<uint64_t>& shape :
         {std::vector<uint64_t>{}, std::vector<uint64_t>{5}, std::vector<uint64_t>{1, 2, 1, 3, 2}}) {
      const ManifestEntry e = Tensor(c.dtype, shape);
      std::string payload = Bytes(e.bin_size);
      if (std::string(c.dtype) == "BOOL") {
        for (char& b : payload) b = static_cast<char>(b & 1);
      }
      const std::string file = EncodeNpy(e, payload).value();
      const NpyArray a = ParseNpy(file).value();
      EXPECT_EQ(a.descr, c.descr);
      EXPECT_EQ(a.shape, shape);
      EXPECT_EQ(a.numel(), e.numel);
      const std::string data = file.substr(a.data_offset);
      if (!c.widened) {
        EXPECT_EQ(data, payload);
        EXPECT_EQ(DtypeOfNpyDescr(a.descr), c.dtype);
        EXPECT_EQ(NpyFileName(e).find("_as_"), std::string::npos);
        continue;
      }
      EXPECT_NE(NpyFileName(e).find(std::string(".") + c.dtype + "_as_float32.npy"),
                std::string::npos)
          << NpyFileName(e);
      ASSERT_EQ(data.size(), e.numel * 4);
      const DataType dtype = *DataTypeFromName(c.dtype);
      for (uint64_t i = 0; i < e.numel; ++i) {
        float v;
        std::memcpy(&v, data.data() + i * 4, 4);
        const double want = ElementAsDouble(dtype, reinterpret_cast<const uint8_t*>(payload.data()), i);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(v)) << i;
        } else {
          EXPECT_EQ(v, static_cast<float>(want)) << i;
        }
      }
    }
  }
}

TEST(NpyTest, WhatCannotBeAnArraySaysWhy) {
  ManifestEntry scalar = Tensor("INT32", {});
  scalar.kind = v1::KIND_SCALAR;
  EXPECT_NE(EncodeNpy(scalar, "").status().message().find("scalar"), std::string::npos);
  ManifestEntry cut = Tensor("FLOAT32", {4});
  cut.truncated = true;
  cut.bin_size = 8;
  EXPECT_EQ(EncodeNpy(cut, Bytes(8)).status().message(), "truncated: 8 of 16 bytes captured");
  ManifestEntry over = Tensor("FLOAT32", {4});
  over.overwritten = true;
  EXPECT_NE(EncodeNpy(over, Bytes(16)).status().message().find("overwritten"), std::string::npos);
  ManifestEntry none = Tensor("FLOAT32", {4});
  none.bin_size = 0;
  EXPECT_EQ(EncodeNpy(none, "").status().message(), "no payload was captured");
}

TEST(NpyTest, ParsesNumpyHeadersAndRefusesBrokenFiles) {
  // As numpy 1.x writes it (16-byte alignment, version 1.0), '<' on a byte.
  std::string header = "{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }";
  header.append(16 - (10 + header.size() + 1) % 16, ' ');
  header += "\n";
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file.push_back(static_cast<char>(header.size()));
  file.push_back(0);
  file += header + "abc";
  NpyArray a = ParseNpy(file).value();
  EXPECT_EQ(DtypeOfNpyDescr(a.descr), "UINT8");
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{3}));
  // Every truncation and a few corruptions: an error, never a crash.
  for (size_t n = 0; n < file.size(); ++n) {
    EXPECT_FALSE(ParseNpy(file.substr(0, n)).ok()) << n;
  }
  std::string bad = file;
  bad[6] = 9;
  EXPECT_NE(ParseNpy(bad).status().message().find("version 9"), std::string::npos);
  bad = file;
  bad.replace(bad.find("(3,)"), 4, "(x,)");
  EXPECT_NE(ParseNpy(bad).status().message().find("shape dimension 'x'"), std::string::npos);
  EXPECT_NE(ParseNpy(file + "d").status().message().find("needs 3 data bytes, the file has 4"),
            std::string::npos);
  EXPECT_EQ(DtypeOfNpyDescr(">f4"), "");
  EXPECT_EQ(DtypeOfNpyDescr("=f4"), "FLOAT32");
}

}  // namespace
}  // namespace argsdump
