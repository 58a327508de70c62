// libFuzzer target: any bytes as args.index. Opening must give an index or
// DataLoss (never a crash, never a row the service cannot send); every
// query over an index that opened must stay in bounds, and every row it
// hands out must be one RecordFromRow turns into a valid record. The same
// bytes opened ranged (from memory, the reader failing from a call the
// input picks) must answer every question with an error or a checked row,
// and exactly as the local index when that one passed kEveryRow's checks
// and no read failed.
//   bazel build --config=fuzz //format:capture_index_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "format/capture_index.h"
#include "format/kernel_table.h"
#include "format/record.h"
#include "tests/fuzz_scratch.h"

namespace {

void Check(const argsdump::ManifestRow& row) {
  // A row that passed Open's checks converts into a record the service
  // can send: ValidateRecord is what Ingest would demand of it.
  const absl::Status s = argsdump::ValidateRecord(argsdump::RecordFromRow(row));
  if (!s.ok()) {
    std::fprintf(stderr, "a row that opened is no valid record: %s\n", s.ToString().c_str());
    std::abort();
  }
}

// The viewer's way in: only the header checked at open, rows as they are
// read. Whatever the bytes, a checked row is a valid record, stats stay in
// bounds and a task's range lies inside the index.
void RowsRead(const std::string& path) {
  auto index = argsdump::IndexFile::Open(path, argsdump::IndexChecks::kRowsRead);
  if (!index.ok()) return;
  const argsdump::IndexFile& f = **index;
  const uint64_t n = f.size();
  std::vector<uint64_t> tasks = {0x123456789abcdefull};
  for (uint64_t i = 0; i < n && i < 4096; ++i) {
    auto row = f.CheckedRow(i);
    f.StatsOf(i);
    if (!row.ok()) continue;
    Check(*row);
    if (tasks.size() < 9) tasks.push_back(row->task_id);
  }
  if (f.CheckedRow(n).ok()) std::abort();  // past the end
  for (uint64_t task : tasks) {
    auto range = f.TaskRows(task);
    if (range.ok() && !(range->begin <= range->end && range->end <= n)) std::abort();
  }
}

// The comparisons' walk over an index that opened: positions only move
// on and stay in bounds, every row it hands out is a valid record of the
// filter's task, and its record id is one.
void NextMatches(const argsdump::IndexFile& f, const argsdump::ArgFilter& q) {
  argsdump::ManifestRow scratch;
  uint64_t position = 0, seen = 0;
  for (const argsdump::ManifestRow* r; seen < 4096 && (r = f.NextMatch(q, &position, &scratch));
       ++position, ++seen) {
    if (position >= f.size() || f.RecordIdAt(position) >= f.size()) std::abort();
    if (q.task_id && r->task_id != *q.task_id) std::abort();
    Check(*r);
  }
}

bool SameRow(const argsdump::ManifestRow& a, const argsdump::ManifestRow& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

bool SameHits(const std::vector<argsdump::QueryHit>& a, const std::vector<argsdump::QueryHit>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].record_id != b[i].record_id || !SameRow(a[i].row, b[i].row) ||
        a[i].manifest_index != b[i].manifest_index ||
        a[i].stats.has_value() != b[i].stats.has_value()) {
      return false;
    }
  }
  return true;
}

