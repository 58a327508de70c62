#include "server/http/payload_range.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace argsdump {
namespace {

PayloadRange Refused(int status, std::string why) {
  PayloadRange r;
  r.error_status = status;
  r.error = std::move(why);
  return r;
}

// The one Range of the request, within the payload's `size` bytes.
PayloadRange FromRange(uint64_t size, int64_t first, int64_t last) {
  PayloadRange r;
  r.provided = size;
  if (first < 0) {  // the last `last` bytes
    r.length = std::min<uint64_t>(static_cast<uint64_t>(last), size);
    r.begin = size - r.length;
  } else {
    r.begin = static_cast<uint64_t>(first);
    if (r.begin >= size || (last >= 0 && last < first)) {
      return Refused(416, absl::StrCat("the range starts past the payload's ", size, " bytes"));
    }
    const uint64_t end = last < 0 ? size : std::min<uint64_t>(last + 1, size);
    r.length = end - r.begin;
  }
  if (r.length == 0) return Refused(416, "the range is empty");
  r.serves_range = true;
  return r;
}

}  // namespace

PayloadRange ResolvePayloadRange(uint64_t size, std::optional<uint64_t> offset,
                                 std::optional<uint64_t> length, const ByteRanges& ranges) {
  if ((offset || length) && !ranges.empty()) {
    return Refused(400, "give a Range header or offset=/length=, not both");
  }
  if (offset || length) {
    PayloadRange r;
    r.begin = offset.value_or(0);
    if (r.begin > size) {
      return Refused(400,
                     absl::StrCat("offset=", r.begin, " is past the payload's ", size, " bytes"));
    }
    r.length = std::min(length.value_or(0) == 0 ? size - r.begin : *length, size - r.begin);
    r.provided = r.length;
    return r;
  }
  if (ranges.size() > 1) return Refused(416, "one byte range per request");
  if (ranges.size() == 1) return FromRange(size, ranges[0].first, ranges[0].second);
  PayloadRange whole;
  whole.length = size;
  whole.provided = size;
  return whole;
}

}  // namespace argsdump
