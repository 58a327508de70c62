#include "server/capture_hub.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>

#include <cstdio>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/thread.h"
#include "format/job.h"
#include "format/record.h"
#include "format/kernel_table.h"

namespace argsdump {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// One line of the server's log (stderr).
void Log(const std::string& line) { std::fprintf(stderr, "capture_server: %s\n", line.c_str()); }

// What a sealed capture holds and lost, for its log line.
std::string Counted(uint64_t records, const v1::CaptureCounters& c) {
  return absl::StrCat(records, " records, ", c.payload_bytes(), " payload bytes; dropped ",
                      c.dropped_records(), " records (ready queue full ",
                      c.dropped_ready_queue_full(), ", free queue empty ",
                      c.dropped_free_queue_empty(), ", arena ack timeout ",
                      c.dropped_arena_ack_timeout(), ", flush timeout ", c.dropped_flush_timeout(),
                      ", host gone ", c.dropped_host_gone(), ", overwritten ",
                      c.dropped_overwrite(), "), ", c.truncated_args(),
                      " truncated");
}

}  // namespace

const char* SealCauseName(SealCause cause) {
  switch (cause) {
    case SealCause::kFinishMessage:
      return "finish message";
    case SealCause::kFinishCapture:
      return "FinishCapture";
    case SealCause::kIdleTimeout:
      return "idle timeout";
    case SealCause::kRecovery:
      return "recovered";
  }
  return "?";
}

// ---- HubCapture ------------------------------------------------------------

HubCapture::~HubCapture() {
  JoinWriter();
  {
    std::lock_guard<std::mutex> lock(mu_);
    committer_stop_ = true;
  }
  commit_cv_.notify_all();
  // The committer finishes what it was handed; it never waits for the
  // writer, so this is joined from any thread.
  if (committer_.joinable()) committer_.join();
}

void HubCapture::JoinWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    writer_done_ = true;
  }
  jobs_cv_.notify_all();
  if (!writer_.joinable()) return;
  if (writer_.get_id() == std::this_thread::get_id()) {
    // ~HubCapture on the writer thread: the last reference went there, after
    // a job (WriterLoop). The thread ends as soon as it is back there; jobs
    // still queued (none holds a reference) are answered, not run.
    *destroyed_on_writer_ = true;
    writer_.detach();
    std::deque<Job> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(jobs_);
    }
    for (Job& j : left) {
      j.done(absl::FailedPreconditionError(absl::StrCat("capture ", name_, " is gone")), durable_);
    }
    return;
  }
  writer_.join();
}

namespace {

// What the regular files of `dir` take on disk (allocated blocks).
uint64_t DiskBytes(const std::string& dir) {
  uint64_t bytes = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (struct dirent* e = ::readdir(d)) {
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  ::closedir(d);
  return bytes;
}

// When a finished capture's manifest was written: its age for retention.
// A damaged capture has none; it is as old as the newest file in it, so a
// capture a crash left unreadable is kept as long as any other.
absl::Time FinishedAt(const std::string& dir) {
  struct stat st;
  if (::stat((dir + "/" + kManifestName).c_str(), &st) == 0) {
    return absl::TimeFromTimespec(st.st_mtim);
  }
  absl::Time newest = absl::UnixEpoch();
  if (::stat(dir.c_str(), &st) == 0) newest = absl::TimeFromTimespec(st.st_mtim);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return newest;
  while (struct dirent* e = ::readdir(d)) {
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      newest = std::max(newest, absl::TimeFromTimespec(st.st_mtim));
    }
  }
  ::closedir(d);
  return newest;
}

// A duration that is set and finite: 0 and InfiniteDuration both mean "no
// such deadline".
bool IsDeadline(absl::Duration d) {
  return d > absl::ZeroDuration() && d != absl::InfiniteDuration();
}

// A capture folder being deleted is first renamed beside itself, to
// args_dump~deleting~<pid>.<n>, so that a new capture of the same name starts in a fresh
// folder. '~' is not a capture-name character: such a folder is never
// taken for a capture.
constexpr char kDeletingMark[] = "~deleting~";

// Whether `dir` holds nothing but empty regular files (or nothing).
bool HoldsNoBytes(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool empty = true;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || st.st_size != 0) {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

// Removes a capture's files and folders; the first failure, naming it.
absl::Status RemoveCaptureFiles(const std::string& dir) {
  // <root>/<name>/<folder>: neither <name> nor <folder> is followed when it
  // is a link (a link planted in the root would otherwise have the files
  // of the folder it leads to removed); a link is removed as itself.
  const size_t slash = dir.rfind('/');
  const std::string parent = dir.substr(0, slash);  // <root>/<name>
  const std::string base = dir.substr(slash + 1);
  const int parent_fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (parent_fd < 0) {
    if (errno == ENOENT) return absl::OkStatus();
    if (errno == ELOOP || errno == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat("not removing ", dir, ": ", parent, " is not a folder of the root"));
    }
    return absl::InternalError(absl::StrCat("cannot open ", parent, ": ", std::strerror(errno)));
  }
  absl::Status first;
  const int fd = ::openat(parent_fd, base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    if (DIR* d = ::fdopendir(fd)) {
      while (struct dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        if (::unlinkat(::dirfd(d), e->d_name, 0) != 0 && first.ok()) {
          first = absl::InternalError(
              absl::StrCat("cannot remove ", dir, "/", name, ": ", std::strerror(errno)));
        }
      }
      ::closedir(d);
    } else {
      ::close(fd);
    }
    if (::unlinkat(parent_fd, base.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT && first.ok()) {
      first = absl::InternalError(absl::StrCat("cannot remove ", dir, ": ", std::strerror(errno)));
    }
  } else if (errno == ELOOP || errno == ENOTDIR) {
    // A link or a file where the folder was: it goes, what it names stays.
    if (::unlinkat(parent_fd, base.c_str(), 0) != 0 && errno != ENOENT && first.ok()) {
      first = absl::InternalError(absl::StrCat("cannot remove ", dir, ": ", std::strerror(errno)));
    }
  } else if (errno != ENOENT) {
    first = absl::InternalError(absl::StrCat("cannot open ", dir, ": ", std::strerror(errno)));
  }
  ::close(parent_fd);
  return first;
}

}  // namespace

google::protobuf::RepeatedPtrField<v1::Kernel> HubCapture::Kernels() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_.kernels();
}

v1::CaptureClock HubCapture::Clock() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_.clock();
}

absl::Status HubCapture::ResolveKernels(ArgFilter* query) const {
  if (!query->func_name && !query->func_type) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status s = ResolveKernelFilter(info_.kernels(), query);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat("capture ", name_, ": ", s.message()));
}

v1::JobMember HubCapture::job() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_.job();
}

v1::CaptureSummary HubCapture::Summary() const {
  const uint64_t disk_bytes = StoredBytes();
  std::lock_guard<std::mutex> lock(mu_);
  v1::CaptureSummary s;
  s.set_capture(name_);
  s.set_state(store_ ? v1::CAPTURE_STATE_LIVE : v1::CAPTURE_STATE_FINISHED);
  s.set_level(static_cast<v1::DumpLevel>(ReportedLevel(info_)));
  if (info_.has_scope()) *s.mutable_scope() = info_.scope();
  s.set_platform(info_.platform());
  *s.mutable_labels() = info_.labels();
  if (info_.has_device_crash()) *s.mutable_device_crash() = info_.device_crash();
  if (info_.has_job()) *s.mutable_job() = info_.job();
  if (info_.has_clock()) *s.mutable_clock() = info_.clock();
  if (store_) {
    *s.mutable_counters() = store_->counters();
  } else if (row_) {
    *s.mutable_counters() = row_->counters;
  } else if (index_) {
    *s.mutable_counters() = index_->counters();
    s.set_recovered(index_->recovered());
  }
  s.set_records(durable_.records);
  // args.bin's bytes: fewer than the stream's when payloads are shared (a
  // capture written before sharing existed counts no stored bytes).
  const v1::CaptureCounters& c = s.counters();
  s.set_bin_bytes(c.payload_bytes_stored() > 0 || c.payload_bytes() == 0
                      ? c.payload_bytes_stored()
                      : durable_.bin_bytes);
  s.set_attached(attached_);
  s.set_disk_bytes(disk_bytes);
  return s;
}

