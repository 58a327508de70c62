#include "format/job.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace argsdump {
namespace {

bool NameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

absl::StatusOr<uint32_t> ParseBounded(absl::string_view text, uint32_t lo, uint32_t hi,
                                      const char* what) {
  if (text.empty() || text.size() > 10 ||
      !std::all_of(text.begin(), text.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", absl::CHexEscape(text.substr(0, 32)),
                     "' is not a decimal number"));
  }
  uint64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", text, " is out of range (", lo, "..", hi, ")"));
  }
  return static_cast<uint32_t>(v);
}

// One place identity may come from: its name and its three variables (an
// empty name: that field has no variable).
struct EnvSource {
  const char* source;
  const char* job;
  const char* rank;
  const char* world_size;
};

constexpr EnvSource kEnvSources[] = {
    {"env", "ARGSDUMP_JOB", "ARGSDUMP_RANK", "ARGSDUMP_WORLD_SIZE"},
    {"launcher:torchrun", "TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE"},
    {"launcher:openmpi", "", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"launcher:pmi", "", "PMI_RANK", "PMI_SIZE"},
    {"launcher:slurm", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS"},
};

const char* Get(const GetEnv& getenv, const char* name) {
  if (name[0] == '\0') return nullptr;
  const char* v = getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

// torchrun sets TORCHELASTIC_RUN_ID to "none" unless given --rdzv-id.
bool LauncherJobIsName(const char* var, const char* value) {
  return !(absl::string_view(var) == "TORCHELASTIC_RUN_ID" && absl::string_view(value) == "none");
}

}  // namespace

absl::Status ValidateJobName(absl::string_view job) {
  if (job.empty()) return absl::InvalidArgumentError("job name is empty");
  if (job.size() > kMaxJobNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("job name is ", job.size(),
                                                   " bytes, more than ", kMaxJobNameBytes));
  }
  if (job == "." || job == "..") {
    return absl::InvalidArgumentError(absl::StrCat("job name '", job, "' is not allowed"));
  }
  for (size_t i = 0; i < job.size(); ++i) {
    if (!NameChar(job[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("job name '", absl::CHexEscape(job.substr(0, 64)), "' has '",
                       absl::CHexEscape(job.substr(i, 1)), "' at byte ", i,
                       ": only [A-Za-z0-9._-] are allowed"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckJobMember(const v1::JobMember& m) {
  if (absl::Status s = ValidateJobName(m.job()); !s.ok()) return s;
  if (m.world_size() > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", m.world_size(), " is more than ", kMaxWorldSize));
  }
  if (m.world_size() > 0 && m.rank() >= m.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", m.rank(), " is not below the world size ",
                                                   m.world_size(), " of job ", m.job()));
  }
  if (m.rank() >= kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", m.rank(), " is not below ", kMaxWorldSize));
  }
  if (m.source().size() > 64 ||
      !std::all_of(m.source().begin(), m.source().end(),
                   [](char c) { return c >= 0x20 && c < 0x7f; })) {
    return absl::InvalidArgumentError("job source is not 0-64 printable ASCII characters");
  }
  return absl::OkStatus();
}

std::string JobCaptureName(absl::string_view job, uint32_t rank) {
  return absl::StrCat(job, ".rank", rank);
}

std::string JobRankFolder(uint32_t rank) { return absl::StrCat("rank", rank); }

std::optional<uint32_t> RankFromFolder(absl::string_view folder) {
  if (!absl::ConsumePrefix(&folder, "rank") || folder.empty() || folder.size() > 5) {
    return std::nullopt;
  }
  if (folder.size() > 1 && folder[0] == '0') return std::nullopt;
  absl::StatusOr<uint32_t> r = ParseRank(folder);
  if (!r.ok()) return std::nullopt;
  return *r;
}

absl::StatusOr<uint32_t> ParseRank(absl::string_view text) {
  return ParseBounded(text, 0, kMaxWorldSize - 1, "rank");
}

absl::StatusOr<uint32_t> ParseWorldSize(absl::string_view text) {
  return ParseBounded(text, 1, kMaxWorldSize, "world size");
}

absl::StatusOr<std::optional<v1::JobMember>> ResolveJob(const std::vector<JobRequest>& given,
                                                       const GetEnv& getenv) {
  std::string job;
  std::optional<uint32_t> rank;
  std::optional<uint32_t> world;
  std::vector<std::string> sources;
  for (const JobRequest& g : given) {
    bool used = false;
    if (job.empty() && !g.job.empty()) job = g.job, used = true;
    if (!rank && g.rank) rank = g.rank, used = true;
    if (!world && g.world_size) world = g.world_size, used = true;
    if (used) sources.push_back(g.source);
  }
  for (const EnvSource& src : kEnvSources) {
    bool used = false;
    const char* j = Get(getenv, src.job);
    if (job.empty() && j != nullptr && LauncherJobIsName(src.job, j)) {
      job = j;
      used = true;
    }
    // A launcher's rank and size count only together (RANK alone is too
    // common a name to mean a launcher); ARGSDUMP_* count one by one.
    const char* r = Get(getenv, src.rank);
    const char* w = Get(getenv, src.world_size);
    const bool own = std::string(src.source) == "env";
    if (!own && (r == nullptr || w == nullptr)) r = w = nullptr;
    if (!rank && r != nullptr) {
      absl::StatusOr<uint32_t> v = ParseRank(r);
      if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(src.rank, ": ", v.status().message()));
      rank = *v;
      used = true;
    }
    if (!world && w != nullptr) {
      absl::StatusOr<uint32_t> v = ParseWorldSize(w);
      if (!v.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(src.world_size, ": ", v.status().message()));
      }
      world = *v;
      used = true;
    }
    if (used) sources.push_back(src.source);
  }
  if (job.empty()) return std::nullopt;
  if (absl::Status s = ValidateJobName(job); !s.ok()) return s;
  if (!rank) {
    if (world && *world > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job ", job, " has ", *world,
          " ranks but no rank was given (--rank, ARGSDUMP_RANK or a launcher's variables)"));
    }
    rank = 0;
  }
  v1::JobMember m;
  m.set_job(job);
  m.set_rank(*rank);
  m.set_world_size(world.value_or(0));
  m.set_source(absl::StrJoin(sources, ","));
  if (absl::Status s = CheckJobMember(m); !s.ok()) return s;
  return m;
}

}  // namespace argsdump
