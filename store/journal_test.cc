#include "store/journal.h"

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "store/crc32c.h"
#include "store/journal_v1_testing.h"

namespace argsdump {
namespace {

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

void WriteThree(const std::string& path) {
  auto w = JournalWriter::Open(path, false);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Append(JournalEntryType::kCaptureInfo, "info").ok());
  ASSERT_TRUE((*w)->Append(JournalEntryType::kRecord, std::string(1000, 'r')).ok());
  ASSERT_TRUE((*w)->Append(JournalEntryType::kRecord, "").ok());
  EXPECT_EQ((*w)->bytes(), kJournalFileHeaderBytes + 3 * kJournalHeaderBytes + 4 + 1000);
}

// Every entry's payload, in order.
std::vector<std::string> ReadAll(JournalReader& r) {
  std::vector<std::string> out;
  JournalEntryType type;
  std::string payload;
  while (r.Next(&type, &payload)) out.push_back(payload);
  return out;
}

// Version 3 (a capture whose payloads are placed by maps): the same
// entries, read and appended to as version 2.
TEST(JournalTest, VersionThreeReadsAndAppends) {
  const std::string path = TempPath("v3.journal");
  {
    auto w = JournalWriter::Open(path, false, kJournalVersionWithMaps);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(JournalEntryType::kCaptureInfo, "info").ok());
    ASSERT_TRUE((*w)->Append(JournalEntryType::kPayloadMap, "map").ok());
  }
  {
    auto w = JournalWriter::Open(path, true);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Append(JournalEntryType::kRecord, "r").ok());
  }
  auto r = JournalReader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->version(), 3);
  std::vector<JournalEntryType> types;
  JournalEntryType type;
  std::string payload;
  while ((*r)->Next(&type, &payload)) types.push_back(type);
  EXPECT_EQ(types, (std::vector<JournalEntryType>{JournalEntryType::kCaptureInfo,
                                                  JournalEntryType::kPayloadMap,
                                                  JournalEntryType::kRecord}));
  EXPECT_EQ((*r)->dropped_bytes(), 0u);
  // A version byte damaged to one no reader knows: the header counts as
  // damaged and the entries are read all the same (the store's replay
  // then places payloads by the maps it finds: CaptureStore writes one
  // right after the header); appending to it is refused.
  std::string bytes = ReadFileOrEmpty(path);
  bytes[4] = 4;
  const std::string v4 = TempPath("v4.journal");
  std::ofstream(v4, std::ios::binary) << bytes;
  auto damaged = JournalReader::Open(v4);
  ASSERT_TRUE(damaged.ok());
  int read = 0;
  while ((*damaged)->Next(&type, &payload)) ++read;
  EXPECT_EQ(read, 3);
  EXPECT_NE((*damaged)->reason().find("damaged file header"), std::string::npos)
      << (*damaged)->reason();
  EXPECT_FALSE(JournalWriter::Open(v4, true).ok());
}

TEST(JournalTest, RoundTrip) {
  const std::string path = TempPath("roundtrip.journal");
  WriteThree(path);
  auto r = JournalReader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->version(), 2);
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
  EXPECT_TRUE((*r)->damage().empty());
  EXPECT_EQ((*r)->reason(), "");
}