bool HubCapture::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_ == nullptr;
}

Watermark HubCapture::durable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return durable_;
}

std::pair<std::shared_ptr<CaptureStore>, std::shared_ptr<IndexFile>> HubCapture::Sources(
    absl::Status* unreadable) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!row_) return {store_, index_};
  }
  // In the store: the index held, or opened again (Find said whether it can be).
  absl::StatusOr<std::shared_ptr<IndexFile>> index = StoreIndex();
  if (!index.ok()) {
    if (unreadable != nullptr) *unreadable = index.status();
    return {nullptr, nullptr};
  }
  return {nullptr, *std::move(index)};
}

bool HubCapture::InStore() const {
  std::lock_guard<std::mutex> lock(mu_);
  return row_.has_value();
}

uint64_t HubCapture::StoredBytes() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (row_) return row_->stored_bytes;
  }
  return DiskBytes(dir_);
}

absl::Time HubCapture::FinishedTime() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (row_) return row_->finished.value_or(row_->created);
  }
  return FinishedAt(dir_);
}

absl::StatusOr<std::shared_ptr<IndexFile>> HubCapture::StoreIndex() const {
  CatalogCapture row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!row_) return absl::FailedPreconditionError(absl::StrCat("capture ", name_, " is not in the object store"));
    if (std::shared_ptr<IndexFile> held = store_index_.lock()) return held;
    row = *row_;
  }
  absl::StatusOr<std::shared_ptr<IndexFile>> index = remote_->OpenIndex(row);
  if (index.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    store_index_ = *index;
  }
  return index;
}

std::shared_ptr<const IndexFile> HubCapture::index() const { return Sources().second; }

QueryPage HubCapture::Query(const ArgFilter& query, uint64_t from, size_t limit, size_t budget,
                         bool* live) const {
  QueryPage page;
  const auto [store, index] = Sources(&page.error);
  if (live != nullptr) *live = store != nullptr;
  if (store) return store->Query(query, from, limit, budget);
  if (index) return index->Query(query, from, limit, budget);
  return page;
}

std::optional<ManifestRow> HubCapture::RecordById(uint64_t record_id, absl::Status* error) const {
  const auto [store, index] = Sources(error);
  if (store) return store->RecordById(record_id);
  if (index) return index->RecordById(record_id, error);
  return std::nullopt;
}

absl::StatusOr<QueryHit> HubCapture::HitById(uint64_t record_id) const {
  const auto [store, index] = Sources();
  auto missing = [&](uint64_t records) {
    return absl::NotFoundError(
        absl::StrCat("capture ", name_, " has no record ", record_id, " (", records, " records)"));
  };
  if (store) {
    std::optional<QueryHit> hit = store->HitById(record_id);
    if (!hit) return missing(durable().records);
    return *std::move(hit);
  }
  if (index) {
    if (record_id >= index->size()) return missing(index->size());
    return index->HitById(record_id);
  }
  return missing(0);
}

std::vector<QueryHit> HubCapture::ByArrival(const ArgFilter& query, uint64_t from,
                                         uint64_t to, absl::Status* error) const {
  const auto [store, index] = Sources(error);
  if (store) return store->ByArrival(query, from, to);
  if (index) return index->ByArrival(query, from, to, error);
  return {};
}

std::string HubCapture::bin_path() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (row_) return "";
  }
  return dir_ + "/" + kBinName;
}

absl::Status HubCapture::ReadBin(uint64_t offset, uint64_t size,
                                 const s3::ChunkCallback& on_chunk) const {
  std::optional<CatalogCapture> row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    row = row_;
  }
  if (row) return remote_->ReadBin(*row, offset, size, on_chunk);
  const std::string path = dir_ + "/" + kBinName;
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) {
    return absl::DataLossError(absl::StrCat("capture ", name_, ": ", fd.status().message()));
  }
  std::string buffer;
  absl::Status s;
  for (uint64_t at = offset; at < offset + size && s.ok();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(1 << 20, offset + size - at));
    buffer.resize(n);
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(*fd, &buffer[got], n - got, static_cast<off_t>(at + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    if (got < n) {
      s = absl::DataLossError(absl::StrCat(path, " ends before byte ", at + n));
      break;
    }
    s = on_chunk(std::string_view(buffer.data(), n));
    at += n;
  }
  ::close(*fd);
  return s;
}

absl::Status HubCapture::Attach() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!store_) {
    return absl::FailedPreconditionError(absl::StrCat("capture ", name_, " is finished"));
  }
  if (attached_) {
    return absl::AbortedError(absl::StrCat(
        "capture ", name_, " is attached to another ingest stream; retry once it is gone"));
  }
  if (sealing_) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture ", name_, " is being finished (FinishCapture or the idle timeout)"));
  }
  attached_ = true;
  last_activity_ = std::chrono::steady_clock::now();
  return absl::OkStatus();
}

absl::Status HubCapture::SealIfDetached(DoneCallback done,
                                     std::optional<absl::Duration> idle_for) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_ || sealing_) {
      return absl::FailedPreconditionError(absl::StrCat("capture ", name_, " is finished"));
    }
    if (attached_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "capture ", name_, " is attached to an ingest stream: its client finishes it"));
    }
    // How long it has been idle (a difference of two clock readings, which
    // cannot overflow) against `idle_for`, which may be any duration.
    if (idle_for &&
        absl::FromChrono(std::chrono::steady_clock::now() - last_activity_) < *idle_for) {
      return absl::FailedPreconditionError(absl::StrCat("capture ", name_, " is not idle"));
    }
    sealing_ = true;
  }
  Finish(
      v1::CaptureCounters(),
      [this, done = std::move(done)](absl::Status s, Watermark w) {
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          sealing_ = false;  // still live: it may be resumed, or sealed again
        }
        done(s, w);
      },
      {}, idle_for ? SealCause::kIdleTimeout : SealCause::kFinishCapture);
  return absl::OkStatus();
}

void HubCapture::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  attached_ = false;
  last_activity_ = std::chrono::steady_clock::now();
}

bool HubCapture::attached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attached_;
}

std::chrono::steady_clock::time_point HubCapture::last_activity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_activity_;
}

uint64_t HubCapture::AddWatcher(std::function<void()> poke) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_watcher_++;
  watchers_[id] = std::move(poke);
  return id;
}

void HubCapture::RemoveWatcher(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  watchers_.erase(id);
}

void HubCapture::NotifyWatchers() {
  std::vector<std::function<void()>> pokes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, poke] : watchers_) pokes.push_back(poke);
  }
  for (auto& poke : pokes) poke();
}

void ChunkPool::Put(std::string chunk) {
  if (chunk.capacity() < (64 << 10)) return;  // small ones are cheap to allocate
  chunk.clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() < kMaxChunks) free_.push_back(std::move(chunk));
}

bool ChunkPool::Take(std::string* chunk) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return false;
  *chunk = std::move(free_.back());
  free_.pop_back();
  return true;
}

std::vector<absl::string_view> AppendJob::Payload() const {
  std::vector<absl::string_view> out;
  out.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    absl::string_view c = chunks[i];
    if (i == 0) c.remove_prefix(std::min(skip, c.size()));
    if (!c.empty()) out.push_back(c);
  }
  return out;
}

uint64_t AppendJob::bytes() const {
  uint64_t n = 0;
  for (const std::string& c : chunks) n += c.size();
  return n - std::min<uint64_t>(skip, chunks.empty() ? 0 : chunks.front().size());
}

void HubCapture::Append(AppendJob job, DoneCallback done) {
  Job j{Job::kAppend, std::move(job), {}, std::move(done)};
  Enqueue(std::move(j));
}

void HubCapture::Finish(v1::CaptureCounters device_counters, DoneCallback done,
                     v1::CaptureInfo end, SealCause cause) {
  Job j{Job::kFinish, {}, std::move(device_counters), std::move(done), std::move(end), cause};
  Enqueue(std::move(j));
}

void HubCapture::Barrier(DoneCallback done) {
  Job j{Job::kBarrier, {}, {}, std::move(done)};
  Enqueue(std::move(j));
}

