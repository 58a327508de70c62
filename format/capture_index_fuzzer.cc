// libFuzzer target: any bytes as args.index. Opening must give an index or
// DataLoss (never a crash, never a row the service cannot send); every
// query over an index that opened must stay in bounds, and every row it
// hands out must be one RecordFromRow turns into a valid record.
//   bazel build --config=fuzz //format:capture_index_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = argsdump::FuzzScratch() + "/args.index";
  argsdump::PutFile(path, reinterpret_cast<const char*>(data), size);
  RowsRead(path);
  auto index = argsdump::IndexFile::Open(path);
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
