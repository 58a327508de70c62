// libFuzzer target: any bytes as a capture directory's args_dump.json and
// args.bin or args.index (input: one byte choosing the command and the
// file, a little-endian u32 length, that many bytes of that file, then the
// manifest). The reader must
// give entries or DataLoss "<file>: byte N", the same with its store-layout
// scanner as without it (else abort, showing both); dump_viewer, run on the
// folder, must exit 0, 1 or 2 - never abort or crash - whatever offsets and
// sizes the entries claim (it checks them against args.bin first).
//   bazel build --config=fuzz //viewer:manifest_reader_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz_scratch.h"
#include "viewer/manifest_reader.h"
#include "viewer/manifest_transcript.h"
#include "viewer/viewer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const argsdump::TwoParts parts = argsdump::SplitInput(data + 1, size - 1);
  const std::string& bin = parts.first;
  const std::string& manifest = parts.second;
  {
    // The store-layout scanner must change nothing: the same entries,
    // errors (and their bytes) and summary with it and without it, read
    // whole and under filters that drop entries at each of their fields.
    std::vector<argsdump::EntryFilter> filters(5);
    filters[1].args.task_id = 0x100000000ull;
    filters[1].args.role = argsdump::v1::ROLE_OUTPUT;
    filters[2].args.step = 1;
    filters[2].args.func_id = 7;
    filters[2].args.stage = argsdump::v1::STAGE_AFTER_COMPLETION;
    filters[3].args.arg_index = 1;
    filters[3].args.kind = argsdump::v1::KIND_SCALAR;
    filters[3].args.dtype = argsdump::v1::DTYPE_FLOAT32;
    // A kernel name, resolved as the viewer would not (it resolves
    // against the table first): unresolved, it matches nothing either way.
    filters[4].args.func_name = "add";
    // The whole manifest in the buffer, and a small buffer (its size from
    // the input) that ends lines anywhere.
    const size_t small = 1 + (size * 7 + mode) % 300;
    for (size_t i = 0; i < 2 * filters.size(); ++i) {
      const argsdump::EntryFilter& f = filters[i / 2];
      const size_t buffer = i % 2 == 0 ? size_t{1} << 20 : small;
      const std::string with = argsdump::ReadTranscript(manifest, f, true, 20000, buffer);
      const std::string without = argsdump::ReadTranscript(manifest, f, false, 20000, buffer);
      if (with != without) {
        std::fprintf(stderr, "the scanner changes what is read\n--- with it:\n%s\n--- without:\n%s\n",
                     with.c_str(), without.c_str());
        std::abort();
      }
    }
  }
  const std::string root = argsdump::FuzzScratch();
  argsdump::EmptyFolder(root);
  const std::string dir = root + "/args_dump";
  if (::mkdir(dir.c_str(), 0755) != 0) std::abort();
  argsdump::PutFile(dir + "/args_dump.json", manifest.data(), manifest.size());
  // The first part is args.bin, or (bit 6) args.index: a --task or
  // --index query then goes through the index lookup (IndexFile's checks
  // as rows are read, the manifest's entry lines found by their offsets).
  argsdump::PutFile(dir + ((mode & 0x40) ? "/args.index" : "/args.bin"), bin.data(), bin.size());
  const std::string out = root + "/out";
  std::vector<std::vector<std::string>> commands = {
      {dir},
      {dir, "--stats"},
      {dir, "-e", "--out", out},
      {dir, "--npy", "--out", out},
      {dir, "--first-nonfinite"},
      {dir, "--compare", dir},
      {dir, "-t", "0x0000000100000000"},
      {dir, "-i", "3", "--stats"},
      {dir, "--func", "add"},
      {dir, "--func-type", "elementwise", "--stats"},
  };
  std::ostringstream o, err;
  const int rc = argsdump::RunViewer(commands[(mode & 0x3f) % commands.size()], o, err);
  if (rc < 0 || rc > 2) std::abort();
  argsdump::EmptyFolder(root);
  return 0;
}
