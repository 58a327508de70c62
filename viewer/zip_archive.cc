#include "viewer/zip_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/confined_path.h"

namespace argsdump {
namespace {

constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr size_t kEndBytes = 22;
constexpr size_t kCentralBytes = 46;
constexpr size_t kLocalBytes = 30;
constexpr size_t kPiece = 1 << 20;
// More members than any test's outputs hold; bounds the central directory
// read for a damaged count.
constexpr uint64_t kMaxMembers = 1 << 22;
// Hosts of the "version made by" field whose external attributes hold a
// Unix mode in their high 16 bits: Unix and OS X.
constexpr uint8_t kHostUnix = 3, kHostDarwin = 19;
constexpr uint32_t kUnixTypeMask = 0170000, kUnixSymlink = 0120000, kUnixFile = 0100000,
                   kUnixFolder = 0040000;

uint16_t U16(const std::string& b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) |
                               static_cast<uint8_t>(b[at + 1]) << 8);
}
uint32_t U32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(U16(b, at)) | static_cast<uint32_t>(U16(b, at + 2)) << 16;
}
uint64_t U64(const std::string& b, size_t at) {
  return static_cast<uint64_t>(U32(b, at)) | static_cast<uint64_t>(U32(b, at + 4)) << 32;
}

// A DOS date and time (local time, 2 s resolution) as seconds since the epoch.
int64_t DosTime(uint16_t time, uint16_t date) {
  std::tm tm{};
  tm.tm_year = 80 + (date >> 9);
  tm.tm_mon = std::max(0, ((date >> 5) & 0xF) - 1);
  tm.tm_mday = std::max(1, date & 0x1F);
  tm.tm_hour = time >> 11;
  tm.tm_min = (time >> 5) & 0x3F;
  tm.tm_sec = (time & 0x1F) * 2;
  tm.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&tm));
}

}  // namespace

ZipArchive::~ZipArchive() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<ZipArchive>> ZipArchive::Open(const std::string& path) {
  std::unique_ptr<ZipArchive> z(new ZipArchive);
  z->path_ = path;
  // Non-blocking: a FIFO under a zip's name is refused below, not waited on.
  z->fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (z->fd_ < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(z->fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(path, ": not a regular file"));
  }
  ::fcntl(z->fd_, F_SETFL, ::fcntl(z->fd_, F_GETFL) & ~O_NONBLOCK);
  z->size_ = static_cast<uint64_t>(st.st_size);
  if (absl::Status s = z->Parse(); !s.ok()) return s;
  return z;
}

absl::StatusOr<std::unique_ptr<ZipArchive>> ZipArchive::FromBytes(std::string bytes,
                                                                  const std::string& name) {
  std::unique_ptr<ZipArchive> z(new ZipArchive);
  z->path_ = name;
  z->bytes_ = std::move(bytes);
  z->in_memory_ = true;
  z->size_ = z->bytes_.size();
  if (absl::Status s = z->Parse(); !s.ok()) return s;
  return z;
}

absl::Status ZipArchive::Error(uint64_t at, absl::string_view what) const {
  return absl::DataLossError(absl::StrCat(path_, ": byte ", at, ": ", what));
}

