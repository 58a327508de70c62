// An append-only journal of typed entries, the store's crash log. Format, one
// entry after another (little endian):
//
//   u32 length   bytes of payload
//   u32 crc      CRC-32C of (type, payload)
//   u8  type     JournalEntryType
//   payload      length bytes
//
// A writer appends whole entries with one write() each. A reader returns the
// entries in order and stops at the first entry that is cut short or fails
// its checksum (a crash mid-append), reporting how many bytes it dropped
// instead of failing.
#ifndef ARGSDUMP_SERVER_JOURNAL_H_
#define ARGSDUMP_SERVER_JOURNAL_H_

#include <cstdint>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argsdump {

enum class JournalEntryType : uint8_t {
  kCaptureInfo = 1,  // argsdump.v1.CaptureInfo
  kRecord = 2,       // argsdump.v1.ArgRecord, after its payload is in args.bin
  kCounters = 3,     // argsdump.v1.CaptureCounters, at the end of a capture
};

inline constexpr uint32_t kJournalHeaderBytes = 9;

// Bytes per write() for every file the store writes (args.bin, the journal,
// the manifest, args.index). Large writes were measured slower here, not
// faster: on this kernel (6.18, ext4 large folios) a 16 MiB writev fills
// the page cache with high-order folios, and on the VMs we run on those
// pages are often freshly handed back by the host, so the copy into them
// crawled (perf: copy_folio_from_iter_atomic at ~300 MB/s) in 1 run of 2;
// the same bytes in 64 KiB writes ran at raw-write speed (pipeline_benchmark,
// BM_PayloadRatios: paired median 0.13-0.81x raw uncapped, 0.70-0.81x at
// 64 KiB). The syscall per 64 KiB costs ~1% at 3 GB/s.
inline constexpr size_t kFileWriteBytes = 64 << 10;
inline constexpr uint32_t kMaxJournalEntryBytes = 64u << 20;

class JournalWriter {
 public:
  // Creates (truncates) or appends to `path`.
  static absl::StatusOr<std::unique_ptr<JournalWriter>> Open(const std::string& path,
                                                             bool append);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // One entry; durable against a crash of this process when it returns.
  absl::Status Append(JournalEntryType type, absl::string_view payload);
  // Frames an entry in memory; Flush() writes every staged entry with one
  // write() (durable when Flush returns).
  absl::Status Stage(JournalEntryType type, absl::string_view payload);
  // Stage() of `size` bytes that `fill(char* out)` writes in place (a
  // message serialized straight into the frame, without a copy).
  template <typename Fill>
  absl::Status StageWith(JournalEntryType type, size_t size, Fill fill) {
    if (size > kMaxJournalEntryBytes) return TooLarge(size);
    char* entry = StageBegin(size);
    fill(entry + kJournalHeaderBytes);
    StageEnd(entry, type, size);
    return absl::OkStatus();
  }
  absl::Status Flush();
  uint64_t bytes() const { return bytes_; }

 private:
  char* StageBegin(size_t size);
  void StageEnd(char* entry, JournalEntryType type, size_t size);
  absl::Status TooLarge(size_t size) const;
  JournalWriter(int fd, std::string path, uint64_t bytes)
      : fd_(fd), path_(std::move(path)), bytes_(bytes) {}
  int fd_;
  std::string path_;
  uint64_t bytes_;
  std::string frame_;
};

class JournalReader {
 public:
  static absl::StatusOr<std::unique_ptr<JournalReader>> Open(const std::string& path);

  // The next whole entry; false at the end or at the first damaged entry.
  bool Next(JournalEntryType* type, std::string* payload);
  // Bytes after the last whole entry (a torn or corrupt tail), once Next()
  // returned false.
  uint64_t dropped_bytes() const { return dropped_; }
  // Offset just past the last whole entry read.
  uint64_t good_bytes() const { return offset_; }
  std::string reason() const { return reason_; }

 private:
  explicit JournalReader(std::string data) : data_(std::move(data)) {}
  std::string data_;
  uint64_t offset_ = 0;
  uint64_t dropped_ = 0;
  std::string reason_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_JOURNAL_H_
