// One folder of a zip archive extracted under a root it cannot leave: the
// files directly in folder `inner` of the archive (not its subfolders)
// become files of folder `inner` below the root, each name resolved with
// ConfinedDir (no "..", no absolute name, no link on disk followed, no
// special file replaced). What an archive may claim is capped before
// anything is written (ZipExtractLimits), and every byte is counted while
// it is written: a member never yields more than its declared size.
// Invariant: a folder holding kExtractedMark was extracted whole; the mark
// is written last, so a folder left half-extracted (a crash, a refusal,
// a full disk) is never taken as complete, and is extracted again.
#ifndef ARGSDUMP_VIEWER_ZIP_EXTRACT_H_
#define ARGSDUMP_VIEWER_ZIP_EXTRACT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "base/confined_path.h"
#include "viewer/zip_archive.h"

namespace argsdump {

// Marks an extracted folder as complete (a member of this name is refused).
inline constexpr char kExtractedMark[] = ".argsdump_extracted";

struct ZipExtractLimits {
  // The declared sizes of the members extracted, added up: at most this,
  // and at most the free space of the root's file system.
  uint64_t max_total_bytes = uint64_t{64} << 30;  // 64 GiB
  // Files extracted (a capture folder holds a handful).
  uint64_t max_files = 10000;
  // A member of more than `ratio_floor` bytes declares at most `max_ratio`
  // times its compressed size. Deflate cannot exceed about 1032:1 (runs of
  // one byte), so a claim beyond 1100:1 is a lie, not data; a real bomb of
  // zeros stays within it and is stopped by max_total_bytes and the free
  // space instead.
  uint64_t max_ratio = 1100;
  uint64_t ratio_floor = uint64_t{1} << 20;  // 1 MiB
  bool check_free_space = true;
};

// Extracts folder `inner` ("" for the archive's root) of `zip` into folder
// `inner` below `root`, once: when that folder already holds
// kExtractedMark nothing is read. Returns the folder's path.
// InvalidArgument or DataLoss naming the zip and the member (and the byte)
// for an archive or member refused; ResourceExhausted naming the zip, the
// member and the numbers when a cap or the free space is exceeded;
// FailedPrecondition when a link or special file is in the way below
// `root`; Unavailable when the root cannot be written.
absl::StatusOr<std::string> ExtractZipFolder(const ZipArchive& zip, const std::string& inner,
                                             const ConfinedDir& root,
                                             const ZipExtractLimits& limits = {});

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_ZIP_EXTRACT_H_
