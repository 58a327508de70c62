#include "server/job_queries.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "format/kernel_table.h"
#include "format/names.h"
#include "format/record.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "server/page_token.h"

namespace argsdump {
namespace {

constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;
constexpr size_t kScanPage = 4096;      // rows per Query while scanning a rank
constexpr size_t kScanBudget = 200000;  // rows looked at per Query
constexpr size_t kMaxTaskArgs = 1000;   // FirstNonfinite's task_args
constexpr uint32_t kDefaultGridSteps = 64;
constexpr uint32_t kMaxGridSteps = 1024;

using Ranks = std::map<uint32_t, std::shared_ptr<HubCapture>>;

uint32_t PageSize(uint32_t requested) {
  return requested == 0 ? kDefaultPageSize : std::min(requested, kMaxPageSize);
}

void FillArg(const QueryHit& hit, v1::CapturedArg* out) {
  out->set_record_id(hit.record_id);
  *out->mutable_record() = RecordFromRow(hit.row);
  if (hit.manifest_index) out->set_manifest_index(*hit.manifest_index);
  if (hit.stats) StatsRowToProto(*hit.stats, out->mutable_record()->mutable_stats());
}

void FillJobArg(uint32_t rank, const HubCapture& c, const QueryHit& hit, v1::JobArg* out) {
  out->set_rank(rank);
  out->set_capture(c.name());
  FillArg(hit, out->mutable_arg());
}

JobArgKey KeyOf(uint32_t rank, const QueryHit& h) {
  return JobArgKey{h.row.step,      h.row.task_id, rank,       h.row.stage,
                   h.row.arg_index, h.row.role,    h.record_id};
}

// The job's ranks, or only `wanted` (NotFound naming a rank it lacks).
absl::StatusOr<Ranks> SelectRanks(const CaptureHub& hub, const std::string& job,
                                  const google::protobuf::RepeatedField<uint32_t>& wanted) {
  auto all = hub.JobRanks(job);
  if (!all.ok() || wanted.empty()) return all;
  Ranks out;
  for (uint32_t r : wanted) {
    auto it = all->find(r);
    if (it == all->end()) {
      return absl::NotFoundError(absl::StrCat("job ", job, " has no rank ", r));
    }
    out[r] = it->second;
  }
  return out;
}

// Every counter that is a count, summed into `sum` (first_overflow_task,
// a task id, is left out: JobSummary.first_overflow says it).
void AddCounters(const v1::CaptureCounters& c, v1::CaptureCounters* sum) {
  const google::protobuf::Descriptor* d = c.GetDescriptor();
  const google::protobuf::Reflection* r = c.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_UINT64 || f->has_presence()) {
      continue;
    }
    r->SetUInt64(sum, f, r->GetUInt64(*sum, f) + r->GetUInt64(c, f));
  }
}

// The step of task `task` in `c` (0 when no record of it is there).
uint32_t StepOfTask(const HubCapture& c, uint64_t task) {
  ArgFilter q;
  q.task_id = task;
  const QueryPage page = c.Query(q, 0, 1, kScanBudget);
  return page.hits.empty() ? 0 : page.hits.front().row.step;
}

