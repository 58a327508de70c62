// libFuzzer target: any bytes as what an Ingest client sends - a sequence
// of IngestRequest messages (the wire format of `repeated IngestRequest
// requests = 1`). They go through IngestStream's checks exactly as the
// service does, the jobs they produce into a real CaptureStore, an open
// resumes from the store's durable watermark, and a finish seals it. No
// crash; and whatever was accepted and sealed reads back: the index opens
// and the manifest parses with one entry per record stored.
//   bazel build --config=fuzz //server:ingest_stream_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "proto/argsdump/v1/capture.pb.h"
#include "server/capture_index.h"
#include "server/capture_store.h"
#include "server/ingest_stream.h"
#include "tests/fuzz_scratch.h"
#include "viewer/manifest_reader.h"

namespace {

std::vector<argsdump::v1::IngestRequest> Requests(const uint8_t* data, size_t size) {
  std::vector<argsdump::v1::IngestRequest> out;
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  while (out.size() < 64) {
    const uint32_t tag = in.ReadTag();
    if (tag != ((1 << 3) | 2)) break;
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) break;
    const auto limit = in.PushLimit(static_cast<int>(length));
    argsdump::v1::IngestRequest r;
    if (!r.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) break;
    in.PopLimit(limit);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<argsdump::v1::IngestRequest> requests = Requests(data, size);
  const std::string dir = argsdump::FuzzScratch() + "/args_dump";
  argsdump::EmptyFolder(argsdump::FuzzScratch());
  argsdump::v1::CaptureInfo info;
  info.set_name("fuzz");
  info.set_level(argsdump::v1::DUMP_LEVEL_FULL);
  info.set_platform("a2a3sim");
  std::unique_ptr<argsdump::CaptureStore> store;
  argsdump::IngestStream stream;
  bool finished = false;
  for (argsdump::v1::IngestRequest& r : requests) {
    if (finished) break;
    if (r.has_open()) {
      // A (re)open: the stream goes on from what is durable.
      if (store == nullptr) {
        const int level = r.open().level();
        if (level >= 1 && level <= 3) info.set_level(static_cast<argsdump::v1::DumpLevel>(level));
        auto created = argsdump::CaptureStore::Create(dir, info);
        if (!created.ok()) std::abort();
        store = std::move(created).value();
      }
      stream = argsdump::IngestStream();
      stream.Start({store->records(), store->bin_bytes()});
    } else if (store == nullptr) {
      continue;  // the service refuses anything before open
    } else if (r.has_batch()) {
      if (!stream.Batch(r.mutable_batch()).ok()) continue;
      argsdump::AppendJob job;
      while (stream.TakeComplete(&job)) {
        std::vector<const argsdump::v1::ArgRecord*> records;
        for (const auto& rec : job.records) records.push_back(&rec);
        auto payloads = job.Payloads();  // as the capture's writer cuts them
        if (!payloads.ok()) std::abort();  // a job's bytes are its records'
        if (job.first_record != store->records()) break;
        // What IngestStream let through, the store takes (it checks again).
        if (!store->AppendBatch(records, *payloads).ok()) std::abort();
      }
    } else if (r.has_finish()) {
      argsdump::v1::CaptureInfo end;
      if (!stream.Finish(r.finish(), &end).ok()) continue;
      if (!store->Amend(end).ok()) std::abort();
      if (!store->Finish(r.finish().device_counters()).ok()) std::abort();
      finished = true;
    }
  }
  if (finished && store->created()) {
    auto index = argsdump::IndexFile::Open(dir + "/" + argsdump::kIndexName);
    if (!index.ok()) std::abort();
    auto manifest = argsdump::ManifestReader::Open(dir + "/" + argsdump::kManifestName);
    if (!manifest.ok()) std::abort();
    uint64_t entries = 0;
    if (!(*manifest)->ForEach([&](const argsdump::ManifestEntry&) { return ++entries, true; }).ok()) {
      std::abort();
    }
    if (entries != store->records() || (*index)->size() != entries) std::abort();
  }
  store.reset();
  argsdump::EmptyFolder(argsdump::FuzzScratch());
  return 0;
}
