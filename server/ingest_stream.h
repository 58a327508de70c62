// IngestStream: what one Ingest stream has sent, checked before anything is
// kept - the sequence numbers, the payload offsets, every record, the
// payload bytes each record still waits for - and the records whose bytes
// are all here, handed out as AppendJobs for the capture's writer. No gRPC
// and no locking: an IngestSession owns one under its lock.
#ifndef ARGSDUMP_SERVER_INGEST_STREAM_H_
#define ARGSDUMP_SERVER_INGEST_STREAM_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "proto/argsdump/v1/capture.pb.h"
#include "server/capture_hub.h"

namespace argsdump {

class IngestStream {
 public:
  // Payload bytes a stream may hold for records not complete yet.
  static constexpr uint64_t kMaxPendingBytes = 256 << 20;

  // Where the stream goes on from: the capture's durable watermark (an
  // empty one for a new capture).
  void Start(const Watermark& w);

  // A batch, all or nothing: InvalidArgument naming what is wrong (a
  // sequence number or payload offset that does not follow, a bad record,
  // bytes that belong to no record), ResourceExhausted past
  // kMaxPendingBytes, FailedPrecondition after finish.
  absl::Status Batch(v1::IngestBatch* batch);
  // The records (from the oldest) whose payload bytes are all here, as one
  // job; false when there are none.
  bool TakeComplete(AppendJob* job);

  // A finish message: FailedPrecondition when sent twice, InvalidArgument
  // for step levels out of order, a device_crash over its bounds
  // (format/device_crash.h) or records still waiting for payload bytes.
  // `end` gets what amends the capture (labels, step levels, device_crash).
  absl::Status Finish(const v1::IngestFinish& finish, v1::CaptureInfo* end);
  bool finishing() const { return finishing_; }

  uint64_t received_records() const { return received_records_; }
  uint64_t pending_records() const { return pending_records_.size(); }

 private:
  uint64_t received_records_ = 0;  // ids of records received so far
  uint64_t received_bytes_ = 0;    // payload bytes received so far
  uint64_t assigned_bytes_ = 0;    // payload bytes the records received claim
  // Records are checked and encoded as they come (the writer only writes),
  // and the batch's messages keep no record: the transport's next read
  // parses into the same message objects.
  PreparedRecords batch_records_;    // the batch being checked
  PreparedRecords pending_records_;  // waiting for bytes
  // Payload bytes not handed out yet: the messages' payloads as they came
  // (moved, not copied), the first from byte pending_skip_.
  std::deque<std::string> pending_chunks_;
  size_t pending_skip_ = 0;
  uint64_t pending_bytes_ = 0;
  // Buffers back from the writer: each message's payload moved out is
  // replaced by one, for the next message to be parsed into.
  std::shared_ptr<ChunkPool> pool_ = std::make_shared<ChunkPool>();
  bool finishing_ = false;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_INGEST_STREAM_H_