v1::JobSummary Summarize(const std::string& job, const Ranks& ranks, bool with_ranks) {
  v1::JobSummary out;
  out.set_job(job);
  std::map<uint32_t, std::vector<uint32_t>> sizes;        // world size -> ranks giving it
  std::optional<std::pair<uint64_t, uint32_t>> overflow;  // (task, rank)
  for (const auto& [rank, c] : ranks) {
    v1::CaptureSummary s = c->Summary();
    if (s.job().world_size() > 0) sizes[s.job().world_size()].push_back(rank);
    (s.state() == v1::CAPTURE_STATE_LIVE) ? out.set_ranks_live(out.ranks_live() + 1)
                                          : out.set_ranks_finished(out.ranks_finished() + 1);
    if (s.has_device_crash()) out.add_crashed_ranks(rank);
    AddCounters(s.counters(), out.mutable_counters());
    if (s.counters().has_first_overflow_task()) {
      const std::pair<uint64_t, uint32_t> here{s.counters().first_overflow_task(), rank};
      if (!overflow || here < *overflow) overflow = here;
    }
    if (with_ranks) {
      v1::RankSummary* r = out.add_ranks();
      r->set_rank(rank);
      *r->mutable_capture() = std::move(s);
    }
  }
  out.set_ranks_present(static_cast<uint32_t>(ranks.size()));
  const uint32_t world_size = sizes.empty() ? 0 : sizes.rbegin()->first;
  out.set_world_size(world_size);
  if (sizes.size() > 1) {
    std::vector<std::string> said;
    for (const auto& [size, by] : sizes) {
      said.push_back(
          absl::StrCat(size, " (rank", by.size() > 1 ? "s " : " ", absl::StrJoin(by, ", "), ")"));
    }
    out.add_problems(
        absl::StrCat("the ranks give different world sizes: ", absl::StrJoin(said, ", ")));
  }
  for (const auto& [rank, c] : ranks) {
    if (world_size > 0 && rank >= world_size) {
      out.add_problems(absl::StrCat("rank ", rank, " is at or past the world size ", world_size));
    }
  }
  for (uint32_t r = 0; r < world_size; ++r) {
    if (ranks.count(r) == 0) out.add_missing_ranks(r);
  }
  if (overflow) {
    const HubCapture& c = *ranks.at(overflow->second);
    v1::JobRecordRef* f = out.mutable_first_overflow();
    f->set_rank(overflow->second);
    f->set_capture(c.name());
    f->set_task_id(overflow->first);
    f->set_step(StepOfTask(c, overflow->first));
  }
  return out;
}

