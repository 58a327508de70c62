#include "viewer/zip_extract.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {

std::string MemberName(const ZipMember& m) {
  return absl::StrCat("member '", absl::CHexEscape(m.name), "'");
}

// `s`, prefixed with the zip and the member unless it names them already
// (the archive's own DataLoss errors do).
absl::Status AboutMember(const ZipArchive& zip, const ZipMember& m, const absl::Status& s) {
  if (absl::StrContains(s.message(), zip.path())) return s;
  return absl::Status(s.code(), absl::StrCat(zip.path(), ": ", MemberName(m), ": ", s.message()));
}

// The files directly in the folder `inner` (its members' names start with
// `prefix`), checked against the caps before anything is written; `total`
// is the bytes they declare.
absl::StatusOr<std::vector<const ZipMember*>> FolderFilesWithinLimits(
    const ZipArchive& zip, const std::string& inner, const std::string& prefix,
    const ZipExtractLimits& limits, uint64_t* total_out) {
  std::vector<const ZipMember*> files;
  uint64_t total = 0;
  for (const ZipMember& m : zip.members()) {
    if (m.is_dir() || !absl::StartsWith(m.name, prefix)) continue;
    const absl::string_view rest = absl::string_view(m.name).substr(prefix.size());
    if (rest.find('/') != absl::string_view::npos) continue;  // a subfolder's
    if (rest == kExtractedMark) {
      return absl::InvalidArgumentError(absl::StrCat(
          zip.path(), ": ", MemberName(m), ": the name the viewer marks a complete extraction "
          "with (not extracted)"));
    }
    if (files.size() == limits.max_files) {
      return absl::ResourceExhaustedError(absl::StrCat(
          zip.path(), ": folder '", absl::CHexEscape(inner), "' holds more than ",
          limits.max_files, " files (", MemberName(m), " and on; not extracted)"));
    }
    if (m.size > limits.ratio_floor &&
        m.size / std::max<uint64_t>(m.compressed_size, 1) > limits.max_ratio) {
      return absl::ResourceExhaustedError(absl::StrCat(
          zip.path(), ": ", MemberName(m), ": declares ", m.size, " bytes from ",
          m.compressed_size, " compressed, more than ", limits.max_ratio,
          " times as many (a zip bomb, or a size that lies; not extracted)"));
    }
    if (m.size > limits.max_total_bytes - std::min(total, limits.max_total_bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          zip.path(), ": ", MemberName(m), ": declares ", m.size, " bytes, which with the ",
          total, " before it is more than the ", limits.max_total_bytes,
          " bytes extracted at most (not extracted)"));
    }
    total += m.size;
    files.push_back(&m);
  }
  *total_out = total;
  return files;
}

// Each of `files` written into `dir` under its name less `prefix`.
absl::Status WriteMembers(const ZipArchive& zip, const std::vector<const ZipMember*>& files,
                          const std::string& prefix, const ConfinedDir& dir) {
  for (const ZipMember* m : files) {
    const std::string rest = m->name.substr(prefix.size());
    absl::Status s = dir.WriteFileWith(rest, [&](int fd) {
      return zip.Read(*m, [&](absl::string_view piece) -> absl::Status {
        while (!piece.empty()) {
          const ssize_t n = ::write(fd, piece.data(), piece.size());
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            return absl::UnavailableError(
                absl::StrCat("cannot write ", dir.PathOf(rest), ": ", std::strerror(errno)));
          }
          piece.remove_prefix(static_cast<size_t>(n));
        }
        return absl::OkStatus();
      });
    });
    if (!s.ok()) return AboutMember(zip, *m, s);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ExtractZipFolder(const ZipArchive& zip, const std::string& inner_given,
                                             const ConfinedDir& root,
                                             const ZipExtractLimits& limits) {
  std::string inner = inner_given;
  while (!inner.empty() && inner.back() == '/') inner.pop_back();
  if (!inner.empty()) {
    if (absl::Status s = CheckConfinedName(inner); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(zip.path(), ": folder ", s.message(), " (not extracted)"));
    }
  }
  // The cache's own errors (a link or special file in the way) say which
  // zip was being extracted.
  auto in_cache = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(zip.path(), ": extracting folder '",
                                               absl::CHexEscape(inner), "': ", s.message()));
  };
  // Extracted before: nothing to do.
  const std::string mark = inner.empty() ? kExtractedMark : absl::StrCat(inner, "/", kExtractedMark);
  auto done = root.EntryAt(mark);
  if (!done.ok()) return in_cache(done.status());
  if (*done == ConfinedEntry::kFile) return inner.empty() ? root.path() : root.PathOf(inner);
  // What would be written, checked against the caps before anything is.
  const std::string prefix = inner.empty() ? "" : inner + "/";
  uint64_t total = 0;
  absl::StatusOr<std::vector<const ZipMember*>> files =
      FolderFilesWithinLimits(zip, inner, prefix, limits, &total);
  if (!files.ok()) return files.status();
  if (limits.check_free_space) {
    auto free = root.FreeBytes();
    if (!free.ok()) return free.status();
    if (total > *free) {
      return absl::ResourceExhaustedError(absl::StrCat(
          zip.path(), ": folder '", absl::CHexEscape(inner), "' declares ", total,
          " bytes; ", root.path(), " has ", *free, " free (not extracted)"));
    }
  }
  std::optional<ConfinedDir> made;
  if (!inner.empty()) {
    auto dir = root.Subdir(inner, ConfinedDir::Missing::kCreate);
    if (!dir.ok()) return in_cache(dir.status());
    made.emplace(*std::move(dir));
  }
  const ConfinedDir& dir = made ? *made : root;
  if (absl::Status s = WriteMembers(zip, *files, prefix, dir); !s.ok()) return s;
  if (absl::Status s = dir.WriteFile(kExtractedMark, zip.path() + "\n"); !s.ok()) {
    return in_cache(s);
  }
  return dir.path();
}

}  // namespace argsdump
