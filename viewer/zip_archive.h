// Reads a .zip archive: what Bazel 4 leaves of a test's undeclared outputs
// (bazel-testlogs/<pkg>/<target>/test.outputs/outputs.zip, written by
// `zip -qr`), so that dump_viewer and the SDK's test library open captures
// there without the user unzipping by hand.
//
// The byte grammar (PKWARE APPNOTE 6.3), as far as it is read:
//   archive   = *(local header, data) central-directory [zip64 end record,
//               zip64 locator] end-record
//   end-record (22 + comment bytes, found scanning back from the end):
//               "PK\5\6", disk counts, entries u16, cd size u32,
//               cd offset u32, comment length u16
//   zip64: fields of 0xFFFF/0xFFFFFFFF live in the zip64 end record
//               ("PK\6\6", located by "PK\6\7") and per entry in the extra
//               field 0x0001 (sizes and offset, in that order, each only
//               when its 32-bit field is 0xFFFFFFFF)
//   central entry = "PK\1\2", ..., method u16, time u16, date u16, crc u32,
//               compressed u32, size u32, name/extra/comment lengths, ...,
//               local header offset u32, name, extra, comment
//   local header = "PK\3\4", ..., name length u16, extra length u16, name,
//               extra; the data follows (stored, or raw deflate)
// The archive is untrusted: every size and offset is checked against the
// file before it is used, and a damaged archive is a DataLoss naming the
// file, the byte and what is wrong, never a crash or an unbounded read.
// An archive is refused whole (DataLoss naming the member and the byte of
// its central entry) when a member's name could leave the folder it is
// extracted to (CheckConfinedName: "..", absolute, empty parts, NUL,
// control bytes, backslashes), when two members have the same name (which
// one would win differs between tools), when a member is a symbolic link
// or a FIFO, device or socket (its Unix mode in the external attributes;
// only regular files and folders are read), or when members' data
// overlap (the overlapping-member zip bomb, where every member inflates
// the same bytes).
#ifndef ARGSDUMP_VIEWER_ZIP_ARCHIVE_H_
#define ARGSDUMP_VIEWER_ZIP_ARCHIVE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argsdump {

struct ZipMember {
  std::string name;  // as stored: '/'-separated, a trailing '/' for folders
  uint16_t method = 0;  // 0 stored, 8 deflate (the only two read)
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_header_offset = 0;
  int64_t mtime = 0;  // seconds since the epoch (local time of the DOS stamp)
  bool is_dir() const { return !name.empty() && name.back() == '/'; }
};

class ZipArchive {
 public:
  // NotFound when the file cannot be opened; DataLoss for anything that is
  // not a zip archive this reader can read.
  static absl::StatusOr<std::unique_ptr<ZipArchive>> Open(const std::string& path);
  // The same over bytes in memory (tests, the fuzz target); `name` is
  // what messages call it.
  static absl::StatusOr<std::unique_ptr<ZipArchive>> FromBytes(std::string bytes,
                                                               const std::string& name);
  ~ZipArchive();

  const std::vector<ZipMember>& members() const { return members_; }
  const std::string& path() const { return path_; }

  // The member's bytes, in pieces of at most 1 MiB, in order; the CRC-32
  // and size are checked at the end (DataLoss when they disagree, after
  // the pieces were handed out: write to a temporary name). A `sink` error
  // stops the read and is returned.
  absl::Status Read(const ZipMember& member,
                    const std::function<absl::Status(absl::string_view)>& sink) const;

 private:
  ZipArchive() = default;
  absl::Status Error(uint64_t at, absl::string_view what) const;
  // Reads `n` bytes at `at` into `out`; DataLoss when the file ends first.
  absl::Status ReadAt(uint64_t at, size_t n, std::string* out) const;
  absl::Status Parse();
  // Where the central directory is and how many entries it says it holds,
  // from the end record (and the zip64 end record when the end record's
  // fields say 0xFFFF...).
  struct CentralDirectory {
    uint64_t entries = 0;
    uint64_t size = 0;
    uint64_t offset = 0;
    uint64_t end_at = 0;  // where the end record starts
  };
  absl::StatusOr<CentralDirectory> FindCentralDirectory() const;
  // The central directory entry `e` at `at` in `cd` (read from `cd_offset`)
  // into `m`; `entry_bytes` is how long the entry is.
  absl::Status ParseCentralEntry(const std::string& cd, size_t at, uint64_t e,
                                 uint64_t cd_offset, ZipMember* m, size_t* entry_bytes) const;
  // The member's data at `data_at`, stored or deflated, handed to `emit`.
  using PieceSink = std::function<absl::Status(absl::string_view)>;
  absl::Status ReadStored(const ZipMember& m, uint64_t data_at, const PieceSink& emit) const;
  absl::Status ReadDeflated(const ZipMember& m, uint64_t data_at, const PieceSink& emit) const;
  // The refusals above, over the parsed members; `central_at` is where
  // each member's central entry starts.
  absl::Status CheckMembers(const std::vector<uint64_t>& central_at, uint64_t cd_offset) const;

  std::string path_;
  int fd_ = -1;         // or:
  std::string bytes_;   // the archive in memory
  bool in_memory_ = false;
  uint64_t size_ = 0;
  std::vector<ZipMember> members_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_ZIP_ARCHIVE_H_
