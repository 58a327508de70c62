#include "format/capture_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "format/kernel_table.h"

namespace argsdump {
namespace {

constexpr char kMagic[4] = {'A', 'D', 'I', 'X'};
// Version 3 rows carry the task times; version 2 rows (kIndexRowBytesV2)
// end before them and still read, with times 0.
constexpr uint32_t kVersion = 3;
constexpr uint32_t kOldestVersion = 2;

struct IndexHeader {
  char magic[4];
  uint32_t version;
  uint32_t row_bytes;
  uint32_t info_bytes;
  uint64_t rows;
  uint32_t counters_bytes;
  uint32_t flags;  // bit 0: recovered; bit 1: a StatsRow section follows the task ids
  uint64_t reserved[4];
};
static_assert(sizeof(IndexHeader) == 64, "args.index header is 64 bytes");

uint64_t Pad8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

// Appends to a file through a buffer, in bounded write()s.
class FileWriter {
 public:
  explicit FileWriter(int fd) : fd_(fd) {}
  bool Append(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const size_t take = std::min(n, kBuffer - buffer_.size());
      buffer_.append(c, take);
      c += take;
      n -= take;
      if (buffer_.size() == kBuffer && !Flush()) return false;
    }
    return true;
  }
  bool Flush() {
    size_t done = 0;
    while (done < buffer_.size()) {
      const ssize_t w = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      done += static_cast<size_t>(w);
    }
    buffer_.clear();
    return true;
  }

 private:
  static constexpr size_t kBuffer = 64 << 10;  // as the store's other files
  int fd_;
  std::string buffer_;
};

}  // namespace

absl::Status WriteIndex(const std::string& path, const v1::CaptureInfo& info,
                        const v1::CaptureCounters& counters, bool recovered,
                        const RecordList& records, const std::vector<uint32_t>& order,
                        const StatsTable* stats) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("index ", tmp, ": cannot create: ", std::strerror(errno)));
  }
  const std::string info_bytes = info.SerializeAsString();
  const std::string counter_bytes = counters.SerializeAsString();
  IndexHeader h = {};
  std::memcpy(h.magic, kMagic, 4);
  h.version = kVersion;
  h.row_bytes = sizeof(ManifestRow);
  h.info_bytes = static_cast<uint32_t>(info_bytes.size());
  h.counters_bytes = static_cast<uint32_t>(counter_bytes.size());
  h.rows = order.size();
  h.flags = (recovered ? 1 : 0) | (stats != nullptr && !stats->empty() ? 2 : 0);
  FileWriter out(fd);
  bool ok = out.Append(&h, sizeof(h)) && out.Append(info_bytes.data(), info_bytes.size()) &&
            out.Append(counter_bytes.data(), counter_bytes.size());
  const char zeros[8] = {};
  const uint64_t meta = info_bytes.size() + counter_bytes.size();
  ok = ok && out.Append(zeros, Pad8(meta) - meta);
  for (size_t i = 0; ok && i < order.size(); ++i) {
    ok = out.Append(&records[order[i]], sizeof(ManifestRow));
  }
  ok = ok && out.Append(order.data(), order.size() * sizeof(uint32_t));
  std::vector<uint32_t> position(order.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<uint32_t>(i);
  ok = ok && out.Append(position.data(), position.size() * sizeof(uint32_t));
  for (size_t i = 0; ok && i < order.size(); ++i) {
    ok = out.Append(&records[order[i]].task_id, sizeof(uint64_t));
  }
  if (h.flags & 2) {
    const StatsRow none;
    for (size_t i = 0; ok && i < order.size(); ++i) {
      const StatsRow* s = stats->Get(order[i]);
      ok = out.Append(s != nullptr ? s : &none, sizeof(StatsRow));
    }
  }
  ok = ok && out.Flush();
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return absl::DataLossError(
        absl::StrCat("index ", tmp, ": write failed: ", std::strerror(saved)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::DataLossError(
        absl::StrCat("index ", path, ": rename failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<IndexFile>> IndexFile::Open(const std::string& path,
                                                           IndexChecks checks) {
  // A FIFO or device is refused, not waited on or read without end.
  absl::StatusOr<int> opened = OpenRegularFile(path);
  if (!opened.ok()) {
    return absl::Status(opened.status().code(), absl::StrCat("index ", opened.status().message()));
  }
  const int fd = *opened;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat("index ", path, ": cannot stat"));
  }
  const uint64_t bytes = static_cast<uint64_t>(st.st_size);
  if (bytes < sizeof(IndexHeader)) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat("index ", path, ": shorter than its header"));
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::DataLossError(
        absl::StrCat("index ", path, ": mmap failed: ", std::strerror(errno)));
  }
  std::unique_ptr<IndexFile> f(new IndexFile());
  f->map_ = map;
  f->map_bytes_ = bytes;
  f->path_ = path;
  if (absl::Status s = f->OpenMapped(checks); !s.ok()) return s;
  return f;
}