// A bounded max-heap of the `limit` smallest (key, hit) pairs offered.
class SmallestArgs {
 public:
  explicit SmallestArgs(size_t limit) : limit_(limit) {}
  void Offer(const JobArgKey& key, const QueryHit& hit) {
    if (heap_.size() == limit_ && !(key < heap_.top().first)) return;
    heap_.emplace(key, hit);
    if (heap_.size() > limit_) heap_.pop();
  }
  void Clear() { heap_ = {}; }
  // The pairs, smallest first (the heap is emptied).
  std::vector<std::pair<JobArgKey, QueryHit>> Take() {
    std::vector<std::pair<JobArgKey, QueryHit>> out;
    out.reserve(heap_.size());
    while (!heap_.empty()) {
      out.push_back(heap_.top());
      heap_.pop();
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

 private:
  struct ByKey {
    bool operator()(const std::pair<JobArgKey, QueryHit>& a,
                    const std::pair<JobArgKey, QueryHit>& b) const {
      return a.first < b.first;
    }
  };
  const size_t limit_;
  std::priority_queue<std::pair<JobArgKey, QueryHit>, std::vector<std::pair<JobArgKey, QueryHit>>,
                      ByKey>
      heap_;
};

// One rank's rows counted by step: the lowest `limit` steps kept, and
// whether a higher one was seen.
struct RankSteps {
  std::map<uint32_t, v1::JobGridCell> cells;
  bool capped = false;
  uint32_t last_step = 0;
  absl::Status error;  // the rank's index could not be read
};

RankSteps CountSteps(const HubCapture& c, uint32_t limit) {
  RankSteps out;
  out.error = ScanRows(
      c, ArgFilter(),
      [&](const QueryHit& h) {
        const ManifestRow& row = h.row;
        out.last_step = std::max(out.last_step, row.step);
        auto it = out.cells.find(row.step);
        if (it == out.cells.end()) {
          if (out.cells.size() == limit) {
            if (row.step > out.cells.rbegin()->first) {
              out.capped = true;
              return;
            }
            out.cells.erase(std::prev(out.cells.end()));
            out.capped = true;
          }
          it = out.cells.emplace(row.step, v1::JobGridCell()).first;
        }
        v1::JobGridCell& cell = it->second;
        cell.set_records(cell.records() + 1);
        if (row.nonfinite) cell.set_nonfinite(cell.nonfinite() + 1);
        if (row.overflow) cell.set_overflow(cell.overflow() + 1);
        if (row.overwritten) cell.set_overwritten(cell.overwritten() + 1);
        if (row.truncated) cell.set_truncated(cell.truncated() + 1);
      },
      [&] { out = RankSteps(); });
  return out;
}

}  // namespace

v1::RankProgress RankProgressOf(uint32_t rank, const HubCapture& c) {
  v1::RankProgress p;
  p.set_rank(rank);
  p.set_capture(c.name());
  const bool finished = c.finished();  // before durable(): final then
  p.set_state(finished ? v1::CAPTURE_STATE_FINISHED : v1::CAPTURE_STATE_LIVE);
  p.set_durable_records(c.durable().records);
  return p;
}

std::optional<ArgFilter> ResolvedFilter(const HubCapture& c, const v1::ArgFilter& f,
                                        absl::Status* unresolved) {
  ArgFilter q = ArgFilter::FromProto(f);
  absl::Status s = c.ResolveKernels(&q);
  if (s.ok()) return q;
  if (unresolved != nullptr && unresolved->ok()) *unresolved = s;
  return std::nullopt;
}

absl::Status ScanRows(const HubCapture& c, const ArgFilter& q,
              const std::function<void(const QueryHit&)>& each,
              const std::function<void()>& restart) {
  for (;;) {
    uint64_t from = 0;
    std::optional<bool> was_live;
    bool again = false;
    for (;;) {
      bool live = false;
      QueryPage page = c.Query(q, from, kScanPage, kScanBudget, &live);
      if (!page.error.ok()) return page.error;
      if (was_live && *was_live != live) {
        again = true;
        break;
      }
      was_live = live;
      for (const QueryHit& h : page.hits) each(h);
      if (!page.next) break;
      from = *page.next;
    }
    if (!again) return absl::OkStatus();
    restart();
  }
}

absl::StatusOr<v1::JobSummary> JobQueries::GetJob(const std::string& job) const {
  auto ranks = hub_->JobRanks(job);
  if (!ranks.ok()) return ranks.status();
  return Summarize(job, *ranks, /*with_ranks=*/true);
}

absl::StatusOr<v1::ListJobsResponse> JobQueries::ListJobs(
    const v1::ListJobsRequest& request) const {
  auto after = ParseNameToken(request.page_token());
  if (!after.ok()) return after.status();
  bool more = false;
  const std::vector<std::string> names =
      hub_->JobNames(*after, PageSize(request.page_size()), &more);
  v1::ListJobsResponse out;
  for (const std::string& job : names) {
    auto ranks = hub_->JobRanks(job);
    if (!ranks.ok()) continue;  // its last rank went since it was listed
    *out.add_jobs() = Summarize(job, *ranks, /*with_ranks=*/false);
  }
  if (more && !names.empty()) out.set_next_page_token(NameToken(names.back()));
  return out;
}

absl::StatusOr<v1::QueryJobResponse> JobQueries::QueryJob(
    const v1::QueryJobRequest& request) const {
  auto ranks = SelectRanks(*hub_, request.job(), request.ranks());
  if (!ranks.ok()) return ranks.status();
  auto after = ParseJobArgToken(request.page_token());
  if (!after.ok()) return after.status();
  const size_t limit = PageSize(request.page_size());
  v1::QueryJobResponse out;
  if (!*after) {
    for (const auto& [rank, c] : *ranks) *out.add_progress() = RankProgressOf(rank, *c);
  }
  // One more than a page: whether there is a next one.
  SmallestArgs page(limit + 1);
  absl::Status unresolved;
  bool resolved = ranks->empty();
  for (const auto& [rank, c] : *ranks) {
    std::optional<ArgFilter> q = ResolvedFilter(*c, request.filter(), &unresolved);
    if (!q) continue;
    resolved = true;
    SmallestArgs of_rank(limit + 1);
    const uint32_t r = rank;
    absl::Status scanned = ScanRows(
        *c, *q,
        [&](const QueryHit& h) {
          const JobArgKey key = KeyOf(r, h);
          if (*after && !(**after < key)) return;
          of_rank.Offer(key, h);
        },
        [&] { of_rank.Clear(); });
    if (!scanned.ok()) return scanned;
    for (auto& [key, hit] : of_rank.Take()) page.Offer(key, hit);
  }
  if (!resolved) return unresolved;
  std::vector<std::pair<JobArgKey, QueryHit>> hits = page.Take();
  const bool more = hits.size() > limit;
  if (more) hits.resize(limit);
  for (const auto& [key, hit] : hits) {
    FillJobArg(key.rank, *ranks->at(key.rank), hit, out.add_args());
  }
  if (more) out.set_next_page_token(JobArgToken(hits.back().first));
  return out;
}

absl::StatusOr<v1::FirstNonfiniteResponse> JobQueries::FirstNonfinite(
    const v1::FirstNonfiniteRequest& request) const {
  auto ranks = hub_->JobRanks(request.job());
  if (!ranks.ok()) return ranks.status();
  v1::FirstNonfiniteResponse out;
  for (const auto& [rank, c] : *ranks) *out.add_progress() = RankProgressOf(rank, *c);
  // Per rank, the earliest record the index says holds a NaN or an Inf.
  SmallestArgs first(1);
  absl::Status unresolved;
  bool resolved = false;
  for (const auto& [rank, c] : *ranks) {
    std::optional<ArgFilter> q = ResolvedFilter(*c, request.filter(), &unresolved);
    if (!q) continue;
    resolved = true;
    q->has_nonfinite = true;
    SmallestArgs of_rank(1);
    const uint32_t r = rank;
    absl::Status scanned = ScanRows(
        *c, *q, [&](const QueryHit& h) { of_rank.Offer(KeyOf(r, h), h); },
        [&] { of_rank.Clear(); });
    if (!scanned.ok()) return scanned;
    for (auto& [key, hit] : of_rank.Take()) first.Offer(key, hit);
  }
  if (!resolved) return unresolved;
  const std::vector<std::pair<JobArgKey, QueryHit>> found = first.Take();
  if (found.empty()) return out;
  const auto& [key, hit] = found.front();
  const HubCapture& c = *ranks->at(key.rank);
  FillJobArg(key.rank, c, hit, out.mutable_first());
  const KernelTable kernels = c.Kernels();
  for (uint8_t i = 0; i < hit.row.func_count; ++i) {
    const v1::Kernel* k = FindKernel(kernels, hit.row.func_ids[i]);
    out.add_funcs(k != nullptr ? k->name() : absl::StrCat("func ", hit.row.func_ids[i]));
  }
  ArgFilter task;
  task.task_id = hit.row.task_id;
  const QueryPage page = c.Query(task, 0, kMaxTaskArgs, kScanBudget);
  for (const QueryHit& h : page.hits) FillArg(h, out.add_task_args());
  return out;
}

absl::StatusOr<v1::JobGrid> JobQueries::GetJobGrid(const v1::GetJobGridRequest& request) const {
  auto ranks = hub_->JobRanks(request.job());
  if (!ranks.ok()) return ranks.status();
  const uint32_t limit = request.max_steps() == 0
                             ? kDefaultGridSteps
                             : std::min(request.max_steps(), kMaxGridSteps);
  const v1::JobSummary summary = Summarize(request.job(), *ranks, /*with_ranks=*/true);
  v1::JobGrid out;
  out.set_job(request.job());
  out.set_world_size(summary.world_size());
  out.set_max_steps(limit);
  *out.mutable_crashed_ranks() = summary.crashed_ranks();
  *out.mutable_missing_ranks() = summary.missing_ranks();
  std::map<uint32_t, RankSteps> counted;
  std::set<uint32_t> steps;
  for (const auto& [rank, c] : *ranks) {
    RankSteps r = CountSteps(*c, limit);
    if (!r.error.ok()) return r.error;
    out.set_steps_capped(out.steps_capped() || r.capped);
    for (const auto& [step, cell] : r.cells) steps.insert(step);
    counted.emplace(rank, std::move(r));
  }
  while (steps.size() > limit) {
    steps.erase(std::prev(steps.end()));
    out.set_steps_capped(true);
  }
  for (uint32_t step : steps) out.add_steps(step);
  std::map<uint32_t, const v1::CaptureSummary*> by_rank;
  for (const v1::RankSummary& r : summary.ranks()) by_rank[r.rank()] = &r.capture();
  for (uint32_t m : summary.missing_ranks()) by_rank.emplace(m, nullptr);
  for (const auto& [rank, s] : by_rank) {
    v1::JobGridRank* row = out.add_ranks();
    row->set_rank(rank);
    if (s == nullptr) {
      row->set_missing(true);
      continue;
    }
    const RankSteps& r = counted.at(rank);
    row->set_capture(s->capture());
    row->set_state(s->state());
    row->set_crashed(s->has_device_crash());
    row->set_records(s->records());
    row->set_dropped_records(s->counters().dropped_records());
    row->set_dropped_overwrite(s->counters().dropped_overwrite());
    row->set_last_step(r.last_step);
    for (uint32_t step : steps) {
      auto it = r.cells.find(step);
      *row->add_cells() = it == r.cells.end() ? v1::JobGridCell() : it->second;
    }
  }
  return out;
}

}  // namespace argsdump
