#include "base/confined_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/files.h"

namespace argsdump {
namespace {

std::string Reason() { return std::strerror(errno); }

absl::Status Refuse(absl::string_view name, absl::string_view why, size_t at) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", absl::CHexEscape(name), "' ", why, " at its byte ", at));
}

ConfinedEntry KindOf(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return ConfinedEntry::kFile;
  if (S_ISDIR(st.st_mode)) return ConfinedEntry::kDir;
  if (S_ISLNK(st.st_mode)) return ConfinedEntry::kSymlink;
  return ConfinedEntry::kOther;
}

const char* KindName(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "a regular file";
}

// Why `part` in `dir` is not what was asked: "<path> is a symbolic link".
absl::Status NotA(int dir, const std::string& part, const std::string& path,
                  absl::string_view wanted) {
  struct stat st;
  if (::fstatat(dir, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot open: ", Reason()));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is ", KindName(st), ", not ", wanted, " (not followed)"));
}

}  // namespace

absl::Status CheckConfinedName(absl::string_view name) {
  if (name.empty()) return Refuse(name, "is empty", 0);
  if (name.size() > kMaxConfinedNameBytes) {
    return Refuse(name.substr(0, 64), absl::StrCat("is longer than ", kMaxConfinedNameBytes,
                                                   " bytes"), kMaxConfinedNameBytes);
  }
  if (name[0] == '/') return Refuse(name, "is absolute", 0);
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size()) {
      const unsigned char c = static_cast<unsigned char>(name[i]);
      if (c == 0) return Refuse(name, "holds a NUL byte", i);
      if (c < 0x20 || c == 0x7F) return Refuse(name, "holds a control byte", i);
      if (c == '\\') return Refuse(name, "holds a backslash", i);
      if (c != '/') continue;
    }
    const absl::string_view part = name.substr(start, i - start);
    if (part.empty()) return Refuse(name, "has an empty part", i);
    if (part == "." || part == "..") {
      return Refuse(name, absl::StrCat("has a '", part, "' part"), start);
    }
    if (part.size() > kMaxConfinedPartBytes) {
      return Refuse(name, absl::StrCat("has a part longer than ", kMaxConfinedPartBytes, " bytes"),
                    start);
    }
    start = i + 1;
  }
  return absl::OkStatus();
}

OwnedFd& OwnedFd::operator=(OwnedFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

OwnedFd::~OwnedFd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<ConfinedDir> ConfinedDir::Open(const std::string& path, Missing missing) {
  if (missing == Missing::kCreate) {
    if (absl::Status s = CreateDirectories(path); !s.ok()) return s;
  }
  OwnedFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    const std::string why = absl::StrCat(path, ": cannot open the folder: ", Reason());
    return errno == ENOENT ? absl::NotFoundError(why) : absl::UnavailableError(why);
  }
  return ConfinedDir(std::move(fd), path);
}

std::string ConfinedDir::PathOf(absl::string_view name) const {
  return path_ == "." ? std::string(name) : absl::StrCat(path_, "/", name);
}

