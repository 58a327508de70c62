#include "viewer/capture_compare.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "format/dtype.h"
#include "format/names.h"

namespace argsdump {
namespace {

std::string Dims(const std::vector<uint64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

std::string Num(double v) { return absl::StrFormat("%.6g", v); }

}  // namespace

std::tuple<uint64_t, int, uint32_t, int> ManifestKey(const ManifestEntry& e) {
  return {e.task_id, static_cast<int>(e.stage), e.arg_index, static_cast<int>(e.role)};
}

std::string WhereIs(const ManifestEntry& e) {
  return absl::StrFormat("task %s %s %s arg %d", TaskIdHex(e.task_id),
                         StageShortName(e.stage), RoleName(e.role), e.arg_index);
}

std::string ElementPosition(const std::vector<uint64_t>& shape, uint64_t flat) {
  std::vector<uint64_t> at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return absl::StrCat("[", absl::StrJoin(at, ", "), "]");
}

uint64_t ElementsIn(const ManifestEntry& e, uint64_t bytes) {
  uint64_t numel = 1;
  for (uint64_t d : e.shape) numel *= d;
  return std::min<uint64_t>(numel, bytes * 8 / std::max<uint32_t>(1, ElementBits(e.dtype)));
}

ArgVerdict CompareArg(const ManifestEntry& a, const std::string& pa, const ManifestEntry& g,
                      const std::string& pg, const Tolerance& t) {
  ArgVerdict v;
  v.numel = 1;
  for (uint64_t d : a.shape) v.numel *= d;
  auto not_compared = [&](const std::string& why) {
    v.differs = true;
    v.status = why;
    v.detail = absl::StrCat(WhereIs(a), ": ", why);
    return v;
  };
  if (a.kind != g.kind) {
    return not_compared(absl::StrCat("kind ", KindName(a.kind), " vs golden ", KindName(g.kind)));
  }
  if (a.is_scalar()) {
    v.numel = 1;
    double x, y;
    if (a.value == g.value) {
      ElementDiff same;
      same.compared = 1;
      v.diff = same;
      v.status = "ok";
      return v;
    }
    if (!ScalarAsDouble(a.value, &x) || !ScalarAsDouble(g.value, &y)) {
      return not_compared(absl::StrCat("value ", a.value, " vs golden ", g.value));
    }
    v.diff = CompareValues(x, y, t);
    v.differs = v.diff->mismatches > 0;
    v.status = v.differs ? "DIFFERS" : "ok";
    if (v.differs) v.detail = absl::StrCat(WhereIs(a), ": value ", a.value, ", golden ", g.value);
    return v;
  }
  if (a.shape != g.shape) {
    return not_compared(absl::StrCat("shape ", Dims(a.shape), " vs golden ", Dims(g.shape)));
  }
  if (a.overwritten || g.overwritten) {
    return not_compared(a.overwritten ? "overwritten (bytes untrustworthy)"
                                      : "golden overwritten (bytes untrustworthy)");
  }
  if (a.bin_size == 0 && g.bin_size == 0) {
    // Metadata only on both sides (hybrid level): shape and dtype are all
    // there is to compare.
    v.differs = a.dtype != g.dtype;
    const char* ad = DataTypeName(a.dtype).data();
    const char* gd = DataTypeName(g.dtype).data();
    v.status = v.differs ? absl::StrCat("DIFFERS (dtype ", ad, " vs golden ", gd, ")")
                         : "ok (metadata only)";
    if (v.differs) v.detail = absl::StrCat(WhereIs(a), ": dtype ", ad, ", golden ", gd);
    return v;
  }
  if (a.bin_size == 0 || g.bin_size == 0) {
    return not_compared(a.bin_size == 0 ? "no data captured" : "golden has no data");
  }
  const uint64_t count = std::min(ElementsIn(a, pa.size()), ElementsIn(g, pg.size()));
  const ElementDiff d = CompareElements(a.dtype, pa, g.dtype, pg, count, t);
  std::vector<std::string> notes;
  if (a.dtype != g.dtype) notes.push_back(absl::StrCat("golden ", DataTypeName(g.dtype).data()));
  if (count < v.numel) {
    notes.push_back(absl::StrCat("truncated: ", count, " of ", v.numel, " compared"));
  }
  if (d.nonfinite > 0) notes.push_back(absl::StrCat(d.nonfinite, " NaN/Inf on one side"));
  v.diff = d;
  v.differs = d.mismatches > 0;
  v.status = absl::StrCat(v.differs ? "DIFFERS" : "ok",
                          notes.empty() ? "" : absl::StrCat(" (", absl::StrJoin(notes, "; "), ")"));
  if (v.differs) {
    v.detail = absl::StrCat(WhereIs(a), ": element ", ElementPosition(a.shape, d.first_mismatch),
                            " = ", Num(d.first_actual), ", golden ", Num(d.first_golden));
  }
  return v;
}

absl::Status JoinCaptures(
    ArgSource& here, ArgSource& golden,
    const std::function<absl::Status(const ManifestEntry* a, const ManifestEntry* g)>& visit) {
  ManifestEntry a, g;
  bool have_a = false, have_g = false;
  std::optional<std::tuple<uint64_t, int, uint32_t, int>> last_a, last_g;
  auto next = [](ArgSource& s, ManifestEntry* e, bool* have, auto* last) -> absl::Status {
    absl::StatusOr<bool> got = s.Next(e);
    if (!got.ok()) return got.status();
    *have = *got;
    if (*have) {
      if (*last && ManifestKey(*e) < **last) {
        return absl::DataLossError(absl::StrCat(s.name(), ": entry ", e->index,
                                                " is out of manifest order (task_id, stage, "
                                                "arg_index, role); cannot match by key"));
      }
      *last = ManifestKey(*e);
    }
    return absl::OkStatus();
  };
  if (absl::Status s = next(here, &a, &have_a, &last_a); !s.ok()) return s;
  if (absl::Status s = next(golden, &g, &have_g, &last_g); !s.ok()) return s;
  while (have_a || have_g) {
    const bool only_a = have_a && (!have_g || ManifestKey(a) < ManifestKey(g));
    const bool only_g = !only_a && have_g && (!have_a || ManifestKey(g) < ManifestKey(a));
    if (absl::Status s = visit(only_g ? nullptr : &a, only_a ? nullptr : &g); !s.ok()) return s;
    if (!only_g) {
      if (absl::Status s = next(here, &a, &have_a, &last_a); !s.ok()) return s;
    }
    if (!only_a) {
      if (absl::Status s = next(golden, &g, &have_g, &last_g); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace argsdump
