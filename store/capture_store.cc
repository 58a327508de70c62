#include "store/capture_store.h"

#include <functional>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "base/thread.h"
#include "store/manifest.h"
#include "format/kernel_table.h"
#include "format/device_crash.h"
#include "format/names.h"
#include "format/record.h"

namespace argsdump {
namespace {


bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool EagerBin(v1::DumpLevel level) { return level != v1::DUMP_LEVEL_HYBRID; }

// A journal read back in order, every intact entry (past damaged regions
// too), each record's payload placed in args.bin: by the batch's payload
// map once the journal has maps, where the stream put it before that.
struct Replay {
  v1::CaptureInfo info;
  bool have_info = false;
  std::vector<v1::ArgRecord> records;  // bin_offset: where the bytes are in args.bin
  std::vector<bool> shared;            // per record: placed on bytes stored before it
  v1::CaptureCounters counters;
  bool have_counters = false;  // the last counters entry parsed, and no record follows it
  bool finished = false;       // a counters entry no record follows
  bool maps = false;           // the journal places payloads with kPayloadMap entries
  uint64_t unparsed = 0;       // record entries that do not parse (or do not check)
  uint64_t unplaced = 0;       // records whose batch's map is not there
  // For going on appending: stream offsets follow each other, and every
  // payload written (not shared) starts where the one before ended.
  bool in_order = true;
  uint64_t stream_end = 0;
  uint64_t stored_end = 0;
};

Replay ReplayJournal(JournalReader& reader) {
  Replay r;
  r.maps = reader.version() == static_cast<int>(kJournalVersionWithMaps);
  std::optional<PayloadMap> map;
  size_t damage_seen = 0;
  JournalEntryType type;
  std::string payload;
  while (reader.Next(&type, &payload)) {
    if (reader.damage().size() != damage_seen) {
      // Entries were lost before this one: maybe the map of the batch it
      // belongs to. The map before the damage places nothing after it.
      damage_seen = reader.damage().size();
      map.reset();
    }
    switch (type) {
      case JournalEntryType::kCaptureInfo: {
        v1::CaptureInfo i;
        if (i.ParseFromString(payload)) {
          // A kernel table over its bounds is not kept (the records keep
          // their func ids); the rest of the header is.
          if (!CheckKernelTable(i.kernels()).ok()) i.clear_kernels();
          r.info = std::move(i);
          r.have_info = true;
        }
        break;
      }
      case JournalEntryType::kCounters:
        r.have_counters = r.counters.ParseFromString(payload);
        r.finished = true;
        break;
      case JournalEntryType::kPayloadMap: {
        r.maps = true;
        auto m = PayloadMap::Parse(payload);
        map.reset();
        if (m.ok()) map = std::move(m).value();
        break;
      }
      case JournalEntryType::kRecord: {
        v1::ArgRecord rec;
        if (!rec.ParseFromString(payload) || !RowFromRecord(rec).ok()) {
          ++r.unparsed;
          break;
        }
        r.have_counters = r.finished = false;  // a finish that failed, then more records
        bool shared = false;
        if (rec.bin_size() > 0) {
          const uint64_t stream = rec.bin_offset(), size = rec.bin_size();
          r.in_order = r.in_order && stream == r.stream_end;
          r.stream_end = stream + size;  // RowFromRecord: no overflow
          uint64_t stored = stream;
          if (r.maps) {
            std::optional<uint64_t> at =
                map.has_value() ? map->Place(stream, size, &shared) : std::nullopt;
            if (!at.has_value()) {
              ++r.unplaced;
              break;
            }
            stored = *at;
            rec.set_bin_offset(stored);
          }
          if (shared) {
            r.in_order = r.in_order && stored + size <= r.stored_end;
          } else {
            r.in_order = r.in_order && stored == r.stored_end;
            r.stored_end = stored + size;
          }
        }
        r.records.push_back(std::move(rec));
        r.shared.push_back(shared);
        break;
      }
    }
  }
  return r;
}

// Remembers every written payload of `r` (bytes from `bin`, mapped) in
// `index`, in order.
absl::Status RebuildPayloadIndex(const std::string& bin, const Replay& r, uint64_t bin_end,
                                 PayloadIndex* index) {
  const int fd = ::open(bin.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    return absl::OkStatus();  // not a file: nothing is compared with it either
  }
  void* map = ::mmap(nullptr, bin_end, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat("capture store: cannot map ", bin, ": ", std::strerror(errno)));
  }
  const char* bytes = static_cast<const char*>(map);
  for (size_t i = 0; i < r.records.size(); ++i) {
    const uint64_t size = r.records[i].bin_size();
    if (r.shared[i] || size < PayloadIndex::kMinBytes) continue;
    const uint64_t at = r.records[i].bin_offset();
    const absl::string_view piece(bytes + at, size);
    index->Remember(PayloadIndex::KeyOf(PayloadPieces(&piece, 1), size), at);
  }
  ::munmap(map, bin_end);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CaptureStore>> CaptureStore::Create(std::string dir,
                                                                    v1::CaptureInfo info) {
  if (dir.empty()) return absl::InvalidArgumentError("capture store: empty directory");
  if (info.level() < v1::DUMP_LEVEL_PARTIAL || info.level() > v1::DUMP_LEVEL_HYBRID) {
    return absl::InvalidArgumentError(absl::StrCat(
        "capture store: level ", static_cast<int>(info.level()), " captures nothing"));
  }
  if (absl::Status s = CheckKernelTable(info.kernels()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("capture store: ", s.message()));
  }
  if (Exists(dir + "/" + kManifestName) || Exists(dir + "/" + kJournalName)) {
    return absl::AlreadyExistsError(
        absl::StrCat("capture store: ", dir, " already holds a capture"));
  }
  return std::unique_ptr<CaptureStore>(new CaptureStore(std::move(dir), std::move(info)));
}

CaptureStore::~CaptureStore() {
  if (bin_fd_ >= 0) ::close(bin_fd_);
  if (bin_read_fd_ >= 0) ::close(bin_read_fd_);
}

absl::StatusOr<std::unique_ptr<CaptureStore>> CaptureStore::Reopen(const std::string& dir) {
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture store: ", dir, " cannot be reopened live: ", why));
  };
  if (Exists(dir + "/" + kManifestName)) return refuse("it has a manifest (finished)");
  const std::string journal_path = dir + "/" + kJournalName;
  auto reader = JournalReader::Open(journal_path);
  if (!reader.ok()) return reader.status();
  Replay r = ReplayJournal(**reader);
  if (r.finished) return refuse("its journal says it finished");
  if ((*reader)->version() == 1) return refuse("a version 1 journal");
  for (const JournalReader::Damage& d : (*reader)->damage()) {
    if (!d.tail) return refuse(absl::StrCat("its journal is damaged (", (*reader)->reason(), ")"));
  }
  if (!r.have_info) return refuse("its journal has no capture header");
  if (r.unparsed > 0) return refuse("a journaled record does not parse");
  if (r.unplaced > 0) return refuse("a journaled payload has no map placing it in args.bin");
  if (!r.in_order) return refuse("journaled payloads are not in args.bin order");
  const std::string bin = dir + "/" + kBinName;
  struct stat st;
  const uint64_t bin_size = ::stat(bin.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  const uint64_t bin_end = r.stored_end;
  if (bin_end > bin_size) {
    return refuse(absl::StrCat("args.bin holds ", bin_size, " bytes, the journal needs ", bin_end));
  }
  // The payload index as it was: every payload written (not shared)
  // remembered in order, as the writer did, so that the capture goes on
  // sharing exactly as if it had never stopped (the same files). Before
  // anything is cut: a failure here leaves the files as they were.
  PayloadIndex index;
  if (r.maps && bin_end > 0) {
    if (absl::Status s = RebuildPayloadIndex(bin, r, bin_end, &index); !s.ok()) return s;
  }
  // What never became durable goes: the torn entry, the payload bytes
  // written before a record that never reached the journal.
  if (::truncate(journal_path.c_str(), static_cast<off_t>((*reader)->good_bytes())) != 0 ||
      (bin_size > 0 && ::truncate(bin.c_str(), static_cast<off_t>(bin_end)) != 0)) {
    return absl::UnavailableError(
        absl::StrCat("capture store: ", dir, ": cannot cut back: ", std::strerror(errno)));
  }
  std::unique_ptr<CaptureStore> store(new CaptureStore(dir, std::move(r.info)));
  auto journal = JournalWriter::Open(journal_path, /*append=*/true);
  if (!journal.ok()) return journal.status();
  store->journal_ = std::move(journal).value();
  if (bin_size > 0 || EagerBin(store->info_.level())) {
    store->bin_fd_ = ::open(bin.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (store->bin_fd_ < 0 || ::lseek(store->bin_fd_, static_cast<off_t>(bin_end), SEEK_SET) < 0) {
      return absl::UnavailableError(
          absl::StrCat("capture store: cannot open ", bin, ": ", std::strerror(errno)));
    }
  }
  store->maps_ = store->dedup_ = r.maps;
  store->payload_index_ = std::move(index);
  store->bin_bytes_ = store->stored_bytes_ = bin_end;
  store->stream_bytes_ = r.stream_end;
  store->deduplicated_ = std::count(r.shared.begin(), r.shared.end(), true);
  for (size_t i = 0; i < r.records.size(); ++i) {
    const ManifestRow row = *RowFromRecord(r.records[i]);
    store->stats_.Add(i, r.records[i]);
    store->tally_.Add(row);
    store->records_.push_back(row);
  }
  return store;
}

absl::Status CaptureStore::CreateFiles() {
  if (auto s = CreateDirectories(dir_); !s.ok()) return s;
  auto journal = JournalWriter::Open(dir_ + "/" + kJournalName, /*append=*/false,
                                     dedup_ ? kJournalVersionWithMaps : kJournalVersion);
  if (!journal.ok()) return journal.status();
  journal_ = std::move(journal).value();
  if (auto s = journal_->Append(JournalEntryType::kCaptureInfo, info_.SerializeAsString());
      !s.ok()) {
    return s;
  }
  if (dedup_) {
    // An empty map says from here on every payload is placed by one.
    if (auto s = journal_->Append(JournalEntryType::kPayloadMap, PayloadMap().Encode()); !s.ok()) {
      return s;
    }
    maps_ = true;
  }
  if (EagerBin(info_.level())) return OpenBin();
  return absl::OkStatus();
}

void CaptureStore::set_payload_dedup(bool on) {
  if (journal_ == nullptr) dedup_ = on;
}

absl::Status CaptureStore::OpenBin() {
  const std::string path = dir_ + "/" + kBinName;
  bin_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (bin_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("capture store: cannot create ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status CaptureStore::Append(const v1::ArgRecord& record, absl::string_view payload) {
  return AppendBatch({&record}, {payload});
}

absl::Status PreparedRecords::Add(const v1::ArgRecord& record) {
  auto row = RowFromRecord(record);
  if (!row.ok()) return row.status();
  const size_t size = record.ByteSizeLong();
  if (size > kMaxJournalEntryBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "record of task ", TaskIdHex(record.task_id()), " is ", size,
        " bytes serialized, over the journal's ", kMaxJournalEntryBytes, "-byte entries"));
  }
  if (record.has_stats()) stats_.emplace_back(rows_.size(), StatsRowFromProto(record.stats()));
  rows_.push_back(*row);
  JournalWriter::FrameWith(&journal_, JournalEntryType::kRecord, size, [&](char* out) {
    record.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out));
  });
  ends_.push_back(journal_.size());
  return absl::OkStatus();
}

void PreparedRecords::MoveFront(size_t n, PreparedRecords* out) {
  if (n == 0) return;
  if (out->empty() && n == size()) {
    std::swap(rows_, out->rows_);
    std::swap(stats_, out->stats_);
    std::swap(journal_, out->journal_);
    std::swap(ends_, out->ends_);
    Clear();
    return;
  }
  const size_t base = out->rows_.size();
  const size_t journal_base = out->journal_.size();
  const size_t cut = ends_[n - 1];
  out->rows_.insert(out->rows_.end(), rows_.begin(), rows_.begin() + n);
  out->journal_.append(journal_, 0, cut);
  for (size_t i = 0; i < n; ++i) out->ends_.push_back(journal_base + ends_[i]);
  size_t kept = 0;
  for (const auto& [i, row] : stats_) {
    if (i < n) {
      out->stats_.emplace_back(base + i, row);
    } else {
      stats_[kept++] = {i - n, row};
    }
  }
  stats_.resize(kept);
  rows_.erase(rows_.begin(), rows_.begin() + n);
  journal_.erase(0, cut);
  ends_.erase(ends_.begin(), ends_.begin() + n);
  for (size_t& e : ends_) e -= cut;
}

void PreparedRecords::Reserve(size_t records, size_t bytes) {
  rows_.reserve(rows_.size() + records);
  ends_.reserve(ends_.size() + records);
  journal_.reserve(journal_.size() + bytes);
}

void PreparedRecords::Clear() {
  rows_.clear();
  stats_.clear();
  journal_.clear();
  ends_.clear();
}

absl::Status CaptureStore::AppendBatch(const std::vector<const v1::ArgRecord*>& records,
                                       const std::vector<absl::string_view>& payloads) {
  if (finished_) return absl::FailedPreconditionError("capture store: already finished");
  if (records.size() != payloads.size()) {
    return absl::InvalidArgumentError("capture store: one payload per record");
  }
  prepared_.Clear();
  prepared_.Reserve(records.size(), records.size() * PreparedRecords::kRecordEntryGuess);
  for (size_t i = 0; i < records.size(); ++i) {
    const v1::ArgRecord& record = *records[i];
    if (payloads[i].size() != record.bin_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "capture store: record of task ", TaskIdHex(record.task_id()), " says bin_size ",
          record.bin_size(), " but came with ", payloads[i].size(), " payload bytes"));
    }
    if (absl::Status s = prepared_.Add(record); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("capture store: ", s.message()));
    }
  }
  return AppendPrepared(prepared_, payloads);
}

