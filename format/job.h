// A job of many ranks: the rules for a capture's job identity (JobMember)
// and where it comes from when the caller does not give it.
//
// A job is named like a capture (1-64 characters of [A-Za-z0-9._-], not "."
// or ".."), a rank is 0..world_size-1, a world size 1..kMaxWorldSize (0:
// not known). A rank's capture is named <job>.rank<k> unless the user names
// it; locally it is the folder <prefix>/<job>/rank<k>/args_dump.
//
// Identity is resolved field by field, the first source that sets a field
// winning: the caller's (SessionOptions, a command-line flag), then
// ARGSDUMP_JOB / ARGSDUMP_RANK / ARGSDUMP_WORLD_SIZE, then the variables a
// launcher sets for each process it starts:
//   torchrun            RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID (the job)
//   Open MPI (mpirun)   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
//   MPICH, Intel MPI    PMI_RANK, PMI_SIZE
//   Slurm (srun)        SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID (the job)
// in that order (torchrun and MPI run under srun: the inner launcher knows
// the process's rank in the job the user started). A launcher's rank is
// used only when a job name is known too (given, or the launcher's job id):
// ranks without a job name cannot be grouped.
#ifndef ARGSDUMP_FORMAT_JOB_H_
#define ARGSDUMP_FORMAT_JOB_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

inline constexpr uint32_t kMaxWorldSize = 65536;
inline constexpr size_t kMaxJobNameBytes = 64;

// OK, or InvalidArgument saying what is wrong with the name.
absl::Status ValidateJobName(absl::string_view job);
// The whole identity: the name, rank < world_size (when known), world_size
// <= kMaxWorldSize, source at most 64 printable ASCII characters.
absl::Status CheckJobMember(const v1::JobMember& member);

// "<job>.rank<k>": a rank's capture name (a valid capture name for every
// valid job and rank).
std::string JobCaptureName(absl::string_view job, uint32_t rank);
// "rank<k>": a rank's folder under <prefix>/<job>/.
std::string JobRankFolder(uint32_t rank);
// The rank of a folder named rank<k> (decimal, no sign or leading zero but
// "rank0"); nullopt otherwise.
std::optional<uint32_t> RankFromFolder(absl::string_view folder);

// Parses a rank or a world size as the flags and the environment give it:
// decimal digits only, rank < kMaxWorldSize, world size 1..kMaxWorldSize.
absl::StatusOr<uint32_t> ParseRank(absl::string_view text);
absl::StatusOr<uint32_t> ParseWorldSize(absl::string_view text);

// What one of the caller's entries gave (empty / nullopt: not given) and
// its source name ("flag", "options").
struct JobRequest {
  std::string job;
  std::optional<uint32_t> rank;
  std::optional<uint32_t> world_size;
  std::string source;
};

// The identity from `given` (the caller's entries, first wins), then the
// environment (`getenv`: nullptr for an
// unset variable), field by field as above. nullopt: no job (no name from
// anywhere). A job named with no rank from any source is rank 0 of a world
// of unknown size - unless a world size above 1 was given: a rank is needed
// then. InvalidArgument naming the flag or variable whose value is bad,
// the missing rank, or a rank at or past the world size.
using GetEnv = std::function<const char*(const char*)>;
absl::StatusOr<std::optional<v1::JobMember>> ResolveJob(const std::vector<JobRequest>& given,
                                                       const GetEnv& getenv);

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_JOB_H_
