#include "store/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "store/crc32c.h"

namespace argsdump {
namespace {

constexpr char kFileMagic[4] = {'A', 'D', 'J', '2'};
constexpr uint32_t kVersion = kJournalVersion;

bool KnownVersion(uint32_t v) { return v == kJournalVersion || v == kJournalVersionWithMaps; }

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Version 2: over (length, type, payload).
uint32_t Crc(uint32_t length, uint8_t type, absl::string_view payload) {
  char l[4];
  PutU32(l, length);
  return Crc32c(Crc32c(Crc32c(0, l, 4), &type, 1), payload.data(), payload.size());
}

// Version 1: over (type, payload).
uint32_t CrcV1(uint8_t type, absl::string_view payload) {
  return Crc32c(Crc32c(0, &type, 1), payload.data(), payload.size());
}

bool KnownType(uint8_t t) { return t >= 1 && t <= 4; }

}  // namespace

absl::StatusOr<std::unique_ptr<JournalWriter>> JournalWriter::Open(const std::string& path,
                                                                   bool append,
                                                                   uint32_t version) {
  const int flags = O_RDWR | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("journal ", path, ": cannot open: ", std::strerror(errno)));
  }
  struct stat st;
  const uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  std::unique_ptr<JournalWriter> w(new JournalWriter(fd, path, size));
  if (size == 0) {
    char header[kJournalFileHeaderBytes];
    std::memcpy(header, kFileMagic, 4);
    PutU32(header + 4, KnownVersion(version) ? version : kVersion);
    // Staged, not written: the first entry (the capture header) goes out
    // with it in one write, so no crash leaves a journal of a file header
    // alone (a capture that can be neither reopened nor recovered).
    w->frame_.assign(header, sizeof(header));
    return w;
  }
  char header[kJournalFileHeaderBytes] = {};
  if (::pread(fd, header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)) ||
      std::memcmp(header, kFileMagic, 4) != 0 || !KnownVersion(GetU32(header + 4))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "journal ", path, ": not a version ", kJournalVersion, " or ", kJournalVersionWithMaps,
        " journal; it cannot be appended to"));
  }
  return w;
}

JournalWriter::~JournalWriter() { ::close(fd_); }

absl::Status JournalWriter::Append(JournalEntryType type, absl::string_view payload) {
  if (payload.size() > kMaxJournalEntryBytes) return TooLarge(payload.size());
  FrameWith(&frame_, type, payload.size(),
            [&](char* out) { std::memcpy(out, payload.data(), payload.size()); });
  return Flush();
}

char* JournalWriter::FrameBegin(std::string* out, size_t size) {
  const size_t at = out->size();
  out->resize(at + kJournalHeaderBytes + size);
  return &(*out)[at];
}

void JournalWriter::FrameEnd(char* entry, JournalEntryType type, size_t size) {
  const auto t = static_cast<uint8_t>(type);
  const uint32_t length = static_cast<uint32_t>(size);
  PutU32(entry, kJournalSync);
  PutU32(entry + 4, length);
  PutU32(entry + 8, Crc(length, t, absl::string_view(entry + kJournalHeaderBytes, size)));
  entry[12] = static_cast<char>(t);
}

absl::Status JournalWriter::TooLarge(size_t size) const {
  return absl::InvalidArgumentError(
      absl::StrCat("journal ", path_, ": entry of ", size, " bytes is too large"));
}

absl::Status JournalWriter::Flush() {
  const absl::Status s = WriteAll(frame_.data(), frame_.size());
  frame_.clear();
  return s;
}

absl::Status JournalWriter::AppendFramed(absl::string_view entries) {
  if (!frame_.empty()) {  // a new file's header first
    frame_.append(entries.data(), entries.size());
    return Flush();
  }
  return WriteAll(entries.data(), entries.size());
}

absl::Status JournalWriter::AppendFramed(absl::string_view first, absl::string_view entries) {
  if (!frame_.empty()) {  // a new file's header first
    frame_.append(first.data(), first.size());
    frame_.append(entries.data(), entries.size());
    return Flush();
  }
  return WriteAll(first, entries);
}

absl::Status JournalWriter::WriteAll(const char* data, size_t size) {
  return WriteAll(absl::string_view(data, size), absl::string_view());
}

