#include "viewer/capture_location.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/confined_path.h"
#include "base/files.h"
#include "viewer/arg_source.h"
#include "viewer/zip_archive.h"
#include "viewer/zip_extract.h"

namespace argsdump {
namespace {

constexpr char kManifest[] = "args_dump.json";

struct Stat {
  bool exists = false, dir = false, file = false;
  int64_t mtime_ns = 0;
  uint64_t size = 0;
};

Stat StatOf(const std::string& path) {
  Stat s;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.dir = S_ISDIR(st.st_mode);
  s.file = S_ISREG(st.st_mode);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.size = static_cast<uint64_t>(st.st_size);
  return s;
}

std::vector<std::string> Children(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool IsZipFile(const std::string& path) {
  if (!StatOf(path).file) return false;
  if (absl::EndsWith(path, ".zip")) return true;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char magic[4] = {};
  const bool pk = std::fread(magic, 1, 4, f) == 4 && magic[0] == 'P' && magic[1] == 'K' &&
                  magic[2] == 3 && magic[3] == 4;
  std::fclose(f);
  return pk;
}

// A candidate: a capture directory on disk, or one inside a zip (`inner`
// is its folder there, "" for the zip's root).
struct Candidate {
  std::string dir;    // on disk
  std::string zip;    // or in this zip
  std::string inner;
  int64_t time_ns = 0;
  std::string Name() const {
    if (zip.empty()) return dir;
    return inner.empty() ? zip : absl::StrCat(zip, "/", inner);
  }
};

// The newest, with a note about the others ("" when there is one).
std::pair<Candidate, std::string> Newest(std::vector<Candidate> all, const std::string& where,
                                         const std::string& how) {
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    return a.time_ns > b.time_ns;
  });
  std::string note;
  if (all.size() > 1) {
    std::vector<std::string> others;
    for (size_t i = 1; i < all.size() && i <= 5; ++i) others.push_back(all[i].Name());
    note = absl::StrCat("the newest of ", all.size(), " captures in ", where, "; ", how,
                        " (others: ", absl::StrJoin(others, ", "), all.size() > 6 ? ", ..." : "",
                        ")");
  }
  return {all.front(), note};
}

// The capture folders of a zip: every "<inner>/args_dump.json" member.
std::vector<Candidate> CapturesInZip(const ZipArchive& zip) {
  std::vector<Candidate> out;
  for (const ZipMember& m : zip.members()) {
    if (m.is_dir()) continue;
    std::string inner;
    if (m.name == kManifest) {
      inner = "";
    } else if (absl::EndsWith(m.name, absl::StrCat("/", kManifest))) {
      inner = m.name.substr(0, m.name.size() - sizeof(kManifest));
    } else {
      continue;
    }
    Candidate c;
    c.zip = zip.path();
    c.inner = inner;
    c.time_ns = m.mtime * 1000000000;
    out.push_back(c);
  }
  return out;
}

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The cache folder, open. The fallback under /tmp is shared with other
// users: it must be ours and a folder (not a link someone left there), or
// it is not used; it is made closed to others.
absl::StatusOr<ConfinedDir> OpenCacheDir() {
  const std::string dir = CaptureCacheDir();
  const std::string tmp_base = absl::StrCat("/tmp/argsdump-", ::getuid());
  if (absl::StartsWith(dir, tmp_base + "/")) {
    if (::mkdir(tmp_base.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot create ", tmp_base, ": ", std::strerror(errno)));
    }
    struct stat st;
    if (::lstat(tmp_base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          tmp_base, " is not a folder of this user (a link, or made by someone else?): not used "
          "as the extraction cache; set XDG_CACHE_HOME"));
    }
    // Ours (and /tmp is sticky: no one else can swap it): closed to others.
    if ((st.st_mode & 0077) != 0 && ::chmod(tmp_base.c_str(), 0700) != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot close ", tmp_base, " to others: ", std::strerror(errno)));
    }
  }
  return ConfinedDir::Open(dir, ConfinedDir::Missing::kCreate);
}

// Extracts the files of capture folder `inner` of `zip` (not its
// subfolders: exports) into the cache, once; returns the folder. The
// cache entry's name is ours (a hash of the zip's path, size and time);
// everything below it comes from the archive and is confined to it.
absl::StatusOr<std::string> Extract(const ZipArchive& zip, const std::string& inner) {
  char real[PATH_MAX];
  const std::string zip_path = ::realpath(zip.path().c_str(), real) != nullptr ? real : zip.path();
  const Stat st = StatOf(zip.path());
  const std::string key = absl::StrCat(
      absl::Hex(Fnv1a(absl::StrCat(zip_path, "|", st.size, "|", st.mtime_ns)), absl::kZeroPad16));
  auto cache = OpenCacheDir();
  if (!cache.ok()) return cache.status();
  auto entry = cache->Subdir(key, ConfinedDir::Missing::kCreate);
  if (!entry.ok()) {
    return absl::Status(entry.status().code(),
                        absl::StrCat(zip.path(), ": extracting: ", entry.status().message()));
  }
  return ExtractZipFolder(zip, inner, *entry);
}

absl::StatusOr<LocatedCapture> FromZip(const std::string& zip_path, const std::string& inner_asked,
                                       const std::string& shown) {
  auto zip = ZipArchive::Open(zip_path);
  if (!zip.ok()) return zip.status();
  std::vector<Candidate> all = CapturesInZip(**zip);
  std::string inner = inner_asked;
  while (!inner.empty() && inner.back() == '/') inner.pop_back();
  LocatedCapture found;
  found.from_zip = true;
  found.zip = zip_path;
  if (!inner.empty()) {
    std::vector<Candidate> match;
    for (const Candidate& c : all) {
      if (c.inner == inner || c.inner == inner + "/args_dump") match.push_back(c);
    }
    if (match.empty()) {
      std::vector<std::string> names;
      for (const Candidate& c : all) names.push_back(c.inner.empty() ? "(the root)" : c.inner);
      return absl::NotFoundError(absl::StrCat(
          zip_path, " holds no capture '", inner, "'",
          names.empty() ? " (it holds no capture at all)"
                        : absl::StrCat("; it holds ", absl::StrJoin(names, ", "))));
    }
    all = match;
  }
  if (all.empty()) {
    return absl::NotFoundError(absl::StrCat(zip_path, " holds no capture (no ", kManifest,
                                            " in it: was the dump on?)"));
  }
  auto [pick, note] = Newest(all, shown, absl::StrCat("name one as ", shown, "/<folder>"));
  auto dir = Extract(**zip, pick.inner);
  if (!dir.ok()) return dir.status();
  found.dir = *dir;
  std::string folder = pick.inner;
  if (folder == "args_dump") folder.clear();
  if (absl::EndsWith(folder, "/args_dump")) folder.resize(folder.size() - 10);
  if (folder.empty()) {
    folder = zip_path.substr(zip_path.find_last_of('/') + 1);
    if (absl::EndsWith(folder, ".zip") && folder.size() > 4) folder.resize(folder.size() - 4);
  }
  found.zip_capture_name = folder.substr(folder.find_last_of('/') + 1);
  found.name = pick.inner.empty() ? shown : absl::StrCat(shown, "/", pick.inner);
  found.note = note;
  return found;
}

// Capture folders one level down: <dir>/<name>/args_dump (or <name> itself).
std::vector<Candidate> CapturesBelow(const std::string& dir) {
  std::vector<Candidate> out;
  for (const std::string& name : Children(dir)) {
    for (const std::string& c : {absl::StrCat(dir, "/", name, "/args_dump"),
                                 absl::StrCat(dir, "/", name)}) {
      const Stat m = StatOf(c + "/" + kManifest);
      if (m.file) {
        out.push_back(Candidate{c, "", "", m.mtime_ns});
        break;
      }
    }
  }
  return out;
}

// Every test.outputs/outputs.zip (or unzipped test.outputs capture) under
// a bazel-testlogs tree.
void TestOutputsUnder(const std::string& dir, int depth, std::vector<Candidate>* out) {
  if (depth > 24) return;
  for (const std::string& name : Children(dir)) {
    const std::string path = absl::StrCat(dir, "/", name);
    const Stat st = StatOf(path);
    if (!st.dir) continue;
    if (name == "test.outputs") {
      const Stat zip = StatOf(path + "/outputs.zip");
      if (zip.file) out->push_back(Candidate{"", path + "/outputs.zip", "", zip.mtime_ns});
      for (const Candidate& c : CapturesBelow(path)) out->push_back(c);
      continue;
    }
    TestOutputsUnder(path, depth + 1, out);
  }
}

std::string ParentOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string CaptureCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') {
    return absl::StrCat(x, "/argsdump/unzipped");
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') {
    return absl::StrCat(h, "/.cache/argsdump/unzipped");
  }
  return absl::StrCat("/tmp/argsdump-", ::getuid(), "/unzipped");
}

