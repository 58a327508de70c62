#include "format/record.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "format/dtype.h"
#include "format/names.h"

namespace argsdump {

StatsRow StatsRowFromProto(const v1::TensorStats& s) {
  StatsRow row;
#define ARGSDUMP_STATS_FROM_PROTO(member, type) row.member = s.member();
  ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_STATS_FROM_PROTO)
#undef ARGSDUMP_STATS_FROM_PROTO
  row.present = true;
  return row;
}

void StatsRowToProto(const StatsRow& row, v1::TensorStats* s) {
#define ARGSDUMP_STATS_TO_PROTO(member, type) s->set_##member(row.member);
  ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_STATS_TO_PROTO)
#undef ARGSDUMP_STATS_TO_PROTO
}

void StatsTable::Add(uint64_t record_id, const v1::ArgRecord& r) {
  if (!r.has_stats() && rows_.empty()) return;
  Add(record_id, r.has_stats() ? StatsRowFromProto(r.stats()) : StatsRow());
}

void StatsTable::Add(uint64_t record_id, const StatsRow& row) {
  if (rows_.size() < record_id) rows_.resize(record_id);
  if (rows_.size() == record_id) {
    rows_.push_back(row);
  } else {
    rows_[record_id] = row;
  }
}

absl::StatusOr<ManifestRow> RowFromRecord(const v1::ArgRecord& r) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("record of task ", TaskIdHex(r.task_id()), " arg ", r.arg_index(), ": ", what));
  };
  // What its fields say must hang together, as for a row read back
  // (CheckStoredRow): the store keeps nothing its own index would refuse.
  // (ValidateRecord also bounds the dims and checks every enum.)
  if (absl::Status s = ValidateRecord(r); !s.ok()) return s;
  if (r.func_ids_size() > static_cast<int>(kMaxRecordFuncIds)) {
    return bad(absl::StrCat(r.func_ids_size(), " func ids, at most 3"));
  }
  ManifestRow row;
#define ARGSDUMP_NUMBER(f) row.f = r.f();
#define ARGSDUMP_ENUM(f, E) row.f = static_cast<uint8_t>(r.f());
#define ARGSDUMP_SIMPLE(id, style, f) row.f = r.f();
  ARGSDUMP_ROW_NUMBERS(ARGSDUMP_NUMBER)
  ARGSDUMP_ROW_ENUMS(ARGSDUMP_ENUM)
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_SIMPLE)
#undef ARGSDUMP_NUMBER
#undef ARGSDUMP_ENUM
#undef ARGSDUMP_SIMPLE
  row.ndims = static_cast<uint8_t>(r.shape_size());
  for (int d = 0; d < r.shape_size(); ++d) {
    row.shape[d] = r.shape(d);
    row.strides[d] = r.strides(d);
  }
  row.func_count = static_cast<uint8_t>(r.func_ids_size());
  for (int i = 0; i < r.func_ids_size(); ++i) {
    if (r.func_ids(i) > 0xFFFF) return bad("func id above 65535");
    row.func_ids[i] = static_cast<uint16_t>(r.func_ids(i));
  }
  return row;
}