absl::StatusOr<std::unique_ptr<IndexFile>> IndexFile::OpenRanged(std::string name, uint64_t size,
                                                                 IndexReader read,
                                                                 IndexChecks checks) {
  if (size < sizeof(IndexHeader)) {
    return absl::DataLossError(absl::StrCat("index ", name, ": shorter than its header"));
  }
  // 2^32 rows of the widest layout after the largest info and counters.
  constexpr uint64_t kLargest = sizeof(IndexHeader) + (uint64_t{2} << 24) + 8 +
                                (uint64_t{1} << 32) * (sizeof(ManifestRow) + 2 * sizeof(uint32_t) +
                                                       sizeof(uint64_t) + sizeof(StatsRow));
  if (size > kLargest) {
    return absl::DataLossError(
        absl::StrCat("index ", name, ": ", size, " bytes, more than any index holds"));
  }
  // Address space only: pages hold memory once a fetched block is written
  // to them.
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("index ", name, ": cannot reserve ", size, " bytes: ", std::strerror(errno)));
  }
  std::unique_ptr<IndexFile> f(new IndexFile());
  f->map_ = map;
  f->map_bytes_ = size;
  f->path_ = std::move(name);
  f->read_ = std::move(read);
  f->ranged_ = true;
  const uint64_t blocks = (size + kRangedBlockBytes - 1) / kRangedBlockBytes;
  f->block_state_.reset(new std::atomic<uint8_t>[blocks]);
  for (uint64_t b = 0; b < blocks; ++b) f->block_state_[b].store(kEmpty, std::memory_order_relaxed);
  if (absl::Status s = f->OpenMapped(checks); !s.ok()) return s;
  return f;
}

