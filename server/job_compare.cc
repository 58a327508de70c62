// JobQueries' comparisons (server/job_queries.h): two ranks' records paired
// in (step, task_id, stage, arg_index, role) order and compared by the
// viewer's rules (format/compare.h), payloads a chunk at a time.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "base/thread.h"
#include "format/compare.h"
#include "format/dtype.h"
#include "format/names.h"
#include "format/record.h"
#include "server/job_queries.h"

namespace argsdump {
namespace {

constexpr uint64_t kCompareChunkBytes = 1 << 20;  // payload bytes read at a time per side
constexpr size_t kMaxCompareThreads = 4;           // per comparison

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
absl::StatusOr<std::vector<QueryHit>> SortedRows(const HubCapture& c,
                                                 const std::optional<ArgFilter>& q) {
  std::vector<QueryHit> rows;
  if (!q) return rows;  // the capture has no such kernel: nothing matches
  absl::Status scanned = ScanRows(
      c, *q,
      [&](const QueryHit& h) {
        rows.push_back(h);
        rows.back().stats.reset();
      },
      [&] { rows.clear(); });
  if (!scanned.ok()) return scanned;
  std::sort(rows.begin(), rows.end(), [](const QueryHit& a, const QueryHit& b) {
    return std::make_tuple(PairKey(a.row), a.record_id) <
           std::make_tuple(PairKey(b.row), b.record_id);
  });
  return rows;
}

// args.bin of a finished or live capture, opened once per comparison and
// mapped (as the service maps args.index): a comparison reads payloads in
// manifest order, which deduplicated payloads turn into jumps back, and a
// mapping costs a page fault per page where a read costs a system call
// per payload. Ranges are checked against the size at open (a live
// capture's durable records lie within it). Without a mapping (the address
// space refused it) each payload is read.
class BinFile {
 public:
  // args.bin's local file, or (its bin_path() empty) the capture's ranged
  // reads from the object store.
  explicit BinFile(std::shared_ptr<const HubCapture> capture)
      : path_(capture->bin_path()), capture_(std::move(capture)) {}
  ~BinFile() {
    if (map_ != nullptr) ::munmap(map_, size_);
    if (fd_ >= 0) ::close(fd_);
  }
  BinFile(const BinFile&) = delete;
  BinFile& operator=(const BinFile&) = delete;

