#include "server/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "server/crc32c.h"

namespace argsdump {
namespace {

uint32_t Crc(uint8_t type, absl::string_view payload) {
  return Crc32c(Crc32c(0, &type, 1), payload.data(), payload.size());
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JournalWriter>> JournalWriter::Open(const std::string& path,
                                                                   bool append) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("journal ", path, ": cannot open: ", std::strerror(errno)));
  }
  struct stat st;
  const uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return std::unique_ptr<JournalWriter>(new JournalWriter(fd, path, size));
}

JournalWriter::~JournalWriter() { ::close(fd_); }

absl::Status JournalWriter::Append(JournalEntryType type, absl::string_view payload) {
  if (absl::Status s = Stage(type, payload); !s.ok()) return s;
  return Flush();
}

absl::Status JournalWriter::Stage(JournalEntryType type, absl::string_view payload) {
  return StageWith(type, payload.size(),
                   [&](char* out) { std::memcpy(out, payload.data(), payload.size()); });
}

char* JournalWriter::StageBegin(size_t size) {
  const size_t at = frame_.size();
  frame_.resize(at + kJournalHeaderBytes + size);
  return &frame_[at];
}

void JournalWriter::StageEnd(char* entry, JournalEntryType type, size_t size) {
  const auto t = static_cast<uint8_t>(type);
  const uint32_t length = static_cast<uint32_t>(size);
  const uint32_t crc = Crc(t, absl::string_view(entry + kJournalHeaderBytes, size));
  for (int i = 0; i < 4; ++i) entry[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  for (int i = 0; i < 4; ++i) entry[4 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  entry[8] = static_cast<char>(t);
}

absl::Status JournalWriter::TooLarge(size_t size) const {
  return absl::InvalidArgumentError(
      absl::StrCat("journal ", path_, ": entry of ", size, " bytes is too large"));
}

absl::Status JournalWriter::Flush() {
  size_t done = 0;
  while (done < frame_.size()) {
    const ssize_t n = ::write(fd_, frame_.data() + done, std::min(frame_.size() - done, kFileWriteBytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      // Keep the file whole: cut a partial write back.
      if (::ftruncate(fd_, static_cast<off_t>(bytes_)) == 0) {
        ::lseek(fd_, static_cast<off_t>(bytes_), SEEK_SET);
      }
      frame_.clear();
      return absl::DataLossError(absl::StrCat("journal ", path_, ": write failed: ", why));
    }
    done += static_cast<size_t>(n);
  }
  bytes_ += frame_.size();
  frame_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<JournalReader>> JournalReader::Open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("journal ", path, ": cannot open"));
  std::ostringstream data;
  data << in.rdbuf();
  return std::unique_ptr<JournalReader>(new JournalReader(data.str()));
}

bool JournalReader::Next(JournalEntryType* type, std::string* payload) {
  const uint64_t left = data_.size() - offset_;
  if (left == 0) return false;
  auto stop = [&](std::string why) {
    dropped_ = data_.size() - offset_;
    reason_ = absl::StrCat(why, " at byte ", offset_);
    return false;
  };
  if (left < kJournalHeaderBytes) return stop("torn entry header");
  const char* p = data_.data() + offset_;
  const uint32_t length = GetU32(p);
  const uint32_t crc = GetU32(p + 4);
  const uint8_t raw_type = static_cast<uint8_t>(p[8]);
  if (length > kMaxJournalEntryBytes) return stop("entry length out of range");
  if (left - kJournalHeaderBytes < length) return stop("torn entry");
  absl::string_view body(p + kJournalHeaderBytes, length);
  if (Crc(raw_type, body) != crc) return stop("checksum mismatch");
  if (raw_type < 1 || raw_type > 3) return stop("unknown entry type");
  *type = static_cast<JournalEntryType>(raw_type);
  payload->assign(body.data(), body.size());
  offset_ += kJournalHeaderBytes + length;
  return true;
}

}  // namespace argsdump
