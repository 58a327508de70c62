// An append-only journal of typed entries, the store's crash log. Format
// (version 2, little endian):
//
//   file    = header *entry
//   header  = "ADJ2" u32 version (2, or 3: payloads placed by maps) 8 bytes
//   entry   = u32 sync (0x4C4E4A41, "AJNL")                      13 bytes +
//             u32 length   bytes of payload                      payload
//             u32 crc      CRC-32C of (length, type, payload)
//             u8  type     JournalEntryType
//             payload      length bytes
//
// A writer appends whole entries with one write() each. A reader returns
// every whole entry in order. Where an entry is damaged (a flipped byte, a
// bad length) it looks for the next sync marker whose entry checks out and
// goes on from there, noting the damaged region (offset and bytes); a torn
// last entry (a crash mid-append) is the tail it drops. The CRC covers the
// length, so a damaged length is found too.
//
// Version 1 files (no header; entries of u32 length, u32 CRC-32C of (type,
// payload), u8 type, payload) are still read, without resynchronisation:
// the first damaged entry ends them, and the reader says so.
#ifndef ARGSDUMP_STORE_JOURNAL_H_
#define ARGSDUMP_STORE_JOURNAL_H_

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argsdump {

enum class JournalEntryType : uint8_t {
  kCaptureInfo = 1,  // argsdump.v1.CaptureInfo
  kRecord = 2,       // argsdump.v1.ArgRecord, after its payload is in args.bin
  kCounters = 3,     // argsdump.v1.CaptureCounters, at the end of a capture
  // Where a batch's payloads went in args.bin (store/payload_dedup.h),
  // ahead of the batch's records, in captures that share equal payloads.
  kPayloadMap = 4,
};

inline constexpr uint32_t kJournalFileHeaderBytes = 8;
// The header's version: 2, or 3 for a capture that shares equal payloads
// (the same entries; every batch's payloads are placed by a kPayloadMap
// entry, so a reader that does not know maps must refuse the file rather
// than read records at their stream offsets).
inline constexpr uint32_t kJournalVersion = 2;
inline constexpr uint32_t kJournalVersionWithMaps = 3;
inline constexpr uint32_t kJournalHeaderBytes = 13;  // per entry
inline constexpr uint32_t kJournalSync = 0x4C4E4A41;

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
  // Creates (truncates) `path` with a `version` header, or appends to it:
  // FailedPrecondition for a version 1 journal (sealed by recovery instead)
  // or a file that is not a journal.
  static absl::StatusOr<std::unique_ptr<JournalWriter>> Open(
      const std::string& path, bool append, uint32_t version = kJournalVersion);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // One entry; durable against a crash of this process when it returns.
  absl::Status Append(JournalEntryType type, absl::string_view payload);
  // Frames one entry of `size` (at most kMaxJournalEntryBytes) bytes that
  // `fill(char* out)` writes in place at the end of `out` (a message
  // serialized straight into the frame, without a copy), on any thread,
  // for AppendFramed.
  template <typename Fill>
  static void FrameWith(std::string* out, JournalEntryType type, size_t size, Fill fill) {
    char* entry = FrameBegin(out, size);
    fill(entry + kJournalHeaderBytes);
    FrameEnd(entry, type, size);
  }
  // Writes whole entries framed by FrameWith, back to back (one write()
  // per kFileWriteBytes); durable when it returns. On failure the file is
  // cut back to where it was.
  absl::Status AppendFramed(absl::string_view entries);
  // `first`, then `entries`, in one go (one write() per kFileWriteBytes).
  absl::Status AppendFramed(absl::string_view first, absl::string_view entries);
  uint64_t bytes() const { return bytes_; }

 private:
  // Writes frame_ (a new file's header, staged by Open until the first
  // entry, and what follows it).
  absl::Status Flush();
  static char* FrameBegin(std::string* out, size_t size);
  static void FrameEnd(char* entry, JournalEntryType type, size_t size);
  // Writes [data, data + size) whole, or cuts the file back to bytes_.
  absl::Status WriteAll(const char* data, size_t size);
  absl::Status WriteAll(absl::string_view a, absl::string_view b);
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
  // The same over bytes in memory (tests, the fuzz target).
  static std::unique_ptr<JournalReader> FromBytes(std::string data);

  // The next whole entry (skipping damaged regions); false at the end.
  bool Next(JournalEntryType* type, std::string* payload);

  // A region the reader could not read (once Next returned false: all).
  struct Damage {
    uint64_t offset = 0;  // file offset where it starts
    uint64_t bytes = 0;
    std::string why;      // "checksum mismatch", "entry length out of range", ...
    bool tail = false;    // the end of the file: a torn last append
  };
  const std::vector<Damage>& damage() const { return damage_; }
  // Bytes in damaged regions, the tail included.
  uint64_t dropped_bytes() const;
  // Offset just past the last whole entry read.
  uint64_t good_bytes() const { return good_; }
  int version() const { return version_; }
  // "checksum mismatch at byte 123 (45 bytes); torn entry at byte 900 (7
  // bytes, the tail)", or "" when nothing was dropped.
  std::string reason() const;

 private:
  explicit JournalReader(std::string data);
  // A whole valid entry at `at` (version 2)? Fills type, body, and `why`.
  bool EntryAt(uint64_t at, uint8_t* type, absl::string_view* body, std::string* why) const;
  void Drop(uint64_t from, uint64_t to, std::string why, bool tail);
  std::string data_;
  int version_ = 2;
  uint64_t offset_ = 0;
  uint64_t good_ = 0;
  std::vector<Damage> damage_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_JOURNAL_H_