absl::Status IndexFile::OpenMapped(IndexChecks checks) {
  const uint64_t bytes = map_bytes_;
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("index ", path_, ": ", what));
  };
  if (absl::Status s = Need(uint64_t{0}, sizeof(IndexHeader)); !s.ok()) return s;
  IndexHeader h;
  std::memcpy(&h, map_, sizeof(h));
  if (std::memcmp(h.magic, kMagic, 4) != 0) return bad("not an args.index (bad magic)");
  if (h.version < kOldestVersion || h.version > kVersion) {
    return bad(absl::StrCat("version ", h.version, ", expected ", kOldestVersion, " to ", kVersion));
  }
  const uint32_t row_bytes = h.version == kVersion ? sizeof(ManifestRow) : kIndexRowBytesV2;
  if (h.row_bytes != row_bytes) {
    return bad(absl::StrCat("rows of ", h.row_bytes, " bytes, expected ", row_bytes));
  }
  if (h.info_bytes > (1u << 24) || h.counters_bytes > (1u << 24)) {
    return bad(absl::StrCat("capture info of ", h.info_bytes, " bytes or counters of ",
                            h.counters_bytes, " bytes (at most 16 MiB each)"));
  }
  const uint64_t meta = uint64_t{h.info_bytes} + h.counters_bytes;
  const uint64_t rows_at = sizeof(IndexHeader) + Pad8(meta);
  // Rows are a multiple of 8 bytes and the two u32 arrays 8 bytes per row
  // together: the task_id column starts 8-aligned.
  const uint64_t tasks_at = rows_at + h.rows * (row_bytes + 2 * sizeof(uint32_t));
  const uint64_t stats_at = tasks_at + h.rows * sizeof(uint64_t);
  const uint64_t stats_bytes = (h.flags & 2) ? h.rows * sizeof(StatsRow) : 0;
  if (h.rows > (uint64_t{1} << 32) || bytes != stats_at + stats_bytes) {
    return bad(absl::StrCat(bytes, " bytes do not hold the ", h.rows, " rows it says"));
  }
  // kEveryRow reads everything: a ranged index fetches it all at once.
  if (absl::Status s = Need(sizeof(IndexHeader),
                            checks == IndexChecks::kEveryRow ? bytes - sizeof(IndexHeader) : meta);
      !s.ok()) {
    return s;
  }
  const char* base = static_cast<const char*>(map_);
  if (!info_.ParseFromArray(base + sizeof(IndexHeader), static_cast<int>(h.info_bytes)) ||
      !counters_.ParseFromArray(base + sizeof(IndexHeader) + h.info_bytes,
                                static_cast<int>(h.counters_bytes))) {
    return bad("capture info or counters do not parse");
  }
  if (absl::Status s = CheckKernelTable(info_.kernels()); !s.ok()) {
    return bad(absl::StrCat("byte ", sizeof(IndexHeader), ": capture info: ", s.message()));
  }
  rows_ = h.rows;
  recovered_ = (h.flags & 1) != 0;
  row_bytes_ = row_bytes;
  rows_at_ = base + rows_at;
  record_id_ = reinterpret_cast<const uint32_t*>(base + rows_at + h.rows * row_bytes);
  position_ = record_id_ + h.rows;
  task_ids_ = reinterpret_cast<const uint64_t*>(base + tasks_at);
  if (h.flags & 2) stats_at_ = reinterpret_cast<const StatsRow*>(base + stats_at);
  if (checks == IndexChecks::kRowsRead) return absl::OkStatus();
  return CheckEveryRow();
}

absl::Status IndexFile::Fetch(uint64_t offset, uint64_t size) const {
  if (size == 0) return absl::OkStatus();
  if (offset > map_bytes_ || size > map_bytes_ - offset) {
    return absl::DataLossError(absl::StrCat("index ", path_, ": ", size, " bytes at byte ",
                                            offset, " are past its end (", map_bytes_,
                                            " bytes)"));
  }
  for (uint64_t b = offset / kRangedBlockBytes, last = (offset + size - 1) / kRangedBlockBytes;
       b <= last; ++b) {
    if (block_state_[b].load(std::memory_order_acquire) == kFilled) continue;
    if (absl::Status s = FetchBlock(b); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status IndexFile::FetchBlock(uint64_t block) const {
  std::atomic<uint8_t>& state = block_state_[block];
  std::unique_lock<std::mutex> lock(fill_mu_);
  // Another thread may be filling it: wait for its end. Filled, done;
  // back to empty (its fetch failed), this thread asks again.
  filled_.wait(lock, [&] { return state.load(std::memory_order_relaxed) != kLoading; });
  if (state.load(std::memory_order_relaxed) == kFilled) return absl::OkStatus();
  state.store(kLoading, std::memory_order_relaxed);
  lock.unlock();
  const uint64_t begin = block * kRangedBlockBytes;
  const uint64_t n = std::min<uint64_t>(kRangedBlockBytes, map_bytes_ - begin);
  // No one reads the block's bytes before it is kFilled: the reader
  // writes them in place.
  const absl::Status s = read_(begin, n, static_cast<char*>(map_) + begin);
  lock.lock();
  if (s.ok()) {
    fetched_bytes_.fetch_add(n, std::memory_order_relaxed);
    state.store(kFilled, std::memory_order_release);
  } else {
    state.store(kEmpty, std::memory_order_relaxed);
  }
  filled_.notify_all();
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("index ", path_, ": bytes ", begin, " to ", begin + n,
                                             ": ", s.message()));
}

absl::Status IndexFile::CheckEveryRow() const {
  // Everything a query will read, checked once before the capture is
  // served: a row that is not one, ids that are not a permutation, or a
  // task column out of order would otherwise crash lookups or send
  // answers clients cannot parse.
  const char* const base = static_cast<const char*>(map_);
  auto at = [&](const void* p) { return static_cast<const char*>(p) - base; };
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("index ", path_, ": ", what));
  };
  const uint64_t rows_at = static_cast<uint64_t>(at(rows_at_));
  std::vector<bool> seen(rows_, false);
  for (uint64_t i = 0; i < rows_; ++i) {
    if (absl::Status s = CheckStoredRow(RawRow(i).data()); !s.ok()) {
      return bad(absl::StrCat("byte ", rows_at + i * row_bytes_, ": row ", i, ": ",
                              s.message()));
    }
    const uint32_t id = record_id_[i];
    if (id >= rows_ || seen[id] || position_[id] != i) {
      return bad(absl::StrCat("byte ", at(&record_id_[i]), ": row ", i, " has record id ", id,
                              ", which is out of range, repeated, or not where position[] puts "
                              "it"));
    }
    seen[id] = true;
    if (task_ids_[i] != row(i).task_id || (i > 0 && task_ids_[i - 1] > task_ids_[i])) {
      return bad(absl::StrCat("byte ", at(&task_ids_[i]), ": the task_id column at row ", i,
                              " disagrees with its row or is out of order"));
    }
    if (stats_at_ != nullptr) {
      const char* present = reinterpret_cast<const char*>(stats_at_) + i * sizeof(StatsRow) +
                            offsetof(StatsRow, present);
      if (static_cast<uint8_t>(*present) > 1) {
        return bad(absl::StrCat("byte ", present - base, ": stats row ", i, " is not one"));
      }
    }
  }
  return absl::OkStatus();
}