absl::Status CaptureStore::AppendPrepared(const PreparedRecords& prepared,
                                          const std::vector<absl::string_view>& payload) {
  if (finished_) return absl::FailedPreconditionError("capture store: already finished");
  uint64_t expected = stream_bytes_;
  for (const ManifestRow& row : prepared.rows_) {
    if (row.bin_size > 0 && row.bin_offset != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "capture store: record of task ", TaskIdHex(row.task_id), " has bin_offset ",
          row.bin_offset, ", the capture's payloads so far are ", expected,
          " bytes (pairs must arrive in order)"));
    }
    expected += row.bin_size;
  }
  const uint64_t payload_bytes = expected - stream_bytes_;
  uint64_t given = 0;
  for (absl::string_view p : payload) given += p.size();
  if (given != payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("capture store: ", given,
                                                   " payload bytes for records that claim ",
                                                   payload_bytes));
  }

  if (prepared.empty()) return absl::OkStatus();
  if (journal_ == nullptr) {
    if (auto s = CreateFiles(); !s.ok()) return s;
  }
  const bool mapped = maps_ && payload_bytes > 0;
  Placed placed{bin_bytes_ + payload_bytes, 0};
  if (payload_bytes > 0) {
    if (bin_fd_ < 0) {
      if (auto s = OpenBin(); !s.ok()) return s;
    }
    const std::vector<absl::string_view>* to_write = &payload;
    if (mapped) placed = PlacePayloads(prepared, payload, &to_write);
    if (auto s = WritePayloads(*to_write); !s.ok()) {
      ForgetBatch();
      return s;
    }
  }
  // The payloads are in args.bin; a batch whose records are not journaled
  // after all cuts args.bin back, so the two stay consistent and the next
  // batch starts where this one did.
  absl::Status journaled = mapped ? journal_->AppendFramed(map_frame_, prepared.journal_)
                                  : journal_->AppendFramed(prepared.journal_);
  if (!journaled.ok()) {
    if (bin_fd_ >= 0) {
      (void)::ftruncate(bin_fd_, static_cast<off_t>(bin_bytes_));
      ::lseek(bin_fd_, static_cast<off_t>(bin_bytes_), SEEK_SET);  // the next batch starts here
    }
    if (mapped) ForgetBatch();
    return journaled;
  }
  stream_bytes_ += payload_bytes;
  bin_bytes_ = placed.stored_end;
  {
    std::unique_lock<std::shared_mutex> lock(rows_mu_);
    const uint64_t first_id = records_.size();
    records_.insert(records_.end(), prepared.rows_.begin(), prepared.rows_.end());
    if (mapped) {
      for (size_t i = 0; i < prepared.rows_.size(); ++i) {
        if (prepared.rows_[i].bin_size > 0) records_[first_id + i].bin_offset = stored_offsets_[i];
      }
    }
    for (const auto& [i, row] : prepared.stats_) stats_.Add(first_id + i, row);
    for (size_t i = 0; i < prepared.rows_.size(); ++i) {
      const ManifestRow& row = prepared.rows_[i];
      tally_.Add(row);
      if (task_index_on_) IndexRow(row.task_id, static_cast<uint32_t>(first_id + i));
    }
    stored_bytes_ = bin_bytes_;
    deduplicated_ += placed.shared;
  }
  return absl::OkStatus();
}

