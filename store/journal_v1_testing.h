// Tests only: one entry of the journal format before sync markers
// (version 1: no file header; u32 length, u32 CRC-32C of type and payload,
// u8 type, the payload), which readers must still take.
#ifndef ARGSDUMP_STORE_JOURNAL_V1_TESTING_H_
#define ARGSDUMP_STORE_JOURNAL_V1_TESTING_H_

#include <cstdint>
#include <string>

#include "store/crc32c.h"

namespace argsdump {

inline std::string VersionOneJournalEntry(uint8_t type, const std::string& payload) {
  std::string e(9, '\0');
  const uint32_t length = static_cast<uint32_t>(payload.size());
  const uint32_t crc = Crc32c(Crc32c(0, &type, 1), payload.data(), payload.size());
  for (int i = 0; i < 4; ++i) e[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  for (int i = 0; i < 4; ++i) e[4 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  e[8] = static_cast<char>(type);
  return e + payload;
}

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_JOURNAL_V1_TESTING_H_