absl::StatusOr<LocatedCapture> LocateCapture(const std::string& given) {
  std::string path = given;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const Stat st = StatOf(path);
  if (st.dir) {
    LocatedCapture found;
    found.name = path;
    if (StatOf(path + "/" + kManifest).file) {
      found.dir = path;
      return found;
    }
    if (StatOf(path + "/args_dump/" + kManifest).file) {
      found.dir = path + "/args_dump";
      return found;
    }
    if (StatOf(path + "/outputs.zip").file) {
      return FromZip(path + "/outputs.zip", "", path + "/outputs.zip");
    }
    std::vector<Candidate> below = CapturesBelow(path);
    if (!below.empty()) {
      auto [pick, note] = Newest(below, path, "name one as " + path + "/<folder>");
      found.dir = pick.dir;
      found.name = pick.dir;
      found.note = note;
      return found;
    }
    return absl::NotFoundError(absl::StrCat(
        "no capture in ", path, " (no ", kManifest, " in it, in ", path,
        "/args_dump, in a folder below it, or an outputs.zip)"));
  }
  if (st.file) {
    if (IsZipFile(path)) return FromZip(path, "", path);
    return absl::NotFoundError(absl::StrCat(
        path, " is a file, not a capture (pass its folder, or an outputs.zip)"));
  }
  // A path inside a zip: the longest prefix that is a zip file.
  for (std::string zip = ParentOf(path); !zip.empty() && zip != "/"; zip = ParentOf(zip)) {
    if (IsZipFile(zip)) return FromZip(zip, path.substr(zip.size() + 1), zip);
  }
  return absl::NotFoundError(absl::StrCat(path, "/", kManifest,
                                          ": cannot open: no such capture directory, zip or file"));
}