CaptureStore::Placed CaptureStore::PlacePayloads(const PreparedRecords& prepared,
                                                 const std::vector<absl::string_view>& payload,
                                                 const std::vector<absl::string_view>** to_write) {
  const std::vector<ManifestRow>& rows = prepared.rows_;
  // Each record's payload as pieces of `payload` (cut anywhere).
  pieces_.clear();
  piece_range_.assign(rows.size(), {0, 0});
  size_t view = 0, at = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t begin = pieces_.size();
    for (uint64_t left = rows[i].bin_size; left > 0;) {
      while (at == payload[view].size()) {
        ++view;
        at = 0;
      }
      const size_t take = static_cast<size_t>(std::min<uint64_t>(left, payload[view].size() - at));
      pieces_.push_back(payload[view].substr(at, take));
      at += take;
      left -= take;
    }
    piece_range_[i] = {begin, pieces_.size()};
  }
  auto pieces_of = [&](size_t i) {
    return PayloadPieces(pieces_.data() + piece_range_[i].first,
                         piece_range_[i].second - piece_range_[i].first);
  };

  PayloadMap map;
  map.stream_begin = stream_bytes_;
  map.stream_end = stream_bytes_;
  map.stored_begin = bin_bytes_;
  stored_offsets_.assign(rows.size(), 0);
  written_.clear();
  to_write_.clear();
  remembered_.clear();
  // A map's entry stays within the journal's: past this many shared
  // payloads (each at most 30 bytes of varints), the rest are written.
  constexpr size_t kMaxSharedPerBatch = (kMaxJournalEntryBytes - 64) / 30;
  uint64_t next = bin_bytes_;
  bool any_shared = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    const uint64_t size = rows[i].bin_size;
    if (size == 0) continue;
    map.stream_end += size;
    const PayloadPieces pieces = pieces_of(i);
    std::optional<uint64_t> shared;
    if (dedup_ && size >= PayloadIndex::kMinBytes && map.shared.size() < kMaxSharedPerBatch) {
      const PayloadIndex::Key key = PayloadIndex::KeyOf(pieces, size);
      // The fingerprint names a candidate; only equal bytes share it.
      if (std::optional<uint64_t> c = payload_index_.Find(key)) {
        if (*c <= bin_bytes_ && size <= bin_bytes_ - *c) {  // stored by an earlier batch
          if (StoredEquals(*c, pieces)) shared = c;
        } else if (*c >= bin_bytes_) {  // written by this batch (or a refused one)
          auto w = std::lower_bound(written_.begin(), written_.end(), std::make_pair(*c, size_t{0}));
          if (w != written_.end() && w->first == *c && SamePayload(pieces_of(w->second), pieces)) {
            shared = c;
          }
        }
      }
      if (!shared) remembered_.emplace_back(key, payload_index_.Remember(key, next));
    }
    if (shared) {
      if (!any_shared) {  // from here on, only what is not shared is written
        any_shared = true;
        to_write_.assign(pieces_.begin(), pieces_.begin() + piece_range_[i].first);
      }
      stored_offsets_[i] = *shared;
      map.shared.push_back({rows[i].bin_offset, size, *shared});
      continue;
    }
    stored_offsets_[i] = next;
    written_.emplace_back(next, i);
    next += size;
    if (any_shared) to_write_.insert(to_write_.end(), pieces.begin(), pieces.end());
  }
  if (any_shared) *to_write = &to_write_;
  const std::string entry = map.Encode();
  map_frame_.clear();
  JournalWriter::FrameWith(&map_frame_, JournalEntryType::kPayloadMap, entry.size(),
                           [&](char* out) { std::memcpy(out, entry.data(), entry.size()); });
  return {next, map.shared.size()};
}