  // Bytes [offset, offset + size), valid until the next View. DataLoss
  // naming the file when it ends before them.
  absl::StatusOr<absl::string_view> View(uint64_t offset, uint64_t size) {
    if (path_.empty() || in_store_) {
      buffer_.clear();
      absl::Status s = capture_->ReadBin(offset, size, [this](std::string_view piece) {
        buffer_.append(piece.data(), piece.size());
        return absl::OkStatus();
      });
      if (!s.ok()) return s;
      return absl::string_view(buffer_);
    }
    if (fd_ < 0) {
      if (absl::Status s = Open(); !s.ok()) return s;
      if (in_store_) return View(offset, size);
    }
    if (offset > size_ || size > size_ - offset) {
      return absl::DataLossError(absl::StrCat(path_, " ends before byte ", offset + size));
    }
    if (map_ != nullptr) {
      Populate(offset, size);
      return absl::string_view(static_cast<const char*>(map_) + offset, size);
    }
    buffer_.resize(size);
    size_t got = 0;
    while (got < size) {
      const ssize_t r = ::pread(fd_, &buffer_[got], size - got, static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    if (got < size) {
      return absl::DataLossError(absl::StrCat(path_, " ends before byte ", offset + size));
    }
    return absl::string_view(buffer_);
  }

 private:
  absl::Status Open() {
    // Refuses what is not a regular file (a FIFO would block the worker).
    absl::StatusOr<int> fd = OpenRegularFile(path_);
    if (!fd.ok() && capture_->InStore()) {
      // Sealed into the object store since the comparison began.
      in_store_ = true;
      return absl::OkStatus();
    }
    if (!fd.ok()) {
      return absl::DataLossError(absl::StrCat("cannot open ", path_, ": ", fd.status().message()));
    }
    fd_ = *fd;
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      return absl::DataLossError(absl::StrCat("cannot open ", path_, ": ", std::strerror(errno)));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > 0) {
      void* map = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
      if (map != MAP_FAILED) map_ = map;
    }
    return absl::OkStatus();
  }

  // Maps the pages of [offset, offset + size) and up to kPopulateBytes
  // past them in one call (MADV_POPULATE_READ) instead of a page fault
  // each, which a virtual machine makes dear. The mapped range only grows
  // onward; a read before it (a deduplicated payload, mapped when first
  // passed) or a kernel without the call faults its pages in as read.
  void Populate(uint64_t offset, uint64_t size) {
    if (offset < populated_begin_ || offset + size <= populated_end_) return;
    constexpr uint64_t kPage = 4096;
    uint64_t begin = offset / kPage * kPage;
    if (begin <= populated_end_) {
      begin = populated_end_ / kPage * kPage;  // onward from what is mapped
    } else {
      populated_begin_ = begin;  // a jump ahead: a new range
    }
    const uint64_t end = std::min(size_, std::max(offset + size, begin + kPopulateBytes));
#ifdef MADV_POPULATE_READ
    ::madvise(static_cast<char*>(map_) + begin, end - begin, MADV_POPULATE_READ);
#endif
    populated_end_ = end;
  }

  static constexpr uint64_t kPopulateBytes = 8 << 20;
  const std::string path_;
  const std::shared_ptr<const HubCapture> capture_;
  bool in_store_ = false;  // its local file went with a seal: read from the store
  int fd_ = -1;
  uint64_t size_ = 0;
  void* map_ = nullptr;
  uint64_t populated_begin_ = 0, populated_end_ = 0;  // what Populate mapped
  std::string buffer_;  // without a mapping: the last payload read
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
                                            const Tolerance& t,
                                            const std::function<bool()>& stopped) {
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
  for (uint64_t first = 0; first < count; first += per_chunk) {
    if (first > 0 && stopped()) return absl::CancelledError("comparison cancelled");
    const uint64_t n = std::min(per_chunk, count - first);
    const uint64_t abytes = (n * abits + 7) / 8, gbytes = (n * gbits + 7) / 8;
    absl::StatusOr<absl::string_view> abuf = abin.View(a.bin_offset + first * abits / 8, abytes);
    if (!abuf.ok()) return abuf.status();
    absl::StatusOr<absl::string_view> gbuf = gbin.View(g.bin_offset + first * gbits / 8, gbytes);
    if (!gbuf.ok()) return gbuf.status();
    v.bytes += abytes + gbytes;
    if (*ad == *gd && *abuf == *gbuf) {  // the same bits: every element matches
      all.compared += n;
      continue;
    }
    const ElementDiff e = CompareElements(*ad, *abuf, *gd, *gbuf, n, t);
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
                                           const Tolerance& t,
                                           const std::function<bool()>& stopped) {
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
  return ComparePayloads(a, abin, g, gbin, t, stopped);
}

// What one rank's comparison ended with.
struct RankOutcome {
  std::optional<v1::Divergence> first;
  uint64_t records = 0;
  uint64_t bytes = 0;
  bool unordered = false;  // an index side was not in pairing order: walk sorted copies
};

// One side's rows in pairing order, copied and sorted (a live capture, or
// an index not in pairing order).
class SortedSide {
 public:
  explicit SortedSide(std::vector<QueryHit> rows) : rows_(std::move(rows)) {}
  bool done() const { return i_ == rows_.size(); }
  const ManifestRow& row() const { return rows_[i_].row; }
  uint64_t record_id() const { return rows_[i_].record_id; }
  void Advance() { ++i_; }
  bool unordered() const { return false; }

 private:
  std::vector<QueryHit> rows_;
  size_t i_ = 0;
};

// One side's rows read in place from a finished capture's index. Manifest
// order (task_id, stage, arg_index, role, ...) is pairing order when steps
// never go down as task ids go up and no two rows share a key, as in a
// capture of tasks whose ids grow with their steps; unordered() says when
// a row breaks that, and the rank is walked again sorted. So does a row an
// index in an object store could not read: the sorted walk's scan answers
// with the error.
class IndexSide {
 public:
  IndexSide(const IndexFile& index, const ArgFilter& q) : index_(index), q_(q) {
    row_ = index_.NextMatch(q_, &position_, &scratch_, &error_);
  }
  bool done() const { return row_ == nullptr; }
  const ManifestRow& row() const { return *row_; }
  uint64_t record_id() const { return index_.RecordIdAt(position_, &error_); }
  void Advance() {
    const auto before = PairKey(*row_);
    ++position_;
    row_ = index_.NextMatch(q_, &position_, &scratch_, &error_);
    if (row_ != nullptr && !(before < PairKey(*row_))) unordered_ = true;
  }
  bool unordered() const { return unordered_ || !error_.ok(); }

 private:
  mutable absl::Status error_;
  const IndexFile& index_;
  const ArgFilter& q_;
  uint64_t position_ = 0;
  ManifestRow scratch_;  // an older index's row
  const ManifestRow* row_ = nullptr;
  bool unordered_ = false;
};

// Walks both sides' records in pairing order to the first divergence.
template <typename ActualSide, typename ReferenceSide>
absl::StatusOr<RankOutcome> Walk(const RankPair& p, ActualSide& a, ReferenceSide& g,
                                 const Tolerance& t, const std::function<bool()>& stopped) {
  BinFile abin(p.actual), gbin(p.reference);
  RankOutcome out;
  absl::Status failed;
  auto actual_arg = [&](bool present, v1::Divergence* d) {
    v1::JobArg* j = d->mutable_actual();
    j->set_rank(p.rank);
    j->set_capture(p.actual->name());
    if (present) {
      j->mutable_arg()->set_record_id(a.record_id());
      *j->mutable_arg()->mutable_record() = RecordFromRow(a.row());
    }
  };
  auto reference_arg = [&](v1::Divergence* d) {
    v1::JobArg* j = d->mutable_reference();
    j->set_rank(p.reference_rank);
    j->set_capture(p.reference->name());
    j->mutable_arg()->set_record_id(g.record_id());
    *j->mutable_arg()->mutable_record() = RecordFromRow(g.row());
  };
  while (!a.done() || !g.done()) {
    if (a.unordered() || g.unordered()) {
      out.unordered = true;
      return out;
    }
    if (stopped()) return absl::CancelledError("comparison cancelled");
    if (g.done() || (!a.done() && PairKey(a.row()) < PairKey(g.row()))) {
      v1::Divergence d = Reason(absl::StrCat("no such record in ", p.reference->name()));
      actual_arg(true, &d);
      out.first = std::move(d);
      break;
    }
    if (a.done() || PairKey(g.row()) < PairKey(a.row())) {
      v1::Divergence d = Reason(absl::StrCat(p.actual->name(), " has no such record"));
      actual_arg(false, &d);
      reference_arg(&d);
      out.first = std::move(d);
      break;
    }
    absl::StatusOr<PairVerdict> v = CompareRecords(a.row(), abin, g.row(), gbin, t, stopped);
    if (!v.ok()) {
      if (absl::IsCancelled(v.status())) return v.status();
      failed = v.status();  // the first in pairing order only if the rest is in order
      break;
    }
    ++out.records;
    out.bytes += v->bytes;
    if (v->divergence) {
      actual_arg(true, &*v->divergence);
      reference_arg(&*v->divergence);
      out.first = std::move(v->divergence);
      break;
    }
    a.Advance();
    g.Advance();
  }
  if (a.unordered() || g.unordered()) {  // a side ended on a row it could not read
    out = RankOutcome();
    out.unordered = true;
    return out;
  }
  // A divergence (or a payload that cannot be read) is the first in
  // pairing order only if no later row of either side belongs before it
  // (or shares its key): the rest of both sides is checked for order, rows
  // only.
  if (out.first || !failed.ok()) {
    auto to_end = [&](auto& side) {  // false: stopped on the way
      for (uint64_t n = 0; !side.done() && !side.unordered(); ++n) {
        if (n % 4096 == 0 && stopped()) return false;
        side.Advance();
      }
      return true;
    };
    if (!to_end(a) || !to_end(g)) return absl::CancelledError("comparison cancelled");
    if (a.unordered() || g.unordered()) {
      out = RankOutcome();
      out.unordered = true;
      return out;
    }
  }
  if (!failed.ok()) return failed;
  return out;
}

// One rank against its reference: straight from both indexes when both
// captures are finished and in pairing order, from sorted copies of their
// rows otherwise.
absl::StatusOr<RankOutcome> CompareRank(const RankPair& p, const v1::ArgFilter& f,
                                        const Tolerance& t, const std::function<bool()>& stopped) {
  const std::optional<ArgFilter> aq = ResolvedFilter(*p.actual, f, nullptr);
  const std::optional<ArgFilter> gq = ResolvedFilter(*p.reference, f, nullptr);
  const std::shared_ptr<const IndexFile> ai = p.actual->index();
  const std::shared_ptr<const IndexFile> gi = p.reference->index();
  if (ai && gi && aq && gq) {
    IndexSide a(*ai, *aq), g(*gi, *gq);
    absl::StatusOr<RankOutcome> r = Walk(p, a, g, t, stopped);
    if (!r.ok() || !r->unordered) return r;
  }
  absl::StatusOr<std::vector<QueryHit>> actual = SortedRows(*p.actual, aq);
  if (!actual.ok()) return actual.status();
  absl::StatusOr<std::vector<QueryHit>> reference = SortedRows(*p.reference, gq);
  if (!reference.ok()) return reference.status();
  SortedSide a(*std::move(actual)), g(*std::move(reference));
  return Walk(p, a, g, t, stopped);
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
  // Ranks are compared on worker threads (as many as the cores, at most
  // kMaxCompareThreads), each taking the next pair; this thread emits the
  // progress as ranks end, in the order they end.
  std::mutex mu;
  std::condition_variable changed;
  std::deque<std::pair<size_t, absl::StatusOr<RankOutcome>>> ended;  // guarded by mu
  size_t running = 0;                                               // guarded by mu
  std::atomic<size_t> next{0};
  std::atomic<bool> abandon{false};
  const std::function<bool()> stopped = [&] {
    return abandon.load(std::memory_order_relaxed) ||
           (cancelled != nullptr && cancelled->load(std::memory_order_relaxed));
  };
  auto work = [&] {
    for (size_t i; !stopped() && (i = next.fetch_add(1)) < pairs.size();) {
      absl::StatusOr<RankOutcome> r = CompareRank(pairs[i], f, t, stopped);
      std::lock_guard<std::mutex> lock(mu);
      ended.emplace_back(i, std::move(r));
      changed.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    changed.notify_one();
  };
  std::vector<std::thread> workers;
  const size_t wanted = std::min<size_t>(
      pairs.size(), std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxCompareThreads));
  for (size_t w = 0; w < wanted; ++w) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++running;
    }
    std::thread worker;
    if (!StartThread("a job comparison thread", &worker, work).ok()) {
      std::lock_guard<std::mutex> lock(mu);
      --running;
      break;
    }
    workers.push_back(std::move(worker));
  }
  if (workers.empty()) {  // no thread to be had: this one compares
    {
      std::lock_guard<std::mutex> lock(mu);
      ++running;
    }
    work();
  }
  absl::Status failed;
  for (size_t emitted = 0; emitted < pairs.size() && failed.ok();) {
    std::unique_lock<std::mutex> lock(mu);
    changed.wait(lock, [&] { return !ended.empty() || running == 0; });
    if (ended.empty()) break;  // the workers stopped (cancelled)
    auto [i, r] = std::move(ended.front());
    ended.pop_front();
    lock.unlock();
    ++emitted;
    if (!r.ok()) {
      failed = r.status();
      break;
    }
    progress.set_records_compared(progress.records_compared() + r->records);
    progress.set_bytes_compared(progress.bytes_compared() + r->bytes);
    progress.set_ranks_done(progress.ranks_done() + 1);
    if (r->first && (!first || DivergenceKey(*r->first) < DivergenceKey(*first))) {
      first = std::move(r->first);
    }
    if (!emit(progress)) failed = absl::CancelledError("the client went away");
  }
  abandon = true;
  for (std::thread& w : workers) w.join();
  if (!failed.ok()) return failed;
  if (progress.ranks_done() < pairs.size()) return absl::CancelledError("comparison cancelled");
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
