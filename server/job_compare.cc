// JobQueries' comparisons (server/job_queries.h): two ranks' records paired
// in (step, task_id, stage, arg_index, role) order and compared by the
// viewer's rules (format/compare.h), payloads a chunk at a time.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "format/compare.h"
#include "format/dtype.h"
#include "format/names.h"
#include "format/record.h"
#include "server/job_queries.h"

namespace argsdump {
namespace {

constexpr uint64_t kCompareChunkBytes = 1 << 20;  // payload bytes read at a time per side

// One rank against its reference.
struct RankPair {
  uint32_t rank = 0;
  std::shared_ptr<HubCapture> actual;
  uint32_t reference_rank = 0;
  std::shared_ptr<HubCapture> reference;
};

auto PairKey(const ManifestRow& r) {
  return std::make_tuple(r.step, r.task_id, r.stage, r.arg_index, r.role);
}

// A capture's rows matching `q`, in pairing order (arrival order among
// equal keys). Rows only: 136 bytes a record, never payloads.
std::vector<QueryHit> SortedRows(const HubCapture& c, const std::optional<ArgFilter>& q) {
  std::vector<QueryHit> rows;
  if (!q) return rows;  // the capture has no such kernel: nothing matches
  ScanRows(
      c, *q,
      [&](const QueryHit& h) {
        rows.push_back(h);
        rows.back().stats.reset();
      },
      [&] { rows.clear(); });
  std::sort(rows.begin(), rows.end(), [](const QueryHit& a, const QueryHit& b) {
    return std::make_tuple(PairKey(a.row), a.record_id) <
           std::make_tuple(PairKey(b.row), b.record_id);
  });
  return rows;
}

// args.bin of a capture, opened once per comparison.
class BinFile {
 public:
  explicit BinFile(std::string path) : path_(std::move(path)) {}
  ~BinFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Read(uint64_t offset, uint64_t size, std::string* out) {
    if (fd_ < 0) {
      fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) {
        return absl::DataLossError(absl::StrCat("cannot open ", path_, ": ", std::strerror(errno)));
      }
    }
    out->resize(size);
    size_t got = 0;
    while (got < size) {
      const ssize_t r = ::pread(fd_, &(*out)[got], size - got, static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    if (got < size) {
      return absl::DataLossError(absl::StrCat(path_, " ends before byte ", offset + size));
    }
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  int fd_ = -1;
};

std::string Dims(const ManifestRow& r) {
  return absl::StrCat("[", absl::StrJoin(r.shape, r.shape + r.ndims, ", "), "]");
}

const char* KindWord(uint8_t kind) {
  return kind == v1::KIND_SCALAR ? "scalar" : kind == v1::KIND_TENSOR ? "tensor" : "unknown";
}

// The elements a row's payload holds: its numel, fewer when truncated.
uint64_t ElementsIn(const ManifestRow& r, DataType dtype) {
  return std::min<uint64_t>(r.numel, r.bin_size * 8 / std::max<uint32_t>(1, ElementBits(dtype)));
}

// What comparing one pair found: nothing (they agree), or a divergence
// whose `actual`/`reference` the caller fills.
struct PairVerdict {
  std::optional<v1::Divergence> divergence;
  uint64_t bytes = 0;
};

v1::Divergence Reason(std::string why) {
  v1::Divergence d;
  d.set_reason(std::move(why));
  return d;
}

void Differs(const ElementDiff& e, v1::Divergence* d) {
  d->set_element(e.first_mismatch);
  d->set_actual_value(e.first_actual);
  d->set_reference_value(e.first_golden);
  d->set_mismatches(e.mismatches);
  d->set_max_abs(e.max_abs);
  d->set_max_rel(e.max_rel);
}

PairVerdict CompareScalars(const ManifestRow& a, const ManifestRow& g, const Tolerance& t) {
  PairVerdict v;
  if (a.scalar_bits == g.scalar_bits && a.dtype == g.dtype) return v;
  const std::string av = FormatScalarJson(a.dtype, a.scalar_bits);
  const std::string gv = FormatScalarJson(g.dtype, g.scalar_bits);
  double x = 0, y = 0;
  if (!ScalarAsDouble(av, &x) || !ScalarAsDouble(gv, &y)) {
    v.divergence = Reason(absl::StrCat("value ", av, " vs reference ", gv));
    return v;
  }
  const ElementDiff e = CompareValues(x, y, t);
  if (e.mismatches == 0) return v;
  v.divergence = Reason(absl::StrCat("value ", av, " vs reference ", gv));
  Differs(e, &*v.divergence);
  v.divergence->set_element(0);
  return v;
}

// Two tensors' payloads, a chunk of elements at a time.
absl::StatusOr<PairVerdict> ComparePayloads(const ManifestRow& a, BinFile& abin,
                                            const ManifestRow& g, BinFile& gbin,
                                            const Tolerance& t) {
  PairVerdict v;
  const std::optional<DataType> ad = FromProtoDType(a.dtype);
  const std::optional<DataType> gd = FromProtoDType(g.dtype);
  if (!ad || !gd) {
    v.divergence = Reason("a dtype without elements to compare");
    return v;
  }
  const uint32_t abits = std::max<uint32_t>(1, ElementBits(*ad));
  const uint32_t gbits = std::max<uint32_t>(1, ElementBits(*gd));
  const uint64_t count = std::min(ElementsIn(a, *ad), ElementsIn(g, *gd));
  // Whole bytes on both sides: a multiple of 8 elements per chunk.
  const uint64_t per_chunk =
      std::max<uint64_t>(8, kCompareChunkBytes * 8 / std::max(abits, gbits) / 8 * 8);
  ElementDiff all;
  std::string abuf, gbuf;
  for (uint64_t first = 0; first < count; first += per_chunk) {
    const uint64_t n = std::min(per_chunk, count - first);
    const uint64_t abytes = (n * abits + 7) / 8, gbytes = (n * gbits + 7) / 8;
    if (absl::Status s = abin.Read(a.bin_offset + first * abits / 8, abytes, &abuf); !s.ok()) {
      return s;
    }
    if (absl::Status s = gbin.Read(g.bin_offset + first * gbits / 8, gbytes, &gbuf); !s.ok()) {
      return s;
    }
    v.bytes += abytes + gbytes;
    const ElementDiff e = CompareElements(*ad, abuf, *gd, gbuf, n, t);
    if (e.mismatches > 0 && all.mismatches == 0) {
      all.first_mismatch = first + e.first_mismatch;
      all.first_actual = e.first_actual;
      all.first_golden = e.first_golden;
    }
    all.compared += e.compared;
    all.mismatches += e.mismatches;
    all.nonfinite += e.nonfinite;
    all.max_abs = std::max(all.max_abs, e.max_abs);
    all.max_rel = std::max(all.max_rel, e.max_rel);
  }
  if (all.mismatches == 0) return v;
  v.divergence = Reason(absl::StrCat(all.mismatches, " of ", count, " elements differ"));
  Differs(all, &*v.divergence);
  return v;
}

// One pair of records by the viewer's rules: kind, scalar value, shape,
// bytes that can be trusted, then the elements.
absl::StatusOr<PairVerdict> CompareRecords(const ManifestRow& a, BinFile& abin,
                                           const ManifestRow& g, BinFile& gbin,
                                           const Tolerance& t) {
  PairVerdict v;
  if (a.kind != g.kind) {
    v.divergence =
        Reason(absl::StrCat("kind ", KindWord(a.kind), " vs reference ", KindWord(g.kind)));
    return v;
  }
  if (a.kind == v1::KIND_SCALAR) return CompareScalars(a, g, t);
  if (a.ndims != g.ndims || !std::equal(a.shape, a.shape + a.ndims, g.shape)) {
    v.divergence = Reason(absl::StrCat("shape ", Dims(a), " vs reference ", Dims(g)));
    return v;
  }
  if (a.overwritten || g.overwritten) {
    v.divergence = Reason(a.overwritten ? "overwritten (bytes untrustworthy)"
                                        : "reference overwritten (bytes untrustworthy)");
    return v;
  }
  if (a.bin_size == 0 && g.bin_size == 0) {
    if (a.dtype != g.dtype) {
      v.divergence =
          Reason(absl::StrCat("dtype ", DTypeName(a.dtype), " vs reference ", DTypeName(g.dtype)));
    }
    return v;
  }
  if (a.bin_size == 0 || g.bin_size == 0) {
    v.divergence = Reason(a.bin_size == 0 ? "no data captured" : "the reference has no data");
    return v;
  }
  return ComparePayloads(a, abin, g, gbin, t);
}

// What one rank's comparison ended with.
struct RankOutcome {
  std::optional<v1::Divergence> first;
  uint64_t records = 0;
  uint64_t bytes = 0;
};

// Walks both ranks' records in pairing order to the first divergence.
absl::StatusOr<RankOutcome> CompareRank(const RankPair& p, const v1::ArgFilter& f,
                                        const Tolerance& t, const std::atomic<bool>* cancelled) {
  const std::vector<QueryHit> a = SortedRows(*p.actual, ResolvedFilter(*p.actual, f, nullptr));
  const std::vector<QueryHit> g =
      SortedRows(*p.reference, ResolvedFilter(*p.reference, f, nullptr));
  BinFile abin(p.actual->bin_path()), gbin(p.reference->bin_path());
  RankOutcome out;
  auto actual_arg = [&](const QueryHit* h, v1::Divergence* d) {
    v1::JobArg* j = d->mutable_actual();
    j->set_rank(p.rank);
    j->set_capture(p.actual->name());
    if (h != nullptr) {
      j->mutable_arg()->set_record_id(h->record_id);
      *j->mutable_arg()->mutable_record() = RecordFromRow(h->row);
    }
  };
  auto reference_arg = [&](const QueryHit& h, v1::Divergence* d) {
    v1::JobArg* j = d->mutable_reference();
    j->set_rank(p.reference_rank);
    j->set_capture(p.reference->name());
    j->mutable_arg()->set_record_id(h.record_id);
    *j->mutable_arg()->mutable_record() = RecordFromRow(h.row);
  };
  size_t i = 0, k = 0;
  while (i < a.size() || k < g.size()) {
    if (cancelled != nullptr && cancelled->load())
      return absl::CancelledError("comparison cancelled");
    if (k == g.size() || (i < a.size() && PairKey(a[i].row) < PairKey(g[k].row))) {
      v1::Divergence d = Reason(absl::StrCat("no such record in ", p.reference->name()));
      actual_arg(&a[i], &d);
      out.first = std::move(d);
      return out;
    }
    if (i == a.size() || PairKey(g[k].row) < PairKey(a[i].row)) {
      v1::Divergence d = Reason(absl::StrCat(p.actual->name(), " has no such record"));
      actual_arg(nullptr, &d);
      reference_arg(g[k], &d);
      out.first = std::move(d);
      return out;
    }
    absl::StatusOr<PairVerdict> v = CompareRecords(a[i].row, abin, g[k].row, gbin, t);
    if (!v.ok()) return v.status();
    ++out.records;
    out.bytes += v->bytes;
    if (v->divergence) {
      actual_arg(&a[i], &*v->divergence);
      reference_arg(g[k], &*v->divergence);
      out.first = std::move(v->divergence);
      return out;
    }
    ++i;
    ++k;
  }
  return out;
}

// Where a divergence is in the job's order: (step, task_id, rank, stage,
// arg_index, role), from the actual record or, missing, the reference's.
auto DivergenceKey(const v1::Divergence& d) {
  const v1::ArgRecord& r =
      d.actual().has_arg() ? d.actual().arg().record() : d.reference().arg().record();
  return std::make_tuple(r.step(), r.task_id(), d.actual().rank(), static_cast<int>(r.stage()),
                         r.arg_index(), static_cast<int>(r.role()));
}

Tolerance ToleranceOf(const v1::CompareTolerance& t) {
  Tolerance out;
  if (t.has_atol()) out.atol = t.atol();
  if (t.has_rtol()) out.rtol = t.rtol();
  return out;
}

absl::Status ComparePairs(const std::vector<RankPair>& pairs, const v1::ArgFilter& f,
                          const v1::CompareTolerance& tolerance, const JobQueries::Emit& emit,
                          const std::atomic<bool>* cancelled) {
  const Tolerance t = ToleranceOf(tolerance);
  if (t.atol < 0 || t.rtol < 0) {
    return absl::InvalidArgumentError("tolerance: atol and rtol must be 0 or more");
  }
  // A kernel name or type no compared capture has: the caller's mistake,
  // not records that agree.
  absl::Status unresolved;
  bool resolved = pairs.empty();
  for (const RankPair& p : pairs) {
    resolved = resolved || ResolvedFilter(*p.actual, f, &unresolved) ||
               ResolvedFilter(*p.reference, f, &unresolved);
  }
  if (!resolved) return unresolved;
  v1::CompareProgress progress;
  progress.set_ranks_total(static_cast<uint32_t>(pairs.size()));
  std::optional<v1::Divergence> first;
  for (const RankPair& p : pairs) {
    absl::StatusOr<RankOutcome> r = CompareRank(p, f, t, cancelled);
    if (!r.ok()) return r.status();
    progress.set_records_compared(progress.records_compared() + r->records);
    progress.set_bytes_compared(progress.bytes_compared() + r->bytes);
    progress.set_ranks_done(progress.ranks_done() + 1);
    if (r->first && (!first || DivergenceKey(*r->first) < DivergenceKey(*first))) {
      first = std::move(r->first);
    }
    if (!emit(progress)) return absl::CancelledError("the client went away");
  }
  progress.set_done(true);
  if (first) *progress.mutable_first() = std::move(*first);
  std::map<std::string, v1::RankProgress> seen;  // by capture: each once
  for (const RankPair& p : pairs) {
    seen.emplace(p.actual->name(), RankProgressOf(p.rank, *p.actual));
    seen.emplace(p.reference->name(), RankProgressOf(p.reference_rank, *p.reference));
  }
  for (auto& [name, rp] : seen) *progress.add_progress() = std::move(rp);
  if (!emit(progress)) return absl::CancelledError("the client went away");
  return absl::OkStatus();
}

}  // namespace

absl::Status JobQueries::CompareJobs(const v1::CompareJobsRequest& request, const Emit& emit,
                                     const std::atomic<bool>* cancelled) const {
  auto job = hub_->JobRanks(request.job());
  if (!job.ok()) return job.status();
  auto reference = hub_->JobRanks(request.reference());
  if (!reference.ok()) return reference.status();
  std::vector<RankPair> pairs;
  if (request.ranks().empty()) {
    for (const auto& [rank, c] : *job) {
      auto r = reference->find(rank);
      if (r != reference->end()) pairs.push_back({rank, c, rank, r->second});
    }
  }
  for (uint32_t rank : request.ranks()) {
    auto a = job->find(rank);
    auto r = reference->find(rank);
    if (a == job->end() || r == reference->end()) {
      return absl::NotFoundError(absl::StrCat(
          "job ", a == job->end() ? request.job() : request.reference(), " has no rank ", rank));
    }
    pairs.push_back({rank, a->second, rank, r->second});
  }
  return ComparePairs(pairs, request.filter(), request.tolerance(), emit, cancelled);
}

absl::Status JobQueries::CompareRanks(const v1::CompareRanksRequest& request, const Emit& emit,
                                      const std::atomic<bool>* cancelled) const {
  auto job = hub_->JobRanks(request.job());
  if (!job.ok()) return job.status();
  auto ref = job->find(request.reference_rank());
  if (ref == job->end()) {
    return absl::NotFoundError(
        absl::StrCat("job ", request.job(), " has no rank ", request.reference_rank()));
  }
  std::vector<RankPair> pairs;
  if (request.ranks().empty()) {
    for (const auto& [rank, c] : *job) {
      if (rank != ref->first) pairs.push_back({rank, c, ref->first, ref->second});
    }
  }
  for (uint32_t rank : request.ranks()) {
    auto a = job->find(rank);
    if (a == job->end()) {
      return absl::NotFoundError(absl::StrCat("job ", request.job(), " has no rank ", rank));
    }
    if (rank != ref->first) pairs.push_back({rank, a->second, ref->first, ref->second});
  }
  return ComparePairs(pairs, request.filter(), request.tolerance(), emit, cancelled);
}

}  // namespace argsdump
