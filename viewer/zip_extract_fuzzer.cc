// libFuzzer target: any bytes as a zip archive, every folder of it
// extracted (ExtractZipFolder) into <scratch>/root/cache, where a link to
// <scratch>/outside already waits ("escape", as a hostile earlier run or
// another user could leave one). Aborts when anything outside the cache
// folder changed - a file beside it, the folder the link points to - or
// when the cache holds a link or special file the extraction made: the
// extraction may refuse, never write outside its root.
//   bazel build --config=fuzz //viewer:zip_extract_fuzzer   (tools/fuzz.sh)
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "base/confined_path.h"
#include "tests/fuzz_scratch.h"
#include "viewer/zip_archive.h"
#include "viewer/zip_extract.h"

namespace {

// Every path below `dir` (links not followed): mode, size, first bytes.
void List(const std::string& dir, const std::string& rel, std::map<std::string, std::string>* out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name, key = rel + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    // A folder's size changes with its entries: compared by its mode.
    std::string what = std::to_string(st.st_mode);
    if (!S_ISDIR(st.st_mode)) what += " " + std::to_string(st.st_size);
    if (S_ISREG(st.st_mode)) {
      char head[64] = {};
      if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
        what.append(head, std::fread(head, 1, sizeof(head), f));
        std::fclose(f);
      }
    }
    (*out)[key] = what;
    if (S_ISDIR(st.st_mode)) List(path, key, out);
  }
  ::closedir(d);
}

void Die(const std::string& why) {
  std::fprintf(stderr, "zip_extract_fuzzer: %s\n", why.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& scratch = argsdump::FuzzScratch();
  argsdump::EmptyFolder(scratch);
  const std::string cache = scratch + "/root/cache";
  if (std::system(("mkdir -p '" + cache + "' '" + scratch + "/outside'").c_str()) != 0) Die("mkdir");
  argsdump::PutFile(scratch + "/outside/victim", "precious", 8);
  argsdump::PutFile(scratch + "/root/beside", "precious", 8);
  if (::symlink((scratch + "/outside").c_str(), (cache + "/escape").c_str()) != 0) Die("symlink");
  std::map<std::string, std::string> before;
  List(scratch, "", &before);

  auto zip = argsdump::ZipArchive::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.zip");
  if (zip.ok()) {
    auto root = argsdump::ConfinedDir::Open(cache, argsdump::ConfinedDir::Missing::kFail);
    if (!root.ok()) Die(std::string(root.status().message()));
    // Every folder a member is in (and the root), the first 16.
    std::set<std::string> folders = {""};
    for (const argsdump::ZipMember& m : (*zip)->members()) {
      if (folders.size() >= 16) break;
      const size_t slash = m.name.rfind('/');
      folders.insert(slash == std::string::npos ? "" : m.name.substr(0, slash));
    }
    argsdump::ZipExtractLimits limits;
    limits.max_total_bytes = 16 << 20;  // the scratch folder may be in memory
    limits.max_files = 64;
    for (const std::string& inner : folders) {
      argsdump::ExtractZipFolder(**zip, inner, *root, limits).status().IgnoreError();
    }
  }

  std::map<std::string, std::string> after;
  List(scratch, "", &after);
  for (const auto& [path, what] : after) {
    const bool in_cache = path.rfind("/root/cache/", 0) == 0;
    if (in_cache) {
      // Only folders and regular files were made there (and the link put
      // there before).
      const mode_t mode = static_cast<mode_t>(std::stoul(what.substr(0, what.find(' '))));
      if (path != "/root/cache/escape" && !S_ISDIR(mode) && !S_ISREG(mode)) {
        Die("the extraction made " + path + ", neither a file nor a folder");
      }
      continue;
    }
    auto it = before.find(path);
    if (it == before.end()) Die("written outside the cache: " + path);
    if (it->second != what) Die("changed outside the cache: " + path);
  }
  for (const auto& [path, what] : before) {
    if (path.rfind("/root/cache/", 0) != 0 && after.count(path) == 0) {
      Die("removed outside the cache: " + path);
    }
  }
  if (after["/root/cache/escape"] != before["/root/cache/escape"]) Die("the link was replaced");
  return 0;
}