std::array<char, sizeof(ManifestRow)> IndexFile::RawRow(uint64_t i) const {
  std::array<char, sizeof(ManifestRow)> raw = {};
  std::memcpy(raw.data(), rows_at_ + i * row_bytes_, row_bytes_);
  return raw;
}

ManifestRow IndexFile::row(uint64_t i) const {
  ManifestRow r;
  std::memcpy(&r, rows_at_ + i * row_bytes_, row_bytes_);
  return r;
}

IndexFile::~IndexFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

IndexRange IndexFile::RowsToLook(const ArgFilter& query, uint64_t from) const {
  if (!query.task_id) return IndexRange{from, rows_};
  // Rows are sorted by task_id first; search the dense column.
  const uint64_t* first = task_ids_;
  const uint64_t* last = task_ids_ + rows_;
  const uint64_t* lo = std::lower_bound(first, last, *query.task_id);
  const uint64_t* hi = std::upper_bound(lo, last, *query.task_id);
  return IndexRange{std::max<uint64_t>(from, lo - first), static_cast<uint64_t>(hi - first)};
}

QueryPage IndexFile::Query(const ArgFilter& query, uint64_t from, size_t limit,
                           size_t budget) const {
  if (ranged_) return RangedQuery(query, from, limit, budget);
  QueryPage page;
  const IndexRange range = RowsToLook(query, from);
  uint64_t i = range.begin, end = range.end;
  for (size_t looked = 0; i < end && page.hits.size() < limit && looked < budget; ++i, ++looked) {
    const ManifestRow r = row(i);
    if (query.Matches(r, stats(i))) {
      QueryHit hit{record_id_[i], r, i};
      if (const StatsRow* s = stats(i)) hit.stats = *s;
      page.hits.push_back(hit);
    }
  }
  if (i < end) page.next = i;
  return page;
}