// The bytes read ranged. `full`: the same bytes opened locally with
// kEveryRow, or null when they did not pass. Reads fail from call
// `fail_from` on (never when it is 0).
void Ranged(const std::string& bytes, const argsdump::IndexFile* full, uint32_t fail_from) {
  uint32_t calls = 0;
  auto read = [&](uint64_t offset, uint64_t size, char* out) -> absl::Status {
    if (fail_from != 0 && ++calls >= fail_from) return absl::UnavailableError("down");
    if (offset > bytes.size() || size > bytes.size() - offset) std::abort();  // past the end
    std::memcpy(out, bytes.data() + offset, size);
    return absl::OkStatus();
  };
  auto opened = argsdump::IndexFile::OpenRanged("fuzz", bytes.size(), read);
  // What passes kEveryRow locally opens ranged while reads work.
  const bool exact = full != nullptr && fail_from == 0;
  if (!opened.ok()) {
    if (exact) std::abort();
    return;
  }
  const argsdump::IndexFile& f = **opened;
  const uint64_t n = f.size();
  if (full != nullptr && n != full->size()) std::abort();
  absl::Status error;
  // An answer is an error (only when a read failed, if the bytes passed
  // kEveryRow) or the local index's answer.
  auto must = [&](bool same) {
    if ((exact && !error.ok()) || (full != nullptr && error.ok() && !same)) std::abort();
    error = absl::OkStatus();
  };
  // Tasks: those of the first rows that read, and one that is not there.
  std::vector<uint64_t> tasks = {0x123456789abcdefull};
  for (uint64_t i = 0; i < n && i < 64; ++i) {
    auto row = f.CheckedRow(i);
    if (exact && !row.ok()) std::abort();
    if (!row.ok()) continue;
    Check(*row);
    if (full != nullptr && !SameRow(*row, *full->CheckedRow(i))) std::abort();
    if (tasks.size() < 9) tasks.push_back(row->task_id);
    const std::optional<argsdump::StatsRow> stats = f.StatsOf(i, &error);
    must(full == nullptr || stats.has_value() == full->StatsOf(i).has_value());
  }
  for (uint64_t task : tasks) {
    argsdump::ArgFilter q;
    q.task_id = task;
    argsdump::QueryPage p = f.Query(q, 0, 1000, 1 << 20);
    if (!p.error.ok() && !p.hits.empty()) std::abort();
    for (const argsdump::QueryHit& h : p.hits) {
      Check(h.row);
      if (h.row.task_id != task || h.record_id >= n || !h.manifest_index ||
          *h.manifest_index >= n) {
        std::abort();
      }
    }
    error = p.error;
    must(full == nullptr || SameHits(p.hits, full->Query(q, 0, 1000, 1 << 20).hits));
    auto range = f.TaskRows(task);
    if (range.ok() && !(range->begin <= range->end && range->end <= n)) std::abort();
    if (exact && (!range.ok() || range->end - range->begin != p.hits.size())) std::abort();
    // The walk of the comparisons, by task, against the local one.
    argsdump::ManifestRow scratch, full_scratch;
    uint64_t position = 0, full_position = 0;
    for (int seen = 0; seen < 64; ++seen, ++position, ++full_position) {
      const argsdump::ManifestRow* r = f.NextMatch(q, &position, &scratch, &error);
      if (r == nullptr && position != n) std::abort();
      if (r != nullptr) {
        if (position >= n || r->task_id != task) std::abort();
        Check(*r);
        if (f.RecordIdAt(position, &error) >= n) std::abort();  // fetched with the row
        if (!error.ok()) std::abort();
      }
      if (full != nullptr && error.ok()) {
        const argsdump::ManifestRow* w = full->NextMatch(q, &full_position, &full_scratch);
        must(position == full_position && (r == nullptr) == (w == nullptr) &&
             (r == nullptr || SameRow(*r, *w)));
      }
      error = absl::OkStatus();
      if (r == nullptr) break;
    }
  }
  argsdump::ArgFilter all;
  for (uint64_t from = 0, page = 0; page < 8; ++page) {
    argsdump::QueryPage p = f.Query(all, from, 100, 300);
    for (const argsdump::QueryHit& h : p.hits) Check(h.row);
    error = p.error;
    must(full == nullptr || SameHits(p.hits, full->Query(all, from, 100, 300).hits));
    if (!p.next) break;
    if (*p.next <= from) std::abort();
    from = *p.next;
  }
  for (uint64_t id = 0; id < n && id < 64; ++id) {
    auto hit = f.HitById(id);
    if (hit.ok()) {
      Check(hit->row);
      if (!hit->manifest_index || *hit->manifest_index >= n) std::abort();
    }
    if (exact && !hit.ok()) std::abort();
    if (full != nullptr && hit.ok() && !SameHits({*hit}, {*full->HitById(id)})) std::abort();
    auto row = f.RecordById(id, &error);
    if (row) Check(*row);
    must(full == nullptr || (row.has_value() && SameRow(*row, *full->RecordById(id))));
  }
  if (!absl::IsNotFound(f.HitById(n).status())) std::abort();
  const std::vector<argsdump::QueryHit> arrived = f.ByArrival(all, 0, 64, &error);
  for (const argsdump::QueryHit& h : arrived) Check(h.row);
  must(full == nullptr || SameHits(arrived, full->ByArrival(all, 0, 64)));
  if (f.fetched_bytes() > bytes.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = argsdump::FuzzScratch() + "/args.index";
  argsdump::PutFile(path, reinterpret_cast<const char*>(data), size);
  RowsRead(path);
  auto index = argsdump::IndexFile::Open(path);
  // The last byte picks the read a ranged open fails from (0: none).
  const uint32_t fail_from = size > 0 && (data[size - 1] & 1) ? data[size - 1] >> 1 : 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  Ranged(bytes, index.ok() ? index->get() : nullptr, fail_from);
  if (!index.ok()) return 0;
  const argsdump::IndexFile& f = **index;
  const uint64_t n = f.size();
  for (uint64_t id = 0; id < n && id < 4096; ++id) {
    auto row = f.RecordById(id);
    if (!row) std::abort();  // every id below size() has a row
    Check(*row);
    // GetArg's read: a checked row (or DataLoss), its manifest position in range.
    auto hit = f.HitById(id);
    if (hit.ok() && (!hit->manifest_index || *hit->manifest_index >= n)) std::abort();
  }
  if (f.RecordById(n)) std::abort();
  if (!absl::IsNotFound(f.HitById(n).status())) std::abort();
  argsdump::ArgFilter all;
  uint64_t from = 0;
  for (int page = 0; page < 64; ++page) {
    argsdump::QueryPage p = f.Query(all, from, 100, 1000);
    for (const argsdump::QueryHit& h : p.hits) Check(h.row);
    if (!p.next) break;
    if (*p.next <= from) std::abort();  // pages always move on
    from = *p.next;
  }
  // By task: the first rows' tasks, and one that is not there.
  for (uint64_t id = 0; id < n && id < 8; ++id) {
    argsdump::ArgFilter q;
    q.task_id = f.RecordById(id)->task_id;
    argsdump::QueryPage p = f.Query(q, 0, 1000, 1 << 20);
    if (p.hits.empty()) std::abort();  // a task that is there is found
    for (const argsdump::QueryHit& h : p.hits) {
      if (h.row.task_id != *q.task_id) std::abort();
    }
    NextMatches(f, q);
  }
  NextMatches(f, all);
  // The kernel table (checked at open): every kernel describes itself, and
  // a name and a type it holds resolve and select within bounds.
  const argsdump::KernelTable& kernels = f.info().kernels();
  for (const argsdump::v1::Kernel& k : kernels) argsdump::DescribeKernel(k);
  if (!kernels.empty()) {
    argsdump::ArgFilter named;
    named.func_name = kernels.Get(0).name();
    named.func_type = kernels.Get(0).type();
    if (!argsdump::ResolveKernelFilter(kernels, &named).ok()) std::abort();
    for (const argsdump::QueryHit& h : f.Query(named, 0, 100, 1000).hits) Check(h.row);
  }
  argsdump::ArgFilter none;
  none.task_id = 0x123456789abcdefull;
  f.Query(none, 0, 10, 1000);
  f.ByArrival(all, 0, n < 4096 ? n : 4096);
  f.ByArrival(all, n, n + 10);
  return 0;
}
