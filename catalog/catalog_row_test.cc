// The row decoders and parameter encoders without a database: a row as
// PostgreSQL sends it decodes, and each broken cell is DataLoss naming its
// column.
#include "catalog/catalog_row.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

std::string BigEndian(uint64_t v, int width) {
  std::string out(static_cast<size_t>(width), '\0');
  for (int i = width - 1; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

struct Row {
  std::vector<std::string> storage;
  std::vector<PgCell> cells;
  void Add(PgType type, std::string bytes, bool null = false) {
    storage.push_back(std::move(bytes));
    PgCell cell;
    cell.type = static_cast<uint32_t>(type);
    cell.is_null = null;
    cells.push_back(cell);
  }
  // The views, once storage no longer moves.
  std::vector<PgCell> Cells() const {
    std::vector<PgCell> out = cells;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out[i].is_null) out[i].bytes = storage[i];
    }
    return out;
  }
};

Row LiveRow() {
  v1::CaptureInfo info;
  info.set_name("cap");
  info.mutable_job()->set_job("j");
  info.mutable_job()->set_rank(2);
  v1::CaptureCounters counters;
  counters.set_total_args(5);
  Row row;
  row.Add(PgType::kText, "cap");
  row.Add(PgType::kInt2, BigEndian(1, 2));
  row.Add(PgType::kInt8, BigEndian(3, 8));
  row.Add(PgType::kBytea, info.SerializeAsString());
  row.Add(PgType::kBytea, counters.SerializeAsString());
  row.Add(PgType::kInt8, BigEndian(5, 8));
  row.Add(PgType::kInt8, BigEndian(100, 8));
  row.Add(PgType::kInt8, BigEndian(0, 8));
  row.Add(PgType::kInt8, BigEndian(10, 8));
  row.Add(PgType::kText, "p/cap");
  row.Add(PgType::kText, "", true);
  row.Add(PgType::kText, "", true);
  row.Add(PgType::kText, "", true);
  row.Add(PgType::kTimestampTz, BigEndian(1000000, 8));  // 2000-01-01T00:00:01Z
  row.Add(PgType::kTimestampTz, "", true);
  row.Add(PgType::kText, "j");
  row.Add(PgType::kInt4, BigEndian(2, 4));
  return row;
}

TEST(CatalogRowTest, DecodesACaptureRow) {
  absl::StatusOr<CatalogCapture> c = DecodeCaptureRow(LiveRow().Cells(), 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->info.name(), "cap");
  EXPECT_EQ(c->state, v1::CAPTURE_STATE_LIVE);
  EXPECT_EQ(c->epoch, 3);
  EXPECT_EQ(c->counters.total_args(), 5u);
  EXPECT_EQ(c->committed_bytes, 100u);
  EXPECT_EQ(c->created, absl::FromUnixSeconds(946684801));
  EXPECT_FALSE(c->finished.has_value());
}

TEST(CatalogRowTest, EachBrokenCellIsDataLossNamingItsColumn) {
  struct Case {
    size_t column;
    PgType type;
    std::string bytes;
    bool null;
    const char* name;
  };
  const Case cases[] = {
      {0, PgType::kText, "", true, "name"},
      {1, PgType::kInt2, BigEndian(9, 2), false, "state"},
      {2, PgType::kInt8, BigEndian(1, 4), false, "epoch"},           // short
      {2, PgType::kText, "1", false, "epoch"},                        // another type
      {3, PgType::kBytea, "\xff\xff", false, "info"},
      {4, PgType::kBytea, "\x0a", false, "counters"},
      {5, PgType::kInt8, BigEndian(~0ull, 8), false, "committed_records"},  // -1
      {13, PgType::kTimestampTz, BigEndian(0x7fffffffffffffffull, 8), false, "created_at"},
      {14, PgType::kTimestampTz, BigEndian(0, 8), false, "finished_at"},   // set while live
      {16, PgType::kInt4, BigEndian(7, 4), false, "rank"},
      {15, PgType::kText, "other", false, "job"},
  };
  for (const Case& c : cases) {
    Row row = LiveRow();
    row.storage[c.column] = c.bytes;
    row.cells[c.column].type = static_cast<uint32_t>(c.type);
    row.cells[c.column].is_null = c.null;
    absl::Status s = DecodeCaptureRow(row.Cells(), 4).status();
    EXPECT_TRUE(absl::IsDataLoss(s)) << c.name << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("column ", c.name))) << s;
  }
  Row row = LiveRow();
  row.cells.pop_back();
  EXPECT_TRUE(absl::IsDataLoss(DecodeCaptureRow(row.Cells(), 0).status()));
}

TEST(CatalogRowTest, EncodesParametersWithTheirEscapes) {
  EXPECT_EQ(LabelsJson({}), "{}");
  EXPECT_EQ(LabelsJson({{"a\"b", "c\\d\n"}}), "{\"a\\\"b\":\"c\\\\d\\u000a\"}");
  EXPECT_EQ(TextArrayLiteral({}), "{}");
  EXPECT_EQ(TextArrayLiteral({"a", "b\"c\\", "NULL"}), "{\"a\",\"b\\\"c\\\\\",\"NULL\"}");
}

}  // namespace
}  // namespace argsdump
