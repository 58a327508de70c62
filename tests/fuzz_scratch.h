// Files for fuzz targets whose parser reads from disk: one scratch folder
// per process (in TEST_TMPDIR, else /dev/shm, else /tmp), emptied between
// inputs.
#ifndef ARGSDUMP_TESTS_FUZZ_SCRATCH_H_
#define ARGSDUMP_TESTS_FUZZ_SCRATCH_H_

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace argsdump {

inline const std::string& FuzzScratch() {
  static const std::string* dir = [] {
    const char* base = std::getenv("TEST_TMPDIR");
    struct stat st;
    std::string root = base != nullptr                   ? base
                       : ::stat("/dev/shm", &st) == 0 ? "/dev/shm"
                                                        : "/tmp";
    std::string tmpl = root + "/argsdump_fuzz_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    return new std::string(tmpl);
  }();
  return *dir;
}

// Removes everything below `dir` (not `dir` itself).
inline void EmptyFolder(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      EmptyFolder(path);
      ::rmdir(path.c_str());
    } else {
      ::unlink(path.c_str());
    }
  }
  ::closedir(d);
}

inline void PutFile(const std::string& path, const char* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(data, static_cast<std::streamsize>(size));
}

// Splits fuzz input: a little-endian u32 length, that many bytes, the rest.
struct TwoParts {
  std::string first, second;
};
inline TwoParts SplitInput(const uint8_t* data, size_t size) {
  TwoParts p;
  uint32_t n = 0;
  if (size >= 4) std::memcpy(&n, data, 4);
  const size_t at = size >= 4 ? 4 : size;
  const size_t first = std::min<size_t>(n, size - at);
  p.first.assign(reinterpret_cast<const char*>(data) + at, first);
  p.second.assign(reinterpret_cast<const char*>(data) + at + first, size - at - first);
  return p;
}

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_FUZZ_SCRATCH_H_
