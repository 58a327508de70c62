// UTF-8 as proto3 strings and JSON need it: one checked sequence at a time
// (overlong forms, surrogates and code points past U+10FFFF refused).
#ifndef ARGSDUMP_BASE_UTF8_H_
#define ARGSDUMP_BASE_UTF8_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace argsdump {

// The length (1-4) of the valid UTF-8 sequence `text` starts with; 0 when
// it starts with none (or is empty).
inline size_t Utf8SequenceLength(absl::string_view text) {
  if (text.empty()) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  const size_t n = c >= 0xF0 ? (c <= 0xF4 ? 4 : 0) : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || text.size() < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((p[k] & 0xC0) != 0x80) return 0;
  }
  if (n == 3 && ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0))) return 0;
  if (n == 4 && ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90))) return 0;
  return n;
}

inline bool IsValidUtf8(absl::string_view text) {
  while (!text.empty()) {
    const size_t n = Utf8SequenceLength(text);
    if (n == 0) return false;
    text.remove_prefix(n);
  }
  return true;
}

}  // namespace argsdump

#endif  // ARGSDUMP_BASE_UTF8_H_
