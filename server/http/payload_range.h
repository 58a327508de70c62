// Which bytes of a payload GET .../args/ID/payload answers with: all of
// them, the one Range of the request (206), or ?offset=&length=. Pure: the
// payload handler applies the answer to httplib's request and response.
#ifndef ARGSDUMP_SERVER_HTTP_PAYLOAD_RANGE_H_
#define ARGSDUMP_SERVER_HTTP_PAYLOAD_RANGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace argsdump {

// A Range header's byte ranges as httplib parses them: {first, last}, -1
// for a side not given ("bytes=-N" is {-1, N}, "bytes=N-" is {N, -1}).
using ByteRanges = std::vector<std::pair<int64_t, int64_t>>;

struct PayloadRange {
  // Bytes [begin, begin + length) of the payload are sent.
  uint64_t begin = 0;
  uint64_t length = 0;
  // What the content provider covers: the whole payload when the one
  // Range is served (httplib cuts it by the range and answers 206), else
  // `length`.
  uint64_t provided = 0;
  // The request's one Range is served: it becomes {begin, begin+length-1}.
  bool serves_range = false;
  // Non-zero: refused with this HTTP status (400, or 416 with
  // "Content-Range: bytes */size") and message; the range is not served.
  int error_status = 0;
  std::string error;
};

// `size`: the payload's bytes; `offset` / `length`: the query's (length 0
// or absent: to the end); `ranges`: the request's Range header.
PayloadRange ResolvePayloadRange(uint64_t size, std::optional<uint64_t> offset,
                                 std::optional<uint64_t> length, const ByteRanges& ranges);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_PAYLOAD_RANGE_H_