absl::Status JournalWriter::WriteAll(absl::string_view a, absl::string_view b) {
  const size_t size = a.size() + b.size();
  size_t done = 0;
  while (done < size) {
    // Up to kFileWriteBytes from where `done` is, across the two parts.
    struct iovec iov[2];
    int count = 0;
    size_t room = kFileWriteBytes;
    if (done < a.size()) {
      const size_t take = std::min(room, a.size() - done);
      iov[count++] = {const_cast<char*>(a.data() + done), take};
      room -= take;
    }
    const size_t in_b = done > a.size() ? done - a.size() : 0;
    if (room > 0 && in_b < b.size()) {
      iov[count++] = {const_cast<char*>(b.data() + in_b), std::min(room, b.size() - in_b)};
    }
    const ssize_t n = ::writev(fd_, iov, count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      // Keep the file whole: cut a partial write back.
      if (::ftruncate(fd_, static_cast<off_t>(bytes_)) == 0) {
        ::lseek(fd_, static_cast<off_t>(bytes_), SEEK_SET);
      }
      return absl::DataLossError(absl::StrCat("journal ", path_, ": write failed: ", why));
    }
    done += static_cast<size_t>(n);
  }
  bytes_ += size;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<JournalReader>> JournalReader::Open(const std::string& path) {
  // Read whole, however long (recovery needs every entry): the reader
  // still takes a regular file only.
  absl::StatusOr<std::string> data = ReadFileToString(path, kUnboundedFileBytes);
  if (!data.ok()) {
    return absl::Status(data.status().code(), absl::StrCat("journal ", data.status().message()));
  }
  return FromBytes(*std::move(data));
}

std::unique_ptr<JournalReader> JournalReader::FromBytes(std::string data) {
  return std::unique_ptr<JournalReader>(new JournalReader(std::move(data)));
}

JournalReader::JournalReader(std::string data) : data_(std::move(data)) {
  const bool magic = data_.size() >= 4 && std::memcmp(data_.data(), kFileMagic, 4) == 0;
  if (magic && data_.size() >= kJournalFileHeaderBytes &&
      KnownVersion(GetU32(data_.data() + 4))) {
    version_ = static_cast<int>(GetU32(data_.data() + 4));
    offset_ = good_ = kJournalFileHeaderBytes;
    return;
  }
  // A damaged file header in front of a whole first entry: the entries are
  // version 2 all the same (one flipped byte must not cost the capture).
  uint8_t type;
  absl::string_view body;
  std::string why;
  if (data_.size() > kJournalFileHeaderBytes && EntryAt(kJournalFileHeaderBytes, &type, &body, &why)) {
    Drop(0, kJournalFileHeaderBytes, "damaged file header", false);
    offset_ = good_ = kJournalFileHeaderBytes;
  } else if (magic) {
    Drop(0, data_.size(), "an unknown journal version", false);
    offset_ = data_.size();
  } else {
    version_ = 1;  // no header: the format before sync markers
  }
}

namespace {

// Damage that is only the end of the file cut short: an append a crash
// interrupted, never acknowledged. Anything else (a checksum, a type, a
// length that cannot be, a missing marker) damaged an entry that was whole.
bool TornEnd(const std::string& why) {
  return why == "torn entry header" || why == "torn entry";
}

}  // namespace

void JournalReader::Drop(uint64_t from, uint64_t to, std::string why, bool tail) {
  if (to > from) damage_.push_back(Damage{from, to - from, std::move(why), tail});
}

uint64_t JournalReader::dropped_bytes() const {
  uint64_t n = 0;
  for (const Damage& d : damage_) n += d.bytes;
  return n;
}

std::string JournalReader::reason() const {
  std::vector<std::string> parts;
  for (const Damage& d : damage_) {
    parts.push_back(absl::StrCat(d.why, " at byte ", d.offset, " (", d.bytes, " bytes",
                                 d.tail ? ", the tail" : "", ")"));
  }
  return absl::StrJoin(parts, "; ");
}

bool JournalReader::EntryAt(uint64_t at, uint8_t* type, absl::string_view* body,
                            std::string* why) const {
  const uint64_t left = data_.size() - at;
  if (left < kJournalHeaderBytes) {
    *why = "torn entry header";
    return false;
  }
  const char* p = data_.data() + at;
  if (GetU32(p) != kJournalSync) {
    *why = "no sync marker";
    return false;
  }
  const uint32_t length = GetU32(p + 4);
  if (length > kMaxJournalEntryBytes) {
    *why = "entry length out of range";
    return false;
  }
  if (left - kJournalHeaderBytes < length) {
    *why = "torn entry";
    return false;
  }
  *type = static_cast<uint8_t>(p[12]);
  *body = absl::string_view(p + kJournalHeaderBytes, length);
  if (Crc(length, *type, *body) != GetU32(p + 8)) {
    *why = "checksum mismatch";
    return false;
  }
  if (!KnownType(*type)) {
    *why = "unknown entry type";
    return false;
  }
  return true;
}

bool JournalReader::Next(JournalEntryType* type, std::string* payload) {
  if (offset_ >= data_.size()) return false;
  if (version_ == 1) {
    const uint64_t left = data_.size() - offset_;
    auto stop = [&](const char* why) {
      Drop(offset_, data_.size(), absl::StrCat(why, " (a version 1 journal: nothing after it "
                                                    "can be read)"),
           TornEnd(why));
      offset_ = data_.size();
      return false;
    };
    if (left < 9) return stop("torn entry header");
    const char* p = data_.data() + offset_;
    const uint32_t length = GetU32(p);
    const uint8_t raw_type = static_cast<uint8_t>(p[8]);
    if (length > kMaxJournalEntryBytes) return stop("entry length out of range");
    if (left - 9 < length) return stop("torn entry");
    absl::string_view body(p + 9, length);
    if (CrcV1(raw_type, body) != GetU32(p + 4)) return stop("checksum mismatch");
    if (!KnownType(raw_type)) return stop("unknown entry type");
    *type = static_cast<JournalEntryType>(raw_type);
    payload->assign(body.data(), body.size());
    offset_ += 9 + length;
    good_ = offset_;
    return true;
  }
  uint8_t raw_type;
  absl::string_view body;
  std::string why;
  if (!EntryAt(offset_, &raw_type, &body, &why)) {
    // Resynchronise: the next sync marker whose entry checks out.
    const uint64_t damaged_at = offset_;
    uint64_t at = offset_ + 1;
    bool found = false;
    std::string ignored;
    // Checksum bytes spent on candidates not framed by a marker or the end.
    uint64_t unframed_budget = uint64_t{64} << 20;
    for (;;) {
      const size_t next = data_.find("AJNL", at);  // kJournalSync, little endian
      if (next == std::string::npos) break;
      // Cheap first: a whole entry ends at the end of the file or at the
      // next marker. Only then is its checksum worth computing (a file
      // full of markers must not cost a CRC over the rest per marker);
      // small entries are checked anyway (a damaged marker after them),
      // within a budget per resynchronisation.
      const uint64_t left = data_.size() - next;
      const uint64_t length = left >= kJournalHeaderBytes ? GetU32(data_.data() + next + 4) : 0;
      const uint64_t end = next + kJournalHeaderBytes + length;
      const bool framed = left >= kJournalHeaderBytes && end <= data_.size() &&
                          (end == data_.size() ||
                           (data_.size() - end >= 4 && GetU32(data_.data() + end) == kJournalSync));
      const bool small = length <= 4096 && unframed_budget >= length;
      if (!framed && small) unframed_budget -= length;
      if ((framed || small) && EntryAt(next, &raw_type, &body, &ignored)) {
        found = true;
        at = next;
        break;
      }
      at = next + 1;
    }
    if (!found) {
      // Nothing whole after it: a torn last append (never acknowledged), or
      // damage to an entry that was whole (lossy).
      Drop(damaged_at, data_.size(), why, TornEnd(why));
      offset_ = data_.size();
      return false;
    }
    Drop(damaged_at, at, why, false);
    offset_ = at;
  }
  *type = static_cast<JournalEntryType>(raw_type);
  payload->assign(body.data(), body.size());
  offset_ += kJournalHeaderBytes + body.size();
  good_ = offset_;
  return true;
}

}  // namespace argsdump
