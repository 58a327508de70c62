#include "store/crc32c.h"

#include <cstring>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

TEST(Crc32cTest, KnownValues) {
  // The check value of CRC-32C, and RFC 3720 (iSCSI) B.4 vectors.
  EXPECT_EQ(Crc32c(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(0, "123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0');
  for (int i = 0; i < 32; ++i) up[i] = static_cast<char>(i);
  EXPECT_EQ(Crc32c(0, zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(0, ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(0, up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(0, nullptr, 0), 0u);
}

TEST(Crc32cTest, BothImplementationsAgreeAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::string data(4096 + 16, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n = 0; n < 300; ++n) {
      ASSERT_EQ(Crc32c(0, data.data() + offset, n), Crc32cPortable(0, data.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
    ASSERT_EQ(Crc32c(0, data.data() + offset, 4096), Crc32cPortable(0, data.data() + offset, 4096));
  }
}

TEST(Crc32cTest, ExtendsInPieces) {
  const char* text = "the tensor that caused it is gone";
  const size_t n = std::strlen(text);
  const uint32_t whole = Crc32c(0, text, n);
  for (size_t cut = 0; cut <= n; ++cut) {
    EXPECT_EQ(Crc32c(Crc32c(0, text, cut), text + cut, n - cut), whole) << cut;
    EXPECT_EQ(Crc32cPortable(Crc32cPortable(0, text, cut), text + cut, n - cut), whole) << cut;
  }
}

TEST(Crc32cTest, ReportsWhichImplementationRuns) {
#if defined(__x86_64__)
  EXPECT_EQ(Crc32cIsAccelerated(), static_cast<bool>(__builtin_cpu_supports("sse4.2")));
#else
  EXPECT_FALSE(Crc32cIsAccelerated());
#endif
}

}  // namespace
}  // namespace argsdump