TEST(JournalTest, AppendReopensAtTheEnd) {
  const std::string path = TempPath("append.journal");
  WriteThree(path);
  auto w = JournalWriter::Open(path, true);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(JournalEntryType::kCounters, "c").ok());
  w->reset();
  auto r = JournalReader::Open(path);
  EXPECT_EQ(ReadAll(**r).size(), 4u);
  // Not a journal of this version: refused for appending.
  WriteFile(path, "something else entirely");
  EXPECT_EQ(JournalWriter::Open(path, true).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A crash mid-append leaves a torn tail: every whole entry is still read, and
// the reader says how many bytes it dropped and that it was the tail.
TEST(JournalTest, TornTailIsDroppedAndCounted) {
  const std::string path = TempPath("torn.journal");
  WriteThree(path);
  const std::string data = ReadFileOrEmpty(path);
  // A fourth entry written only in part.
  auto w = JournalWriter::Open(path, true);
  ASSERT_TRUE((*w)->Append(JournalEntryType::kRecord, std::string(50, 'z')).ok());
  w->reset();
  const std::string four = ReadFileOrEmpty(path);
  for (size_t cut : {size_t{1}, size_t{5}, size_t{kJournalHeaderBytes + 3},
                     four.size() - data.size() - 1}) {
    WriteFile(path, four.substr(0, data.size() + cut));
    auto r = JournalReader::Open(path);
    EXPECT_EQ(ReadAll(**r).size(), 3u) << cut;
    EXPECT_EQ((*r)->dropped_bytes(), cut);
    EXPECT_EQ((*r)->good_bytes(), data.size());
    ASSERT_EQ((*r)->damage().size(), 1u);
    EXPECT_TRUE((*r)->damage()[0].tail);
  }
}

// Damage in the middle costs the damaged entry only: the reader finds the
// next sync marker and goes on, and says where and how much it skipped.
TEST(JournalTest, DamageInTheMiddleIsSkippedAndTheRestIsKept) {
  const std::string path = TempPath("middle.journal");
  {
    auto w = JournalWriter::Open(path, false);
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE((*w)->Append(JournalEntryType::kRecord, std::string(100 + i, 'a' + i)).ok());
    }
  }
  const std::string data = ReadFileOrEmpty(path);
  // Entry i starts at 8 + sum of the earlier entries' sizes.
  std::vector<size_t> starts;
  size_t at = kJournalFileHeaderBytes;
  for (int i = 0; i < 10; ++i) {
    starts.push_back(at);
    at += kJournalHeaderBytes + 100 + i;
  }
  struct Case {
    size_t at;
    const char* why;
  } cases[] = {
      {starts[4] + kJournalHeaderBytes + 10, "checksum mismatch"},  // a payload byte
      {starts[4] + 12, "checksum mismatch"},                         // the type byte
      {starts[4] + 7, "entry length out of range"},                  // the length's high byte
      {starts[4] + 4, "checksum mismatch"},  // the length's low byte (the CRC covers it)
      {starts[4], "no sync marker"},
  };
  for (const Case& c : cases) {
    std::string bad = data;
    bad[c.at] = static_cast<char>(bad[c.at] ^ 0x40);
    auto r = JournalReader::FromBytes(bad);
    const std::vector<std::string> got = ReadAll(*r);
    ASSERT_EQ(got.size(), 9u) << c.why << ": " << r->reason();
    for (int i = 0, k = 0; i < 10; ++i) {
      if (i == 4) continue;
      EXPECT_EQ(got[k++], std::string(100 + i, 'a' + i));
    }
    ASSERT_EQ(r->damage().size(), 1u) << r->reason();
    EXPECT_EQ(r->damage()[0].offset, starts[4]);
    EXPECT_EQ(r->damage()[0].bytes, starts[5] - starts[4]) << r->reason();
    EXPECT_FALSE(r->damage()[0].tail);
    EXPECT_NE(r->reason().find(c.why), std::string::npos) << r->reason();
    EXPECT_EQ(r->good_bytes(), data.size());
  }
  // Two damaged regions, and garbage spliced in between entries.
  std::string bad = data;
  bad[starts[2] + 20] ^= 1;
  bad[starts[7] + 20] ^= 1;
  bad.insert(starts[5], "AJNL garbage that is not an entry");
  auto r = JournalReader::FromBytes(bad);
  EXPECT_EQ(ReadAll(*r).size(), 8u);
  EXPECT_EQ(r->damage().size(), 3u) << r->reason();
}

// The format before sync markers (version 1: no file header; u32 length,
// u32 CRC-32C of type and payload, u8 type): still read to its first
// damaged entry, which ends it, and the reason says why.
// Only an end cut short is a torn tail (an append never acknowledged). A
// whole last entry with a flipped byte was acknowledged: its loss is damage
// that counts, in both versions. A damaged file header costs nothing.
TEST(JournalTest, OnlyACutEndIsATornTail) {
  const std::string path = TempPath("tails.journal");
  WriteThree(path);
  const std::string good = ReadFileOrEmpty(path);
  const uint64_t last = good.size() - kJournalHeaderBytes;  // the empty last entry
  struct Case {
    std::string what, bytes;
    size_t entries;
    bool tail;
  };
  std::string flipped_last = good;
  flipped_last[last + 9] ^= 0x01;  // its checksum
  std::string flipped_type = good;
  flipped_type[last + 12] = 0x7f;
  std::string flipped_header = good;
  flipped_header[1] ^= 0x40;
  std::string wrong_version = good;
  wrong_version[4] = 9;
  const std::vector<Case> cases = {
      {"cut in the last entry's header", good.substr(0, last + 5), 2, true},
      {"cut in the middle entry's payload", good.substr(0, good.size() - 600), 1, true},
      {"the last entry's checksum flipped", flipped_last, 2, false},
      {"the last entry's type unknown", flipped_type, 2, false},
      {"the file header damaged", flipped_header, 3, false},
      {"the version damaged", wrong_version, 3, false},
  };
  for (const Case& c : cases) {
    auto r = JournalReader::FromBytes(c.bytes);
    EXPECT_EQ(ReadAll(*r).size(), c.entries) << c.what;
    ASSERT_EQ(r->damage().size(), 1u) << c.what << ": " << r->reason();
    EXPECT_EQ(r->damage()[0].tail, c.tail) << c.what << ": " << r->reason();
  }
  // Version 1: a checksum flipped mid-file is not a tail either.
  const auto v1 = VersionOneJournalEntry;
  std::string old = v1(1, "info") + v1(2, std::string(300, 'r')) + v1(2, "s");
  old[9 + 4 + 9 + 100] ^= 0x01;
  auto r = JournalReader::FromBytes(old);
  EXPECT_EQ(ReadAll(*r).size(), 1u);
  ASSERT_EQ(r->damage().size(), 1u);
  EXPECT_FALSE(r->damage()[0].tail) << r->reason();
}