QueryPage IndexFile::RangedQuery(const ArgFilter& query, uint64_t from, size_t limit,
                                 size_t budget) const {
  QueryPage page;
  auto failed = [&](absl::Status s) {
    QueryPage error;
    error.error = std::move(s);
    return error;
  };
  IndexRange range{from, rows_};
  if (query.task_id) {
    absl::StatusOr<IndexRange> bounds = TaskBounds(*query.task_id);
    if (!bounds.ok()) return failed(bounds.status());
    range = IndexRange{std::max(from, bounds->begin), bounds->end};
  }
  uint64_t i = range.begin;
  for (size_t looked = 0; i < range.end && page.hits.size() < limit && looked < budget;
       ++i, ++looked) {
    absl::StatusOr<ManifestRow> r = ReadRow(i, true);
    if (!r.ok()) return failed(r.status());
    if (query.task_id && r->task_id != *query.task_id) {
      return failed(absl::DataLossError(absl::StrCat(
          "index ", path_, ": the task_id column is out of order at row ", i)));
    }
    absl::StatusOr<std::optional<StatsRow>> s = ReadStats(i);
    if (!s.ok()) return failed(s.status());
    if (!query.Matches(*r, *s ? &**s : nullptr)) continue;
    absl::StatusOr<uint64_t> id = ReadRecordId(i);
    if (!id.ok()) return failed(id.status());
    QueryHit hit{*id, *r, i};
    hit.stats = *s;
    page.hits.push_back(hit);
  }
  if (i < range.end) page.next = i;
  return page;
}

std::optional<ManifestRow> IndexFile::RecordById(uint64_t record_id, absl::Status* error) const {
  if (record_id >= rows_) return std::nullopt;
  if (!ranged_) return row(position_[record_id]);
  absl::StatusOr<uint64_t> position = ReadPosition(record_id);
  absl::StatusOr<ManifestRow> r =
      position.ok() ? ReadRow(*position, true) : absl::StatusOr<ManifestRow>(position.status());
  if (!r.ok()) {
    if (error != nullptr) *error = r.status();
    return std::nullopt;
  }
  return *r;
}

absl::StatusOr<QueryHit> IndexFile::HitById(uint64_t record_id) const {
  if (record_id >= rows_) {
    return absl::NotFoundError(absl::StrCat("no record ", record_id, " (", rows_, " records)"));
  }
  absl::StatusOr<uint64_t> position = ReadPosition(record_id);
  if (!position.ok()) return position.status();
  absl::StatusOr<ManifestRow> row = CheckedRow(*position);  // also position < rows_
  if (!row.ok()) return row.status();
  absl::StatusOr<std::optional<StatsRow>> stats = ReadStats(*position);
  if (!stats.ok()) return stats.status();
  QueryHit hit{record_id, *row};
  hit.manifest_index = *position;
  hit.stats = *stats;
  return hit;
}

const ManifestRow* IndexFile::LocalNextMatch(const ArgFilter& query, uint64_t* position,
                                             ManifestRow* scratch) const {
  const IndexRange range = RowsToLook(query, *position);
  const bool all = !query.any();
  // Version 3 rows are ManifestRows, 8-aligned in the mapping (everything
  // before them is a multiple of 8) and checked at Open.
  const bool in_place = row_bytes_ == sizeof(ManifestRow);
  if (!in_place) *scratch = ManifestRow{};  // a version 2 row: times 0
  for (uint64_t i = range.begin; i < range.end; ++i) {
    const ManifestRow* r;
    if (in_place) {
      r = reinterpret_cast<const ManifestRow*>(rows_at_ + i * row_bytes_);
    } else {
      std::memcpy(scratch, rows_at_ + i * row_bytes_, row_bytes_);
      r = scratch;
    }
    if (all || query.Matches(*r, stats(i))) {
      *position = i;
      return r;
    }
  }
  *position = rows_;
  return nullptr;
}

