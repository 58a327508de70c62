#include "viewer/arg_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/confined_path.h"
#include "viewer/index_lookup.h"

namespace argsdump {

void SomeValues::Add(const ManifestEntry& e) {
  if (tasks.size() < 5) tasks.insert(e.task_id);
  if (args.size() < 8) args.insert(e.arg_index);
  for (int64_t f : e.func_ids) {
    if (funcs.size() < 8) funcs.insert(f);
  }
  stages.insert(e.stage);
  roles.insert(e.role);
  kinds.insert(e.kind);
  if (steps.size() < 8) steps.insert(e.step);
}

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

namespace {

// A capture folder's payload file, opened on the first read: named by the
// manifest's bin_file (the store's is "args.bin", written before args[];
// another manifest may say it after), else the schema's args.bin; a file of
// the capture folder, never a path out of it.
class PayloadFile {
 public:
  explicit PayloadFile(std::string dir) : dir_(std::move(dir)) {}
  ~PayloadFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  PayloadFile(const PayloadFile&) = delete;
  PayloadFile& operator=(const PayloadFile&) = delete;

  absl::Status Read(const ManifestSummary& s, const ManifestEntry& e, std::string* bytes) {
    bytes->clear();
    if (e.bin_size == 0) return absl::OkStatus();
    if (!opened_) {
      const std::string name = s.has_bin_file ? s.bin_file : "args.bin";
      path_ = absl::StrCat(dir_, "/", name);
      opened_ = true;
      // A name from the manifest: one regular file of the capture folder
      // (a link there is followed to a regular file only: Bazel's runfiles
      // are links; never to a FIFO or a device).
      absl::StatusOr<OwnedFd> fd = absl::InvalidArgumentError("holds a '/'");
      absl::StatusOr<ConfinedDir> dir = ConfinedDir::Open(dir_, ConfinedDir::Missing::kFail);
      if (!dir.ok()) {
        fd = dir.status();
      } else if (name.find('/') == std::string::npos) {
        fd = dir->OpenFile(name, ConfinedDir::LastLink::kFollow);
      }
      if (fd.ok()) {
        fd_ = fd->release();
        struct stat st;
        if (::fstat(fd_, &st) == 0) bytes_ = static_cast<uint64_t>(st.st_size);
      } else if (absl::IsInvalidArgument(fd.status())) {
        error_ = absl::DataLossError(absl::StrCat(dir_, "/args_dump.json: bin_file '",
                                                  absl::CHexEscape(name),
                                                  "' is not a file of the capture folder (",
                                                  fd.status().message(), ")"));
      } else if (!absl::IsNotFound(fd.status())) {
        error_ = fd.status();
      }
    }
    if (!error_.ok()) return error_;
    if (fd_ < 0) {
      return absl::NotFoundError(absl::StrCat(path_, ": cannot open (entry ", e.index, " has ",
                                              e.bin_size, " payload bytes)"));
    }
    // Checked before anything is allocated: a manifest may claim any size.
    if (e.bin_offset > bytes_ || e.bin_size > bytes_ - e.bin_offset) {
      return absl::DataLossError(absl::StrCat(
          path_, ": entry ", e.index, " needs bytes ", e.bin_offset, "..",
          e.bin_offset + std::min(e.bin_size, UINT64_MAX - e.bin_offset), ", the file holds ",
          bytes_));
    }
    bytes->resize(e.bin_size);
    uint64_t done = 0;
    while (done < e.bin_size) {
      const ssize_t r = ::pread(fd_, &(*bytes)[done], e.bin_size - done,
                                static_cast<off_t>(e.bin_offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return absl::DataLossError(absl::StrCat(path_, ": entry ", e.index, " needs bytes ",
                                                e.bin_offset, "..", e.bin_offset + e.bin_size,
                                                ", the file ends before"));
      }
      done += static_cast<uint64_t>(r);
    }
    return absl::OkStatus();
  }

 private:
  const std::string dir_;
  bool opened_ = false;
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  absl::Status error_;
};

// Suggestions under a filter: the first entries of the capture (the reader
// parsed only the entries the filter selects).
absl::StatusOr<SomeValues> FirstValues(const std::string& dir) {
  auto reader = ManifestReader::Open(dir + "/args_dump.json");
  if (!reader.ok()) return reader.status();
  SomeValues some;
  ManifestEntry e;
  for (int i = 0; i < 10000; ++i) {
    absl::StatusOr<bool> got = (*reader)->Next(&e);
    if (!got.ok()) return got.status();
    if (!*got) break;
    some.Add(e);
  }
  return some;
}

// Streams the manifest.
class LocalSource : public ArgSource {
 public:
  LocalSource(std::string dir, std::unique_ptr<ManifestReader> reader, Selection selection)
      : dir_(std::move(dir)), reader_(std::move(reader)), selection_(std::move(selection)),
        payloads_(dir_) {}

