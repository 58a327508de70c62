#include "viewer/arg_source.h"

#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace argsdump {

void SomeValues::Add(const ManifestEntry& e) {
  if (tasks.size() < 5) tasks.insert(e.task_id);
  if (args.size() < 8) args.insert(e.arg_index);
  for (int64_t f : e.func_ids) {
    if (funcs.size() < 8) funcs.insert(f);
  }
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

class LocalSource : public ArgSource {
 public:
  LocalSource(std::string dir, std::unique_ptr<ManifestReader> reader, Selection selection)
      : dir_(std::move(dir)), reader_(std::move(reader)), selection_(std::move(selection)) {}

  std::string name() const override { return dir_; }

  absl::StatusOr<bool> Next(ManifestEntry* e) override {
    for (;;) {
      absl::StatusOr<bool> got = reader_->Next(e);
      if (!got.ok() || !*got) return got;
      some_.Add(*e);
      if (selection_.Matches(*e)) return true;
    }
  }

  absl::Status ReadPayload(const ManifestEntry& e, std::string* bytes) override {
    bytes->clear();
    if (e.bin_size == 0) return absl::OkStatus();
    if (!bin_open_) {
      // Named by the manifest's bin_file when it came before args[] (the
      // writer puts it after), else the schema's args.bin; a file of the
      // capture folder, never a path out of it.
      const ManifestSummary& s = reader_->summary();
      const std::string name = s.has_bin_file ? s.bin_file : "args.bin";
      bin_path_ = absl::StrCat(dir_, "/", name);
      bin_open_ = true;
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
        bin_error_ = absl::DataLossError(absl::StrCat(
            dir_, "/args_dump.json: bin_file '", name, "' is not a file of the capture folder"));
      } else {
        bin_.open(bin_path_, std::ios::binary);
        struct stat st;
        if (bin_.is_open() && ::stat(bin_path_.c_str(), &st) == 0) {
          bin_bytes_ = static_cast<uint64_t>(st.st_size);
        }
      }
    }
    if (!bin_error_.ok()) return bin_error_;
    if (!bin_.is_open()) {
      return absl::NotFoundError(absl::StrCat(bin_path_, ": cannot open (entry ", e.index,
                                              " has ", e.bin_size, " payload bytes)"));
    }
    // Checked before anything is allocated: a manifest may claim any size.
    if (e.bin_offset > bin_bytes_ || e.bin_size > bin_bytes_ - e.bin_offset) {
      return absl::DataLossError(absl::StrCat(
          bin_path_, ": entry ", e.index, " needs bytes ", e.bin_offset, "..",
          e.bin_offset + std::min(e.bin_size, UINT64_MAX - e.bin_offset), ", the file holds ",
          bin_bytes_));
    }
    bytes->assign(e.bin_size, '\0');
    bin_.clear();
    bin_.seekg(static_cast<std::streamoff>(e.bin_offset));
    bin_.read(&(*bytes)[0], static_cast<std::streamsize>(e.bin_size));
    if (!bin_ || static_cast<uint64_t>(bin_.gcount()) != e.bin_size) {
      return absl::DataLossError(absl::StrCat(bin_path_, ": entry ", e.index, " needs bytes ",
                                              e.bin_offset, "..", e.bin_offset + e.bin_size,
                                              ", the file ends before"));
    }
    return absl::OkStatus();
  }

  std::map<std::string, std::string> Labels() const override {
    return reader_->summary().labels;
  }

  std::optional<v1::DeviceCrash> DeviceCrashInfo() const override {
    return reader_->summary().device_crash;
  }

  absl::StatusOr<SomeValues> Suggestions() override {
    if (!selection_.any()) return some_;
    // With a filter the reader parsed only the entries it selects: look
    // at the first ones of the capture instead.
    auto reader = ManifestReader::Open(dir_ + "/args_dump.json");
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

 private:
  const std::string dir_;
  std::unique_ptr<ManifestReader> reader_;
  const Selection selection_;
  SomeValues some_;
  bool bin_open_ = false;
  std::string bin_path_;
  std::ifstream bin_;
  uint64_t bin_bytes_ = 0;
  absl::Status bin_error_;
};

}  // namespace

std::string CaptureDirOf(const std::string& dir) {
  if (IsDir(dir + "/args_dump") && !IsFile(dir + "/args_dump.json")) return dir + "/args_dump";
  return dir;
}

absl::StatusOr<std::unique_ptr<ArgSource>> OpenLocalCapture(const std::string& dir,
                                                            const Selection& selection) {
  const std::string capture = CaptureDirOf(dir);
  auto reader = ManifestReader::Open(capture + "/args_dump.json");
  if (!reader.ok()) return reader.status();
  (*reader)->set_filter(selection);
  return std::unique_ptr<ArgSource>(
      new LocalSource(capture, std::move(*reader), selection));
}

}  // namespace argsdump
