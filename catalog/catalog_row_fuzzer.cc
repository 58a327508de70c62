// libFuzzer target: any cells as a catalog row (what a hostile or damaged
// database could send). Input: a byte choosing the row (capture, segment,
// job), then cells as [flags][length: 2 bytes LE][bytes], flags bit 0 =
// NULL, bit 1 = a 4-byte LE type oid follows the flags (else the column's
// expected type); missing cells are NULL. A row either decodes to values
// that keep the row's invariants or is DataLoss with a bounded message.
//   bazel build --config=fuzz //catalog:catalog_row_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "catalog/catalog_row.h"
#include "catalog/pg_cell.h"

namespace {

using argsdump::PgCell;
using argsdump::PgType;

constexpr PgType kCaptureTypes[] = {
    PgType::kText,  PgType::kInt2,  PgType::kInt8, PgType::kBytea, PgType::kBytea,
    PgType::kInt8,  PgType::kInt8,  PgType::kInt8, PgType::kInt8,  PgType::kText,
    PgType::kText,  PgType::kText,  PgType::kText, PgType::kTimestampTz,
    PgType::kTimestampTz, PgType::kText, PgType::kInt4};
constexpr PgType kSegmentTypes[] = {PgType::kInt8, PgType::kText, PgType::kInt8,
                                    PgType::kInt8, PgType::kInt8, PgType::kTimestampTz};
constexpr PgType kJobTypes[] = {PgType::kText, PgType::kInt4, PgType::kInt8, PgType::kInt8,
                                PgType::kInt8};

std::vector<PgCell> Cells(const uint8_t* data, size_t size, const PgType* types, size_t count) {
  std::vector<PgCell> cells;
  size_t at = 0;
  while (cells.size() < count + 1 && at < size) {
    PgCell cell;
    const uint8_t flags = data[at++];
    cell.type = cells.size() < count ? static_cast<uint32_t>(types[cells.size()]) : 0;
    if ((flags & 2) != 0 && at + 4 <= size) {
      cell.type = static_cast<uint32_t>(data[at]) | static_cast<uint32_t>(data[at + 1]) << 8 |
                  static_cast<uint32_t>(data[at + 2]) << 16 |
                  static_cast<uint32_t>(data[at + 3]) << 24;
      at += 4;
    }
    size_t length = 0;
    if (at + 2 <= size) {
      length = data[at] | static_cast<size_t>(data[at + 1]) << 8;
      at += 2;
    }
    if (length > size - at) length = size - at;
    cell.is_null = (flags & 1) != 0;
    if (!cell.is_null) cell.bytes = absl::string_view(reinterpret_cast<const char*>(data + at), length);
    at += length;
    cells.push_back(cell);
  }
  while (cells.size() < count) {
    PgCell null_cell;
    null_cell.type = static_cast<uint32_t>(types[cells.size()]);
    null_cell.is_null = true;
    cells.push_back(null_cell);
  }
  return cells;
}

void CheckError(const absl::Status& status) {
  if (!absl::IsDataLoss(status) || status.message().size() > 4096) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t which = data[0] % 3;
  ++data;
  --size;
  if (which == 0) {
    auto row = argsdump::DecodeCaptureRow(Cells(data, size, kCaptureTypes, 17), 0);
    if (!row.ok()) {
      CheckError(row.status());
    } else {
      const bool finished = row->state == argsdump::v1::CAPTURE_STATE_FINISHED;
      if (row->epoch < 1 || row->info.name().empty() || finished != row->finished.has_value() ||
          (finished && (row->objects.manifest_key.empty() || row->objects.index_key.empty()))) {
        std::abort();
      }
    }
  } else if (which == 1) {
    auto row = argsdump::DecodeSegmentRow(Cells(data, size, kSegmentTypes, 6), "c", 0);
    if (!row.ok()) {
      CheckError(row.status());
    } else if (row->object_key.empty() || row->first_record + row->record_count < row->first_record) {
      std::abort();
    }
  } else {
    auto row = argsdump::DecodeJobRow(Cells(data, size, kJobTypes, 5), 0);
    if (!row.ok()) {
      CheckError(row.status());
    } else if (row->job.empty() || row->ranks_live + row->ranks_finished > row->ranks_present) {
      std::abort();
    }
  }
  return 0;
}
