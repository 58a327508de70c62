// The record builder fills what follows from shape and dtype and nothing a
// test did not ask for; a batch places payloads back to back.
#include "tests/testing/arg_records.h"

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/testing/record_batch.h"

namespace argsdump {
namespace {

// `record` is exactly the record `text` (protobuf text format) describes.
void ExpectRecord(const v1::ArgRecord& record, const char* text) {
  v1::ArgRecord want;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &want)) << text;
  EXPECT_EQ(record.SerializeAsString(), want.SerializeAsString()) << record.DebugString();
}

TEST(ArgRecordsTest, ATensorGetsWhatItsShapeAndDtypeSay) {
  const v1::ArgRecord r = TensorRecord(0x200000a00).FuncIds({3, 9}).Arg(2)
                              .Role(v1::ROLE_OUTPUT).Stage(v1::STAGE_AFTER_COMPLETION)
                              .Dtype(v1::DTYPE_FLOAT16).Shape({4, 3}).BinOffset(4096);
  ExpectRecord(r, R"(task_id: 0x200000a00 func_ids: [3, 9] arg_index: 2 role: ROLE_OUTPUT
                    stage: STAGE_AFTER_COMPLETION kind: KIND_TENSOR dtype: DTYPE_FLOAT16
                    shape: [4, 3] strides: [3, 1] numel: 12 logical_bytes: 24
                    bin_offset: 4096 bin_size: 24)");
  // FP4 packs two elements a byte; 0-d is one element.
  EXPECT_EQ(TensorRecord(1).Dtype(v1::DTYPE_FP4E2M1).Shape({3}).Build().logical_bytes(), 2u);
  const v1::ArgRecord zero_d = TensorRecord(1).Dtype(v1::DTYPE_FLOAT64);
  EXPECT_EQ(zero_d.numel(), 1u);
  EXPECT_EQ(zero_d.logical_bytes(), 8u);
  EXPECT_EQ(zero_d.strides_size(), 0);
}

TEST(ArgRecordsTest, WhatATestSetsIsKeptEvenWhenItDisagrees) {
  const v1::ArgRecord r =
      TensorRecord(1).Shape({2, 3}).Strides({1, 2}).Numel(5).LogicalBytes(7).BinSize(3);
  EXPECT_EQ(r.strides(0), 1u);
  EXPECT_EQ(r.strides(1), 2u);
  EXPECT_EQ(r.numel(), 5u);
  EXPECT_EQ(r.logical_bytes(), 7u);
  EXPECT_EQ(r.bin_size(), 3u);
}

TEST(ArgRecordsTest, AScalarHasOneElementAndNoPayload) {
  const v1::ArgRecord s = ScalarRecord(7).Arg(1).Dtype(v1::DTYPE_FLOAT32).ScalarBits(BitsOf(0.5f));
  ExpectRecord(s, R"(task_id: 7 arg_index: 1 role: ROLE_INPUT stage: STAGE_BEFORE_DISPATCH
                    kind: KIND_SCALAR dtype: DTYPE_FLOAT32 numel: 1 scalar_bits: 0x3F000000)");
  EXPECT_EQ(ScalarRecord(7).Build().dtype(), v1::DTYPE_INT32);
  EXPECT_EQ(BitsOf(int64_t{-7}), ~uint64_t{6});
  EXPECT_EQ(BitsOf(uint8_t{0xFF}), 0xFFu);  // zero-extended
}

TEST(ArgRecordsTest, ABatchPlacesPayloadsBackToBack) {
  RecordBatch b(100);
  b.Add(TensorRecord(1).Shape({2}), std::string(8, 'a'));
  v1::ArgRecord& scalar = b.Add(ScalarRecord(1).Arg(1));
  b.Add(TensorRecord(2).Shape({8}).Truncated(), std::string(4, 'b'));  // 4 of 32 bytes
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.records()[0].bin_offset(), 100u);
  EXPECT_EQ(b.records()[0].bin_size(), 8u);
  EXPECT_EQ(scalar.bin_offset(), 0u);
  EXPECT_EQ(scalar.bin_size(), 0u);
  EXPECT_EQ(b.records()[2].bin_offset(), 108u);
  EXPECT_EQ(b.records()[2].bin_size(), 4u);
  EXPECT_EQ(b.records()[2].logical_bytes(), 32u);
  EXPECT_EQ(b.end_bin_offset(), 112u);
  EXPECT_EQ(b.RecordPtrs(1, 3), (std::vector<const v1::ArgRecord*>{&b.records()[1],
                                                                   &b.records()[2]}));
  EXPECT_EQ(b.PayloadViews(), (std::vector<absl::string_view>{"aaaaaaaa", "", "bbbb"}));
}

}  // namespace
}  // namespace argsdump
