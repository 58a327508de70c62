#include "catalog/catalog_row.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace argsdump {
namespace {

// Reads the cells of one row of `table`, naming the row in errors.
class RowReader {
 public:
  RowReader(const char* table, const std::vector<PgCell>& cells, std::string row)
      : table_(table), cells_(cells), row_(std::move(row)) {}
  void set_row(std::string row) { row_ = std::move(row); }
  CellPlace place(const char* column) const { return {table_, column, row_}; }
  const PgCell& cell(size_t i) const { return cells_[i]; }

 private:
  const char* table_;
  const std::vector<PgCell>& cells_;
  std::string row_;
};

#define ASSIGN_OR_RETURN_CELL(lhs, expr) \
  auto lhs##_or = (expr);                \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

absl::Status ShapeError(const char* table, size_t got, size_t want, size_t row_index) {
  return absl::DataLossError(absl::StrCat("catalog table ", table, " row #", row_index,
                                          ": ", got, " columns, expected ", want));
}

// A text cell that may be NULL ("" then).
absl::StatusOr<std::string> OptionalText(const PgCell& cell, const CellPlace& place) {
  if (cell.is_null && cell.type == static_cast<uint32_t>(PgType::kText)) return std::string();
  return DecodeText(cell, place, kMaxNameBytes);
}

}  // namespace

absl::StatusOr<CatalogCapture> DecodeCaptureRow(const std::vector<PgCell>& cells,
                                                size_t row_index) {
  if (cells.size() != kCaptureColumnCount) {
    return ShapeError("captures", cells.size(), kCaptureColumnCount, row_index);
  }
  RowReader row("captures", cells, absl::StrCat("#", row_index));
  ASSIGN_OR_RETURN_CELL(name, DecodeText(row.cell(0), row.place("name"), kMaxNameBytes));
  if (name.empty()) return CellError(row.place("name"), "is empty");
  row.set_row(absl::StrCat("'", absl::CHexEscape(name), "'"));
  CatalogCapture c;
  ASSIGN_OR_RETURN_CELL(state, DecodeInt2(row.cell(1), row.place("state")));
  if (state != v1::CAPTURE_STATE_LIVE && state != v1::CAPTURE_STATE_FINISHED) {
    return CellError(row.place("state"), absl::StrCat("is ", state, ", not 1 (live) or 2 (finished)"));
  }
  c.state = static_cast<v1::CaptureState>(state);
  ASSIGN_OR_RETURN_CELL(epoch, DecodeInt8(row.cell(2), row.place("epoch")));
  if (epoch < 1) return CellError(row.place("epoch"), absl::StrCat("is ", epoch, ", below 1"));
  c.epoch = epoch;
  ASSIGN_OR_RETURN_CELL(info, DecodeBytea(row.cell(3), row.place("info"), kMaxInfoBytes));
  if (!c.info.ParseFromString(info)) {
    return CellError(row.place("info"), "is not a CaptureInfo message");
  }
  if (c.info.name() != name) {
    return CellError(row.place("info"), absl::StrCat("names capture '", absl::CHexEscape(c.info.name()),
                                                     "', not the row's"));
  }
  ASSIGN_OR_RETURN_CELL(counters, DecodeBytea(row.cell(4), row.place("counters"),
                                              kMaxCountersBytes));
  if (!c.counters.ParseFromString(counters)) {
    return CellError(row.place("counters"), "is not a CaptureCounters message");
  }
  ASSIGN_OR_RETURN_CELL(records, DecodeCount(row.cell(5), row.place("committed_records")));
  ASSIGN_OR_RETURN_CELL(bytes, DecodeCount(row.cell(6), row.place("committed_bytes")));
  ASSIGN_OR_RETURN_CELL(bin_bytes, DecodeCount(row.cell(7), row.place("bin_bytes")));
  ASSIGN_OR_RETURN_CELL(stored, DecodeCount(row.cell(8), row.place("stored_bytes")));
  c.committed_records = records;
  c.committed_bytes = bytes;
  c.bin_bytes = bin_bytes;
  c.stored_bytes = stored;
  ASSIGN_OR_RETURN_CELL(prefix, DecodeText(row.cell(9), row.place("object_prefix"), kMaxNameBytes));
  c.object_prefix = std::move(prefix);
  ASSIGN_OR_RETURN_CELL(manifest, OptionalText(row.cell(10), row.place("manifest_key")));
  ASSIGN_OR_RETURN_CELL(bin, OptionalText(row.cell(11), row.place("bin_key")));
  ASSIGN_OR_RETURN_CELL(index, OptionalText(row.cell(12), row.place("index_key")));
  c.objects = {std::move(manifest), std::move(bin), std::move(index)};
  ASSIGN_OR_RETURN_CELL(created, DecodeTimestamp(row.cell(13), row.place("created_at")));
  c.created = created;
  const PgCell& finished = row.cell(14);
  if (!(finished.is_null && finished.type == static_cast<uint32_t>(PgType::kTimestampTz))) {
    ASSIGN_OR_RETURN_CELL(at, DecodeTimestamp(finished, row.place("finished_at")));
    c.finished = at;
  }
  // The row's parts agree with each other.
  if (c.state == v1::CAPTURE_STATE_FINISHED) {
    if (!c.finished.has_value()) return CellError(row.place("finished_at"), "is NULL on a finished capture");
    // args.bin may be absent (a level 3 capture that stored no payload).
    if (c.objects.manifest_key.empty() || c.objects.index_key.empty()) {
      return CellError(row.place("manifest_key"), "a finished capture lacks an object key");
    }
  } else if (c.finished.has_value()) {
    return CellError(row.place("finished_at"), "is set on a live capture");
  }
  const PgCell& job = row.cell(15);
  const PgCell& rank = row.cell(16);
  const bool job_null = job.is_null && job.type == static_cast<uint32_t>(PgType::kText);
  const bool rank_null = rank.is_null && rank.type == static_cast<uint32_t>(PgType::kInt4);
  if (job_null != rank_null || job_null != c.info.job().job().empty()) {
    if (!job_null) {
      ASSIGN_OR_RETURN_CELL(j, DecodeText(job, row.place("job"), kMaxNameBytes));
      (void)j;
    }
    return CellError(row.place("job"), "disagrees with rank or with info's job");
  }
  if (!job_null) {
    ASSIGN_OR_RETURN_CELL(j, DecodeText(job, row.place("job"), kMaxNameBytes));
    ASSIGN_OR_RETURN_CELL(r, DecodeInt4(rank, row.place("rank")));
    if (j != c.info.job().job()) return CellError(row.place("job"), "is not info's job");
    if (r < 0 || static_cast<uint32_t>(r) != c.info.job().rank()) {
      return CellError(row.place("rank"), absl::StrCat("is ", r, ", not info's rank"));
    }
  }
  return c;
}