namespace {

// The rules a record and a stored row share: what the fields say must hang
// together, so no reader ever sizes a payload from one field and reads it
// by another. `logical_bytes` null: a row, which stores none (it is
// numel x element size by construction).
absl::Status CheckArgFields(int role, int stage, int kind, int dtype_value,
                            const uint32_t* shape, int ndims, uint64_t numel,
                            const uint64_t* logical_bytes, uint64_t bin_size, bool truncated) {
  if (!v1::Role_IsValid(role) || role == v1::ROLE_UNSPECIFIED) {
    return absl::InvalidArgumentError("role unset or unknown");
  }
  if (!v1::Stage_IsValid(stage) || stage == v1::STAGE_UNSPECIFIED) {
    return absl::InvalidArgumentError("stage unset or unknown");
  }
  if (!v1::Kind_IsValid(kind) || kind == v1::KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError("kind unset or unknown");
  }
  const std::optional<DataType> dtype = FromProtoDType(static_cast<v1::DType>(dtype_value));
  if (!dtype) return absl::InvalidArgumentError(absl::StrCat("dtype ", dtype_value, " unknown"));
  if (ndims > static_cast<int>(kMaxRecordDims)) {
    return absl::InvalidArgumentError(absl::StrCat("shape has ", ndims, " dims, at most 5"));
  }
  unsigned __int128 product = 1;
  for (int d = 0; d < ndims; ++d) {
    product *= shape[d];
    if (product > (uint64_t{1} << 48)) {
      return absl::InvalidArgumentError("shape product overflows (more than 2^48 elements)");
    }
  }
  if (numel != static_cast<uint64_t>(product)) {
    return absl::InvalidArgumentError(absl::StrCat("numel ", numel, " is not the shape's product ",
                                                   static_cast<uint64_t>(product)));
  }
  if (kind == v1::KIND_SCALAR) {
    if (bin_size != 0 || truncated) return absl::InvalidArgumentError("a scalar with payload");
    return absl::OkStatus();
  }
  const uint64_t logical = PayloadBytes(*dtype, numel);
  if (logical_bytes != nullptr && *logical_bytes != logical) {
    return absl::InvalidArgumentError(absl::StrCat(
        "logical_bytes ", *logical_bytes, " is not numel x element size ", logical));
  }
  if (truncated) {
    if (bin_size == 0 || bin_size >= logical) {
      return absl::InvalidArgumentError(absl::StrCat("truncated, but bin_size ", bin_size,
                                                     " is not in (0, ", logical, ")"));
    }
  } else if (bin_size != 0 && bin_size != logical) {
    return absl::InvalidArgumentError(
        absl::StrCat("bin_size ", bin_size, " is not numel x element size ", logical));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckStoredRow(const char* raw) {
  auto byte = [&](size_t offset) { return static_cast<uint8_t>(raw[offset]); };
  struct Member {
    FieldStyle style;
    size_t offset;
  };
#define ARGSDUMP_MEMBER(id, style, f) {FieldStyle::style, offsetof(ManifestRow, f)},
  static constexpr Member kMembers[] = {ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_MEMBER)};
#undef ARGSDUMP_MEMBER
  for (const Member& m : kMembers) {
    if (m.style != FieldStyle::kBool && m.style != FieldStyle::kTrueFlag) continue;
    const size_t offset = m.offset;
    if (byte(offset) > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("a flag at row byte ", offset, " holds ", byte(offset), ", not 0 or 1"));
    }
  }
  // The bools are 0/1: the row may be read as a struct now.
  ManifestRow r;
  std::memcpy(&r, raw, sizeof(r));
  if (r.ndims > kMaxRecordDims) return absl::InvalidArgumentError(absl::StrCat(r.ndims, " dims"));
  if (r.func_count > kMaxRecordFuncIds) {
    return absl::InvalidArgumentError(absl::StrCat(r.func_count, " func ids"));
  }
#define ARGSDUMP_ENUM_VALID(f, E)                                                      \
  if (!v1::E##_IsValid(r.f)) {                                                         \
    return absl::InvalidArgumentError(absl::StrCat("an enum out of range (role ", r.role, \
                                                   ", stage ", r.stage, ", kind ", r.kind, \
                                                   ", dtype ", r.dtype, ")"));             \
  }
  ARGSDUMP_ROW_ENUMS(ARGSDUMP_ENUM_VALID)
#undef ARGSDUMP_ENUM_VALID
  if (r.bin_offset + r.bin_size < r.bin_offset) {
    return absl::InvalidArgumentError("bin_offset + bin_size overflows");
  }
  // And what it says hangs together, as for a record Ingest takes.
  return CheckArgFields(r.role, r.stage, r.kind, r.dtype, r.shape, r.ndims, r.numel, nullptr,
                        r.bin_size, r.truncated);
}

v1::ArgRecord RecordFromRow(const ManifestRow& row) {
  v1::ArgRecord r;
#define ARGSDUMP_NUMBER(f) r.set_##f(row.f);
#define ARGSDUMP_ENUM(f, E) r.set_##f(static_cast<v1::E>(row.f));
#define ARGSDUMP_SIMPLE(id, style, f) r.set_##f(row.f);
  ARGSDUMP_ROW_NUMBERS(ARGSDUMP_NUMBER)
  ARGSDUMP_ROW_ENUMS(ARGSDUMP_ENUM)
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_SIMPLE)
#undef ARGSDUMP_NUMBER
#undef ARGSDUMP_ENUM
#undef ARGSDUMP_SIMPLE
  for (uint32_t i = 0; i < row.func_count && i < kMaxRecordFuncIds; ++i) {
    r.add_func_ids(row.func_ids[i]);
  }
  for (uint32_t d = 0; d < row.ndims && d < kMaxRecordDims; ++d) {
    r.add_shape(row.shape[d]);
    r.add_strides(row.strides[d]);
  }
  // Not stored: numel x element size by construction.
  if (row.kind == v1::KIND_TENSOR) {
    if (auto d = FromProtoDType(row.dtype)) r.set_logical_bytes(PayloadBytes(*d, row.numel));
  }
  return r;
}