void HubCapture::Enqueue(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!writer_done_ && writer_.joinable()) {
      jobs_.push_back(std::move(job));
      jobs_cv_.notify_one();
      return;
    }
  }
  // Finished: nothing is appended any more.
  job.done(absl::FailedPreconditionError(absl::StrCat("capture ", name_, " is finished")),
           durable());
}

absl::Status HubCapture::StartWriter() {
  return StartThread(absl::StrCat("the writer thread of capture ", name_), &writer_,
                     [this, weak = weak_from_this()] { WriterLoop(weak); });
}

void HubCapture::WriterLoop(std::weak_ptr<HubCapture> weak) {
  bool destroyed = false;  // ~HubCapture ran on this thread: nothing of it is left
  {
    std::lock_guard<std::mutex> lock(mu_);
    destroyed_on_writer_ = &destroyed;
  }
  for (;;) {
    std::optional<Job> job;
    bool news = false;
    std::shared_ptr<CaptureStore> store;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // The writer ends once every append is answered.
      jobs_cv_.wait(lock, [&] {
        return !jobs_.empty() || commit_news_ || (writer_done_ && unacked_.empty());
      });
      news = commit_news_;
      if (!jobs_.empty()) {
        job = std::move(jobs_.front());
        jobs_.pop_front();
      } else if (!news) {
        return;
      }
      store = store_;
    }
    // A job's callbacks (and a commit's answers) may hold the last other
    // reference to this capture: it stays alive until they are done, then
    // goes here, on this thread (JoinWriter lets the thread go). Null:
    // ~HubCapture runs on another thread, which waits for this one.
    std::shared_ptr<HubCapture> self = weak.lock();
    if (news) AnswerCommitted();
    const bool more = job ? RunJob(std::move(*job), std::move(store)) : true;
    self.reset();
    if (destroyed || !more) return;
  }
}

bool HubCapture::RunJob(Job job, std::shared_ptr<CaptureStore> store) {
  if (remote_ != nullptr && needs_restore_) {
    // A commit failed: the scratch files hold what was never acknowledged.
    // Rebuilt from the store before anything else: the watermark a resume
    // gets (its open waits on a barrier) is the store's.
    if (absl::Status s = RestoreFromStore(); !s.ok()) {
      // A damaged segment stays damaged: said as it is, not as a retry.
      job.done(absl::IsDataLoss(s)
                   ? s
                   : absl::UnavailableError(absl::StrCat(
                         "capture ", name_, ": cannot rebuild it from the object store (",
                         s.message(), "); retry")),
               durable());
      return true;
    }
    std::deque<Job> rest;
    {
      std::lock_guard<std::mutex> lock(mu_);
      store = store_;
      if (store == nullptr) {  // the store says it finished: a seal's answer was lost
        writer_done_ = true;
        rest.swap(jobs_);
      }
    }
    if (store == nullptr) {
      rest.push_front(std::move(job));
      for (Job& j : rest) {
        j.done(j.kind == Job::kAppend
                   ? absl::FailedPreconditionError(absl::StrCat("capture ", name_, " is finished"))
                   : absl::OkStatus(),
               durable());
      }
      NotifyWatchers();
      return false;
    }
  }
  switch (job.kind) {
    case Job::kBarrier:
      if (remote_ != nullptr && !unacked_.empty() && !CommitPending(*store)) {
        job.done(absl::UnavailableError(absl::StrCat("capture ", name_,
                                                     ": the last appends are not durable")),
                 durable());
        return true;
      }
      job.done(absl::OkStatus(), durable());
      return true;
    case Job::kAppend:
      RunAppend(std::move(job), *store);
      return true;
    case Job::kFinish:
      break;
  }
  return !RunFinish(std::move(job), *store);
}

void HubCapture::RunAppend(Job job, CaptureStore& store) {
  absl::Status s;
  const std::vector<absl::string_view> payload = job.append.Payload();
  const uint64_t bytes = job.append.bytes();
  if (store.records() != job.append.first_record) {
    // An earlier job of this stream failed: keep ids dense, append nothing.
    s = absl::FailedPreconditionError(absl::StrCat("capture ", name_, ": records from ",
                                                   job.append.first_record,
                                                   " refused, the capture holds ", store.records()));
  } else if (max_bytes_ > 0 && store.bin_bytes() + bytes > max_bytes_) {
    s = absl::ResourceExhaustedError(absl::StrCat(
        "capture ", name_, ": args.bin would grow to ", store.bin_bytes() + bytes,
        " bytes, over the server's quota of ", max_bytes_, " bytes per capture (",
        store.bin_bytes(), " stored)"));
  } else {
    s = store.AppendPrepared(job.append.records, payload);
  }
  if (job.append.pool != nullptr) {
    for (std::string& c : job.append.chunks) job.append.pool->Put(std::move(c));
  }
  if (remote_ != nullptr && s.ok()) {
    // Acknowledged once a segment holding it is committed: the committer
    // thread cuts one as soon as the previous ended, of the appends made
    // meanwhile, while this thread goes on appending.
    unacked_.push_back({std::move(job.done), store.records()});
    PublishCut(store);
    AnswerCommitted();
    return;
  }
  const Watermark w = Durable(store, s.ok());
  job.done(s, w);
  if (s.ok()) NotifyWatchers();
}

Watermark HubCapture::Durable(const CaptureStore& store, bool advance) {
  std::lock_guard<std::mutex> lock(mu_);
  if (advance) {
    durable_.records = store.records();
    durable_.bin_bytes = store.stream_bytes();
  }
  return durable_;
}

bool HubCapture::CommitPending(CaptureStore& store) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    commit_now_ = true;
    commit_cv_.notify_all();
    jobs_cv_.wait(lock, [&] {
      return !commit_error_.ok() || (committed_.records >= store.records() && !committing_);
    });
    commit_now_ = false;
  }
  AnswerCommitted();
  return !needs_restore_;
}

void HubCapture::PublishCut(const CaptureStore& store) {
  Cut cut;
  cut.counters = store.counters();
  cut.records = store.records();
  cut.journal_end = store.journal_bytes();
  cut.bin_end = store.bin_bytes();
  cut.stream_bytes = store.stream_bytes();
  cut.bytes = cut.stream_bytes - published_.bin_bytes +
              PreparedRecords::kRecordEntryGuess * (cut.records - published_.records);
  published_.records = cut.records;
  published_.bin_bytes = cut.stream_bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cuts_.push_back(std::move(cut));
    if (!committer_.joinable() &&
        !StartThread(absl::StrCat("the committer thread of capture ", name_), &committer_,
                     [this] { CommitterLoop(); })
             .ok()) {
      // No thread for it: the commit fails, the append with it (retried
      // after a restore).
      commit_error_ = absl::ResourceExhaustedError("no thread for the committer");
      commit_news_ = true;
      return;
    }
  }
  commit_cv_.notify_all();
}

void HubCapture::CommitterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  absl::Time last_start = absl::InfinitePast();
  for (;;) {
    commit_cv_.wait(lock, [&] { return committer_stop_ || (commit_error_.ok() && !cuts_.empty()); });
    if (cuts_.empty() || !commit_error_.ok()) return;  // stopped
    // At least group_.delay between two commits' starts, unless the group is full.
    uint64_t bytes = 0;
    for (const Cut& c : cuts_) bytes += c.bytes;
    const absl::Time allowed = last_start + group_.delay;
    if (!committer_stop_ && !commit_now_ && bytes < group_.bytes && absl::Now() < allowed) {
      commit_cv_.wait_for(lock, absl::ToChronoNanoseconds(allowed - absl::Now()));
      continue;
    }
    // The appends of one segment: up to group_.bytes of them, at least one.
    Cut cut = std::move(cuts_.front());
    cuts_.pop_front();
    bytes = cut.bytes;
    while (!cuts_.empty() && bytes + cuts_.front().bytes <= group_.bytes) {
      bytes += cuts_.front().bytes;
      cut = std::move(cuts_.front());
      cuts_.pop_front();
    }
    // The whole info (its kernel table may be large) only for the commit
    // that creates the catalog's row; later ones need its name. live_ is
    // this thread's while it commits (the writer waits for it to be idle).
    v1::CaptureInfo info;
    if (live_.cataloged) {
      info.set_name(name_);
    } else {
      info = info_;
    }
    committing_ = true;
    last_start = absl::Now();
    lock.unlock();
    absl::Status s = remote_->Commit(dir_, info, cut.counters, cut.records, cut.journal_end,
                                     cut.bin_end, &live_);
    lock.lock();
    committing_ = false;
    if (s.ok()) {
      committed_.records = cut.records;
      committed_.bin_bytes = cut.stream_bytes;
    } else {
      commit_error_ = std::move(s);
    }
    commit_news_ = true;
    jobs_cv_.notify_all();
  }
}

