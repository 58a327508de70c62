#include "server/journal.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

void WriteThree(const std::string& path) {
  auto w = JournalWriter::Open(path, false);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Append(JournalEntryType::kCaptureInfo, "info").ok());
  ASSERT_TRUE((*w)->Append(JournalEntryType::kRecord, std::string(1000, 'r')).ok());
  ASSERT_TRUE((*w)->Append(JournalEntryType::kRecord, "").ok());
  EXPECT_EQ((*w)->bytes(), 3 * kJournalHeaderBytes + 4 + 1000);
}

TEST(JournalTest, RoundTrip) {
  const std::string path = TempPath("roundtrip.journal");
  WriteThree(path);
  auto r = JournalReader::Open(path);
  ASSERT_TRUE(r.ok());
  JournalEntryType type;
  std::string payload;
  ASSERT_TRUE((*r)->Next(&type, &payload));
  EXPECT_EQ(type, JournalEntryType::kCaptureInfo);
  EXPECT_EQ(payload, "info");
  ASSERT_TRUE((*r)->Next(&type, &payload));
  EXPECT_EQ(payload, std::string(1000, 'r'));
  ASSERT_TRUE((*r)->Next(&type, &payload));
  EXPECT_EQ(payload, "");
  EXPECT_FALSE((*r)->Next(&type, &payload));
  EXPECT_EQ((*r)->dropped_bytes(), 0u);
}

TEST(JournalTest, AppendReopensAtTheEnd) {
  const std::string path = TempPath("append.journal");
  WriteThree(path);
  auto w = JournalWriter::Open(path, true);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(JournalEntryType::kCounters, "c").ok());
  w->reset();
  auto r = JournalReader::Open(path);
  JournalEntryType type;
  std::string payload;
  int n = 0;
  while ((*r)->Next(&type, &payload)) ++n;
  EXPECT_EQ(n, 4);
  EXPECT_EQ(type, JournalEntryType::kCounters);
}

// A crash mid-append leaves a torn tail: every whole entry is still read, and
// the reader says how many bytes it dropped.
TEST(JournalTest, TornTailIsDroppedAndCounted) {
  const std::string path = TempPath("torn.journal");
  WriteThree(path);
  std::string data = ReadFile(path);
  for (size_t cut : {size_t{1}, size_t{5}, size_t{kJournalHeaderBytes + 3}}) {
    const std::string torn = data + std::string(cut, '\x07');
    WriteFile(path, torn);
    auto r = JournalReader::Open(path);
    JournalEntryType type;
    std::string payload;
    int n = 0;
    while ((*r)->Next(&type, &payload)) ++n;
    EXPECT_EQ(n, 3) << cut;
    EXPECT_EQ((*r)->dropped_bytes(), cut);
    EXPECT_EQ((*r)->good_bytes(), data.size());
  }
}

TEST(JournalTest, CorruptEntryStopsTheReadThere) {
  const std::string path = TempPath("corrupt.journal");
  WriteThree(path);
  std::string data = ReadFile(path);
  const size_t second = kJournalHeaderBytes + 4;
  struct Case {
    size_t at;
    const char* why;
  } cases[] = {
      {second + kJournalHeaderBytes + 10, "checksum"},  // payload byte
      {second + 8, "checksum"},                          // type byte
      {second + 3, "length"},                            // length's high byte
  };
  for (const Case& c : cases) {
    std::string bad = data;
    bad[c.at] = static_cast<char>(bad[c.at] ^ 0x40);
    WriteFile(path, bad);
    auto r = JournalReader::Open(path);
    JournalEntryType type;
    std::string payload;
    ASSERT_TRUE((*r)->Next(&type, &payload));
    EXPECT_FALSE((*r)->Next(&type, &payload));
    EXPECT_EQ((*r)->dropped_bytes(), data.size() - second);
    EXPECT_NE((*r)->reason().find(c.why), std::string::npos) << (*r)->reason();
  }
}

TEST(JournalTest, EmptyAndMissingFiles) {
  const std::string path = TempPath("empty.journal");
  WriteFile(path, "");
  auto r = JournalReader::Open(path);
  ASSERT_TRUE(r.ok());
  JournalEntryType type;
  std::string payload;
  EXPECT_FALSE((*r)->Next(&type, &payload));
  EXPECT_EQ((*r)->dropped_bytes(), 0u);
  EXPECT_EQ(JournalReader::Open(TempPath("nope.journal")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace argsdump
