#include "viewer/job_view.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/capture_client.h"
#include "format/job.h"
#include "format/kernel_table.h"
#include "format/names.h"
#include "viewer/capture_compare.h"
#include "viewer/remote_source.h"
#include "viewer/trace_export.h"

namespace argsdump {
namespace {

int Fail(std::ostream& err, const absl::Status& s) {
  err << "dump_viewer: " << s.message() << "\n";
  return 2;
}

// The order of records across a job's ranks.
using JobKey = std::tuple<uint32_t, uint64_t, uint32_t, int, uint32_t, int>;
JobKey KeyOf(const ManifestEntry& e, uint32_t rank) {
  return {e.step, e.task_id, rank, static_cast<int>(e.stage), e.arg_index, static_cast<int>(e.role)};
}

// The job's ranks, local or on the service, with --ranks applied.
absl::StatusOr<std::vector<JobRankPlace>> JobRanks(const ViewerOptions& o, const std::string& job) {
  std::vector<JobRankPlace> ranks;
  if (o.remote.target.empty()) {
    absl::StatusOr<std::vector<JobRankPlace>> local = LocalJobRanks(job);
    if (!local.ok()) return local.status();
    ranks = *std::move(local);
  } else {
    absl::StatusOr<std::vector<v1::CaptureSummary>> captures = ListRemoteCaptures(o.remote, {});
    if (!captures.ok()) return captures.status();
    for (const v1::CaptureSummary& c : *captures) {
      if (c.has_job() && c.job().job() == job) ranks.push_back({c.job().rank(), "", c.capture()});
    }
    if (ranks.empty()) {
      return absl::NotFoundError(absl::StrCat("no capture on ", o.remote.target, " is a rank of job ", job));
    }
    std::sort(ranks.begin(), ranks.end(),
              [](const JobRankPlace& a, const JobRankPlace& b) { return a.rank < b.rank; });
  }
  if (!o.ranks.empty()) {
    const std::set<uint32_t> wanted(o.ranks.begin(), o.ranks.end());
    ranks.erase(std::remove_if(ranks.begin(), ranks.end(),
                               [&](const JobRankPlace& r) { return wanted.count(r.rank) == 0; }),
                ranks.end());
  }
  return ranks;
}

absl::StatusOr<std::unique_ptr<ArgSource>> OpenRank(const ViewerOptions& o, const JobRankPlace& r,
                                                    const Selection& selection) {
  if (r.capture.empty()) return OpenLocalCapture(r.dir, selection);
  RemoteCapture remote = o.remote;
  remote.capture = r.capture;
  return OpenRemoteCapture(remote, selection);
}

std::string Where(const ViewerOptions& o, const JobRankPlace& r) {
  return r.capture.empty() ? r.dir : absl::StrCat(o.remote.target, "/", r.capture);
}

std::string KernelOf(const KernelTable& kernels, const ManifestEntry& e) {
  if (kernels.empty() || (e.func_ids.size() == 1 && e.func_ids[0] == -1)) return "";
  return KernelNames(kernels, e.func_ids.begin(), e.func_ids.end());
}

std::string EntryLine(const ManifestEntry& e) {
  std::string line = absl::StrFormat("step %d  %s", e.step, WhereIs(e));
  if (e.is_scalar()) return absl::StrCat(line, "  scalar ", std::string(DataTypeName(e.dtype)), " = ", e.value);
  return absl::StrCat(line, "  ", std::string(DataTypeName(e.dtype)), " [", absl::StrJoin(e.shape, ","), "]",
                      e.nonfinite ? "  nonfinite" : "", e.overflow ? "  overflow" : "");
}

// The ranks, one line each.
int ListRanks(const ViewerOptions& o, const std::vector<JobRankPlace>& ranks, std::ostream& out,
              std::ostream& err) {
  out << absl::StrFormat("job %s: %d ranks\n", o.job, ranks.size());
  out << absl::StrFormat("%6s  %8s  %9s  %8s  %6s  %s\n", "rank", "records", "nonfinite",
                         "overflow", "crash", "capture");
  std::set<uint32_t> present;
  for (const JobRankPlace& r : ranks) {
    present.insert(r.rank);
    absl::StatusOr<std::unique_ptr<ArgSource>> source = OpenRank(o, r, o.selection);
    if (!source.ok()) return Fail(err, source.status());
    uint64_t records = 0, nonfinite = 0, overflow = 0;
    ManifestEntry e;
    for (;;) {
      absl::StatusOr<bool> got = (*source)->Next(&e);
      if (!got.ok()) return Fail(err, got.status());
      if (!*got) break;
      ++records;
      nonfinite += e.nonfinite || (e.stats && e.stats->has_nonfinite());
      overflow += e.overflow;
    }
    const std::optional<v1::DeviceCrash> crash = (*source)->DeviceCrashInfo();
    out << absl::StrFormat("%6d  %8d  %9d  %8d  %6s  %s\n", r.rank, records, nonfinite, overflow,
                           crash ? (crash->signal_name().empty() ? "exit" : crash->signal_name())
                                 : "-",
                           Where(o, r));
  }
  std::vector<uint32_t> missing;
  const uint32_t top = present.empty() ? 0 : *present.rbegin();
  for (uint32_t k = 0; k < top; ++k) {
    if (present.count(k) == 0) missing.push_back(k);
  }
  if (!missing.empty() && o.ranks.empty()) {
    out << "missing ranks (below the highest present): " << absl::StrJoin(missing, ", ") << "\n";
  }
  return 0;
}

// --first-nonfinite over the ranks.
int FirstNonfinite(const ViewerOptions& o, const std::vector<JobRankPlace>& ranks,
                   std::ostream& out, std::ostream& err) {
  Selection s = o.selection;
  s.args.has_nonfinite = true;
  std::optional<std::pair<JobKey, size_t>> best;
  ManifestEntry first;
  for (size_t i = 0; i < ranks.size(); ++i) {
    absl::StatusOr<std::unique_ptr<ArgSource>> source = OpenRank(o, ranks[i], s);
    if (!source.ok()) return Fail(err, source.status());
    // Manifest order is task order, and steps only grow with it: the
    // rank's first match is its earliest.
    ManifestEntry e;
    absl::StatusOr<bool> got = (*source)->Next(&e);
    if (!got.ok()) return Fail(err, got.status());
    if (!*got) continue;
    const JobKey key = KeyOf(e, ranks[i].rank);
    if (!best || key < best->first) {
      best = {key, i};
      first = e;
    }
  }
  if (!best) {
    out << "no record of job " << o.job << " holds a NaN or an Inf (" << ranks.size()
        << " ranks)\n";
    return 0;
  }
  const JobRankPlace& r = ranks[best->second];
  Selection task;
  task.args.task_id = first.task_id;
  absl::StatusOr<std::unique_ptr<ArgSource>> source = OpenRank(o, r, task);
  if (!source.ok()) return Fail(err, source.status());
  std::vector<ManifestEntry> records;
  ManifestEntry e;
  for (;;) {
    absl::StatusOr<bool> got = (*source)->Next(&e);
    if (!got.ok()) return Fail(err, got.status());
    if (!*got) break;
    records.push_back(e);
  }
  const std::string kernel = KernelOf((*source)->Kernels(), first);
  out << "first non-finite: rank " << r.rank << ", " << EntryLine(first) << "\n";
  out << "  kernel: " << (kernel.empty() ? "(not known)" : kernel) << "; capture "
      << Where(o, r) << ", index " << first.index << "\n";
  out << "records of task " << TaskIdHex(first.task_id) << " on rank " << r.rank << ":\n";
  for (const ManifestEntry& t : records) out << "  index " << t.index << "  " << EntryLine(t) << "\n";
  return 0;
}

struct RankDivergence {
  JobKey key;
  std::string detail;
};

// Rank `here` against `golden` in manifest order; the first divergence,
// if any. `compared` counts the pairs.
absl::StatusOr<std::optional<RankDivergence>> CompareRank(ArgSource& here, ArgSource& golden,
                                                          uint32_t rank, const Tolerance& tol,
                                                          uint64_t* compared) {
  std::optional<RankDivergence> first;
  const absl::Status stop = absl::CancelledError("first divergence");
  absl::Status joined =
      JoinCaptures(here, golden, [&](const ManifestEntry* a, const ManifestEntry* g) {
        if (a == nullptr || g == nullptr) {
          const ManifestEntry& e = a != nullptr ? *a : *g;
          first = RankDivergence{KeyOf(e, rank),
                                 absl::StrCat(WhereIs(e), a != nullptr ? ": not in the reference"
                                                                       : ": only in the reference")};
          return stop;
        }
        std::string pa, pg;
        if (absl::Status s = here.ReadPayload(*a, &pa); !s.ok()) return s;
        if (absl::Status s = golden.ReadPayload(*g, &pg); !s.ok()) return s;
        ++*compared;
        const ArgVerdict v = CompareArg(*a, pa, *g, pg, tol);
        if (!v.differs) return absl::OkStatus();
        first = RankDivergence{KeyOf(*a, rank), absl::StrCat("step ", a->step, "  ",
                                                             v.detail.empty() ? v.status : v.detail)};
        return stop;
      });
  if (!joined.ok() && !first) return joined;
  return first;
}

// --compare-job / --compare-ranks: pairs of (rank, reference rank).
int CompareJobRanks(const ViewerOptions& o, const std::vector<JobRankPlace>& ranks,
                    const std::vector<JobRankPlace>& reference, bool by_rank, std::ostream& out,
                    std::ostream& err) {
  std::map<uint32_t, const JobRankPlace*> refs;
  for (const JobRankPlace& r : reference) refs[r.rank] = &r;
  std::optional<RankDivergence> first;
  uint32_t first_rank = 0;
  uint64_t pairs = 0, total = 0;
  for (const JobRankPlace& r : ranks) {
    const JobRankPlace* g = by_rank ? (refs.count(r.rank) ? refs[r.rank] : nullptr)
                                    : (refs.empty() ? nullptr : refs.begin()->second);
    if (g == nullptr) {
      out << "rank " << r.rank << ": the reference has no such rank\n";
      continue;
    }
    if (!by_rank && g->rank == r.rank) continue;
    Selection by_key = o.selection;
    by_key.index.reset();
    absl::StatusOr<std::unique_ptr<ArgSource>> here = OpenRank(o, r, by_key);
    if (!here.ok()) return Fail(err, here.status());
    absl::StatusOr<std::unique_ptr<ArgSource>> gold = OpenRank(o, *g, by_key);
    if (!gold.ok()) return Fail(err, gold.status());
    uint64_t compared = 0;
    absl::StatusOr<std::optional<RankDivergence>> d =
        CompareRank(**here, **gold, r.rank, o.tolerance, &compared);
    if (!d.ok()) return Fail(err, d.status());
    ++pairs;
    total += compared;
    out << "rank " << r.rank << " vs " << (by_rank ? "reference rank " : "rank ") << g->rank
        << ": " << compared << " args compared, "
        << (*d ? absl::StrCat("first divergence: ", (*d)->detail) : std::string("all match"))
        << "\n";
    if (*d && (!first || (*d)->key < first->key)) {
      first = *d;
      first_rank = r.rank;
    }
  }
  if (pairs == 0) {
    err << "dump_viewer: no rank to compare\n";
    return 2;
  }
  if (!first) {
    out << "job " << o.job << ": " << pairs << " ranks, " << total << " args compared, all match\n";
    return 0;
  }
  out << "first divergence: rank " << first_rank << ", " << first->detail << "\n";
  return 1;
}

// ---- a job on a capture service: its own answers ------------------------

absl::StatusOr<std::unique_ptr<CaptureClient>> ClientFor(const ViewerOptions& o) {
  CaptureClientOptions options;
  options.target = o.remote.target;
  options.credentials = o.remote.credentials;
  options.auth_token = o.remote.auth_token;
  return CaptureClient::Create(std::move(options));
}

absl::Status Annotated(const absl::Status& s, absl::string_view call) {
  return absl::Status(s.code(), absl::StrCat(call, ": ", s.message()));
}

// How far each live rank had got when the service answered.
void PrintProgress(const google::protobuf::RepeatedPtrField<v1::RankProgress>& progress,
                   std::ostream& out) {
  for (const v1::RankProgress& p : progress) {
    if (p.state() != v1::CAPTURE_STATE_LIVE) continue;
    out << "  rank " << p.rank() << " is live: answered from its first " << p.durable_records()
        << " durable records\n";
  }
}

int RemoteFirstNonfinite(const ViewerOptions& o, const CaptureClient& client, std::ostream& out,
                         std::ostream& err) {
  v1::FirstNonfiniteRequest request;
  request.set_job(o.job);
  *request.mutable_filter() = o.selection.args.ToProto();
  absl::StatusOr<v1::FirstNonfiniteResponse> r = client.FirstNonfinite(request);
  if (!r.ok()) return Fail(err, Annotated(r.status(), "FirstNonfinite"));
  if (!r->has_first()) {
    out << "no record of job " << o.job << " holds a NaN or an Inf\n";
    PrintProgress(r->progress(), out);
    return 0;
  }
  const v1::JobArg& first = r->first();
  absl::StatusOr<ManifestEntry> e =
      EntryFromRecord(first.arg().record(), first.arg().manifest_index(), first.arg().record_id());
  if (!e.ok()) return Fail(err, e.status());
  out << "first non-finite: rank " << first.rank() << ", " << EntryLine(*e) << "\n";
  out << "  kernel: " << (r->funcs().empty() ? "(not known)" : absl::StrJoin(r->funcs(), "+"))
      << "; capture " << o.remote.target << "/" << first.capture() << ", record "
      << first.arg().record_id() << "\n";
  out << "records of task " << TaskIdHex(e->task_id) << " on rank " << first.rank() << ":\n";
  for (const v1::CapturedArg& a : r->task_args()) {
    absl::StatusOr<ManifestEntry> t = EntryFromRecord(a.record(), a.manifest_index(), a.record_id());
    if (!t.ok()) return Fail(err, t.status());
    out << "  record " << a.record_id() << "  " << EntryLine(*t) << "\n";
  }
  PrintProgress(r->progress(), out);
  return 0;
}

int RemoteCompare(const ViewerOptions& o, const CaptureClient& client, std::ostream& out,
                  std::ostream& err) {
  v1::CompareTolerance tolerance;
  tolerance.set_atol(o.tolerance.atol);
  tolerance.set_rtol(o.tolerance.rtol);
  auto progress = [&](const v1::CompareProgress& p) {
    if (!p.done()) {
      out << "  " << p.ranks_done() << " of " << p.ranks_total() << " ranks compared, "
          << p.records_compared() << " records\n";
    }
    return absl::OkStatus();
  };
  absl::StatusOr<v1::CompareProgress> done;
  if (!o.compare_job.empty()) {
    v1::CompareJobsRequest request;
    request.set_job(o.job);
    request.set_reference(o.compare_job);
    for (uint32_t r : o.ranks) request.add_ranks(r);
    *request.mutable_filter() = o.selection.args.ToProto();
    *request.mutable_tolerance() = tolerance;
    done = client.CompareJobs(request, progress);
    if (!done.ok()) return Fail(err, Annotated(done.status(), "CompareJobs"));
  } else {
    v1::CompareRanksRequest request;
    request.set_job(o.job);
    request.set_reference_rank(*o.compare_ranks);
    for (uint32_t r : o.ranks) request.add_ranks(r);
    *request.mutable_filter() = o.selection.args.ToProto();
    *request.mutable_tolerance() = tolerance;
    done = client.CompareRanks(request, progress);
    if (!done.ok()) return Fail(err, Annotated(done.status(), "CompareRanks"));
  }
  PrintProgress(done->progress(), out);
  if (!done->has_first()) {
    out << "job " << o.job << ": " << done->ranks_total() << " ranks, "
        << done->records_compared() << " args compared, all match\n";
    return 0;
  }
  const v1::Divergence& d = done->first();
  absl::StatusOr<ManifestEntry> e = EntryFromRecord(d.actual().arg().record(), 0, 0);
  if (!e.ok()) return Fail(err, e.status());
  out << "first divergence: rank " << d.actual().rank() << ", step " << e->step << "  "
      << WhereIs(*e) << ": "
      << (d.reason().empty()
              ? absl::StrCat("element ", d.element(), " = ", d.actual_value(), ", reference ",
                             d.reference_value(), " (", d.mismatches(), " elements differ)")
              : d.reason())
      << "\n";
  return 1;
}

}  // namespace

absl::StatusOr<std::vector<JobRankPlace>> LocalJobRanks(const std::string& folder) {
  DIR* d = ::opendir(folder.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat(folder, ": no such job folder"));
  }
  std::vector<JobRankPlace> ranks;
  while (const dirent* entry = ::readdir(d)) {
    const std::optional<uint32_t> rank = RankFromFolder(entry->d_name);
    if (!rank) continue;
    const std::string dir = absl::StrCat(folder, "/", entry->d_name, "/args_dump");
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) ranks.push_back({*rank, dir, ""});
  }
  ::closedir(d);
  if (ranks.empty()) {
    return absl::NotFoundError(
        absl::StrCat(folder, ": no rank<k>/args_dump in it (a job folder holds its ranks' captures)"));
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const JobRankPlace& a, const JobRankPlace& b) { return a.rank < b.rank; });
  return ranks;
}