absl::StatusOr<LocatedCapture> LocateNewestCapture() {
  std::vector<Candidate> all = CapturesBelow("outputs");
  const size_t from_outputs = all.size();
  std::vector<std::string> roots;
  for (const char* testlogs : {"bazel-testlogs", ".bazel/testlogs"}) {
    if (StatOf(testlogs).dir) {
      roots.push_back(testlogs);
      TestOutputsUnder(testlogs, 0, &all);
      break;  // the two are one tree when both exist
    }
  }
  if (all.empty()) {
    return absl::NotFoundError(
        "no outputs/*/args_dump and no test outputs under bazel-testlogs/ in this folder; pass "
        "a capture directory or an outputs.zip, e.g. dump_viewer outputs/<run>/args_dump (or "
        "--server host:port --capture NAME)");
  }
  const bool only_outputs = all.size() == from_outputs;
  auto [pick, others] =
      Newest(all, only_outputs ? "outputs/" : absl::StrCat("outputs/ and ", roots[0], "/"),
             "pass one to pick it");
  LocatedCapture found;
  if (!pick.zip.empty()) {
    auto in_zip = FromZip(pick.zip, "", pick.zip);
    if (!in_zip.ok()) return in_zip.status();
    found = *in_zip;
  } else {
    found.dir = pick.dir;
    found.name = pick.dir;
  }
  found.note = absl::StrCat("the newest under ", only_outputs ? "outputs/" : "outputs/ and " + roots[0] + "/",
                            found.note.empty() ? "" : "; " + found.note);
  (void)others;
  return found;
}

}  // namespace argsdump
