#include "viewer/zip_archive.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "viewer/test_zip.h"

namespace argsdump {
namespace {

void Put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadMember(const ZipArchive& zip, const ZipMember& m, absl::Status* status) {
  std::string out;
  *status = zip.Read(m, [&](absl::string_view piece) {
    out.append(piece.data(), piece.size());
    return absl::OkStatus();
  });
  return out;
}

using File = TestZipMember;

std::string MakeZip(const std::vector<File>& files, bool zip64_end = false) {
  return MakeTestZip(files, zip64_end);
}

std::string Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// What `zip -qr` (the tool Bazel's test-setup.sh runs) makes of a folder.
TEST(ZipArchiveTest, ReadsWhatZipWrites) {
  const std::string root = TempPath("zip_src");
  ASSERT_EQ(std::system(("rm -rf " + root + " && mkdir -p " + root + "/Case.A/args_dump " +
                         root + "/empty_dir").c_str()),
            0);
  std::string text;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&text, "{\"task_id\": ", i, "},\n");
  const std::string binary = Random(3 << 20, 7);  // incompressible: stored or barely deflated
  Put(root + "/Case.A/args_dump/args_dump.json", text);
  Put(root + "/Case.A/args_dump/args.bin", binary);
  Put(root + "/Case.A/args_dump/empty", "");
  const std::string zip_path = TempPath("outputs.zip");
  ::unlink(zip_path.c_str());
  ASSERT_EQ(std::system(("cd " + root + " && zip -qr " + zip_path + " -- *").c_str()), 0)
      << "needs the zip tool (tools/setup.sh installs it)";
  auto zip = ZipArchive::Open(zip_path);
  ASSERT_TRUE(zip.ok()) << zip.status();
  std::map<std::string, const ZipMember*> by_name;
  for (const ZipMember& m : (*zip)->members()) by_name[m.name] = &m;
  ASSERT_TRUE(by_name.count("Case.A/args_dump/args_dump.json"));
  ASSERT_TRUE(by_name.count("Case.A/args_dump/args.bin"));
  ASSERT_TRUE(by_name.count("Case.A/args_dump/empty"));
  ASSERT_TRUE(by_name.count("empty_dir/"));
  EXPECT_TRUE(by_name["empty_dir/"]->is_dir());
  EXPECT_EQ(by_name["Case.A/args_dump/args_dump.json"]->method, 8);  // deflated
  absl::Status s;
  EXPECT_TRUE(ReadMember(**zip, *by_name["Case.A/args_dump/args_dump.json"], &s) == text);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(ReadMember(**zip, *by_name["Case.A/args_dump/args.bin"], &s) == binary);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(ReadMember(**zip, *by_name["Case.A/args_dump/empty"], &s), "");
  EXPECT_TRUE(s.ok()) << s;
  // The member's time is the file's (DOS time: 2 s steps, local time).
  struct stat st;
  ASSERT_EQ(::stat((root + "/Case.A/args_dump/args.bin").c_str(), &st), 0);
  EXPECT_LE(std::llabs(by_name["Case.A/args_dump/args.bin"]->mtime - st.st_mtime), 2);
}

TEST(ZipArchiveTest, Zip64RecordsAndExtraFields) {
  const std::string a = Random(5000, 1), b(70000, 'z');
  for (bool end64 : {false, true}) {
    auto zip = ZipArchive::FromBytes(
        MakeZip({{"a.bin", a, false, true}, {"dir/b.txt", b, true, true}, {"c", "", false, false}},
                end64),
        "z64.zip");
    ASSERT_TRUE(zip.ok()) << zip.status();
    ASSERT_EQ((*zip)->members().size(), 3u);
    absl::Status s;
    EXPECT_TRUE(ReadMember(**zip, (*zip)->members()[0], &s) == a);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(ReadMember(**zip, (*zip)->members()[1], &s) == b);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ((*zip)->members()[1].size, b.size());
  }
}

void ExpectDataLoss(const absl::Status& s, const std::string& what, const std::string& name) {
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << what << ": " << s;
  EXPECT_NE(s.message().find(name + ": byte "), std::string::npos) << what << ": " << s;
}

TEST(ZipArchiveTest, DamagedArchivesAreDataLossNamingTheByte) {
  const std::string good = MakeZip({{"x/args_dump.json", std::string(3000, 'j'), true},
                                    {"x/args.bin", Random(4000, 3), false}});
  // Every cut: the end record is gone, or points past the end.
  for (size_t n = 0; n < good.size(); ++n) {
    auto zip = ZipArchive::FromBytes(good.substr(0, n), "cut.zip");
    ASSERT_FALSE(zip.ok()) << "prefix " << n;
    ExpectDataLoss(zip.status(), absl::StrCat("prefix ", n), "cut.zip");
  }
  // Every single-byte flip: an error naming the byte at open or at read,
  // or (a byte no check covers, such as a date) the right contents.
  std::mt19937 rng(5);
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    auto zip = ZipArchive::FromBytes(bad, "flip.zip");
    if (!zip.ok()) {
      ExpectDataLoss(zip.status(), absl::StrCat("byte ", at), "flip.zip");
      continue;
    }
    for (const ZipMember& m : (*zip)->members()) {
      absl::Status s;
      const std::string data = ReadMember(**zip, m, &s);
      if (!s.ok()) ExpectDataLoss(s, absl::StrCat("byte ", at, " member ", m.name), "flip.zip");
    }
  }
}

