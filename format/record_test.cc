#include "format/dtype.h"
#include "format/names.h"
#include "format/record.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/arg_records.h"

namespace argsdump {
namespace {

TEST(RecordFormatTest, Names) {
  EXPECT_EQ(TaskIdHex(0x200000a00), "0x0000000200000a00");
  EXPECT_STREQ(RoleName(v1::ROLE_INOUT), "inout");
  EXPECT_STREQ(StageName(v1::STAGE_BEFORE_DISPATCH), "before_dispatch");
  EXPECT_STREQ(KindName(v1::KIND_SCALAR), "scalar");
  EXPECT_EQ(DTypeName(v1::DTYPE_FLOAT64), "FLOAT64");
  EXPECT_EQ(DTypeName(v1::DTYPE_FP4E2M1), "FP4E2M1");
  EXPECT_EQ(DTypeName(99), "UNKNOWN(99)");
  for (int d = 0; d < kDataTypeCount; ++d) {
    const auto dtype = static_cast<DataType>(d);
    EXPECT_EQ(FromProtoDType(ToProtoDType(dtype)), dtype);
    EXPECT_EQ(DTypeName(ToProtoDType(dtype)), DataTypeName(dtype));
  }
  EXPECT_FALSE(FromProtoDType(0).has_value());
}

TEST(RecordFormatTest, TaskIdsParseBackStrictly) {
  for (uint64_t id : {uint64_t{0}, uint64_t{0x200000a00}, ~uint64_t{0}}) {
    EXPECT_EQ(ParseTaskIdHex(TaskIdHex(id)), id);
  }
  EXPECT_EQ(ParseTaskIdHex("100000003"), uint64_t{0x100000003});
  EXPECT_EQ(ParseTaskIdHex("0XAbC"), uint64_t{0xabc});
  for (const char* bad : {"", "0x", "0x0x1", "+12", "-1", " 12", "12 ", "0x1g",
                          "0x00000000000000001", "xyz"}) {
    EXPECT_FALSE(ParseTaskIdHex(bad).has_value()) << bad;
  }
}

TEST(RecordFormatTest, NamesParseBack) {
  for (v1::Role r : {v1::ROLE_INPUT, v1::ROLE_OUTPUT, v1::ROLE_INOUT}) {
    EXPECT_EQ(RoleFromName(RoleName(r)), r);
  }
  for (v1::Stage st : {v1::STAGE_BEFORE_DISPATCH, v1::STAGE_AFTER_COMPLETION}) {
    EXPECT_EQ(StageFromName(StageName(st)), st);
  }
  for (v1::Kind k : {v1::KIND_TENSOR, v1::KIND_SCALAR}) EXPECT_EQ(KindFromName(KindName(k)), k);
  EXPECT_FALSE(RoleFromName("unspecified").has_value());
  EXPECT_FALSE(StageFromName("Before_dispatch").has_value());
  EXPECT_FALSE(KindFromName("").has_value());
}

TEST(RecordFormatTest, ScalarsPrintShortestRoundTrip) {
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT32, BitsOf(0.1f)), "0.1");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT32, BitsOf(1.0f)), "1");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT32, BitsOf(16777217.0f)), "16777216");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT64, BitsOf(0.1)), "0.1");
  const double third = 1.0 / 3.0;
  const std::string s = FormatScalarJson(v1::DTYPE_FLOAT64, BitsOf(third));
  EXPECT_EQ(std::strtod(s.c_str(), nullptr), third) << s;
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT64, BitsOf(1e-310)), "1e-310");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT32, BitsOf(std::numeric_limits<float>::quiet_NaN())),
            "\"NaN\"");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT64, BitsOf(-std::numeric_limits<double>::infinity())),
            "\"-Infinity\"");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT32, BitsOf(std::numeric_limits<float>::infinity())),
            "\"Infinity\"");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_INT8, 0xFF), "-1");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_INT32, 0xFFFFFFFE), "-2");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_UINT64, ~uint64_t{0}), "18446744073709551615");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_BOOL, 1), "true");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT16, 0x3C00), "1");     // 1.0 in half
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_BFLOAT16, 0xC000), "-2");   // -2.0 in bf16
  // 16-bit floats print as few digits as their own format needs.
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT16, 0x2E66), "0.1");    // 0.0999755859375
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_BFLOAT16, 0x3DCD), "0.1");   // 0.10009765625
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT16, 0x7BFF), "6.55e+04");  // 65504, the largest
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT16, 0x0001), "6e-08");  // the smallest subnormal
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT16, 0x8000), "-0");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT16, 0x7C00), "\"Infinity\"");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_BFLOAT16, 0x7FC0), "\"NaN\"");
  // The float32 digits older captures wrote for 16-bit floats still match.
  EXPECT_TRUE(ScalarJsonMatches(v1::DTYPE_FLOAT16, 0x2E66, "0.1"));
  EXPECT_TRUE(ScalarJsonMatches(v1::DTYPE_FLOAT16, 0x2E66, "0.099975586"));
  EXPECT_FALSE(ScalarJsonMatches(v1::DTYPE_FLOAT16, 0x2E66, "0.0999"));
  EXPECT_TRUE(ScalarJsonMatches(v1::DTYPE_FLOAT32, BitsOf(0.1f), "0.1"));
  EXPECT_FALSE(ScalarJsonMatches(v1::DTYPE_FLOAT32, BitsOf(0.1f), "0.10000000149"));
  // Every finite positive half reads back as itself: the half nearest the
  // text's value (found by bisecting the halves, ordered by their bits) is
  // the one printed.
  auto nearest_half = [](double x) {
    uint32_t lo = 0, hi = 0x7BFF;  // the largest finite half
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (HalfToFloat(static_cast<uint16_t>(mid)) < x) lo = mid + 1; else hi = mid;
    }
    if (lo > 0 && x - HalfToFloat(static_cast<uint16_t>(lo - 1)) <
                      HalfToFloat(static_cast<uint16_t>(lo)) - x) {
      --lo;
    }
    return lo;
  };
  for (uint32_t b = 1; b < 0x7C00; ++b) {
    const std::string text = FormatScalarJson(v1::DTYPE_FLOAT16, b);
    EXPECT_EQ(nearest_half(std::strtod(text.c_str(), nullptr)), b) << text;
    if (nearest_half(std::strtod(text.c_str(), nullptr)) != b) break;
  }
  // Only the value's own bytes count (the rest of `bits` is not its).
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_INT16, 0x12348000), "-32768");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_UINT8, 0x1FF), "255");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_UINT32, 0x1FFFFFFFFull), "4294967295");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_BOOL, 0x100), "false");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT16, 0xFFFF3E00ull), "1.5");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT16, 0x7E00), "\"NaN\"");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FLOAT32, BitsOf(0.1f) | (uint64_t{0xABCD} << 32)), "0.1");
  // No scalar of the 8- and 4-bit floats exists: their raw bits.
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FP8E4M3FN, 0x38), "56");
  EXPECT_EQ(FormatScalarJson(v1::DTYPE_FP4E2M1, 0x3), "3");
  EXPECT_EQ(FormatScalarJson(99, 7), "7");  // a dtype this build does not know
}