const ManifestRow* IndexFile::RangedNextMatch(const ArgFilter& query, uint64_t* position,
                                              ManifestRow* scratch, absl::Status* error) const {
  auto failed = [&](absl::Status s) -> const ManifestRow* {
    if (error != nullptr) *error = std::move(s);
    *position = rows_;
    return nullptr;
  };
  IndexRange range{*position, rows_};
  if (query.task_id) {
    absl::StatusOr<IndexRange> bounds = TaskBounds(*query.task_id);
    if (!bounds.ok()) return failed(bounds.status());
    range = IndexRange{std::max(*position, bounds->begin), bounds->end};
  }
  const bool all = !query.any();
  for (uint64_t i = range.begin; i < range.end; ++i) {
    absl::StatusOr<ManifestRow> r = ReadRow(i, true);
    if (!r.ok()) return failed(r.status());
    if (query.task_id && r->task_id != *query.task_id) {
      return failed(absl::DataLossError(absl::StrCat(
          "index ", path_, ": the task_id column is out of order at row ", i)));
    }
    absl::StatusOr<std::optional<StatsRow>> s = ReadStats(i);
    if (!s.ok()) return failed(s.status());
    if (all || query.Matches(*r, *s ? &**s : nullptr)) {
      // Fetched and checked now, so that RecordIdAt(i) cannot fail.
      absl::StatusOr<uint64_t> id = ReadRecordId(i);
      if (!id.ok()) return failed(id.status());
      *scratch = *r;
      *position = i;
      return scratch;
    }
  }
  *position = rows_;
  return nullptr;
}

uint64_t IndexFile::RangedRecordIdAt(uint64_t i, absl::Status* error) const {
  absl::StatusOr<uint64_t> id =
      i < rows_ ? ReadRecordId(i)
                : absl::StatusOr<uint64_t>(absl::OutOfRangeError(
                      absl::StrCat("index ", path_, ": no row ", i, " (", rows_, " rows)")));
  if (!id.ok()) {
    if (error != nullptr) *error = id.status();
    return rows_;
  }
  return *id;
}

std::vector<QueryHit> IndexFile::ByArrival(const ArgFilter& query, uint64_t from, uint64_t to,
                                           absl::Status* error) const {
  std::vector<QueryHit> hits;
  if (!ranged_) {
    for (uint64_t id = from; id < std::min(to, rows_); ++id) {
      const ManifestRow r = row(position_[id]);
      if (query.Matches(r, stats(position_[id]))) hits.push_back(QueryHit{id, r});
    }
    return hits;
  }
  for (uint64_t id = from; id < std::min(to, rows_); ++id) {
    absl::StatusOr<uint64_t> position = ReadPosition(id);
    absl::StatusOr<ManifestRow> r =
        position.ok() ? ReadRow(*position, true) : absl::StatusOr<ManifestRow>(position.status());
    absl::StatusOr<std::optional<StatsRow>> s =
        r.ok() ? ReadStats(*position) : absl::StatusOr<std::optional<StatsRow>>(r.status());
    if (!s.ok()) {
      if (error != nullptr) *error = s.status();
      return {};
    }
    if (query.Matches(*r, *s ? &**s : nullptr)) hits.push_back(QueryHit{id, *r});
  }
  return hits;
}

absl::StatusOr<ManifestRow> IndexFile::ReadRow(uint64_t i, bool with_stats) const {
  const char* base = static_cast<const char*>(map_);
  const char* raw = rows_at_ + i * row_bytes_;
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("index ", path_, ": byte ", raw - base, ": row ", i,
                                            ": ", what));
  };
  if (i >= rows_) return bad(absl::StrCat("out of range (", rows_, " rows)"));
  const char* present = stats_at_ == nullptr ? nullptr
                                             : reinterpret_cast<const char*>(stats_at_ + i) +
                                                   offsetof(StatsRow, present);
  if (ranged_) {
    absl::Status s = Need(raw, row_bytes_);
    if (s.ok()) s = Need(&task_ids_[i], sizeof(uint64_t));
    if (s.ok() && with_stats && present != nullptr) s = Need(present, 1);
    if (!s.ok()) return s;
  }
  const std::array<char, sizeof(ManifestRow)> whole = RawRow(i);
  if (absl::Status s = CheckStoredRow(whole.data()); !s.ok()) return bad(std::string(s.message()));
  ManifestRow row;
  std::memcpy(&row, whole.data(), sizeof(row));
  if (row.task_id != task_ids_[i]) return bad("disagrees with the task_id column");
  if (with_stats && present != nullptr && static_cast<uint8_t>(*present) > 1) {
    return bad("its stats row is not one");
  }
  return row;
}