absl::Status ValidateRecord(const v1::ArgRecord& r) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("record of task ", TaskIdHex(r.task_id()), " arg ", r.arg_index(), ": ", what));
  };
  if (r.shape_size() > static_cast<int>(kMaxRecordDims)) {
    return bad(absl::StrCat("shape has ", r.shape_size(), " dims, at most 5"));
  }
  if (r.strides_size() != r.shape_size()) return bad("shape and strides differ in length");
  const uint64_t logical = r.logical_bytes();
  const absl::Status s = CheckArgFields(r.role(), r.stage(), r.kind(), r.dtype(), r.shape().data(),
                                        r.shape_size(), r.numel(), &logical, r.bin_size(),
                                        r.truncated());
  if (!s.ok()) return bad(s.message());
  if (r.nonfinite()) {
    // Only a float tensor's elements can be NaN or infinite.
    if (r.kind() != v1::KIND_TENSOR) return bad("nonfinite on a scalar");
    const std::optional<DataType> dtype = FromProtoDType(r.dtype());
    if (!dtype || KindOf(*dtype) != ElementKind::kFloat) {
      return bad("nonfinite on a tensor whose dtype has no NaN or infinity");
    }
  }
  return absl::OkStatus();
}

namespace {

// One 24-byte key per row, compared as three integers. Rows hold only
// validated enum values (RowFromRecord), so stage, role and kind fit in two
// bits each. Ties on (task_id, stage, arg_index, role, kind) (a scalar
// lvalue passed twice) fall back to device thread, then arrival: a thread's
// records arrive in the order it wrote them (and its bin offsets grow in
// that order), so the result is the same on every run. ManifestOrderKey
// (record.h) is the same order.
struct OrderKey {
  uint64_t task_id;
  uint64_t slot;    // stage:2 | arg_index:32 | role:2 | kind:2
  uint64_t origin;  // device_thread:32 | arrival index:32
  bool operator<(const OrderKey& o) const {
    if (task_id != o.task_id) return task_id < o.task_id;
    if (slot != o.slot) return slot < o.slot;
    return origin < o.origin;
  }
};

OrderKey KeyOf(const ManifestRow& r, size_t arrival) {
  return OrderKey{r.task_id,
                  (uint64_t{r.stage} & 3) << 36 | uint64_t{r.arg_index} << 4 |
                      (uint64_t{r.role} & 3) << 2 | (uint64_t{r.kind} & 3),
                  uint64_t{r.device_thread} << 32 | static_cast<uint32_t>(arrival)};
}

void Emit(const OrderKey* k, size_t count, uint32_t* out) {
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<uint32_t>(k[i].origin);
}

// The keys grouped by device thread (arrival order within a group), each
// group sorted; `bounds` gets the starts of the non-empty groups, then n.
// False (nothing done) when thread ids are not a device's (too many).
bool SortedThreadGroups(const RecordList& records, std::vector<OrderKey>* keys,
                        std::vector<size_t>* bounds) {
  constexpr uint32_t kMaxGroups = 4096;
  std::vector<size_t> count;
  for (const ManifestRow& r : records) {
    if (r.device_thread >= kMaxGroups) return false;
    if (r.device_thread >= count.size()) count.resize(r.device_thread + 1, 0);
    ++count[r.device_thread];
  }
  std::vector<size_t> fill(count.size());
  for (size_t t = 0, at = 0; t < count.size(); at += count[t], ++t) {
    fill[t] = at;
    if (count[t] > 0) bounds->push_back(at);
  }
  bounds->push_back(records.size());
  size_t i = 0;
  for (const ManifestRow& r : records) (*keys)[fill[r.device_thread]++] = KeyOf(r, i++);
  for (size_t g = 0; g + 1 < bounds->size(); ++g) {
    OrderKey* first = keys->data() + (*bounds)[g];
    OrderKey* last = keys->data() + (*bounds)[g + 1];
    if (!std::is_sorted(first, last)) std::sort(first, last);
  }
  return true;
}

// Merges sorted groups pairwise until at most two are left.
void MergeDownToTwoGroups(std::vector<OrderKey>* keys, std::vector<size_t>* bounds) {
  const size_t n = keys->size();
  std::vector<OrderKey> merged(bounds->size() > 3 ? n : 0);
  while (bounds->size() > 3) {  // more than two groups
    std::vector<size_t> next;
    for (size_t g = 0; g + 1 < bounds->size(); g += 2) {
      next.push_back((*bounds)[g]);
      const OrderKey* a0 = keys->data() + (*bounds)[g];
      const OrderKey* a1 = keys->data() + (*bounds)[g + 1];
      OrderKey* out = merged.data() + (*bounds)[g];
      if (g + 2 < bounds->size()) {
        const OrderKey* a2 = keys->data() + (*bounds)[g + 2];
        std::merge(a0, a1, a1, a2, out);
      } else {
        std::copy(a0, a1, out);  // an odd group out
      }
    }
    next.push_back(n);
    keys->swap(merged);
    bounds->swap(next);
  }
}

// The last merge, of the two groups [0, mid) and [mid, n), writes indices.
void MergeIntoOrder(const std::vector<OrderKey>& keys, size_t mid, uint32_t* out) {
  const OrderKey* a = keys.data();
  const OrderKey* a_end = keys.data() + mid;
  const OrderKey* b = a_end;
  const OrderKey* b_end = keys.data() + keys.size();
  while (a != a_end && b != b_end) {
    const bool take_b = *b < *a;
    *out++ = static_cast<uint32_t>((take_b ? b : a)->origin);
    take_b ? ++b : ++a;
  }
  Emit(a, a_end - a, out);
  out += a_end - a;
  Emit(b, b_end - b, out);
}

}  // namespace