void HubCapture::AnswerCommitted() {
  Watermark committed;
  absl::Status error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    commit_news_ = false;
    committed = committed_;
    error = commit_error_;
    durable_ = committed_;
  }
  std::vector<Unacked> answered;
  while (!unacked_.empty() && unacked_.front().end <= committed.records) {
    answered.push_back(std::move(unacked_.front()));
    unacked_.pop_front();
  }
  const bool any = !answered.empty();
  for (Unacked& a : answered) a.done(absl::OkStatus(), committed);
  if (!error.ok()) {
    if (!needs_restore_) {
      needs_restore_ = true;
      Log(absl::StrCat("capture ", name_, ": a segment could not be committed (",
                       error.message(), "); its appends fail, and it goes on from record ",
                       committed.records, " once rebuilt from the object store"));
    }
    // Not durable: a restore takes them back.
    const absl::Status failed = absl::UnavailableError(
        absl::StrCat("capture ", name_, ": not durable in the object store (", error.message(),
                     "); resume from record ", committed.records));
    std::deque<Unacked> lost;
    lost.swap(unacked_);
    for (Unacked& a : lost) a.done(failed, committed);
  }
  if (any) NotifyWatchers();
}

absl::Status HubCapture::RestoreFromStore() {
  {
    // The committer is idle (it stops at a failed commit): what it was
    // offered since goes with the scratch files.
    std::unique_lock<std::mutex> lock(mu_);
    jobs_cv_.wait(lock, [&] { return !committing_; });
    cuts_.clear();
  }
  absl::StatusOr<RemoteCaptures::LiveState> restored = remote_->Restore(name_, dir_);
  if (!restored.ok()) {
    if (absl::IsNotFound(restored.status()) && !live_.cataloged) {
      // Nothing was ever committed (the first commit failed before the
      // catalog had its row): it starts again empty.
      RemoteCaptures::LiveState empty;
      std::lock_guard<std::mutex> lock(mu_);
      empty.info = info_;
      restored = std::move(empty);
      for (const char* f : {kManifestName, kIndexName, kJournalName, kBinName}) {
        ::unlink((dir_ + "/" + f).c_str());
      }
    } else if (absl::IsFailedPrecondition(restored.status())) {
      // Finished: its seal was committed though its answer was lost.
      absl::StatusOr<CatalogCapture> row = remote_->catalog().Get(name_);
      if (!row.ok()) return row.status();
      if (row->state != v1::CAPTURE_STATE_FINISHED) return restored.status();
      {
        std::lock_guard<std::mutex> lock(mu_);
        info_ = row->info;
        durable_.records = row->committed_records;
        durable_.bin_bytes = row->counters.payload_bytes();
        row_ = *std::move(row);
        store_.reset();
        attached_ = false;
        needs_restore_ = false;
        committed_ = durable_;
        commit_error_ = absl::OkStatus();
      }
      // Served from the store: the scratch copy goes, as after a seal.
      RemoveCaptureFiles(dir_).IgnoreError();
      ::rmdir(dir_.substr(0, dir_.rfind('/')).c_str());
      return absl::OkStatus();
    } else {
      return restored.status();
    }
  }
  // What the store and the catalog sent back is not trusted: bytes that
  // rebuild no live capture are this capture's damage, not the server's
  // failure (a disk that fails is).
  auto damage = [&](const absl::Status& s) {
    if (absl::IsUnavailable(s) || absl::IsResourceExhausted(s)) return s;
    for (const char* f : {kJournalName, kBinName}) ::unlink((dir_ + "/" + f).c_str());
    return absl::DataLossError(absl::StrCat("capture ", name_,
                                            ": its committed segments rebuild no live capture (",
                                            s.message(), ")"));
  };
  std::unique_ptr<CaptureStore> store;
  if (restored->records == 0) {
    auto created = CaptureStore::Create(dir_, restored->info);
    if (!created.ok()) return damage(created.status());
    store = std::move(created).value();
    store->set_payload_dedup(payload_dedup_);
  } else {
    auto reopened = CaptureStore::Reopen(dir_);
    if (!reopened.ok()) return damage(reopened.status());
    store = std::move(reopened).value();
    if (store->records() != restored->records) {
      return absl::DataLossError(absl::StrCat("capture ", name_, ": its segments rebuild ",
                                              store->records(), " records, the catalog commits ",
                                              restored->records));
    }
  }
  store->EnableTaskIndex();
  live_ = *std::move(restored);
  std::lock_guard<std::mutex> lock(mu_);
  if (store->created()) info_ = store->info();
  durable_.records = store->records();
  durable_.bin_bytes = store->stream_bytes();
  committed_ = durable_;
  published_ = durable_;
  commit_error_ = absl::OkStatus();
  store_ = std::move(store);
  needs_restore_ = false;
  return absl::OkStatus();
}

absl::Status HubCapture::SealToStore(CaptureStore& store) {
  absl::StatusOr<CatalogCapture> row =
      remote_->Seal(dir_, store.info(), store.counters(), store.bin_bytes(), live_);
  if (!row.ok()) {
    // The scratch copy is finished, the store's is not: rebuilt before
    // anything else (a finish again seals it).
    needs_restore_ = true;
    return absl::UnavailableError(absl::StrCat("capture ", name_,
                                               ": cannot seal it in the object store (",
                                               row.status().message(), "); retry"));
  }
  // Served from the store at once: its index opened ranged.
  absl::StatusOr<std::shared_ptr<IndexFile>> index = remote_->OpenIndex(*row);
  {
    std::lock_guard<std::mutex> lock(mu_);
    row_ = *std::move(row);
    if (index.ok()) store_index_ = *index;
  }
  // Served from the store from now on: the scratch copy goes.
  RemoveCaptureFiles(dir_).IgnoreError();
  ::rmdir(dir_.substr(0, dir_.rfind('/')).c_str());
  return absl::OkStatus();
}

bool HubCapture::RunFinish(Job job, CaptureStore& store) {
  if (remote_ != nullptr && !unacked_.empty() && !CommitPending(store)) {
    job.done(absl::UnavailableError(absl::StrCat("capture ", name_,
                                                 ": the last appends are not durable; retry")),
             durable());
    return false;
  }
  // The manifest and index, then serve from the index.
  absl::Status s = store.Amend(job.end);
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    info_ = store.info();
  }
  if (s.ok()) s = store.Finish(job.counters);
  std::shared_ptr<IndexFile> index;
  if (s.ok() && store.created() && remote_ != nullptr) {
    s = SealToStore(store);
  } else if (s.ok() && store.created()) {
    auto opened = IndexFile::Open(dir_ + "/" + kIndexName);
    if (opened.ok()) {
      index = std::move(opened).value();
    } else {
      s = opened.status();
    }
  }
  std::deque<Job> rest;
  Watermark w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) {
      index_ = std::move(index);
      store_.reset();
      attached_ = false;
    }
    writer_done_ = s.ok();
    if (writer_done_) rest.swap(jobs_);
    w = durable_;
  }
  if (s.ok()) {
    // The manifest's counters (the device's losses merged in).
    Log(absl::StrCat("capture ", name_, " finished (", SealCauseName(job.cause),
                     "): ", Counted(w.records, store.counters())));
  }
  job.done(s, w);
  NotifyWatchers();
  for (Job& j : rest) {
    j.done(absl::FailedPreconditionError(absl::StrCat("capture ", name_, " is finished")), w);
  }
  return s.ok();
}

// ---- CaptureHub ------------------------------------------------------------