absl::StatusOr<ConfinedDir> ConfinedDir::Subdir(absl::string_view name, Missing missing) const {
  if (absl::Status s = CheckConfinedName(name); !s.ok()) return s;
  int at = fd_.get();
  OwnedFd held;
  std::string path = path_;
  for (absl::string_view piece : absl::StrSplit(name, '/')) {
    const std::string part(piece);
    path = path == "." ? part : absl::StrCat(path, "/", part);
    OwnedFd next(::openat(at, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0 && errno == ENOENT && missing == Missing::kCreate) {
      if (::mkdirat(at, part.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", Reason()));
      }
      next = OwnedFd(::openat(at, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (next.get() < 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such folder"));
      if (errno == ELOOP || errno == ENOTDIR) return NotA(at, part, path, "a folder");
      return absl::UnavailableError(absl::StrCat(path, ": cannot open the folder: ", Reason()));
    }
    held = std::move(next);
    at = held.get();
  }
  return ConfinedDir(std::move(held), std::move(path));
}

absl::StatusOr<std::pair<ConfinedDir, std::string>> ConfinedDir::Parent(absl::string_view name,
                                                                        Missing missing) const {
  if (absl::Status s = CheckConfinedName(name); !s.ok()) return s;
  const size_t slash = name.rfind('/');
  std::string last(slash == absl::string_view::npos ? name : name.substr(slash + 1));
  if (slash == absl::string_view::npos) {
    OwnedFd again(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
    if (again.get() < 0) {
      return absl::UnavailableError(absl::StrCat(path_, ": cannot open the folder: ", Reason()));
    }
    return std::make_pair(ConfinedDir(std::move(again), path_), std::move(last));
  }
  absl::StatusOr<ConfinedDir> dir = Subdir(name.substr(0, slash), missing);
  if (!dir.ok()) return dir.status();
  return std::make_pair(*std::move(dir), std::move(last));
}

absl::StatusOr<OwnedFd> ConfinedDir::OpenFile(absl::string_view name, LastLink last_link) const {
  auto parent = Parent(name, Missing::kFail);
  if (!parent.ok()) return parent.status();
  const ConfinedDir& dir = parent->first;
  const std::string& last = parent->second;
  const std::string path = PathOf(name);
  // Looked at before it is opened: opening a device or a FIFO can have
  // effects (or block), so only a regular file is.
  struct stat before;
  const bool follow = last_link == LastLink::kFollow;
  if (::fstatat(dir.fd_.get(), last.c_str(), &before, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0) {
    const std::string why = absl::StrCat(path, ": cannot open: ", Reason());
    return errno == ENOENT ? absl::NotFoundError(why) : absl::UnavailableError(why);
  }
  if (!S_ISREG(before.st_mode)) {
    struct stat link;
    const bool through_link =
        follow && ::fstatat(dir.fd_.get(), last.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(link.st_mode);
    return absl::FailedPreconditionError(absl::StrCat(path, through_link ? " leads to " : " is ",
                                                      KindName(before),
                                                      ", not a regular file (not opened)"));
  }
  OwnedFd fd(::openat(dir.fd_.get(), last.c_str(),
                      O_RDONLY | (follow ? 0 : O_NOFOLLOW) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ELOOP) return NotA(dir.fd_.get(), last, path, "a regular file");
    return absl::UnavailableError(absl::StrCat(path, ": cannot open: ", Reason()));
  }
  // The same file as looked at (not one swapped in since).
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != before.st_ino ||
      st.st_dev != before.st_dev) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " changed while it was opened (not a regular file now)"));
  }
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

absl::Status ConfinedDir::WriteFileWith(absl::string_view name,
                                        const std::function<absl::Status(int fd)>& fill) const {
  auto parent = Parent(name, Missing::kCreate);
  if (!parent.ok()) return parent.status();
  const int dir = parent->first.fd_.get();
  const std::string& last = parent->second;
  const std::string path = PathOf(name);
  struct stat st;
  if (::fstatat(dir, last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is ", KindName(st), ", not a regular file (not replaced)"));
  }
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = absl::StrCat(".argsdump_tmp_", ::getpid(), "_", serial++);
  OwnedFd fd(::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0644));
  if (fd.get() < 0) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", Reason()));
  absl::Status s = fill(fd.get());
  // A write error may only show at close (NFS, a full disk).
  if (::close(fd.release()) != 0 && s.ok()) {
    s = absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", Reason()));
  }
  if (s.ok() && ::renameat(dir, tmp.c_str(), dir, last.c_str()) != 0) {
    s = absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", Reason()));
  }
  if (!s.ok()) ::unlinkat(dir, tmp.c_str(), 0);
  return s;
}

absl::Status ConfinedDir::WriteFile(absl::string_view name, absl::string_view bytes) const {
  const std::string path = PathOf(name);
  return WriteFileWith(name, [&](int fd) -> absl::Status {
    absl::string_view rest = bytes;
    while (!rest.empty()) {
      const ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", Reason()));
      rest.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<ConfinedEntry> ConfinedDir::EntryAt(absl::string_view name) const {
  auto parent = Parent(name, Missing::kFail);
  if (absl::IsNotFound(parent.status())) return ConfinedEntry::kNone;
  if (!parent.ok()) return parent.status();
  struct stat st;
  if (::fstatat(parent->first.fd_.get(), parent->second.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return ConfinedEntry::kNone;
    return absl::UnavailableError(absl::StrCat(PathOf(name), ": ", Reason()));
  }
  return KindOf(st);
}

absl::StatusOr<uint64_t> ConfinedDir::FreeBytes() const {
  struct statvfs vfs;
  if (::fstatvfs(fd_.get(), &vfs) != 0) {
    return absl::UnavailableError(absl::StrCat(path_, ": cannot tell the free space: ", Reason()));
  }
  return static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
}

}  // namespace argsdump