TEST(RecordFormatTest, OrderIsTaskStageArgRole) {
  auto rec = [](uint64_t task, v1::Stage stage, uint32_t arg, v1::Role role) {
    return ScalarRecord(task).Stage(stage).Arg(arg).Role(role).Build();
  };
  const v1::ArgRecord a = rec(1, v1::STAGE_AFTER_COMPLETION, 0, v1::ROLE_OUTPUT);
  const v1::ArgRecord b = rec(2, v1::STAGE_BEFORE_DISPATCH, 0, v1::ROLE_INPUT);
  const v1::ArgRecord c = rec(2, v1::STAGE_BEFORE_DISPATCH, 1, v1::ROLE_INPUT);
  const v1::ArgRecord d = rec(2, v1::STAGE_AFTER_COMPLETION, 0, v1::ROLE_INOUT);
  RecordList rows;
  for (const v1::ArgRecord* r : {&d, &c, &a, &b}) rows.push_back(*RowFromRecord(*r));
  EXPECT_EQ(ManifestOrder(rows), (std::vector<uint32_t>{2, 3, 1, 0}));
  v1::ArgRecord six = a;
  for (int i = 0; i < 6; ++i) {
    six.add_shape(1);
    six.add_strides(1);
  }
  EXPECT_NE(RowFromRecord(six).status().message().find("6 dims"), std::string::npos);
  v1::ArgRecord odd = a;
  odd.add_shape(2);
  EXPECT_FALSE(RowFromRecord(odd).ok());
  v1::ArgRecord bad_enum = a;
  bad_enum.set_dtype(static_cast<v1::DType>(77));
  EXPECT_FALSE(RowFromRecord(bad_enum).ok());
  // What the fields say must agree, as for a row read back from args.index.
  v1::ArgRecord unset = a;
  unset.set_kind(v1::KIND_UNSPECIFIED);
  EXPECT_NE(RowFromRecord(unset).status().message().find("kind unset"), std::string::npos);
  v1::ArgRecord numel = a;
  numel.set_numel(3);
  EXPECT_NE(RowFromRecord(numel).status().message().find("shape's product"), std::string::npos);
}