absl::StatusOr<std::unique_ptr<CaptureHub>> CaptureHub::Open(Options options) {
  if (options.root.empty()) return absl::InvalidArgumentError("capture hub: --root is empty");
  if (auto s = CreateDirectories(options.root); !s.ok()) return s;
  // One server per root: two would each think they own every capture.
  const std::string lock_path = options.root + "/" + kRootLockName;
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) {
    return absl::UnavailableError(
        absl::StrCat("capture hub: cannot open ", lock_path, ": ", std::strerror(errno)));
  }
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = ::pread(lock, holder, sizeof(holder) - 1, 0);
    ::close(lock);
    return absl::FailedPreconditionError(absl::StrCat(
        "--root ", options.root, " is in use by another capture_server (pid ",
        n > 0 ? std::string(holder, static_cast<size_t>(n)) : "?",
        "); one server per root"));
  }
  const std::string pid = absl::StrCat(::getpid());
  if (::ftruncate(lock, 0) != 0 || ::pwrite(lock, pid.data(), pid.size(), 0) < 0) {
    // The lock holds; only the holder's pid in messages is lost.
  }
  std::unique_ptr<CaptureHub> hub(new CaptureHub(std::move(options)));
  hub->lock_fd_ = lock;
  if (auto s = hub->Load(); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> evicting(hub->evict_mu_);
    if (auto s = hub->MakeRoom(/*for_room=*/true); !s.ok() && !absl::IsResourceExhausted(s)) return s;
  }
  if (IsDeadline(hub->options_.live_idle_timeout) || hub->Retains() ||
      (hub->options_.remote != nullptr && IsDeadline(hub->options_.gc_every))) {
    CaptureHub* h = hub.get();
    if (absl::Status s = StartThread("the capture hub's reaper thread", &hub->reaper_,
                                     [h] { h->ReapLoop(); });
        !s.ok()) {
      return s;
    }
  }
  return hub;
}

absl::Status CaptureHub::ListRoot(std::vector<std::string>* names,
                                  std::vector<std::string>* folders) const {
  DIR* d = ::opendir(options_.root.c_str());
  if (d == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("capture hub: cannot list ", options_.root, ": ", std::strerror(errno)));
  }
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!ValidateCaptureName(name).ok()) continue;
    folders->push_back(name);
    if (IsDirectory(options_.root + "/" + name + "/args_dump")) names->push_back(name);
  }
  ::closedir(d);
  return absl::OkStatus();
}

void CaptureHub::RemoveInterruptedDeletions(const std::vector<std::string>& folders) const {
  // Their folders were renamed away first.
  for (const std::string& folder : folders) {
    const std::string parent = options_.root + "/" + folder;
    DIR* p = ::opendir(parent.c_str());
    if (p == nullptr) continue;
    std::vector<std::string> leftovers;
    while (struct dirent* e = ::readdir(p)) {
      if (absl::StartsWith(e->d_name, absl::StrCat("args_dump", kDeletingMark))) {
        leftovers.push_back(parent + "/" + e->d_name);
      }
    }
    ::closedir(p);
    for (const std::string& left : leftovers) {
      absl::Status removed = RemoveCaptureFiles(left);
      Log(absl::StrCat("removed ", left, ", left by a deletion that did not end",
                       removed.ok() ? "" : absl::StrCat(": ", removed.message())));
    }
    if (!leftovers.empty()) ::rmdir(parent.c_str());  // only when nothing else is in it
  }
}

std::shared_ptr<HubCapture> CaptureHub::NewCapture(const std::string& name) const {
  std::shared_ptr<HubCapture> c(
      new HubCapture(name, options_.root + "/" + name + "/args_dump", options_.max_capture_bytes));
  c->remote_ = options_.remote;
  c->group_.delay = options_.group_commit_delay;
  c->group_.bytes = options_.group_commit_bytes;
  c->payload_dedup_ = options_.payload_dedup;
  return c;
}

absl::Status CaptureHub::LoadFromCatalog() {
  CaptureQuery query;
  query.page_size = 1000;
  for (;;) {
    absl::StatusOr<CapturePage> page = options_.remote->catalog().List(query);
    if (!page.ok()) return page.status();
    for (CatalogCapture& row : page->captures) {
      const std::string name = row.info.name();
      if (!ValidateCaptureName(name).ok()) {
        Log(absl::StrCat("the catalog lists a capture named \"", absl::CEscape(name),
                         "\", which is not a capture name: left out"));
        continue;
      }
      std::shared_ptr<HubCapture> c = NewCapture(name);
      c->info_ = row.info;
      if (row.state == v1::CAPTURE_STATE_FINISHED) {
        c->durable_.records = row.committed_records;
        c->durable_.bin_bytes = row.counters.payload_bytes();
        c->row_ = std::move(row);
      } else {
        c->live_.cataloged = true;
        absl::Status s = c->RestoreFromStore();
        if (absl::IsDataLoss(s)) {
          Log(absl::StrCat("capture ", name, " cannot be rebuilt from the object store: ",
                           s.message()));
          c->damage_ = s;
        } else if (!s.ok()) {
          return absl::Status(s.code(), absl::StrCat("capture ", name, ": ", s.message()));
        } else if (!c->finished()) {
          if (absl::Status started = c->StartWriter(); !started.ok()) return started;
          Log(absl::StrCat("capture ", name, " is live after a restart: ", c->durable_.records,
                           " records, ", c->durable_.bin_bytes,
                           " payload bytes committed in the object store; waiting for its "
                           "client to resume it"));
        }
      }
      captures_[name] = std::move(c);
    }
    if (page->next_page_token.empty()) break;
    query.page_token = page->next_page_token;
  }
  return absl::OkStatus();
}

void CaptureHub::CollectGarbage() {
  absl::StatusOr<RemoteCaptures::GarbageReport> r =
      options_.remote->CollectGarbage(options_.gc_min_age);
  if (!r.ok()) {
    Log(absl::StrCat("garbage collection of the object store: ", r.status().message()));
    return;
  }
  if (r->deleted > 0 || r->aborted_uploads > 0 || r->young > 0) {
    Log(absl::StrCat("garbage collection of the object store: ", r->listed, " objects listed, ",
                     r->deleted, " orphans deleted (", r->deleted_bytes, " bytes), ", r->young,
                     " younger than ", absl::FormatDuration(options_.gc_min_age), " kept, ",
                     r->aborted_uploads, " stale multipart uploads aborted"));
  }
}