int RunJobView(const ViewerOptions& o, std::ostream& out, std::ostream& err) {
  if (!o.remote.target.empty() &&
      (o.first_nonfinite || !o.compare_job.empty() || o.compare_ranks)) {
    // The service answers these itself, from its indexes, live ranks too.
    absl::StatusOr<std::unique_ptr<CaptureClient>> client = ClientFor(o);
    if (!client.ok()) return Fail(err, client.status());
    if (o.first_nonfinite) return RemoteFirstNonfinite(o, **client, out, err);
    return RemoteCompare(o, **client, out, err);
  }
  absl::StatusOr<std::vector<JobRankPlace>> ranks = JobRanks(o, o.job);
  if (!ranks.ok()) return Fail(err, ranks.status());
  if (ranks->empty()) {
    err << "dump_viewer: --ranks: job " << o.job << " has none of those ranks\n";
    return 2;
  }
  if (!o.trace.empty()) {
    std::vector<TraceSourcePlace> places;
    for (const JobRankPlace& r : *ranks) {
      places.push_back({absl::StrCat("rank ", r.rank, " (", Where(o, r), ")"), r.dir, r.capture});
    }
    return WriteTrace(o, places, out, err);
  }
  if (o.first_nonfinite) return FirstNonfinite(o, *ranks, out, err);
  if (!o.compare_job.empty()) {
    ViewerOptions all = o;
    all.ranks.clear();
    absl::StatusOr<std::vector<JobRankPlace>> reference = JobRanks(all, o.compare_job);
    if (!reference.ok()) return Fail(err, reference.status());
    return CompareJobRanks(o, *ranks, *reference, /*by_rank=*/true, out, err);
  }
  if (o.compare_ranks) {
    ViewerOptions all = o;
    all.ranks = {*o.compare_ranks};
    absl::StatusOr<std::vector<JobRankPlace>> reference = JobRanks(all, o.job);
    if (!reference.ok()) return Fail(err, reference.status());
    if (reference->empty()) {
      err << "dump_viewer: --compare-ranks: job " << o.job << " has no rank " << *o.compare_ranks
          << "\n";
      return 2;
    }
    return CompareJobRanks(o, *ranks, *reference, /*by_rank=*/false, out, err);
  }
  return ListRanks(o, *ranks, out, err);
}

}  // namespace argsdump