// Against a plain stable sort by the documented key, on a small capture and
// on one large enough for the two-thread sort; many ties (the same scalar
// slot twice from one thread, the same task id from two threads).
TEST(RecordFormatTest, OrderMatchesTheDocumentedKeyWithTies) {
  // Shapes of input: random; each thread in task order (the common case,
  // merged without sorting); thread ids too large to group by.
  enum Shape { kRandom, kPerThreadSorted, kHugeThreadIds, kOneThread };
  EXPECT_TRUE(ManifestOrder(RecordList()).empty());
  for (const Shape shape : {kRandom, kPerThreadSorted, kHugeThreadIds, kOneThread})
  for (const size_t n : {size_t{1000}, size_t{150000}}) {
    std::mt19937_64 rng(n + shape);
    RecordList rows;
    std::vector<uint64_t> next_task(5, 0);
    for (size_t i = 0; i < n; ++i) {
      ManifestRow r;
      r.task_id = rng() % (n / 8);
      r.stage = 1 + rng() % 2;
      r.arg_index = rng() % 4;
      r.role = 1 + rng() % 3;
      r.kind = 1 + rng() % 2;
      r.device_thread = rng() % (shape == kPerThreadSorted ? 5 : 3);
      if (shape == kPerThreadSorted) {
        next_task[r.device_thread] += rng() % 2;  // runs of equal task ids
        r.task_id = (uint64_t{r.device_thread} << 20) + next_task[r.device_thread];
        r.stage = 1;
        r.arg_index = static_cast<uint32_t>(i);  // increasing within a task
      }
      if (shape == kHugeThreadIds) r.device_thread += 100000;
      if (shape == kOneThread) r.device_thread = 7;
      r.scalar_bits = i;  // tells tied rows apart
      rows.push_back(r);
    }
    std::vector<uint32_t> want(n);
    for (uint32_t i = 0; i < n; ++i) want[i] = i;
    std::stable_sort(want.begin(), want.end(), [&](uint32_t a, uint32_t b) {
      const ManifestRow& x = rows[a];
      const ManifestRow& y = rows[b];
      return std::tie(x.task_id, x.stage, x.arg_index, x.role, x.kind, x.device_thread) <
             std::tie(y.task_id, y.stage, y.arg_index, y.role, y.kind, y.device_thread);
    });
    const std::vector<uint32_t> got = ManifestOrder(rows);
    EXPECT_EQ(got, want) << n << " rows, input shape " << shape;
    // The key the index's lookups sort by gives the same order.
    bool key_sorted = true;
    for (size_t i = 1; i < got.size(); ++i) {
      key_sorted = key_sorted && ManifestOrderKey(rows[got[i - 1]], got[i - 1]) <
                                     ManifestOrderKey(rows[got[i]], got[i]);
    }
    EXPECT_TRUE(key_sorted) << n << " rows, input shape " << shape;
  }
}

