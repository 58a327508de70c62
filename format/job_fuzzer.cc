// libFuzzer target: a job identity from hostile values. The input is split
// at NUL bytes into the values of the variables ResolveJob reads (in
// kVariables' order); every answer must be an error or an identity that
// passes CheckJobMember, and the folder and capture names it makes must
// parse back.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "format/job.h"
#include "format/names.h"

namespace {

constexpr const char* kVariables[] = {
    "ARGSDUMP_JOB", "ARGSDUMP_RANK", "ARGSDUMP_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "RANK",
    "WORLD_SIZE",   "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
    "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> env;
  const std::string input(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  for (const char* name : kVariables) {
    if (start > input.size()) break;
    const size_t end = std::min(input.find('\0', start), input.size());
    env[name] = input.substr(start, end - start);
    start = end + 1;
  }
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  absl::StatusOr<std::optional<argsdump::v1::JobMember>> job = argsdump::ResolveJob({}, getenv);
  if (job.ok() && job->has_value()) {
    const argsdump::v1::JobMember& m = **job;
    if (!argsdump::CheckJobMember(m).ok()) std::abort();
    if (argsdump::RankFromFolder(argsdump::JobRankFolder(m.rank())) != m.rank()) std::abort();
    if (!argsdump::ValidateCaptureName(argsdump::JobCaptureName(m.job(), m.rank())).ok()) {
      std::abort();
    }
  }
  argsdump::RankFromFolder(input);
  argsdump::ParseWorldSize(input).IgnoreError();
  return 0;
}