int CaptureStore::ReadBin() {
  if (bin_read_tried_) return bin_read_fd_;
  bin_read_tried_ = true;
  struct stat written, read;
  if (bin_fd_ < 0 || ::fstat(bin_fd_, &written) != 0 || !S_ISREG(written.st_mode)) return -1;
  const int fd = ::open((dir_ + "/" + kBinName).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  if (::fstat(fd, &read) != 0 || read.st_dev != written.st_dev || read.st_ino != written.st_ino) {
    ::close(fd);  // the name is another file now: compare with nothing
    return -1;
  }
  bin_read_fd_ = fd;
  return bin_read_fd_;
}

void CaptureStore::ForgetBatch() {
  for (auto it = remembered_.rbegin(); it != remembered_.rend(); ++it) {
    payload_index_.Restore(it->first, it->second);
  }
  remembered_.clear();
}

bool CaptureStore::StoredEquals(uint64_t offset, PayloadPieces pieces) {
  const int fd = ReadBin();
  if (fd < 0) return false;
  compare_.resize(kFileWriteBytes);
  size_t piece = 0, at = 0;
  while (piece < pieces.size()) {
    if (at == pieces[piece].size()) {
      ++piece;
      at = 0;
      continue;
    }
    const size_t want = std::min(compare_.size(), pieces[piece].size() - at);
    const ssize_t n = ::pread(fd, &compare_[0], want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // not there after all (or unreadable): not shared
    if (std::memcmp(compare_.data(), pieces[piece].data() + at, static_cast<size_t>(n)) != 0) {
      return false;
    }
    at += static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

void CaptureStore::EnableTaskIndex() {
  std::unique_lock<std::shared_mutex> lock(rows_mu_);
  if (task_index_on_) return;
  task_index_on_ = true;
  for (size_t i = 0; i < records_.size(); ++i) IndexRow(records_[i].task_id, static_cast<uint32_t>(i));
}

void CaptureStore::IndexRow(uint64_t task_id, uint32_t id) {
  constexpr uint32_t kEnd = ~uint32_t{0};
  next_in_task_.push_back(kEnd);
  if (last_chain_ == nullptr || task_id != last_task_) {
    auto [it, inserted] = task_chains_.try_emplace(task_id, TaskChain{id, id});
    last_chain_ = &it->second;
    last_task_ = task_id;
    if (inserted) return;
  }
  next_in_task_[last_chain_->last] = id;
  last_chain_->last = id;
}

uint64_t CaptureStore::records() const {
  std::shared_lock<std::shared_mutex> lock(rows_mu_);
  return records_.size();
}

v1::CaptureCounters CaptureStore::counters() const {
  std::shared_lock<std::shared_mutex> lock(rows_mu_);
  if (counters_final_) return final_counters_;
  v1::CaptureCounters c;
  tally_.FillInto(&c);
  c.set_payload_bytes_stored(stored_bytes_);
  c.set_deduplicated_args(deduplicated_);
  return c;
}

QueryPage CaptureStore::Query(const ArgFilter& query, uint64_t from, size_t limit,
                              size_t budget) const {
  std::shared_lock<std::shared_mutex> lock(rows_mu_);
  std::vector<uint32_t> task_rows;
  if (query.task_id && task_index_on_) {
    auto it = task_chains_.find(*query.task_id);
    if (it != task_chains_.end()) {
      for (uint32_t id = it->second.first; id != ~uint32_t{0}; id = next_in_task_[id]) {
        task_rows.push_back(id);
      }
    }
    return QueryLive(records_, &task_rows, query, from, limit, budget, &stats_);
  }
  return QueryLive(records_, nullptr, query, from, limit, budget, &stats_);
}

std::optional<ManifestRow> CaptureStore::RecordById(uint64_t record_id) const {
  std::shared_lock<std::shared_mutex> lock(rows_mu_);
  if (record_id >= records_.size()) return std::nullopt;
  return records_[record_id];
}

std::optional<QueryHit> CaptureStore::HitById(uint64_t record_id) const {
  std::shared_lock<std::shared_mutex> lock(rows_mu_);
  if (record_id >= records_.size()) return std::nullopt;
  QueryHit hit{record_id, records_[record_id]};
  if (const StatsRow* s = stats_.Get(record_id)) hit.stats = *s;
  return hit;
}

std::vector<QueryHit> CaptureStore::ByArrival(const ArgFilter& query, uint64_t from,
                                              uint64_t to) const {
  std::shared_lock<std::shared_mutex> lock(rows_mu_);
  std::vector<QueryHit> hits;
  for (uint64_t id = from; id < std::min<uint64_t>(to, records_.size()); ++id) {
    if (query.Matches(records_[id], stats_.Get(id))) {
      QueryHit hit{id, records_[id]};
      if (const StatsRow* s = stats_.Get(id)) hit.stats = *s;
      hits.push_back(hit);
    }
  }
  return hits;
}

absl::Status CaptureStore::WritePayloads(const std::vector<absl::string_view>& payloads) {
  std::vector<struct iovec> iov;
  iov.reserve(std::min<size_t>(payloads.size(), IOV_MAX));
  size_t next = 0;     // payload
  size_t consumed = 0; // bytes of payloads[next] already in an iovec
  uint64_t written = 0;
  auto fail = [&](int err) {
    // Cut back what this batch wrote so args.bin stays consistent; the
    // next batch writes from where this one began either way.
    (void)::ftruncate(bin_fd_, static_cast<off_t>(bin_bytes_));
    ::lseek(bin_fd_, static_cast<off_t>(bin_bytes_), SEEK_SET);
    return absl::ResourceExhaustedError(absl::StrCat(
        "capture store: writing ", dir_, "/", kBinName, " failed after ", written,
        " bytes: ", std::strerror(err)));
  };
  while (next < payloads.size()) {
    // Up to kFileWriteBytes, in slices of whole or split payloads.
    iov.clear();
    size_t room = kFileWriteBytes;
    while (next < payloads.size() && room > 0 && iov.size() < IOV_MAX) {
      const absl::string_view p = payloads[next];
      const size_t take = std::min(room, p.size() - consumed);
      if (take > 0) {
        iov.push_back({const_cast<char*>(p.data() + consumed), take});
        room -= take;
        consumed += take;
      }
      if (consumed == p.size()) {
        ++next;
        consumed = 0;
      }
    }
    size_t first = 0;
    while (first < iov.size()) {
      const ssize_t n = ::writev(bin_fd_, iov.data() + first, static_cast<int>(iov.size() - first));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail(n < 0 ? errno : EIO);
      written += static_cast<uint64_t>(n);
      size_t left = static_cast<size_t>(n);
      while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
      if (left > 0) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CaptureStore::Amend(const v1::CaptureInfo& end) {
  if (finished_) return absl::FailedPreconditionError("capture store: already finished");
  if (absl::Status s = CheckStepLevels(end.step_levels()); !s.ok()) return s;
  if (end.has_device_crash()) {
    if (absl::Status s = CheckDeviceCrash(end.device_crash()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("capture store: ", s.message()));
    }
  }
  if (end.labels().empty() && end.step_levels().empty() && !end.has_device_crash()) {
    return absl::OkStatus();
  }
  for (const auto& [key, value] : end.labels()) (*info_.mutable_labels())[key] = value;
  if (end.has_device_crash()) *info_.mutable_device_crash() = end.device_crash();
  if (!end.step_levels().empty()) {
    *info_.mutable_step_levels() = end.step_levels();
    for (const v1::StepLevel& l : end.step_levels()) {
      if (l.level() > 0) info_.set_level(static_cast<v1::DumpLevel>(l.level()));
    }
  }
  if (journal_ == nullptr) return absl::OkStatus();  // the header, when written, has them
  return journal_->Append(JournalEntryType::kCaptureInfo, info_.SerializeAsString());
}

namespace {

// Writes args.index (`write_index`, on a thread of its own) and the
// manifest `m` (null: none) side by side: each is bound by its copy into
// the page cache (~50 and ~165 ms for a million rows), so the two take the
// longer one's time instead of the sum. The index is renamed into place
// before the manifest is, so that a capture with a manifest always has its
// index; `index_written` runs between the two.
absl::Status WriteIndexAndManifest(const std::function<absl::Status()>& write_index,
                                   const std::string& manifest_path, const ManifestContents* m,
                                   const std::function<void()>& index_written) {
  if (m == nullptr) {
    absl::Status s = write_index();
    if (s.ok() && index_written) index_written();
    return s;
  }
  absl::Status index_status;
  std::thread index_writer;
  // Without a thread (the system refused one) the index is written here,
  // before the manifest.
  bool joined = !StartThread("the index writer thread", &index_writer,
                             [&] { index_status = write_index(); })
                     .ok();
  if (joined) index_status = write_index();
  auto join = [&] {
    if (!joined) index_writer.join();
    joined = true;
    return index_status;
  };
  absl::Status s = WriteManifest(manifest_path, *m, [&]() -> absl::Status {
    if (absl::Status i = join(); !i.ok()) return i;
    if (index_written) index_written();
    return absl::OkStatus();
  });
  // Joined whatever the manifest did; the index's status reached `s`
  // through the callback whenever the manifest got that far.
  join().IgnoreError();
  return s;
}

}  // namespace

absl::Status CaptureStore::Finish(const v1::CaptureCounters& losses) {
  if (finished_) return absl::FailedPreconditionError("capture store: already finished");
  if (journal_ == nullptr) {  // nothing captured: no files
    finished_ = true;
    return absl::OkStatus();
  }
  // Finished only once the manifest is written: a failure on the way (a
  // full disk) leaves the capture live, and Finish may be tried again (the
  // counters entry again too: recovery takes the last one).
  v1::CaptureCounters counters = losses;
  tally_.FillInto(&counters);
  counters.set_payload_bytes_stored(bin_bytes_);
  counters.set_deduplicated_args(deduplicated_);
  if (auto s = journal_->Append(JournalEntryType::kCounters, counters.SerializeAsString());
      !s.ok()) {
    return s;
  }
  // Durability here means "survives a crash of this process" (the data is
  // in the OS once write() returned), as for every Append: no fsync.
  const std::vector<uint32_t> order = ManifestOrder(records_);
  ManifestContents m;
  m.SetInfo(info_);
  m.counters = counters;
  m.has_bin_file = bin_fd_ >= 0;
  m.records = &records_;
  m.order = &order;
  m.stats = stats_.empty() ? nullptr : &stats_;
  absl::Status s = WriteIndexAndManifest(
      [&] {
        return WriteIndex(dir_ + "/" + kIndexName, info_, counters, false, records_, order,
                          &stats_);
      },
      dir_ + "/" + kManifestName, &m,
      [&] {
        std::unique_lock<std::shared_mutex> lock(rows_mu_);
        final_counters_ = counters;
        counters_final_ = true;
      });
  if (!s.ok()) {
    std::unique_lock<std::shared_mutex> lock(rows_mu_);
    counters_final_ = false;
    return s;
  }
  finished_ = true;
  // The open writer keeps its descriptor; the name goes (the bytes with it
  // once the store closes).
  if (!keep_journal_) ::unlink((dir_ + "/" + kJournalName).c_str());
  return absl::OkStatus();
}

bool RecoveryReport::lossy() const {
  if (records_without_payload > 0 || records_unplaced > 0) return true;
  for (const JournalReader::Damage& d : damage) {
    if (!d.tail) return true;
  }
  return false;
}

std::string RecoveryReport::Describe() const {
  std::vector<std::string> parts = {absl::StrCat("kept ", records, " records")};
  for (const JournalReader::Damage& d : damage) {
    parts.push_back(absl::StrCat(d.tail ? "dropped a torn last entry: " : "dropped ", d.bytes,
                                 " journal bytes at byte ", d.offset, " (", d.why, ")"));
  }
  if (records_without_payload > 0) {
    parts.push_back(absl::StrCat("dropped ", records_without_payload,
                                 " records whose payload ", bin_missing ? "args.bin (missing)" :
                                 absl::StrCat("args.bin (", bin_bytes, " bytes)"),
                                 " does not hold"));
  }
  if (records_unplaced > 0) {
    parts.push_back(absl::StrCat("dropped ", records_unplaced,
                                 " records whose payload map (where their bytes are in args.bin)"
                                 " was in a damaged journal region"));
  }
  if (bin_cut) parts.push_back("cut args.bin back to the last kept payload");
  return absl::StrJoin(parts, "; ");
}

namespace {

// The journal's records a recovery keeps: those whose payload args.bin holds
// whole, as rows with their stats; where the last kept payload ends, and how
// many were placed on bytes stored before them.
struct KeptRows {
  RecordList records;
  StatsTable stats;
  uint64_t bin_end = 0;
  uint64_t shared = 0;
};

void KeepRecordsWithPayload(const Replay& replay, RecoveryReport& report, KeptRows* kept) {
  for (size_t i = 0; i < replay.records.size(); ++i) {
    const v1::ArgRecord& r = replay.records[i];
    const uint64_t end = r.bin_offset() + r.bin_size();
    if (r.bin_size() > 0 && (report.bin_missing || end < r.bin_offset() || end > report.bin_bytes)) {
      ++report.records_without_payload;
      continue;
    }
    kept->bin_end = std::max(kept->bin_end, end);
    kept->shared += replay.shared[i] ? 1 : 0;
    kept->stats.Add(kept->records.size(), r);
    kept->records.push_back(*RowFromRecord(r));
  }
  report.records = kept->records.size();
}

// Bytes past the last kept payload belong to pairs that never reached the
// journal (a crash between the two writes): cut them, unless the journal
// was damaged before its tail (they may be the payloads of lost entries).
absl::Status CutUnjournaledPayloads(const std::string& bin, uint64_t bin_end,
                                    RecoveryReport& report) {
  bool damaged = false;
  for (const JournalReader::Damage& d : report.damage) damaged = damaged || !d.tail;
  damaged = damaged || report.records_unplaced > 0;  // their bytes may be past the end
  if (!report.bin_missing && !damaged && report.bin_bytes > bin_end) {
    if (::truncate(bin.c_str(), static_cast<off_t>(bin_end)) != 0) {
      return absl::DataLossError(absl::StrCat("capture store: cannot cut ", bin, " back: ",
                                              std::strerror(errno)));
    }
    report.bin_cut = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CaptureStore::Recover(const std::string& dir, RecoveryReport* out) {
  RecoveryReport scratch;
  RecoveryReport& report = out != nullptr ? *out : scratch;
  report = RecoveryReport();
  const bool has_manifest = Exists(dir + "/" + kManifestName);
  if (has_manifest && Exists(dir + "/" + kIndexName)) return absl::OkStatus();
  auto reader = JournalReader::Open(dir + "/" + kJournalName);
  if (!reader.ok()) {
    return absl::NotFoundError(absl::StrCat("capture store: no journal in ", dir));
  }
  Replay replay = ReplayJournal(**reader);
  const v1::CaptureInfo& info = replay.info;
  v1::CaptureCounters counters = replay.counters;
  const bool have_counters = replay.have_counters;
  report.records_unplaced = replay.unplaced;
  report.damage = (*reader)->damage();
  report.journal_bytes = (*reader)->good_bytes() + (*reader)->dropped_bytes();
  if (!replay.have_info) {
    return absl::DataLossError(absl::StrCat("capture store: journal in ", dir,
                                            " has no capture header (",
                                            (*reader)->reason().empty() ? "empty"
                                                                        : (*reader)->reason(),
                                            "); nothing to recover"));
  }
  // Payloads: kept only when args.bin holds them whole.
  const std::string bin = dir + "/" + kBinName;
  struct stat st;
  report.bin_missing = ::stat(bin.c_str(), &st) != 0;
  report.bin_bytes = report.bin_missing ? 0 : static_cast<uint64_t>(st.st_size);
  KeptRows kept;
  KeepRecordsWithPayload(replay, report, &kept);
  if (absl::Status s = CutUnjournaledPayloads(bin, kept.bin_end, report); !s.ok()) return s;
  const RecordList& records = kept.records;
  StatsTable& stats = kept.stats;
  const uint64_t bin_end = kept.bin_end, shared = kept.shared;
  if (!have_counters) {
    CountRecords(records, &counters);
    counters.set_payload_bytes_stored(bin_end);
    counters.set_deduplicated_args(shared);
  }
  const std::vector<uint32_t> order = ManifestOrder(records);
  // The index first, the manifest (the "finished" mark) last.
  ManifestContents m;
  m.SetInfo(info);
  m.counters = counters;
  m.has_bin_file = !report.bin_missing;
  m.recovered = !have_counters;
  m.records = &records;
  m.order = &order;
  m.stats = stats.empty() ? nullptr : &stats;
  if (!report.damage.empty() || report.records_without_payload > 0 || report.records_unplaced > 0) {
    m.recovery = &report;
  }
  if (auto s = WriteIndexAndManifest(
          [&] {
            return WriteIndex(dir + "/" + kIndexName, info, counters, !have_counters, records,
                              order, &stats);
          },
          dir + "/" + kManifestName, has_manifest ? nullptr : &m, nullptr);
      !s.ok()) {
    return s;
  }
  report.wrote_files = true;
  if (report.lossy()) {
    return absl::DataLossError(absl::StrCat("capture store: ", dir, ": ", report.Describe()));
  }
  return absl::OkStatus();
}

}  // namespace argsdump