std::vector<uint32_t> ManifestOrder(const RecordList& records) {
  // Each device thread's records mostly arrive in task order already: group
  // the keys by thread (keeping arrival order), sort only the groups that
  // are not sorted, then merge the groups pairwise, the last merge straight
  // into the result. (A plain sort of a 1 M-record capture took ~65 ms.)
  const size_t n = records.size();
  std::vector<uint32_t> order(n);
  std::vector<OrderKey> keys(n);
  std::vector<size_t> bounds;
  if (!SortedThreadGroups(records, &keys, &bounds)) {  // not a device's thread ids: sort
    size_t i = 0;
    for (const ManifestRow& r : records) keys[i] = KeyOf(r, i), ++i;
    std::sort(keys.begin(), keys.end());
    Emit(keys.data(), n, order.data());
    return order;
  }
  MergeDownToTwoGroups(&keys, &bounds);
  if (bounds.size() <= 2) {  // zero or one group
    Emit(keys.data(), n, order.data());
  } else {
    MergeIntoOrder(keys, bounds[1], order.data());
  }
  return order;
}

absl::Status CheckScopeWords(const std::string& stats, const std::string& mode) {
  if (stats != "" && stats != "off" && stats != "on" && stats != "only") {
    return absl::InvalidArgumentError(
        absl::StrCat("stats: '", stats.substr(0, 16), "' is not off, on or only"));
  }
  if (mode != "" && mode != "all" && mode != "input" && mode != "output") {
    return absl::InvalidArgumentError(
        absl::StrCat("mode: '", mode.substr(0, 16), "' is not all, input or output"));
  }
  return absl::OkStatus();
}

absl::Status CheckDumpScope(const v1::DumpScope& scope) {
  if (scope.level() > 3) {
    return absl::InvalidArgumentError(absl::StrCat("scope.level: ", scope.level(), " is not 0..3"));
  }
  if (absl::Status s = CheckScopeWords(scope.stats(), scope.mode()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scope.", s.message()));
  }
  return absl::OkStatus();
}

uint32_t ReportedLevel(const v1::CaptureInfo& info) {
  if (!info.has_scope() || info.scope().level() > 3) return static_cast<uint32_t>(info.level());
  if (info.step_levels_size() <= 1) return info.scope().level();
  uint32_t last = 0;  // the last level above 0 (0: only the overflow check ran)
  for (const v1::StepLevel& l : info.step_levels()) {
    if (l.level() > 0 && l.level() <= 3) last = l.level();
  }
  return last;
}

absl::Status CheckStepLevels(const google::protobuf::RepeatedPtrField<v1::StepLevel>& levels) {
  for (int i = 0; i < levels.size(); ++i) {
    if (levels[i].level() > 3) {
      return absl::InvalidArgumentError(absl::StrCat("step_levels[", i, "].level: ",
                                                     levels[i].level(), " is not 0..3"));
    }
    if (absl::Status s = CheckScopeWords(levels[i].stats(), levels[i].mode()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("step_levels[", i, "].", s.message()));
    }
    if (i > 0 && levels[i].first_step() <= levels[i - 1].first_step()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step_levels[", i, "].first_step: ", levels[i].first_step(),
          " does not follow step ", levels[i - 1].first_step()));
    }
  }
  return absl::OkStatus();
}

}  // namespace argsdump
