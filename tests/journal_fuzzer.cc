// libFuzzer target: any bytes as a capture's args.journal and args.bin (the
// input is a little-endian u32 length, that many bytes of args.bin, then
// the journal). Reading the journal, reopening the capture live (server
// start) and recovering it (sim_run --recover) must never crash; a
// recovery that wrote files must leave a capture that reads back whole:
// its index opens and its manifest parses with as many entries as it kept,
// each pointing inside args.bin (payload maps placing shared payloads).
//   bazel build --config=fuzz //server:journal_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/stat.h>

#include "store/live_query.h"
#include "store/capture_store.h"
#include "store/journal.h"
#include "tests/fuzz_scratch.h"
#include "viewer/manifest_reader.h"
#include "base/files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const argsdump::TwoParts parts = argsdump::SplitInput(data, size);
  const std::string& bin = parts.first;
  const std::string& journal = parts.second;
  {
    auto reader = argsdump::JournalReader::FromBytes(journal);
    argsdump::JournalEntryType type;
    std::string payload;
    uint64_t entries = 0;
    while (reader->Next(&type, &payload)) ++entries;
    if (reader->good_bytes() > journal.size()) std::abort();
    if (reader->dropped_bytes() > journal.size()) std::abort();
    (void)reader->reason();
  }
  const std::string dir = argsdump::FuzzScratch() + "/args_dump";
  auto write_files = [&] {
    argsdump::EmptyFolder(argsdump::FuzzScratch());
    if (!argsdump::CreateDirectories(dir).ok()) std::abort();
    argsdump::PutFile(dir + "/args.journal", journal.data(), journal.size());
    if (!bin.empty() || (size > 0 && (data[0] & 1))) {
      argsdump::PutFile(dir + "/args.bin", bin.data(), bin.size());
    }
  };
  write_files();
  {
    auto live = argsdump::CaptureStore::Reopen(dir);
    if (live.ok()) {
      (void)(*live)->records();
      // What a live capture's stream counts, shared payloads included, is
      // never less than what args.bin holds.
      if ((*live)->bin_bytes() > (*live)->stream_bytes()) std::abort();
    }
  }
  write_files();
  argsdump::RecoveryReport report;
  const absl::Status s = argsdump::CaptureStore::Recover(dir, &report);
  (void)report.Describe();
  if (report.wrote_files) {
    auto index = argsdump::IndexFile::Open(dir + "/" + argsdump::kIndexName);
    if (!index.ok()) std::abort();  // our own index must open
    auto manifest = argsdump::ManifestReader::Open(dir + "/" + argsdump::kManifestName);
    if (!manifest.ok()) std::abort();
    uint64_t entries = 0;
    if (!(*manifest)->ForEach([&](const argsdump::ManifestEntry&) { return ++entries, true; }).ok()) {
      std::abort();  // our own manifest must parse
    }
    if (entries != (*index)->size() || entries != report.records) std::abort();
    // Every entry kept points inside args.bin (shared payloads included).
    struct stat st;
    const uint64_t bin_size =
        ::stat((dir + "/" + argsdump::kBinName).c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
    for (uint64_t i = 0; i < (*index)->size(); ++i) {
      const argsdump::ManifestRow row = *(*index)->RecordById(i);
      if (row.bin_size > 0 && row.bin_offset + row.bin_size > bin_size) std::abort();
    }
  }
  (void)s;
  argsdump::EmptyFolder(argsdump::FuzzScratch());
  return 0;
}