absl::Status ZipArchive::ReadAt(uint64_t at, size_t n, std::string* out) const {
  if (at > size_ || n > size_ - at) {
    return Error(at, absl::StrCat("the archive ends (", size_, " bytes) before ", n,
                                  " more bytes"));
  }
  if (in_memory_) {
    out->assign(bytes_, static_cast<size_t>(at), n);
    return absl::OkStatus();
  }
  out->resize(n);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, &(*out)[done], n - done, static_cast<off_t>(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return Error(at + done, got < 0 ? std::strerror(errno) : "the file ended while reading");
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<ZipArchive::CentralDirectory> ZipArchive::FindCentralDirectory() const {
  if (size_ < kEndBytes) return Error(0, "too short for a zip archive (no end record)");
  // The end record: the last "PK\5\6" whose comment reaches the end.
  const uint64_t tail = std::min<uint64_t>(size_, kEndBytes + 0xFFFF);
  std::string t;
  if (absl::Status s = ReadAt(size_ - tail, static_cast<size_t>(tail), &t); !s.ok()) return s;
  size_t end = std::string::npos;
  for (size_t i = t.size() - kEndBytes + 1; i-- > 0;) {
    if (U32(t, i) == kEndSignature && i + kEndBytes + U16(t, i + 20) == t.size()) {
      end = i;
      break;
    }
  }
  if (end == std::string::npos) {
    return Error(size_ - tail, "no end-of-central-directory record: not a zip archive, or cut");
  }
  CentralDirectory dir;
  dir.end_at = size_ - tail + end;
  dir.entries = U16(t, end + 10);
  dir.size = U32(t, end + 12);
  dir.offset = U32(t, end + 16);
  if (U16(t, end + 4) != 0 || U16(t, end + 6) != 0) {
    return Error(dir.end_at, "a multi-disk archive (not read)");
  }
  if (dir.entries == 0xFFFF || dir.size == 0xFFFFFFFF || dir.offset == 0xFFFFFFFF) {
    // Zip64: the locator sits right before the end record.
    if (dir.end_at < 20) return Error(dir.end_at, "zip64 fields without a zip64 locator");
    std::string loc;
    if (absl::Status s = ReadAt(dir.end_at - 20, 20, &loc); !s.ok()) return s;
    if (U32(loc, 0) != kZip64LocatorSignature) {
      return Error(dir.end_at - 20, "zip64 fields without a zip64 locator");
    }
    const uint64_t z64_at = U64(loc, 8);
    std::string z64;
    if (absl::Status s = ReadAt(z64_at, 56, &z64); !s.ok()) return s;
    if (U32(z64, 0) != kZip64EndSignature) return Error(z64_at, "no zip64 end record there");
    dir.entries = U64(z64, 32);
    dir.size = U64(z64, 40);
    dir.offset = U64(z64, 48);
  }
  return dir;
}

absl::Status ZipArchive::ParseCentralEntry(const std::string& cd, size_t at, uint64_t e,
                                           uint64_t cd_offset, ZipMember* out,
                                           size_t* entry_bytes) const {
  const uint64_t here = cd_offset + at;
  if (cd.size() - at < kCentralBytes || U32(cd, at) != kCentralSignature) {
    return Error(here, absl::StrCat("central directory entry ", e, " is not one"));
  }
  ZipMember& m = *out;
  const uint8_t host = static_cast<uint8_t>(U16(cd, at + 4) >> 8);
  const uint32_t external = U32(cd, at + 38);
  const uint16_t flags = U16(cd, at + 8);
  m.method = U16(cd, at + 10);
  m.mtime = DosTime(U16(cd, at + 12), U16(cd, at + 14));
  m.crc32 = U32(cd, at + 16);
  m.compressed_size = U32(cd, at + 20);
  m.size = U32(cd, at + 24);
  const size_t name_len = U16(cd, at + 28), extra_len = U16(cd, at + 30),
               comment_len = U16(cd, at + 32);
  m.local_header_offset = U32(cd, at + 42);
  if (cd.size() - at - kCentralBytes < name_len + extra_len + comment_len) {
    return Error(here, absl::StrCat("central directory entry ", e, " runs past the directory"));
  }
  if (flags & 0x1) return Error(here, absl::StrCat("member ", e, " is encrypted (not read)"));
  m.name = cd.substr(at + kCentralBytes, name_len);
  if (host == kHostUnix || host == kHostDarwin) {
    const uint32_t type = (external >> 16) & kUnixTypeMask;
    if (type != 0 && type != kUnixFile && type != kUnixFolder) {
      return Error(here, absl::StrCat("member '", absl::CHexEscape(m.name), "' is ",
                                      type == kUnixSymlink ? "a symbolic link"
                                                           : "a FIFO, device or socket",
                                      " (not extracted, not read)"));
    }
  }
  // Zip64 sizes and offset, for the fields that say 0xFFFFFFFF.
  size_t x = at + kCentralBytes + name_len;
  const size_t x_end = x + extra_len;
  while (x + 4 <= x_end) {
    const uint16_t id = U16(cd, x), len = U16(cd, x + 2);
    if (x + 4 + len > x_end) return Error(cd_offset + x, "an extra field runs past its entry");
    if (id == 0x0001) {
      size_t f = x + 4;
      auto take = [&](uint64_t* field) -> bool {
        if (*field != 0xFFFFFFFF) return true;
        if (f + 8 > x + 4 + len) return false;
        *field = U64(cd, f);
        f += 8;
        return true;
      };
      if (!take(&m.size) || !take(&m.compressed_size) || !take(&m.local_header_offset)) {
        return Error(cd_offset + x, "a zip64 extra field too short for its entry");
      }
    }
    x += 4 + len;
  }
  if (m.local_header_offset > size_ || m.compressed_size > size_) {
    return Error(here, absl::StrCat("member '", m.name, "' points past the archive"));
  }
  *entry_bytes = kCentralBytes + name_len + extra_len + comment_len;
  return absl::OkStatus();
}

absl::Status ZipArchive::Parse() {
  absl::StatusOr<CentralDirectory> dir = FindCentralDirectory();
  if (!dir.ok()) return dir.status();
  const uint64_t entries = dir->entries, cd_size = dir->size, cd_offset = dir->offset;
  if (entries > kMaxMembers) {
    return Error(dir->end_at, absl::StrCat(entries, " members: more than ", kMaxMembers));
  }
  if (cd_offset > size_ || cd_size > size_ - cd_offset || cd_size < entries * kCentralBytes) {
    return Error(dir->end_at, absl::StrCat("the central directory (", cd_size, " bytes at ",
                                           cd_offset, ") does not fit the archive"));
  }
  std::string cd;
  if (absl::Status s = ReadAt(cd_offset, static_cast<size_t>(cd_size), &cd); !s.ok()) return s;
  size_t at = 0;
  members_.reserve(static_cast<size_t>(entries));
  std::vector<uint64_t> central_at;
  central_at.reserve(static_cast<size_t>(entries));
  for (uint64_t e = 0; e < entries; ++e) {
    ZipMember m;
    size_t entry_bytes = 0;
    if (absl::Status s = ParseCentralEntry(cd, at, e, cd_offset, &m, &entry_bytes); !s.ok()) {
      return s;
    }
    members_.push_back(std::move(m));
    central_at.push_back(cd_offset + at);
    at += entry_bytes;
  }
  return CheckMembers(central_at, cd_offset);
}

absl::Status ZipArchive::CheckMembers(const std::vector<uint64_t>& central_at,
                                      uint64_t cd_offset) const {
  absl::flat_hash_map<absl::string_view, size_t> seen;
  for (size_t i = 0; i < members_.size(); ++i) {
    const ZipMember& m = members_[i];
    absl::string_view name = m.name;
    if (m.is_dir()) name.remove_suffix(1);
    if (absl::Status s = CheckConfinedName(name); !s.ok()) {
      return Error(central_at[i],
                   absl::StrCat("member ", s.message(), " (not read: a member's name must be "
                                "relative and stay in its folder)"));
    }
    auto [it, added] = seen.emplace(name, i);
    if (!added) {
      return Error(central_at[i],
                   absl::StrCat("member '", absl::CHexEscape(m.name), "' is there twice (also at byte ",
                                central_at[it->second], "): which one is meant is not known"));
    }
  }
  // Each member's local header and data, at the least 30 bytes, its name
  // and its compressed size, lie before the next member's and before the
  // central directory: members that share bytes are refused.
  std::vector<size_t> order(members_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return members_[a].local_header_offset < members_[b].local_header_offset;
  });
  for (size_t k = 0; k < order.size(); ++k) {
    const ZipMember& m = members_[order[k]];
    const uint64_t end = m.local_header_offset + kLocalBytes + m.name.size() + m.compressed_size;
    const bool last = k + 1 == order.size();
    const uint64_t limit = last ? cd_offset : members_[order[k + 1]].local_header_offset;
    if (end > limit) {
      return Error(central_at[order[k]],
                   absl::StrCat("member '", absl::CHexEscape(m.name), "' (", m.compressed_size,
                                " bytes at byte ", m.local_header_offset, ") overlaps ",
                                last ? "the central directory"
                                     : absl::StrCat("member '",
                                                    absl::CHexEscape(members_[order[k + 1]].name),
                                                    "'"),
                                ": members that share their data are a zip bomb (not read)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ZipArchive::ReadStored(const ZipMember& m, uint64_t data_at,
                                    const PieceSink& emit) const {
  if (m.compressed_size != m.size) {
    return Error(data_at, absl::StrCat("stored '", m.name, "' has two sizes"));
  }
  std::string in;
  for (uint64_t off = 0; off < m.size; off += kPiece) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, m.size - off));
    if (absl::Status s = ReadAt(data_at + off, n, &in); !s.ok()) return s;
    if (absl::Status s = emit(in); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ZipArchive::ReadDeflated(const ZipMember& m, uint64_t data_at,
                                      const PieceSink& emit) const {
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return absl::InternalError("zlib: inflateInit2");
  // Output room for the member's size and one byte more (so a member that
  // inflates past its size is caught), at most a piece: a small member
  // does not allocate and clear a whole piece.
  std::string out(static_cast<size_t>(std::min<uint64_t>(
                      kPiece, std::max<uint64_t>(m.size + 1, 4096))),
                  '\0');
  std::string in;
  uint64_t consumed = 0;
  int rc = Z_OK;
  absl::Status status;
  while (status.ok() && rc != Z_STREAM_END) {
    if (z.avail_in == 0) {
      if (consumed == m.compressed_size) {
        status = Error(data_at + consumed, absl::StrCat("the deflate data of '", m.name,
                                                        "' ends early"));
        break;
      }
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(kPiece, m.compressed_size - consumed));
      status = ReadAt(data_at + consumed, n, &in);
      if (!status.ok()) break;
      consumed += n;
      z.next_in = reinterpret_cast<Bytef*>(&in[0]);
      z.avail_in = static_cast<uInt>(n);
    }
    z.next_out = reinterpret_cast<Bytef*>(&out[0]);
    z.avail_out = static_cast<uInt>(out.size());
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      status = Error(data_at + consumed - z.avail_in,
                     absl::StrCat("the deflate data of '", m.name, "' is damaged (",
                                  z.msg != nullptr ? z.msg : "zlib error", ")"));
      break;
    }
    const size_t got = out.size() - z.avail_out;
    if (got > 0) status = emit(absl::string_view(out.data(), got));
    if (rc == Z_BUF_ERROR && got == 0 && z.avail_in != 0) {
      status = Error(data_at + consumed, absl::StrCat("the deflate data of '", m.name,
                                                      "' makes no progress"));
    }
  }
  inflateEnd(&z);
  return status;
}

absl::Status ZipArchive::Read(const ZipMember& m,
                              const std::function<absl::Status(absl::string_view)>& sink) const {
  std::string local;
  if (absl::Status s = ReadAt(m.local_header_offset, kLocalBytes, &local); !s.ok()) return s;
  if (U32(local, 0) != kLocalSignature) {
    return Error(m.local_header_offset, absl::StrCat("no local header for '", m.name, "'"));
  }
  const uint64_t data_at =
      m.local_header_offset + kLocalBytes + U16(local, 26) + U16(local, 28);
  if (data_at > size_ || m.compressed_size > size_ - data_at) {
    return Error(m.local_header_offset,
                 absl::StrCat("the data of '", m.name, "' runs past the archive"));
  }
  if (m.method != 0 && m.method != 8) {
    return Error(m.local_header_offset,
                 absl::StrCat("'", m.name, "' is compressed with method ", m.method,
                              " (stored and deflate are read)"));
  }
  uLong crc = ::crc32(0, nullptr, 0);
  uint64_t produced = 0;
  const PieceSink emit = [&](absl::string_view piece) -> absl::Status {
    produced += piece.size();
    if (produced > m.size) {
      return Error(data_at, absl::StrCat("'", m.name, "' holds more than its size of ", m.size));
    }
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(piece.data()),
                  static_cast<uInt>(piece.size()));
    return sink(piece);
  };
  const absl::Status read =
      m.method == 0 ? ReadStored(m, data_at, emit) : ReadDeflated(m, data_at, emit);
  if (!read.ok()) return read;
  if (produced != m.size) {
    return Error(data_at, absl::StrCat("'", m.name, "' holds ", produced, " bytes, its size says ",
                                       m.size));
  }
  if (static_cast<uint32_t>(crc) != m.crc32) {
    return Error(data_at, absl::StrCat("'", m.name, "' fails its CRC-32 check"));
  }
  return absl::OkStatus();
}

}  // namespace argsdump