  std::string name() const override { return dir_; }

  absl::StatusOr<bool> Next(ManifestEntry* e) override {
    for (;;) {
      absl::StatusOr<bool> got = reader_->Next(e);
      if (!got.ok() || !*got) return got;
      if (selection_.Matches(*e)) return true;
    }
  }

  absl::Status ReadPayload(const ManifestEntry& e, std::string* bytes) override {
    return payloads_.Read(reader_->summary(), e, bytes);
  }

  std::map<std::string, std::string> Labels() const override {
    return reader_->summary().labels;
  }

  std::optional<v1::DeviceCrash> DeviceCrashInfo() const override {
    return reader_->summary().device_crash;
  }

  KernelTable Kernels() const override { return reader_->summary().kernels; }
  std::optional<v1::CaptureClock> Clock() const override { return reader_->summary().clock; }

  // Without a filter nothing matched only in a capture of no entries: none
  // to suggest.
  absl::StatusOr<SomeValues> Suggestions() override {
    if (!selection_.any()) return SomeValues();
    return FirstValues(dir_);
  }

 private:
  const std::string dir_;
  std::unique_ptr<ManifestReader> reader_;
  const Selection selection_;
  PayloadFile payloads_;
};

// The entries args.index found (index_lookup.h): the same answers as
// LocalSource's, from the few manifest lines they are on.
class IndexedSource : public ArgSource {
 public:
  IndexedSource(std::string dir, IndexedSelection selected)
      : dir_(std::move(dir)), selected_(std::move(selected)), payloads_(dir_) {}

  std::string name() const override { return dir_; }

  absl::StatusOr<bool> Next(ManifestEntry* e) override {
    if (next_ == selected_.entries.size()) return false;
    *e = selected_.entries[next_++];
    return true;
  }

  absl::Status ReadPayload(const ManifestEntry& e, std::string* bytes) override {
    return payloads_.Read(selected_.summary, e, bytes);
  }

  std::map<std::string, std::string> Labels() const override { return selected_.summary.labels; }

  std::optional<v1::DeviceCrash> DeviceCrashInfo() const override {
    return selected_.summary.device_crash;
  }

  KernelTable Kernels() const override { return selected_.summary.kernels; }
  std::optional<v1::CaptureClock> Clock() const override { return selected_.summary.clock; }

  absl::StatusOr<SomeValues> Suggestions() override { return FirstValues(dir_); }

 private:
  const std::string dir_;
  const IndexedSelection selected_;
  size_t next_ = 0;
  PayloadFile payloads_;
};

}  // namespace

std::string CaptureDirOf(const std::string& dir) {
  if (IsDir(dir + "/args_dump") && !IsFile(dir + "/args_dump.json")) return dir + "/args_dump";
  return dir;
}

absl::StatusOr<std::unique_ptr<ArgSource>> OpenLocalCapture(const std::string& dir,
                                                            const Selection& asked,
                                                            std::string* index_note) {
  const std::string capture = CaptureDirOf(dir);
  Selection selection = asked;
  if ((selection.args.func_name || selection.args.func_type) && !selection.args.func_named) {
    // The table is in the manifest's head, before args[].
    auto head = ManifestReader::Open(capture + "/args_dump.json");
    if (!head.ok()) return head.status();
    if (absl::Status s = (*head)->ReadHeader(); !s.ok()) return s;
    if (absl::Status s = ResolveKernelFilter((*head)->summary().kernels, &selection.args);
        !s.ok()) {
      return s;
    }
  }
  if (IndexCanAnswer(selection)) {
    absl::StatusOr<IndexedSelection> selected = SelectFromIndex(capture, selection);
    if (selected.ok()) {
      return std::unique_ptr<ArgSource>(new IndexedSource(capture, *std::move(selected)));
    }
    if (!absl::IsNotFound(selected.status()) && index_note != nullptr) {
      *index_note = std::string(selected.status().message());
    }
  }
  auto reader = ManifestReader::Open(capture + "/args_dump.json");
  if (!reader.ok()) return reader.status();
  (*reader)->set_filter(selection);
  return std::unique_ptr<ArgSource>(
      new LocalSource(capture, std::move(*reader), selection));
}

}  // namespace argsdump