absl::Status CaptureHub::LoadCapture(const std::string& name) {
  const std::string dir = options_.root + "/" + name + "/args_dump";
  if (HoldsNoBytes(dir) && !Exists(dir + "/" + kManifestName)) {
    // The server went away as the capture was being created, before its
    // journal's first entry (its folder made, its files not yet, or
    // empty): nothing of it was acknowledged. Dropped, as a capture whose
    // stream ended before its first record is; its client's resume opens
    // it anew. A folder with any byte in it, or a manifest even empty
    // (finished, then cut short by a power loss), is kept, as damage if
    // need be.
    RemoveCaptureFiles(dir).IgnoreError();
    ::rmdir((options_.root + "/" + name).c_str());
    Log(absl::StrCat("capture ", name,
                     " dropped: the server went away before its journal's first entry"));
    return absl::OkStatus();
  }
  std::shared_ptr<HubCapture> c = NewCapture(name);
  c->info_.set_name(name);
  captures_[name] = c;
  // Live when the server went away: live again, detached, for a resume.
  const bool was_live = !Exists(dir + "/" + kManifestName) && Exists(dir + "/" + kJournalName);
  if (was_live) {
    auto store = CaptureStore::Reopen(dir);
    if (store.ok()) {
      (*store)->EnableTaskIndex();
      c->info_ = (*store)->info();
      c->durable_.records = (*store)->records();
      c->durable_.bin_bytes = (*store)->stream_bytes();
      c->store_ = std::move(store).value();
      if (absl::Status s = c->StartWriter(); !s.ok()) return s;
      Log(absl::StrCat("capture ", name, " is live after a restart: ", c->durable_.records,
                       " records, ", c->durable_.bin_bytes,
                       " payload bytes durable; waiting for its client to resume it"));
      return absl::OkStatus();
    }
    Log(absl::StrCat(store.status().message(), "; recovering it as finished"));
  }
  // A capture whose writer died gets its manifest and index rebuilt;
  // what a damaged journal cost is in its manifest ("recovery").
  RecoveryReport report;
  if (auto s = CaptureStore::Recover(dir, &report); !s.ok()) {
    Log(absl::StrCat(dir, ": ", s.message()));
    if (!report.wrote_files) {
      c->damage_ = absl::DataLossError(absl::StrCat("capture ", name, ": ", s.message()));
      return absl::OkStatus();
    }
  }
  const std::string index_path = dir + "/" + kIndexName;
  auto index = IndexFile::Open(index_path);
  if (!index.ok() && Exists(dir + "/" + kJournalName)) {
    // Damaged (every row is checked at open): set it aside, rebuild it
    // from the journal, which says the same.
    Log(absl::StrCat(index.status().message(), "; rebuilding it from ", kJournalName));
    ::rename(index_path.c_str(), (index_path + ".damaged").c_str());
    RecoveryReport rebuilt;
    CaptureStore::Recover(dir, &rebuilt).IgnoreError();
    if (rebuilt.wrote_files) index = IndexFile::Open(index_path);
  }
  if (!index.ok()) {
    Log(absl::StrCat(dir, " cannot be served: ", index.status().message()));
    c->damage_ =
        absl::DataLossError(absl::StrCat("capture ", name, ": ", index.status().message()));
    return absl::OkStatus();
  }
  c->info_ = (*index)->info();
  c->durable_.records = (*index)->size();
  c->durable_.bin_bytes = (*index)->counters().payload_bytes();
  if (was_live && report.wrote_files) {
    Log(absl::StrCat("capture ", name, " finished (", SealCauseName(SealCause::kRecovery), ": ",
                     report.Describe(), "): ", Counted((*index)->size(), (*index)->counters())));
  }
  c->index_ = std::move(index).value();
  return absl::OkStatus();
}

absl::Status CaptureHub::Load() {
  if (options_.remote != nullptr) {
    // The catalog says what exists; the root is scratch.
    if (absl::Status s = LoadFromCatalog(); !s.ok()) return s;
    CollectGarbage();
  } else {
    std::vector<std::string> names, folders;
    if (absl::Status s = ListRoot(&names, &folders); !s.ok()) return s;
    // Deletions a stop interrupted.
    RemoveInterruptedDeletions(folders);
    for (const std::string& name : names) {
      if (absl::Status s = LoadCapture(name); !s.ok()) return s;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, c] : captures_) {
    if (!c->damage_.ok() || ListRankLocked(*c)) continue;
    const v1::JobMember job = c->job();
    Log(absl::StrCat("capture ", name, " is rank ", job.rank(), " of job ", job.job(),
                     ", which capture ", jobs_[job.job()][job.rank()],
                     " holds: it is not listed as a rank of the job"));
  }
  return absl::OkStatus();
}

bool CaptureHub::ListRankLocked(const HubCapture& c) {
  const v1::JobMember job = c.job();
  if (job.job().empty()) return true;
  auto [it, added] = jobs_[job.job()].emplace(job.rank(), c.name());
  return added || it->second == c.name();
}

void CaptureHub::UnlistRankLocked(const HubCapture& c) {
  const v1::JobMember job = c.job();
  auto j = jobs_.find(job.job());
  if (j == jobs_.end()) return;
  auto r = j->second.find(job.rank());
  if (r == j->second.end() || r->second != c.name()) return;
  j->second.erase(r);
  if (j->second.empty()) jobs_.erase(j);
}

std::vector<std::string> CaptureHub::JobNames(const std::string& after, size_t limit,
                                              bool* more) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  *more = false;
  for (auto it = jobs_.upper_bound(after); it != jobs_.end(); ++it) {
    if (out.size() == limit) {
      *more = true;
      break;
    }
    out.push_back(it->first);
  }
  return out;
}

absl::StatusOr<std::map<uint32_t, std::shared_ptr<HubCapture>>> CaptureHub::JobRanks(
    const std::string& job) const {
  if (absl::Status s = ValidateJobName(job); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job named ", job));
  std::map<uint32_t, std::shared_ptr<HubCapture>> ranks;
  for (const auto& [rank, name] : j->second) {
    auto c = captures_.find(name);
    if (c != captures_.end() && c->second->damage_.ok()) ranks[rank] = c->second;
  }
  return ranks;
}

CaptureHub::~CaptureHub() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reap_stop_ = true;
  }
  reap_cv_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, c] : captures_) c->JoinWriter();
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the root
}

absl::StatusOr<std::shared_ptr<HubCapture>> CaptureHub::Open(const v1::IngestOpen& open) {
  if (auto s = ValidateCaptureName(open.capture()); !s.ok()) return s;
  if (auto s = ValidateCaptureLabels(open.labels()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("capture ", open.capture(), ": ", s.message()));
  }
  // A new capture is checked for room and created under evict_mu_: opens
  // over the limit evict one at a time, each seeing the captures opened
  // before it, as if they came one after another.
  const bool evicts = !open.resume() && (options_.max_total_bytes > 0 || Retains());
  std::unique_lock<std::mutex> evicting(evict_mu_, std::defer_lock);
  if (evicts) evicting.lock();
  std::unique_lock<std::mutex> lock(mu_);
  auto it = captures_.find(open.capture());
  if (open.resume()) {
    if (it == captures_.end()) {
      return absl::NotFoundError(absl::StrCat("no capture named ", open.capture(), " to resume"));
    }
    if (!it->second->damage_.ok()) return it->second->damage_;
    if (auto s = it->second->Attach(); !s.ok()) return s;
    const Watermark w = it->second->durable();
    Log(absl::StrCat("capture ", open.capture(), " opened (resumed at ", w.records, " records, ",
                     w.bin_bytes, " payload bytes)"));
    return it->second;
  }
  if (it != captures_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "capture ", open.capture(), " exists; pick another name or resume it"));
  }
  // Checked before anything is evicted for it.
  if (open.level() == v1::DUMP_LEVEL_OFF || !v1::DumpLevel_IsValid(open.level())) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture ", open.capture(), ": level must be 1, 2 or 3"));
  }
  if (absl::Status s = CheckKernelTable(open.kernels()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("capture ", open.capture(), ": ", s.message()));
  }
  if (open.has_job()) {
    if (absl::Status s = CheckJobMember(open.job()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("capture ", open.capture(), ": ", s.message()));
    }
    if (absl::Status s = RankFreeLocked(open); !s.ok()) return s;
  }
  if (evicts) {
    lock.unlock();  // eviction removes files: not under the hub's lock
    if (absl::Status s = MakeRoom(/*for_room=*/true); !s.ok()) return s;
    lock.lock();
    it = captures_.find(open.capture());
    if (it != captures_.end()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "capture ", open.capture(), " exists; pick another name or resume it"));
    }
    if (open.has_job()) {
      if (absl::Status s = RankFreeLocked(open); !s.ok()) return s;
    }
  }
  const std::string dir = options_.root + "/" + open.capture() + "/args_dump";
  v1::CaptureInfo info;
  info.set_name(open.capture());
  info.set_level(open.level());
  info.set_platform(open.platform());
  *info.mutable_labels() = open.labels();
  if (open.has_scope()) {
    if (absl::Status s = CheckDumpScope(open.scope()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("capture ", open.capture(), ": ", s.message()));
    }
    *info.mutable_scope() = open.scope();
  }
  *info.mutable_kernels() = open.kernels();
  if (open.has_job()) *info.mutable_job() = open.job();
  if (open.has_clock()) {
    // The server's wall clock against the client's, as the open arrives
    // (the one-way latency included).
    *info.mutable_clock() = open.clock();
    if (open.client_unix_ns() != 0) {
      info.mutable_clock()->set_has_server_offset(true);
      const int64_t now_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
      info.mutable_clock()->set_server_offset_ns(now_unix_ns - open.client_unix_ns());
    }
  }
  auto store = CaptureStore::Create(dir, info);
  if (!store.ok()) return store.status();
  (*store)->set_payload_dedup(options_.payload_dedup && !open.no_payload_dedup());
  (*store)->EnableTaskIndex();
  std::shared_ptr<HubCapture> c = NewCapture(open.capture());
  c->payload_dedup_ = options_.payload_dedup && !open.no_payload_dedup();
  c->info_ = info;
  c->store_ = std::move(store).value();
  c->attached_ = true;
  if (absl::Status s = c->StartWriter(); !s.ok()) {
    // Not listed: what the store created goes, so that a restart does not
    // take it for a capture.
    c.reset();
    RemoveCaptureFiles(dir).IgnoreError();
    ::rmdir((options_.root + "/" + open.capture()).c_str());
    return s;
  }
  captures_[open.capture()] = c;
  ListRankLocked(*c);
  Log(absl::StrCat("capture ", open.capture(), " opened (new, level ", info.level(),
                   ", platform ", info.platform().empty() ? "unset" : info.platform(), ")"));
  return c;
}