TEST(ZipArchiveTest, HostileArchives) {
  std::string data(100000, 'a');
  // A member that inflates to more than its size says (a zip bomb's trick).
  std::string bomb = MakeZip({{"big", data, true}});
  {
    // Patch the central size field (offset 24 in the central entry) to 10.
    const size_t cd = bomb.rfind(std::string("PK\1\2", 4));
    bomb[cd + 24] = 10;
    bomb[cd + 25] = bomb[cd + 26] = bomb[cd + 27] = 0;
    auto zip = ZipArchive::FromBytes(bomb, "bomb.zip");
    ASSERT_TRUE(zip.ok()) << zip.status();
    absl::Status s;
    ReadMember(**zip, (*zip)->members()[0], &s);
    ExpectDataLoss(s, "bomb", "bomb.zip");
    EXPECT_NE(s.message().find("more than its size"), std::string::npos) << s;
  }
  // Methods other than stored and deflate, and encryption, are refused.
  std::string bz = MakeZip({{"f", "hello"}});
  {
    const size_t cd = bz.rfind(std::string("PK\1\2", 4));
    bz[cd + 10] = 12;  // bzip2
    auto zip = ZipArchive::FromBytes(bz, "bz.zip");
    ASSERT_TRUE(zip.ok());
    absl::Status s;
    ReadMember(**zip, (*zip)->members()[0], &s);
    ExpectDataLoss(s, "bzip2", "bz.zip");
    bz[cd + 10] = 0;
    bz[cd + 8] = 1;  // encrypted
    ExpectDataLoss(ZipArchive::FromBytes(bz, "enc.zip").status(), "encrypted", "enc.zip");
  }
  // A member count far beyond what the directory holds.
  std::string many = MakeZip({{"f", "x"}});
  many[many.size() - 22 + 10] = static_cast<char>(0xFE);
  ExpectDataLoss(ZipArchive::FromBytes(many, "many.zip").status(), "count", "many.zip");
  // Not a zip at all.
  ExpectDataLoss(ZipArchive::FromBytes(std::string(5000, 'x'), "text.zip").status(), "text",
                 "text.zip");
  EXPECT_EQ(ZipArchive::Open(TempPath("no_such.zip")).status().code(),
            absl::StatusCode::kNotFound);
  // A FIFO by a zip's name: refused at once, not waited on for a writer.
  const std::string fifo = TempPath("fifo.zip");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const auto from_fifo = ZipArchive::Open(fifo);
  EXPECT_EQ(from_fifo.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(from_fifo.status().message().find("not a regular file"), std::string::npos);
}

// Random archives made of pieces of a good one never crash the reader
// (ASan/UBSan run this too; viewer:zip_archive_fuzzer explores further).
TEST(ZipArchiveTest, SplicedArchivesFailCleanly) {
  const std::string good = MakeZip({{"a/args_dump.json", std::string(2000, '{'), true, true},
                                    {"a/args.bin", Random(3000, 9), false}},
                                   true);
  std::mt19937 rng(13);
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good;
    const int edits = 1 + rng() % 6;
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bad.size();
      switch (rng() % 3) {
        case 0: bad[at] = static_cast<char>(rng()); break;
        case 1: bad.insert(at, good.substr(rng() % good.size(), rng() % 64)); break;
        default: bad.erase(at, rng() % 64); break;
      }
    }
    auto zip = ZipArchive::FromBytes(bad, "spliced.zip");
    if (!zip.ok()) {
      ExpectDataLoss(zip.status(), absl::StrCat("case ", i), "spliced.zip");
      continue;
    }
    for (const ZipMember& m : (*zip)->members()) {
      absl::Status s;
      ReadMember(**zip, m, &s);
      if (!s.ok()) ExpectDataLoss(s, absl::StrCat("case ", i, " ", m.name), "spliced.zip");
    }
  }
}

}  // namespace
}  // namespace argsdump
