// The exception dump of a record the collector refuses: a record out of
// shared memory that does not convert (an unknown dtype, role, stage or
// kind, impossible geometry, a payload outside the arena) is data
// corruption. Besides being counted (invalid_records) and named in the
// collector's error, each is saved, as the device wrote it, under
//   <root>/exception_dump/refused_<n>_<thread>_<task_id>/
// (n: 1, 2, ... in the order refused, zero-padded to 3 digits; thread: the
// device thread whose buffer held it; task_id as the record says, in hex)
// with
//   record.bin    the record's 128 raw bytes (abi::ArgsDumpRecord)
//   payload.bin   the arena bytes it points to, at most max_payload_bytes
//                 of them, when that range lies inside the arena
//   context.json  why it was refused, where it was (device thread, buffer
//                 sequence, index in the buffer) and every field as a raw
//                 number, so a reader sees which one is garbage
// and an ERROR line names the folder. Bounded so that a flood of corrupt
// records cannot fill the disk: at most max_records folders per run (the
// rest are only counted, said once), each at most 128 + max_payload_bytes
// + a context of a few KiB. A folder that cannot be written is an ERROR and
// ends the dumping for the run; the collection goes on either way.
#ifndef ARGSDUMP_COLLECTOR_REFUSED_RECORD_DUMP_H_
#define ARGSDUMP_COLLECTOR_REFUSED_RECORD_DUMP_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "collector/transport.h"
#include "device/abi.h"

namespace argsdump {

struct RefusedRecordDumpOptions {
  std::string root;              // the folders go in <root>/exception_dump/
  uint32_t max_records = 16;     // folders per run; later refusals are counted only
  uint32_t max_payload_bytes = 4096;  // of a record's payload kept in payload.bin
};

// Where a refused record was found.
struct RefusedRecordPlace {
  uint32_t thread = 0;           // device thread
  uint64_t buffer_sequence = 0;  // its buffer's sequence number
  uint32_t index = 0;            // the record's index in that buffer
};

class RefusedRecordDump {
 public:
  explicit RefusedRecordDump(RefusedRecordDumpOptions options);

  // Saves `record`, refused for `why`; `transport` gives its payload bytes
  // when they lie inside the arena. Any thread.
  void Dump(RegionTransport& transport, const abi::ArgsDumpRecord& record,
            const RefusedRecordPlace& place, const absl::Status& why);

  // The folders written so far, in order.
  std::vector<std::string> folders() const;
  // Records refused past the bound (or after a write failed): not saved.
  uint64_t not_dumped() const;

 private:
  const RefusedRecordDumpOptions options_;
  mutable std::mutex mu_;
  uint32_t taken_ = 0;       // folders begun (the bound)
  bool write_failed_ = false;
  uint64_t not_dumped_ = 0;
  std::vector<std::string> folders_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_REFUSED_RECORD_DUMP_H_