absl::Status CaptureHub::RankFreeLocked(const v1::IngestOpen& open) const {
  auto j = jobs_.find(open.job().job());
  if (j == jobs_.end()) return absl::OkStatus();
  auto r = j->second.find(open.job().rank());
  if (r == j->second.end()) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat("capture ", open.capture(), ": rank ",
                                               open.job().rank(), " of job ", open.job().job(),
                                               " is capture ", r->second,
                                               "; a job has one capture per rank"));
}

absl::StatusOr<std::shared_ptr<HubCapture>> CaptureHub::Find(const std::string& name) const {
  if (auto s = ValidateCaptureName(name); !s.ok()) return s;
  std::shared_ptr<HubCapture> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = captures_.find(name);
    if (it == captures_.end()) return absl::NotFoundError(absl::StrCat("no capture named ", name));
    if (!it->second->damage_.ok()) return it->second->damage_;
    c = it->second;
  }
  // In the object store: its index through the cache, or why it cannot be
  // read (a damaged object, the store unreachable).
  if (c->InStore()) {
    if (absl::StatusOr<std::shared_ptr<IndexFile>> index = c->StoreIndex(); !index.ok()) {
      return index.status();
    }
  }
  return c;
}

std::vector<std::shared_ptr<HubCapture>> CaptureHub::List(
    const std::map<std::string, std::string>& labels, v1::CaptureState state,
    const std::string& after, size_t limit, bool* more, const std::string& job) const {
  if (options_.remote != nullptr && limit > 0 && limit <= 1000) {
    // The catalog's index answers the filters (a page of it, not every
    // capture); the live captures nothing was committed of yet are not in
    // it, and are merged in from here.
    CaptureQuery query;
    query.labels = labels;
    query.state = state;
    query.job = job;
    query.page_token = after;
    query.page_size = static_cast<uint32_t>(limit);
    absl::StatusOr<CapturePage> page = options_.remote->catalog().List(query);
    if (page.ok()) return MergeListed(*page, labels, state, after, limit, more, job);
    Log(absl::StrCat("listing from the catalog: ", page.status().message(),
                     "; listing what this server holds"));
  }
  std::vector<std::shared_ptr<HubCapture>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = captures_.upper_bound(after); it != captures_.end(); ++it) {
      if (!job.empty() && it->second->job().job() != job) continue;
      all.push_back(it->second);
    }
  }
  std::vector<std::shared_ptr<HubCapture>> out;
  *more = false;
  for (const auto& c : all) {
    const v1::CaptureSummary s = c->Summary();
    if (state != v1::CAPTURE_STATE_UNSPECIFIED && s.state() != state) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto l = s.labels().find(k);
      match = match && l != s.labels().end() && l->second == v;
    }
    if (!match) continue;
    if (out.size() == limit) {
      *more = true;
      break;
    }
    out.push_back(c);
  }
  return out;
}

std::vector<std::shared_ptr<HubCapture>> CaptureHub::MergeListed(
    const CapturePage& page, const std::map<std::string, std::string>& labels,
    v1::CaptureState state, const std::string& after, size_t limit, bool* more,
    const std::string& job) const {
  const bool sql_more = !page.next_page_token.empty();
  // Past the page's last name the catalog has rows not read: nothing there
  // can be merged in order.
  const std::string* bound = sql_more ? &page.captures.back().info.name() : nullptr;
  std::map<std::string, std::shared_ptr<HubCapture>> listed;
  std::vector<std::shared_ptr<HubCapture>> uncommitted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const CatalogCapture& row : page.captures) {
      auto it = captures_.find(row.info.name());
      if (it != captures_.end() && it->second->damage_.ok()) listed[it->first] = it->second;
    }
    for (auto it = captures_.upper_bound(after); it != captures_.end(); ++it) {
      if (bound != nullptr && it->first > *bound) break;
      if (listed.count(it->first) == 0 && it->second->damage_.ok()) {
        uncommitted.push_back(it->second);
      }
    }
  }
  for (const auto& c : uncommitted) {
    if (c->finished()) continue;  // finished captures are in the catalog
    const v1::CaptureSummary s = c->Summary();
    if (!job.empty() && s.job().job() != job) continue;
    if (state != v1::CAPTURE_STATE_UNSPECIFIED && s.state() != state) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto l = s.labels().find(k);
      match = match && l != s.labels().end() && l->second == v;
    }
    if (match) listed[c->name()] = c;
  }
  std::vector<std::shared_ptr<HubCapture>> out;
  *more = sql_more;
  for (auto& [name, c] : listed) {
    if (out.size() == limit) {
      *more = true;
      break;
    }
    out.push_back(std::move(c));
  }
  return out;
}

void CaptureHub::Forget(const std::shared_ptr<HubCapture>& capture) {
  if (capture == nullptr) return;
  std::shared_ptr<HubCapture> dropped;  // released after the lock, off its writer thread
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = captures_.find(capture->name());
    if (it == captures_.end() || it->second != capture) return;
    {
      std::lock_guard<std::mutex> c(capture->mu_);
      if (capture->store_ == nullptr || capture->attached_ || capture->durable_.records > 0 ||
          capture->store_->created()) {
        return;
      }
    }
    UnlistRankLocked(*capture);
    dropped = std::move(it->second);
    captures_.erase(it);
  }
  Log(absl::StrCat("capture ", capture->name(),
                   " dropped: its stream ended before it wrote a record"));
}

absl::Status CaptureHub::FinishDetached(const std::string& name, HubCapture::DoneCallback done) {
  auto c = Find(name);
  if (!c.ok()) return c.status();
  if ((*c)->finished()) {
    return absl::FailedPreconditionError(absl::StrCat("capture ", name, " is finished"));
  }
  return (*c)->SealIfDetached(std::move(done));
}

absl::StatusOr<uint64_t> CaptureHub::Delete(const std::string& name, const std::string& why) {
  static std::atomic<uint64_t> deletions{0};
  std::shared_ptr<HubCapture> gone;  // released after the lock
  std::string doomed;             // its folder, renamed out of the name's way
  std::shared_ptr<HubCapture> in_store;  // in the object store: deleted there
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = captures_.find(name);
    if (it == captures_.end()) return absl::NotFoundError(absl::StrCat("no capture named ", name));
    if (!it->second->finished()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "capture ", name, " is live; finish it first (FinishCapture), then delete it"));
    }
    // A capture the store's segments could not rebuild (damaged) is in
    // the catalog all the same: deleted there, not only here.
    if (it->second->InStore() || (options_.remote != nullptr && !it->second->damage_.ok())) {
      UnlistRankLocked(*it->second);
      in_store = std::move(it->second);
      captures_.erase(it);
    }
  }
  if (in_store != nullptr) {
    // The catalog row first (the name is free once it goes), then the objects.
    absl::StatusOr<uint64_t> freed = options_.remote->Delete(name);
    if (!freed.ok() && !absl::IsNotFound(freed.status())) {
      // The catalog did not take it (or its answer was lost: asked again,
      // it says NotFound): the capture stays listed and served meanwhile.
      std::lock_guard<std::mutex> lock(mu_);
      if (captures_.emplace(name, in_store).second) ListRankLocked(*in_store);
      Log(absl::StrCat("capture ", name, " not deleted: ", freed.status().message()));
      return freed;
    }
    Log(absl::StrCat("capture ", name, " ", why, " (",
                     freed.ok() ? absl::StrCat(*freed, " bytes in the object store")
                                : std::string(freed.status().message()),
                     ")"));
    return freed;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = captures_.find(name);
    if (it == captures_.end()) return absl::NotFoundError(absl::StrCat("no capture named ", name));
    if (!it->second->finished()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "capture ", name, " is live; finish it first (FinishCapture), then delete it"));
    }
    // Renamed while the name is still taken: a capture opened under it once
    // the lock is let go gets a fresh folder, which nothing here touches.
    doomed = absl::StrCat(it->second->dir_, kDeletingMark, ::getpid(), ".", deletions++);
    if (::rename(it->second->dir_.c_str(), doomed.c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(absl::StrCat("cannot delete capture ", name, ": renaming ",
                                              it->second->dir_, ": ", std::strerror(errno)));
    }
    UnlistRankLocked(*it->second);
    gone = std::move(it->second);
    captures_.erase(it);
  }
  const uint64_t bytes = DiskBytes(doomed);
  absl::Status removed = RemoveCaptureFiles(doomed);
  {
    // <root>/<name> goes too when it is empty and the name is still free: a
    // capture opened under the name meanwhile creates its folder under this
    // lock, so the two never interleave.
    std::lock_guard<std::mutex> lock(mu_);
    if (captures_.count(name) == 0) ::rmdir((options_.root + "/" + name).c_str());
  }
  Log(absl::StrCat("capture ", name, " ", why, " (", bytes, " bytes on disk)",
                   removed.ok() ? "" : absl::StrCat("; ", removed.message())));
  if (!removed.ok()) return removed;
  return bytes;
}