absl::StatusOr<ManifestRow> IndexFile::CheckedRow(uint64_t i) const { return ReadRow(i, true); }

absl::StatusOr<uint64_t> IndexFile::ReadRecordId(uint64_t i) const {
  if (absl::Status s = Need(&record_id_[i], sizeof(uint32_t)); !s.ok()) return s;
  const uint32_t id = record_id_[i];
  if (id >= rows_) {
    return absl::DataLossError(
        absl::StrCat("index ", path_, ": byte ",
                     reinterpret_cast<const char*>(&record_id_[i]) -
                         static_cast<const char*>(map_),
                     ": row ", i, " has record id ", id, ", out of range (", rows_, " rows)"));
  }
  return id;
}

absl::StatusOr<uint64_t> IndexFile::ReadPosition(uint64_t record_id) const {
  if (!ranged_) return position_[record_id];
  if (absl::Status s = Need(&position_[record_id], sizeof(uint32_t)); !s.ok()) return s;
  const uint64_t position = position_[record_id];
  auto bad = [&] {
    return absl::DataLossError(absl::StrCat(
        "index ", path_, ": byte ",
        reinterpret_cast<const char*>(&position_[record_id]) - static_cast<const char*>(map_),
        ": record ", record_id, " is at row ", position,
        ", which is out of range or has another record id"));
  };
  if (position >= rows_) return bad();
  absl::StatusOr<uint64_t> id = ReadRecordId(position);
  if (!id.ok()) return id.status();
  if (*id != record_id) return bad();
  return position;
}

absl::StatusOr<std::optional<StatsRow>> IndexFile::ReadStats(uint64_t i) const {
  if (i >= rows_ || stats_at_ == nullptr) return std::nullopt;
  if (absl::Status s = Need(stats_at_ + i, sizeof(StatsRow)); !s.ok()) return s;
  // `present` is read as a byte before the row becomes a StatsRow (a bool
  // that is neither 0 nor 1 is no bool): not one, no stats.
  const char* present = reinterpret_cast<const char*>(stats_at_ + i) + offsetof(StatsRow, present);
  if (static_cast<uint8_t>(*present) != 1) return std::nullopt;
  StatsRow s;
  std::memcpy(&s, stats_at_ + i, sizeof(s));
  return s;
}

std::optional<StatsRow> IndexFile::StatsOf(uint64_t i, absl::Status* error) const {
  absl::StatusOr<std::optional<StatsRow>> s = ReadStats(i);
  if (!s.ok()) {
    if (error != nullptr) *error = s.status();
    return std::nullopt;
  }
  return *s;
}

