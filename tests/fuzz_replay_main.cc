// A main for libFuzzer targets in plain (gcc) builds: feeds every file of
// the folders and files on the command line to LLVMFuzzerTestOneInput, so
// the seeds (and any crash a fuzzing run saved) run in every test pass,
// under ASan and UBSan too. tools/fuzz.sh does the fuzzing itself.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "base/files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& path, int* runs) {
  const std::string s = argsdump::ReadFileToString(path, argsdump::kUnboundedFileBytes).value_or("");
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  ++*runs;
}

void Walk(const std::string& path, int* runs) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz replay: no such file or folder %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) return Run(path, runs);
  DIR* d = ::opendir(path.c_str());
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") Walk(path + "/" + name, runs);
  }
  ::closedir(d);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 0;
  // Inputs no corpus should be without.
  for (const std::string& s : {std::string(), std::string("PK\3\4"), std::string(22, '\0'),
                               std::string("PK\5\6") + std::string(18, '\xff')}) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    ++runs;
  }
  for (int i = 1; i < argc; ++i) Walk(argv[i], &runs);
  std::printf("fuzz replay: %d inputs, no crash\n", runs);
  return 0;
}
