// libFuzzer target: any bytes as a capture directory's args_dump.json and
// args.bin (input: one byte choosing the command, a little-endian u32
// length, that many bytes of args.bin, then the manifest). The reader must
// give entries or DataLoss "<file>: byte N"; dump_viewer, run on the
// folder, must exit 0, 1 or 2 - never abort or crash - whatever offsets and
// sizes the entries claim (it checks them against args.bin first).
//   bazel build --config=fuzz //viewer:manifest_reader_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz_scratch.h"
#include "viewer/manifest_reader.h"
#include "viewer/viewer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const argsdump::TwoParts parts = argsdump::SplitInput(data + 1, size - 1);
  const std::string& bin = parts.first;
  const std::string& manifest = parts.second;
  {
    auto reader = argsdump::ManifestReader::FromBytes(manifest, "fuzz.json");
    uint64_t entries = 0;
    (void)reader->ForEach([&](const argsdump::ManifestEntry&) { return ++entries < 100000; });
    argsdump::EntryFilter f;
    f.args.task_id = 0x100000000ull;
    f.args.role = argsdump::v1::ROLE_OUTPUT;
    reader = argsdump::ManifestReader::FromBytes(manifest, "fuzz.json");
    reader->set_filter(f);
    argsdump::ManifestEntry e;
    for (int i = 0; i < 1000; ++i) {
      auto more = reader->Next(&e);
      if (!more.ok() || !*more) break;
    }
  }
  const std::string root = argsdump::FuzzScratch();
  argsdump::EmptyFolder(root);
  const std::string dir = root + "/args_dump";
  if (::mkdir(dir.c_str(), 0755) != 0) std::abort();
  argsdump::PutFile(dir + "/args_dump.json", manifest.data(), manifest.size());
  if (mode & 0x80) argsdump::PutFile(dir + "/args.bin", bin.data(), bin.size());
  const std::string out = root + "/out";
  std::vector<std::vector<std::string>> commands = {
      {dir},
      {dir, "--stats"},
      {dir, "-e", "--out", out},
      {dir, "--npy", "--out", out},
      {dir, "--first-nonfinite"},
      {dir, "--compare", dir},
  };
  std::ostringstream o, err;
  const int rc = argsdump::RunViewer(commands[(mode & 0x7f) % commands.size()], o, err);
  if (rc < 0 || rc > 2) std::abort();
  argsdump::EmptyFolder(root);
  return 0;
}
