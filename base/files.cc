#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace argsdump {
namespace {

// Closes a descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // The descriptor, no longer closed here.
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes now; false (errno set) when the close reports an error.
  bool Close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

std::string Reason() { return std::strerror(errno); }

// "<path>: is a FIFO, not a regular file", and the like.
absl::Status NotRegular(const std::string& path, mode_t mode) {
  const char* what = S_ISDIR(mode)    ? "a directory"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "of an unknown type";
  return absl::FailedPreconditionError(
      absl::StrCat(path, ": is ", what, ", not a regular file"));
}

// "<path>: is N bytes, more than the M bytes read from one file"; a file
// that grew while it was read (`size` unknown): "grew past the M bytes...".
absl::Status TooLarge(const std::string& path, std::optional<uint64_t> size, uint64_t max_bytes) {
  const std::string bound = absl::StrCat("the ", max_bytes, " bytes read from one file");
  return absl::FailedPreconditionError(
      size ? absl::StrCat(path, ": is ", *size, " bytes, more than ", bound)
           : absl::StrCat(path, ": grew past ", bound, " while it was read"));
}

// What a byte that cannot be in a token is, for the error.
std::string ByteName(unsigned char c) {
  switch (c) {
    case 0x00: return "NUL";
    case '\t': return "a tab";
    case '\r': return "a carriage return";
    case ' ': return "a space";
    case 0x7F: return "DEL, a control character";
    default: break;
  }
  return c >= 0x80 ? "not ASCII" : "a control character";
}

}  // namespace

absl::StatusOr<int> OpenRegularFile(const std::string& path) {
  // Asked before opening, so a device is not even opened (opening some has
  // effects), and again on the descriptor, which is what is read. Without
  // O_NONBLOCK a FIFO with no writer would block the open itself.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", Reason()));
  if (::fstat(fd.get(), &st) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": cannot read: ", Reason()));
  }
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  return fd.Release();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  absl::StatusOr<int> opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  FileDescriptor fd(*opened);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": cannot read: ", Reason()));
  }
  const uint64_t size = st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0;
  if (size > max_bytes) return TooLarge(path, size, max_bytes);
  // The size is a hint (files under /proc say 0, a file may grow): read
  // until the end, but never more than one byte past the bound.
  const uint64_t limit = max_bytes == UINT64_MAX ? max_bytes : max_bytes + 1;
  std::string data(static_cast<size_t>(std::min<uint64_t>(size > 0 ? size + 1 : 4096, limit)),
                   '\0');
  size_t used = 0;
  for (;;) {
    if (used == data.size()) {
      if (used >= limit) break;
      data.resize(static_cast<size_t>(std::min<uint64_t>(uint64_t{used} * 2, limit)));
    }
    const ssize_t n = ::read(fd.get(), &data[used], data.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(absl::StrCat(path, ": cannot read: ", Reason()));
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  if (used > max_bytes) return TooLarge(path, std::nullopt, max_bytes);
  data.resize(used);
  return data;
}

absl::Status WriteStringToFile(const std::string& path, absl::string_view bytes) {
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", Reason()));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd.get(), bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", Reason()));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  if (!fd.Close()) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", Reason()));
  return absl::OkStatus();
}

absl::Status CreateDirectories(const std::string& path) {
  // Every prefix ending before a '/', then the path itself.
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string prefix = path.substr(0, i);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot create directory ", prefix, ": ", Reason()));
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::UnavailableError(absl::StrCat(path, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenFromFileBytes(absl::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("it is empty");
  size_t end = std::min(bytes.find('\n'), bytes.size());
  // A "\r\n" line end (a file written on Windows) ends the line too; a
  // carriage return anywhere else is refused below.
  if (end < bytes.size() && end > 0 && bytes[end - 1] == '\r') --end;
  if (end == 0) return absl::InvalidArgumentError("its first line is empty");
  for (size_t i = 0; i < end && i <= kMaxTokenBytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x21 && c <= 0x7E) continue;
    return absl::InvalidArgumentError(absl::StrFormat(
        "byte %d is 0x%02x (%s); a token is printable ASCII without spaces (0x21..0x7e)", i, c,
        ByteName(c)));
  }
  if (end > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("its first line is longer than ", kMaxTokenBytes,
                     " bytes (byte ", kMaxTokenBytes, " is still in it), the longest token"));
  }
  return std::string(bytes.substr(0, end));
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxTokenFileBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read a token from ", text.status().message()));
  }
  absl::StatusOr<std::string> token = TokenFromFileBytes(*text);
  if (!token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read a token from ", path, ": ", token.status().message()));
  }
  return token;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace argsdump
