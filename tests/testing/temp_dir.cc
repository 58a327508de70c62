#include "tests/testing/temp_dir.h"

#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/files.h"

namespace argsdump {
namespace {

[[noreturn]] void Die(const char* what, const std::string& path) {
  std::fprintf(stderr, "test temp dir: %s %s: %s\n", what, path.c_str(), std::strerror(errno));
  std::abort();
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  return ::remove(path) == 0 || errno == ENOENT ? 0 : -1;
}


}  // namespace

std::string TempPath(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return std::string(root != nullptr ? root : "/tmp") + "/" + name;
}

std::string AbsentTempPath(const std::string& name) {
  const std::string path = TempPath(name);
  RemoveTree(path);
  return path;
}

std::string FreshTempDir(const std::string& name) {
  const std::string path = AbsentTempPath(name);
  if (absl::Status s = CreateDirectories(path); !s.ok()) Die(std::string(s.message()).c_str(), path);
  return path;
}

void RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    Die("cannot stat", path);
  }
  // Depth first (a folder after what it holds), links not followed.
  if (::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS) != 0) Die("cannot remove", path);
}

std::string ProcessTempPath(const std::string& name) {
  return TempPath(name + "_" + std::to_string(::getpid()));
}

void RemoveTreeAndSync(const std::string& path) {
  RemoveTree(path);
  ::sync();
}

std::string ReadFileOrEmpty(const std::string& path) {
  return ReadFileToString(path, kUnboundedFileBytes).value_or("");
}

}  // namespace argsdump
