#include "catalog/pg_cell.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {

const char* TypeName(uint32_t oid) {
  switch (static_cast<PgType>(oid)) {
    case PgType::kBool: return "bool";
    case PgType::kBytea: return "bytea";
    case PgType::kInt8: return "int8";
    case PgType::kInt2: return "int2";
    case PgType::kInt4: return "int4";
    case PgType::kText: return "text";
    case PgType::kTimestampTz: return "timestamptz";
    case PgType::kJsonb: return "jsonb";
  }
  return "another type";
}

// The cell is not NULL and has the expected type.
absl::Status Expect(const PgCell& cell, const CellPlace& place, PgType type) {
  if (cell.type != static_cast<uint32_t>(type)) {
    return CellError(place, absl::StrCat("has type oid ", cell.type, " (",
                                         TypeName(cell.type), "), expected ",
                                         TypeName(static_cast<uint32_t>(type))));
  }
  if (cell.is_null) return CellError(place, "is NULL");
  return absl::OkStatus();
}

// Big-endian integer of exactly `width` bytes (binary format).
absl::StatusOr<uint64_t> BigEndian(const PgCell& cell, const CellPlace& place,
                                   size_t width) {
  if (cell.bytes.size() != width) {
    return CellError(place, absl::StrCat("holds ", cell.bytes.size(),
                                         " bytes, expected ", width));
  }
  uint64_t v = 0;
  for (unsigned char c : cell.bytes) v = (v << 8) | c;
  return v;
}

}  // namespace

absl::Status CellError(const CellPlace& place, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("catalog table ", place.table, " column ",
                                          place.column, " row ", place.row, ": ", what));
}

absl::StatusOr<int64_t> DecodeInt8(const PgCell& cell, const CellPlace& place) {
  if (absl::Status s = Expect(cell, place, PgType::kInt8); !s.ok()) return s;
  absl::StatusOr<uint64_t> v = BigEndian(cell, place, 8);
  if (!v.ok()) return v.status();
  return static_cast<int64_t>(*v);
}

absl::StatusOr<int32_t> DecodeInt4(const PgCell& cell, const CellPlace& place) {
  if (absl::Status s = Expect(cell, place, PgType::kInt4); !s.ok()) return s;
  absl::StatusOr<uint64_t> v = BigEndian(cell, place, 4);
  if (!v.ok()) return v.status();
  return static_cast<int32_t>(static_cast<uint32_t>(*v));
}

absl::StatusOr<int16_t> DecodeInt2(const PgCell& cell, const CellPlace& place) {
  if (absl::Status s = Expect(cell, place, PgType::kInt2); !s.ok()) return s;
  absl::StatusOr<uint64_t> v = BigEndian(cell, place, 2);
  if (!v.ok()) return v.status();
  return static_cast<int16_t>(static_cast<uint16_t>(*v));
}

absl::StatusOr<bool> DecodeBool(const PgCell& cell, const CellPlace& place) {
  if (absl::Status s = Expect(cell, place, PgType::kBool); !s.ok()) return s;
  absl::StatusOr<uint64_t> v = BigEndian(cell, place, 1);
  if (!v.ok()) return v.status();
  if (*v > 1) return CellError(place, absl::StrCat("bool byte is ", *v));
  return *v == 1;
}

absl::StatusOr<std::string> DecodeText(const PgCell& cell, const CellPlace& place,
                                       size_t max_bytes) {
  if (absl::Status s = Expect(cell, place, PgType::kText); !s.ok()) return s;
  if (cell.bytes.size() > max_bytes) {
    return CellError(place, absl::StrCat("holds ", cell.bytes.size(),
                                         " bytes, at most ", max_bytes, " allowed"));
  }
  return std::string(cell.bytes);
}

absl::StatusOr<std::string> DecodeBytea(const PgCell& cell, const CellPlace& place,
                                        size_t max_bytes) {
  if (absl::Status s = Expect(cell, place, PgType::kBytea); !s.ok()) return s;
  if (cell.bytes.size() > max_bytes) {
    return CellError(place, absl::StrCat("holds ", cell.bytes.size(),
                                         " bytes, at most ", max_bytes, " allowed"));
  }
  return std::string(cell.bytes);
}

absl::StatusOr<absl::Time> DecodeTimestamp(const PgCell& cell, const CellPlace& place) {
  if (absl::Status s = Expect(cell, place, PgType::kTimestampTz); !s.ok()) return s;
  absl::StatusOr<uint64_t> v = BigEndian(cell, place, 8);
  if (!v.ok()) return v.status();
  const int64_t us = static_cast<int64_t>(*v);
  if (us == std::numeric_limits<int64_t>::max() ||
      us == std::numeric_limits<int64_t>::min()) {
    return CellError(place, "is infinity");
  }
  // 2000-01-01T00:00:00Z is 946684800 s after the Unix epoch. Values far
  // outside the representable range saturate in absl::Time (no overflow).
  return absl::FromUnixSeconds(946684800) + absl::Microseconds(us);
}

absl::StatusOr<uint64_t> DecodeCount(const PgCell& cell, const CellPlace& place) {
  absl::StatusOr<int64_t> v = DecodeInt8(cell, place);
  if (!v.ok()) return v.status();
  if (*v < 0) return CellError(place, absl::StrCat("is negative (", *v, ")"));
  return static_cast<uint64_t>(*v);
}

}  // namespace argsdump