absl::StatusOr<IndexRange> IndexFile::TaskBounds(uint64_t task_id) const {
  // The search reads the task_id column only (8 bytes a row: few blocks of
  // a ranged index); what it finds is then checked against the rows, which
  // are what the column is an index of. If row begin - 1 is of a lower
  // task, row end of a higher one and every row between of this one (the
  // readers of the range check those), then, the rows being sorted by
  // task, [begin, end) is the task's range whatever the column holds
  // elsewhere: a damaged column entry the search stepped on can make it
  // end elsewhere, but then those checks fail instead.
  auto column_at = [&](uint64_t i) -> absl::StatusOr<uint64_t> {
    if (absl::Status s = Need(&task_ids_[i], sizeof(uint64_t)); !s.ok()) return s;
    return task_ids_[i];
  };
  // The first row whose entry is >= task_id. Task ids are spread about
  // evenly (counters), so the search interpolates: a cold ranged index
  // then fetches two or three column blocks instead of log2(blocks). An
  // interpolation step that does not halve the interval is followed by a
  // bisection step: never more than twice binary search's probes.
  auto first_not_below = [&]() -> absl::StatusOr<uint64_t> {
    if (rows_ == 0) return uint64_t{0};
    // Row 0's task id, from the row (in the block Open read) rather than
    // from the column: like every probe, only a guess the checks settle.
    absl::StatusOr<uint64_t> first = [&]() -> absl::StatusOr<uint64_t> {
      if (absl::Status s = Need(rows_at_, sizeof(uint64_t)); !s.ok()) return s;
      uint64_t task;
      std::memcpy(&task, rows_at_ + offsetof(ManifestRow, task_id), sizeof(task));
      return task;
    }();
    if (!first.ok()) return first.status();
    if (*first >= task_id) return uint64_t{0};
    absl::StatusOr<uint64_t> last = column_at(rows_ - 1);
    if (!last.ok()) return last.status();
    if (*last < task_id) return rows_;
    // column[lo] < task_id <= column[hi]: the answer is in (lo, hi].
    uint64_t lo = 0, hi = rows_ - 1, lo_task = *first, hi_task = *last;
    bool interpolate = true;
    while (hi - lo > 1) {
      const uint64_t width = hi - lo;
      uint64_t mid = lo + width / 2;
      if (interpolate) {
        const long double at = static_cast<long double>(task_id - lo_task) /
                               static_cast<long double>(hi_task - lo_task) * width;
        mid = lo + std::clamp<uint64_t>(static_cast<uint64_t>(at), 1, width - 1);
      }
      absl::StatusOr<uint64_t> t = column_at(mid);
      if (!t.ok()) return t.status();
      if (*t < task_id) {
        lo = mid;
        lo_task = *t;
      } else {
        hi = mid;
        hi_task = *t;
      }
      interpolate = !interpolate || hi - lo <= width / 2;
    }
    return hi;
  };
  // The first row in [lo, hi) whose entry is > task_id, or hi.
  auto first_above = [&](uint64_t lo, uint64_t hi) -> absl::StatusOr<uint64_t> {
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      absl::StatusOr<uint64_t> t = column_at(mid);
      if (!t.ok()) return t.status();
      if (*t <= task_id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  };
  absl::StatusOr<uint64_t> begin = first_not_below();
  if (!begin.ok()) return begin.status();
  // A task has few rows: its end is searched for by doubling steps from
  // its beginning (the blocks next to it), not over the rest of the index.
  uint64_t lo = *begin, step = 1;
  for (;;) {
    const uint64_t probe = lo + step - 1;
    if (probe >= rows_) break;
    absl::StatusOr<uint64_t> t = column_at(probe);
    if (!t.ok()) return t.status();
    if (*t > task_id) break;
    lo = probe + 1;
    step *= 2;
  }
  absl::StatusOr<uint64_t> end = first_above(lo, std::min(rows_, lo + step - 1));
  if (!end.ok()) return end.status();
  auto out_of_order = [&](uint64_t i) {
    return absl::DataLossError(absl::StrCat("index ", path_, ": the task_id column is out of "
                                            "order at row ", i));
  };
  // The rows around the range are other tasks, on the right sides (each
  // checked, and agreeing with its column entry).
  auto task_at = [&](uint64_t i) -> absl::StatusOr<uint64_t> {
    absl::StatusOr<ManifestRow> row = ReadRow(i, false);
    if (!row.ok()) return row.status();
    return row->task_id;
  };
  if (*begin > 0) {
    absl::StatusOr<uint64_t> t = task_at(*begin - 1);
    if (!t.ok()) return t.status();
    if (*t >= task_id) return out_of_order(*begin - 1);
  }
  if (*end < rows_) {
    absl::StatusOr<uint64_t> t = task_at(*end);
    if (!t.ok()) return t.status();
    if (*t <= task_id) return out_of_order(*end);
  }
  return IndexRange{*begin, *end};
}

absl::StatusOr<IndexRange> IndexFile::TaskRows(uint64_t task_id) const {
  absl::StatusOr<IndexRange> range = TaskBounds(task_id);
  if (!range.ok()) return range.status();
  for (uint64_t i = range->begin; i < range->end; ++i) {
    absl::StatusOr<ManifestRow> row = ReadRow(i, true);
    if (!row.ok()) return row.status();
    if (row->task_id != task_id) {
      return absl::DataLossError(absl::StrCat("index ", path_, ": the task_id column is out of "
                                              "order at row ", i));
    }
  }
  return range;
}

}  // namespace argsdump