// A float16 4x3 output of 24 bytes at offset 4096.
v1::ArgRecord GoodTensor() {
  return TensorRecord(0x200000a00ull).FuncIds({3, 9}).Arg(2).Role(v1::ROLE_OUTPUT)
      .Stage(v1::STAGE_AFTER_COMPLETION).Dtype(v1::DTYPE_FLOAT16).Shape({4, 3}).BinOffset(4096)
      .Contiguous().DeviceThread(5);
}

TEST(RecordFormatTest, RecordFromRowRoundTrips) {
  v1::ArgRecord r = GoodTensor();
  r.set_overwritten(true);
  r.set_in_flight_snapshot(true);
  const ManifestRow row = *RowFromRecord(r);
  const v1::ArgRecord back = RecordFromRow(row);
  EXPECT_EQ(back.SerializeAsString(), r.SerializeAsString()) << back.DebugString();
  const v1::ArgRecord s =
      ScalarRecord(1).Dtype(v1::DTYPE_FLOAT64).ScalarBits(BitsOf(2.5)).AmbiguousArgIndex();
  EXPECT_EQ(RecordFromRow(*RowFromRecord(s)).SerializeAsString(), s.SerializeAsString());
}

// The stats list names every v1::TensorStats field, and each one makes the
// trip through StatsRow.
TEST(RecordFormatTest, StatsListCoversTheProto) {
  const google::protobuf::Descriptor* d = v1::TensorStats::descriptor();
  int listed = 0;
  v1::TensorStats s;
  double value = 1;
#define ARGSDUMP_STATS_CASE(member, type)                                      \
  ++listed;                                                                    \
  EXPECT_NE(d->FindFieldByName(#member), nullptr) << #member;                  \
  s.set_##member(static_cast<type>(value++));
  ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_STATS_CASE)
#undef ARGSDUMP_STATS_CASE
  EXPECT_EQ(listed, d->field_count());
  v1::TensorStats back;
  StatsRowToProto(StatsRowFromProto(s), &back);
  EXPECT_EQ(back.SerializeAsString(), s.SerializeAsString());
}

TEST(RecordFormatTest, ValidateRecordNamesWhatIsWrong) {
  EXPECT_TRUE(ValidateRecord(GoodTensor()).ok());
  auto why = [](v1::ArgRecord r) { return std::string(ValidateRecord(r).message()); };
  v1::ArgRecord r = GoodTensor();
  for (int i = 0; i < 4; ++i) {
    r.add_shape(1);
    r.add_strides(1);
  }
  EXPECT_NE(why(r).find("6 dims"), std::string::npos);
  r = GoodTensor();
  r.set_shape(0, 1u << 30);
  r.set_shape(1, 1u << 30);
  EXPECT_NE(why(r).find("overflows"), std::string::npos);
  r = GoodTensor();
  r.set_numel(13);
  EXPECT_NE(why(r).find("numel 13"), std::string::npos);
  r = GoodTensor();
  r.set_bin_size(20);
  EXPECT_NE(why(r).find("bin_size 20"), std::string::npos);
  r.set_truncated(true);  // truncated to 20 of 24 bytes: fine
  EXPECT_TRUE(ValidateRecord(r).ok());
  r.set_bin_size(24);
  EXPECT_NE(why(r).find("truncated"), std::string::npos);
  r = GoodTensor();
  r.set_logical_bytes(48);
  EXPECT_NE(why(r).find("logical_bytes 48"), std::string::npos);
  r = GoodTensor();
  r.set_dtype(static_cast<v1::DType>(99));
  EXPECT_NE(why(r).find("dtype 99"), std::string::npos);
  r = GoodTensor();
  r.set_role(v1::ROLE_UNSPECIFIED);
  EXPECT_NE(why(r).find("role"), std::string::npos);
  r = GoodTensor();
  r.set_kind(v1::KIND_SCALAR);
  r.clear_shape();
  r.clear_strides();
  r.set_numel(1);
  EXPECT_NE(why(r).find("scalar with payload"), std::string::npos);
  r = GoodTensor();
  r.set_bin_size(0);  // metadata only (level 3, unmarked)
  EXPECT_TRUE(ValidateRecord(r).ok());
}

}  // namespace
}  // namespace argsdump
