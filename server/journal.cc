#include "server/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {

uint32_t Crc(uint8_t type, absl::string_view payload) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, &type, 1);
  // zlib takes uInt lengths: feed in pieces.
  const char* p = payload.data();
  size_t left = payload.size();
  while (left > 0) {
    const uInt n = static_cast<uInt>(left > (1u << 30) ? (1u << 30) : left);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(p), n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  out->append(b, 4);
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
  if (payload.size() > kMaxJournalEntryBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "journal ", path_, ": entry of ", payload.size(), " bytes is too large"));
  }
  PutU32(&frame_, static_cast<uint32_t>(payload.size()));
  PutU32(&frame_, Crc(static_cast<uint8_t>(type), payload));
  frame_.push_back(static_cast<char>(type));
  frame_.append(payload.data(), payload.size());
  return absl::OkStatus();
}

absl::Status JournalWriter::Flush() {
  size_t done = 0;
  while (done < frame_.size()) {
    const ssize_t n = ::write(fd_, frame_.data() + done, frame_.size() - done);
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
