// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// journal entries. Uses the SSE4.2 crc32 instruction when the CPU has it
// (checked once at run time) and a table otherwise; both give the same value.
#ifndef ARGSDUMP_STORE_CRC32C_H_
#define ARGSDUMP_STORE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace argsdump {

// Extends `crc` (the value returned for the bytes before) with `n` bytes.
// Start with 0: Crc32c(0, "123456789", 9) == 0xE3069283.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// The table implementation, for tests comparing the two.
uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t n);
// Whether Crc32c uses the CPU instruction here.
bool Crc32cIsAccelerated();

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_CRC32C_H_
