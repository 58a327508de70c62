// Names that come from data - a zip member, a manifest field used in a
// file name, a capture name, a request - opened under a root folder they
// cannot leave. The root is trusted (the user named it, or the program
// chose it; it may be reached through symbolic links); every name below it
// is not: it is checked (CheckConfinedName) and then walked one part at a
// time with openat(O_NOFOLLOW), so no part can be "..", absolute, or a
// symbolic link on disk, and only regular files are opened or replaced
// (never a FIFO, a device, a socket). Invariant: nothing reached through a
// ConfinedDir lies outside its root.
#ifndef ARGSDUMP_BASE_CONFINED_PATH_H_
#define ARGSDUMP_BASE_CONFINED_PATH_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argsdump {

// The longest name and part accepted (PATH_MAX and NAME_MAX of Linux).
inline constexpr size_t kMaxConfinedNameBytes = 4095;
inline constexpr size_t kMaxConfinedPartBytes = 255;

// OK when `name` is relative and '/'-separated, each part a plain name:
// not empty (no leading, trailing or doubled '/'), not "." or "..", no NUL,
// no control byte (below 0x20, 0x7F), no backslash (a separator to
// Windows and to zip tools that convert it), at most the lengths above.
// InvalidArgument "'<name>' <why> at its byte N" otherwise (the name escaped).
absl::Status CheckConfinedName(absl::string_view name);

// A descriptor closed when it goes out of scope.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OwnedFd& operator=(OwnedFd&& o) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd();
  int get() const { return fd_; }
  // Hands the descriptor over (to be closed by the caller).
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// What is at a name (not following a symbolic link).
enum class ConfinedEntry { kNone, kFile, kDir, kSymlink, kOther };

// An open folder under which names from data are resolved.
class ConfinedDir {
 public:
  enum class Missing { kFail, kCreate };  // folders that do not exist yet

  // The trusted folder `path` ("." for the working folder). kCreate makes
  // it and its parents (mode 0755) when missing. NotFound or Unavailable
  // naming it.
  static absl::StatusOr<ConfinedDir> Open(const std::string& path, Missing missing);

  // Everything below takes a name from data: InvalidArgument when
  // CheckConfinedName refuses it, FailedPrecondition naming the path when
  // a part is a symbolic link or not of the kind needed, NotFound when
  // it is missing, Unavailable for other system errors.

  // The folder `name` (each missing part made, 0755, with kCreate).
  absl::StatusOr<ConfinedDir> Subdir(absl::string_view name, Missing missing) const;
  // The regular file `name`, open for reading. With kFollow a symbolic
  // link as the last part is followed, to a regular file only: links the
  // folder's owner made, such as Bazel's runfiles, where every data file
  // is a link. Folder parts are never followed.
  enum class LastLink { kRefuse, kFollow };
  absl::StatusOr<OwnedFd> OpenFile(absl::string_view name,
                                   LastLink last_link = LastLink::kRefuse) const;
  // Writes the file `name` whole (mode 0644; its folders made): `fill`
  // writes to a new temporary file beside it, which then replaces `name`
  // (rename), so no one sees half a file and a link or special file there
  // is refused, never followed. A `fill` error is returned, the temporary
  // file removed.
  absl::Status WriteFileWith(absl::string_view name,
                             const std::function<absl::Status(int fd)>& fill) const;
  absl::Status WriteFile(absl::string_view name, absl::string_view bytes) const;
  // What `name` is (kNone when it, or a folder above it, does not exist).
  absl::StatusOr<ConfinedEntry> EntryAt(absl::string_view name) const;

  // The bytes an unprivileged user may still write on this folder's file
  // system (statvfs's f_bavail blocks).
  absl::StatusOr<uint64_t> FreeBytes() const;

  // The path of this folder, and of `name` in it, for messages.
  const std::string& path() const { return path_; }
  std::string PathOf(absl::string_view name) const;

 private:
  ConfinedDir(OwnedFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  // The folder holding the last part of `name`, and that part: every
  // part before it walked with O_NOFOLLOW (made with kCreate).
  absl::StatusOr<std::pair<ConfinedDir, std::string>> Parent(absl::string_view name,
                                                             Missing missing) const;
  OwnedFd fd_;
  std::string path_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_BASE_CONFINED_PATH_H_