// A file of sync markers and nothing else (hostile or damaged) reads as one
// damaged region, without a checksum over the rest per marker.
TEST(JournalTest, AFileOfMarkersReadsAsDamage) {
  std::string markers;
  for (int i = 0; i < (1 << 20); ++i) markers += "AJNL";
  auto r = JournalReader::FromBytes(std::string("ADJ2\x02\0\0\0", 8) + markers);
  EXPECT_TRUE(ReadAll(*r).empty());
  ASSERT_EQ(r->damage().size(), 1u);
  EXPECT_EQ(r->damage()[0].bytes, markers.size());
}

TEST(JournalTest, VersionOneJournalsStillRead) {
  const auto v1 = VersionOneJournalEntry;
  const std::string old = v1(1, "info") + v1(2, std::string(300, 'r')) + v1(2, "s") + v1(3, "c");
  auto r = JournalReader::FromBytes(old);
  EXPECT_EQ(r->version(), 1);
  EXPECT_EQ(ReadAll(*r), (std::vector<std::string>{"info", std::string(300, 'r'), "s", "c"}));
  EXPECT_EQ(r->dropped_bytes(), 0u);
  std::string bad = old;
  bad[13 + 9 + 50] ^= 1;
  auto d = JournalReader::FromBytes(bad);
  EXPECT_EQ(ReadAll(*d).size(), 1u);
  EXPECT_EQ(d->dropped_bytes(), old.size() - 13);
  EXPECT_NE(d->reason().find("checksum mismatch (a version 1 journal"), std::string::npos)
      << d->reason();
}

// Random damage: never a crash, never an entry that was not written, and
// every entry outside the damaged bytes is kept (ASan/UBSan run this too;
// server:journal_fuzzer explores further).
TEST(JournalTest, RandomDamageKeepsEveryUntouchedEntry) {
  std::string data;
  std::vector<std::pair<size_t, std::string>> entries;  // start, payload
  {
    const std::string path = TempPath("random.journal");
    auto w = JournalWriter::Open(path, false);
    std::mt19937 rng(1);
    size_t at = kJournalFileHeaderBytes;
    for (int i = 0; i < 60; ++i) {
      std::string p(rng() % 300, '\0');
      for (char& c : p) c = static_cast<char>(rng());
      // Payloads that hold the sync marker must not fool the reader.
      if (i % 7 == 0) p += "AJNL" + std::string(9, '\0');
      ASSERT_TRUE((*w)->Append(JournalEntryType::kRecord, p).ok());
      entries.emplace_back(at, p);
      at += kJournalHeaderBytes + p.size();
    }
    w->reset();
    data = ReadFileOrEmpty(path);
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bad = data;
    std::vector<size_t> hit;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 5); ++k) {
      const size_t at = kJournalFileHeaderBytes + rng() % (bad.size() - kJournalFileHeaderBytes);
      bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
      hit.push_back(at);
    }
    auto r = JournalReader::FromBytes(bad);
    const std::vector<std::string> got = ReadAll(*r);
    std::vector<std::string> untouched;
    for (size_t e = 0; e < entries.size(); ++e) {
      const size_t begin = entries[e].first;
      const size_t end = begin + kJournalHeaderBytes + entries[e].second.size();
      bool touched = false;
      for (size_t h : hit) touched = touched || (h >= begin && h < end);
      if (!touched) untouched.push_back(entries[e].second);
    }
    // Every entry read was written, and every untouched one is read.
    size_t k = 0;
    for (const std::string& g : got) {
      while (k < entries.size() && entries[k].second != g) ++k;
      ASSERT_LT(k, entries.size()) << "an entry that was never written, trial " << trial;
    }
    size_t u = 0;
    for (const std::string& g : got) {
      if (u < untouched.size() && g == untouched[u]) ++u;
    }
    EXPECT_EQ(u, untouched.size()) << "trial " << trial << ": " << r->reason();
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
  auto header_only = JournalReader::FromBytes(std::string("ADJ2\x02\x00\x00\x00", 8));
  EXPECT_FALSE(header_only->Next(&type, &payload));
  EXPECT_EQ(header_only->dropped_bytes(), 0u);
  auto future = JournalReader::FromBytes(std::string("ADJ2\x09\x00\x00\x00", 8) + "whatever");
  EXPECT_FALSE(future->Next(&type, &payload));
  EXPECT_NE(future->reason().find("unknown journal version"), std::string::npos);
}

}  // namespace
}  // namespace argsdump