uint64_t CaptureHub::RootDiskBytes() const {
  std::vector<std::shared_ptr<HubCapture>> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, c] : captures_) held.push_back(c);
  }
  uint64_t total = 0;
  for (const auto& c : held) total += c->StoredBytes();
  return total;
}

bool CaptureHub::Retains() const { return IsDeadline(options_.retain_for); }

absl::Status CaptureHub::MakeRoom(bool for_room) {
  struct Held {
    std::string name;
    std::shared_ptr<HubCapture> capture;
    bool finished;
    absl::Time finished_at;
    uint64_t bytes;
  };
  std::vector<Held> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, c] : captures_) {
      held.push_back({name, c, c->finished(), absl::UnixEpoch(), 0});
    }
  }
  uint64_t total = 0, live_bytes = 0;
  size_t live = 0;
  for (Held& h : held) {
    h.bytes = h.capture->StoredBytes();
    if (h.finished) h.finished_at = h.capture->FinishedTime();
    total += h.bytes;
    if (!h.finished) {
      live_bytes += h.bytes;
      ++live;
    }
  }
  // Oldest finished first.
  std::sort(held.begin(), held.end(), [](const Held& a, const Held& b) {
    if (a.finished != b.finished) return a.finished;
    return a.finished_at != b.finished_at ? a.finished_at < b.finished_at : a.name < b.name;
  });
  const uint64_t limit = options_.max_total_bytes;
  // Evicting every finished capture would still leave the root at or over
  // the limit: evict none for room, refuse the new capture.
  const bool room_possible = limit == 0 || live_bytes < limit;
  const absl::Time now = absl::Now();
  for (const Held& h : held) {
    if (!h.finished) break;
    // Saturating: a retention of centuries (or InfiniteDuration) is never
    // reached, it does not wrap into the past.
    const bool expired = Retains() && h.finished_at + options_.retain_for <= now;
    const bool over = for_room && room_possible && limit > 0 && total >= limit;
    if (!expired && !over) continue;
    const std::string why =
        expired ? absl::StrCat("evicted: finished more than --retain_for=",
                               absl::FormatDuration(options_.retain_for), " ago")
                : absl::StrCat("evicted, oldest finished first: the root held ", total,
                               " bytes on disk, at or over --max_total_bytes=", limit);
    const bool in_store = h.capture->InStore();
    const absl::StatusOr<uint64_t> deleted = Delete(h.name, why);
    // What is no longer kept is freed, whoever removed it (a DeleteCapture
    // may have come first: NotFound here, its bytes gone all the same).
    const uint64_t left =
        in_store ? (deleted.ok() || absl::IsNotFound(deleted.status()) ? 0 : h.bytes)
                 : DiskBytes(h.capture->dir_);
    total -= std::min(total, h.bytes - std::min(h.bytes, left));
  }
  if (for_room && limit > 0 && total >= limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "capture service: the root holds ", total, " bytes on disk, ", live_bytes, " of them in ",
        live, " live capture(s), at or over --max_total_bytes=", limit,
        room_possible ? ""
                      : absl::StrCat("; evicting the ", total - live_bytes,
                                     " bytes of finished captures would not make room, so none "
                                     "was evicted"),
        "; finish or delete some, or raise the limit"));
  }
  return absl::OkStatus();
}

void CaptureHub::ReapLoop() {
  const absl::Duration timeout = options_.live_idle_timeout;
  const bool idle_sealing = IsDeadline(timeout);
  // Retention is looked at every minute at most (and at every open), and
  // never more than once a second, however short --retain_for is: each
  // look measures every capture's files.
  const absl::Duration retention_period =
      std::max(absl::Seconds(1), std::min(options_.retain_for, absl::Minutes(1)));
  // Orphans in the object store: collected at startup, then every gc_every.
  const bool collects = options_.remote != nullptr && IsDeadline(options_.gc_every);
  absl::Time next_collection = absl::Now() + options_.gc_every;
  std::unique_lock<std::mutex> lock(mu_);
  while (!reap_stop_) {
    if (collects && absl::Now() >= next_collection) {
      lock.unlock();
      CollectGarbage();
      next_collection = absl::Now() + options_.gc_every;
      lock.lock();
      if (reap_stop_) break;
    }
    if (Retains()) {
      lock.unlock();
      {
        std::lock_guard<std::mutex> evicting(evict_mu_);
        MakeRoom(/*for_room=*/false).IgnoreError();  // retention only: room is made for a new capture
      }
      lock.lock();
      if (reap_stop_) break;
    }
    std::vector<std::shared_ptr<HubCapture>> idle;
    // How long until the next thing to do (infinite: nothing ever is). A
    // capture detached from now on is due a whole timeout later at the
    // soonest.
    absl::Duration wait = std::min(Retains() ? retention_period : absl::InfiniteDuration(),
                                   idle_sealing ? timeout : absl::InfiniteDuration());
    if (collects) wait = std::min(wait, std::max(absl::ZeroDuration(), next_collection - absl::Now()));
    const auto now = std::chrono::steady_clock::now();
    for (auto& [name, c] : captures_) {
      if (!idle_sealing) break;
      if (!c->damage_.ok() || c->finished() || c->attached()) continue;
      // Idle so far: a difference of clock readings; what is left of the
      // timeout: a subtraction of durations. Neither overflows.
      const absl::Duration left = timeout - absl::FromChrono(now - c->last_activity());
      if (left <= absl::ZeroDuration()) {
        idle.push_back(c);
      } else {
        wait = std::min(wait, left);
      }
    }
    lock.unlock();
    for (auto& c : idle) {
      // Checked again as it is sealed: a stream may have come back since.
      const absl::Status sealing = c->SealIfDetached(
          [name = c->name()](absl::Status s, Watermark) {
            if (!s.ok()) Log(absl::StrCat("finishing ", name, ": ", s.message()));
          },
          timeout);
      if (sealing.ok()) {
        Log(absl::StrCat(c->name(), " was idle for ", absl::FormatDuration(timeout),
                         " with no stream: finishing it"));
      }
    }
    idle.clear();  // before the lock: never the last reference on a writer thread
    lock.lock();
    if (wait == absl::InfiniteDuration()) {
      reap_cv_.wait(lock, [&] { return reap_stop_; });
    } else {
      // At most a day at a time: a wait_for of centuries would overflow the
      // clock's arithmetic inside the standard library.
      const absl::Duration bounded = std::min(wait, absl::Hours(24));
      reap_cv_.wait_for(lock, absl::ToChronoNanoseconds(bounded), [&] { return reap_stop_; });
    }
  }
}

}  // namespace argsdump
