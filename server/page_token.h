// Page tokens of the capture service: what a client sends back untouched
// to get the next page. Strict: a token is exactly what the server wrote,
// and a message about a bad one shows at most 40 printable characters of it
// (an 8 KB token echoed whole broke gRPC's metadata limit).
//   QueryArgs     "p<position>"  a finished capture's manifest position
//                 "l<position>"  a live capture's (arrival order, or the
//                                task's rows) - meaningless once it is sealed
//   ListCaptures  "n<capture>"   (the last name of the page; ListJobs: the
//                                last job's)
//   QueryJob      "q<step>.<task_id>.<rank>.<stage>.<arg_index>.<role>.<record_id>"
//                                the page's last arg, in the job's order
#ifndef ARGSDUMP_SERVER_PAGE_TOKEN_H_
#define ARGSDUMP_SERVER_PAGE_TOKEN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"

namespace argsdump {

struct PagePosition {
  uint64_t position = 0;
  // Which order the position is in; unset for "" (the start, any order).
  std::optional<bool> live;
};
std::string PositionToken(uint64_t position, bool live);
// "" is position 0; InvalidArgument "page_token '...' is not one of ours".
absl::StatusOr<PagePosition> ParsePositionToken(const std::string& token);

std::string NameToken(const std::string& capture);
// "" is "from the start" (""); the name otherwise, or InvalidArgument.
absl::StatusOr<std::string> ParseNameToken(const std::string& token);

// Where an arg of a job is in QueryJob's order: (step, task_id, rank, stage,
// arg_index, role), then its record id in its capture.
struct JobArgKey {
  uint32_t step = 0;
  uint64_t task_id = 0;
  uint32_t rank = 0;
  uint32_t stage = 0;
  uint32_t arg_index = 0;
  uint32_t role = 0;
  uint64_t record_id = 0;
  auto Tie() const {
    return std::make_tuple(step, task_id, rank, stage, arg_index, role, record_id);
  }
  bool operator<(const JobArgKey& o) const { return Tie() < o.Tie(); }
};
std::string JobArgToken(const JobArgKey& key);
// "" is the start (nullopt); the key otherwise, or InvalidArgument.
absl::StatusOr<std::optional<JobArgKey>> ParseJobArgToken(const std::string& token);

// A token as messages show it: quoted, at most 40 characters, anything not
// printable ASCII as '?', and its length when cut.
std::string ShownToken(const std::string& token);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_PAGE_TOKEN_H_