absl::StatusOr<CatalogSegment> DecodeSegmentRow(const std::vector<PgCell>& cells,
                                                const std::string& capture, size_t row_index) {
  if (cells.size() != kSegmentColumnCount) {
    return ShapeError("segments", cells.size(), kSegmentColumnCount, row_index);
  }
  RowReader row("segments", cells,
                absl::StrCat("'", absl::CHexEscape(capture), "' #", row_index));
  CatalogSegment s;
  ASSIGN_OR_RETURN_CELL(seq, DecodeCount(row.cell(0), row.place("seq")));
  ASSIGN_OR_RETURN_CELL(key, DecodeText(row.cell(1), row.place("object_key"), kMaxNameBytes));
  ASSIGN_OR_RETURN_CELL(first, DecodeCount(row.cell(2), row.place("first_record")));
  ASSIGN_OR_RETURN_CELL(count, DecodeCount(row.cell(3), row.place("record_count")));
  ASSIGN_OR_RETURN_CELL(bytes, DecodeCount(row.cell(4), row.place("bytes")));
  ASSIGN_OR_RETURN_CELL(at, DecodeTimestamp(row.cell(5), row.place("committed_at")));
  if (key.empty()) return CellError(row.place("object_key"), "is empty");
  if (count > std::numeric_limits<uint64_t>::max() - first) {
    return CellError(row.place("record_count"), "overflows first_record + record_count");
  }
  s.seq = seq;
  s.object_key = std::move(key);
  s.first_record = first;
  s.record_count = count;
  s.bytes = bytes;
  s.committed = at;
  return s;
}

absl::StatusOr<CatalogJob> DecodeJobRow(const std::vector<PgCell>& cells, size_t row_index) {
  if (cells.size() != kJobColumnCount) {
    return ShapeError("captures (jobs)", cells.size(), kJobColumnCount, row_index);
  }
  RowReader row("captures (jobs)", cells, absl::StrCat("#", row_index));
  CatalogJob j;
  ASSIGN_OR_RETURN_CELL(job, DecodeText(row.cell(0), row.place("job"), kMaxNameBytes));
  if (job.empty()) return CellError(row.place("job"), "is empty");
  row.set_row(absl::StrCat("'", absl::CHexEscape(job), "'"));
  ASSIGN_OR_RETURN_CELL(world, DecodeInt4(row.cell(1), row.place("world_size")));
  if (world < 0) return CellError(row.place("world_size"), absl::StrCat("is negative (", world, ")"));
  ASSIGN_OR_RETURN_CELL(present, DecodeCount(row.cell(2), row.place("count")));
  ASSIGN_OR_RETURN_CELL(live, DecodeCount(row.cell(3), row.place("count live")));
  ASSIGN_OR_RETURN_CELL(finished, DecodeCount(row.cell(4), row.place("count finished")));
  if (live > present || finished > present - live) {
    return CellError(row.place("count"), "live and finished ranks exceed the ranks present");
  }
  j.job = std::move(job);
  j.world_size = static_cast<uint32_t>(world);
  j.ranks_present = present;
  j.ranks_live = live;
  j.ranks_finished = finished;
  return j;
}

std::string LabelsJson(const std::map<std::string, std::string>& labels) {
  auto quote = [](std::string* out, const std::string& s) {
    out->push_back('"');
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        out->push_back('\\');
        out->push_back(static_cast<char>(c));
      } else if (c < 0x20) {
        absl::StrAppendFormat(out, "\\u%04x", c);
      } else {
        out->push_back(static_cast<char>(c));
      }
    }
    out->push_back('"');
  };
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : labels) {
    if (!first) out.push_back(',');
    first = false;
    quote(&out, key);
    out.push_back(':');
    quote(&out, value);
  }
  out.push_back('}');
  return out;
}

std::string TextArrayLiteral(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('"');
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

}  // namespace argsdump
