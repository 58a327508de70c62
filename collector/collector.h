// The host collector: drains the device's dump region while kernels run and
// hands (record, payload) pairs, in args.bin order, to a sink.
//
// Threads (all started by Start, joined by Stop):
//   drain threads      pop ready queues (device thread t belongs to drain
//                      thread t % drains), hand buffers to collector shards,
//                      and return emptied buffers to the free queues
//   collector shards   turn each 128-byte record and its arena bytes into an
//                      argsdump.v1.ArgRecord + payload (validating everything
//                      that comes out of shared memory)
//   payload writer     one thread: writes pairs to the sink in the order the
//                      narrow writer lock assigned their bin_offset
//   replenish thread   owns backpressure release: acknowledges each device
//                      thread's durable payloads back to that thread
// Lifecycle: Initialize -> Start -> (device runs) -> Stop -> Reconcile ->
// Export -> Finalize; then Initialize again for another run.
#ifndef ARGSDUMP_COLLECTOR_COLLECTOR_H_
#define ARGSDUMP_COLLECTOR_COLLECTOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/arena.h"
#include "collector/sink.h"
#include "collector/transport.h"
#include "device/recorder.h"
#include "device/region.h"
#include "proto/argsdump/v1/record.pb.h"
#include "store/capture_store.h"

namespace argsdump {

class RefusedRecordDump;

struct CollectorOptions {
  Platform platform = Platform::kA2a3Sim;
  uint32_t drain_threads = 1;
  uint32_t collector_shards = 2;
  // Set: every record the collector refuses is also saved there (its raw
  // bytes and context, bounded: refused_record_dump.h). Not owned.
  RefusedRecordDump* refused_records = nullptr;
  // Every captured payload is looked at for a NaN or an Inf (the record's
  // nonfinite flag, what ArgFilter.has_nonfinite selects without stats).
  // Off only to measure what it costs (pipeline_benchmark).
  bool flag_nonfinite = true;
};

struct CollectorStats {
  uint64_t buffers = 0;
  uint64_t records = 0;
  uint64_t payload_bytes = 0;
  uint64_t overwritten = 0;
  uint64_t recovered_records = 0;  // from buffers the device never flushed
  uint64_t invalid_records = 0;    // rejected: garbage from shared memory
  // Of records, made by the host from a dead device's memory (flagged
  // in-flight snapshot): RecordSnapshots.
  uint64_t snapshot_records = 0;
};

// A task that was running when the device died, and its scheduler thread.
struct SnapshotTask {
  uint32_t thread = 0;
  const DumpTask* task = nullptr;  // views into memory the host can read
};

// Converts one device record (from device thread `thread`) to the proto,
// validating enums and geometry. InvalidArgument names what is wrong.
absl::Status ConvertRecordInto(const abi::ArgsDumpRecord& r, uint32_t thread,
                               v1::ArgRecord* out);
absl::StatusOr<v1::ArgRecord> ConvertRecord(const abi::ArgsDumpRecord& r, uint32_t thread);

// The stats dump mode's numbers for a record's payload (record.stats), and
// its nonfinite flag from them.
void AddPayloadStats(v1::ArgRecord& record, absl::string_view payload);
// The record's nonfinite flag: whether the elements `payload` holds (all of
// them, or a truncated payload's first ones) include a NaN or an Inf.
void FlagNonFinite(v1::ArgRecord& record, absl::string_view payload);

class Collector {
 public:
  explicit Collector(CollectorOptions options) : options_(options) {}
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Allocates the dump region the device will record into.
  absl::StatusOr<const DumpRegion*> Initialize(const DumpRegionConfig& config);
  // Starts draining into `sink` (not owned; must outlive Export).
  absl::Status Start(CaptureSink* sink);
  // The device finished: drains what is left and joins every thread.
  // Returns the first error met while collecting.
  absl::Status Stop();
  // Recovers buffers the device filled but never flushed (a hang or a crash)
  // and reads the device's loss counters.
  absl::Status Reconcile();
  // After Reconcile, when the device process died: the after-completion
  // records (flagged in-flight snapshot) of tasks it was running, made on
  // the host from the shared device memory by the recorder's own rules at
  // the region's level, and written to the sink after everything collected.
  absl::Status RecordSnapshots(const std::vector<SnapshotTask>& tasks);
  // Finishes the capture: the sink writes its manifest.
  absl::Status Export();
  // Frees the region; Initialize may be called again.
  void Finalize();

  // After Stop (the threads are joined); while it runs: stats_snapshot.
  const CollectorStats& stats() const { return stats_; }
  // The counters so far, from any thread at any time (a progress line).
  CollectorStats stats_snapshot() const;
  const v1::CaptureCounters& losses() const { return losses_; }

 private:
  struct Ticket {
    uint32_t thread;
    uint32_t buffer;
  };
  struct Pair {
    v1::ArgRecord* record = nullptr;  // on its buffer's arena; null: acks only
    // Arena bytes (on the host: the region or its shadow), valid until this
    // pair's acks are given back.
    absl::string_view payload;
    uint32_t thread = 0;
    uint32_t acks = 0;  // payload records this pair settles for the device
  };
  // A drain thread's hand-back queue; the drain sleeps on the region's
  // doorbell, which a shard rings after handing a buffer back.
  struct DrainState {
    std::mutex mu;
    std::deque<Ticket> done;  // buffers the shards finished with
    uint64_t outstanding = 0; // tickets handed out, not yet done
  };
  struct ShardState {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Ticket> tickets;
  };

  void DrainLoop(uint32_t index);
  void ShardLoop(uint32_t index);
  void WriterLoop();
  void ReplenishLoop();
  // Converts a buffer into pairs (payload copied out of the arena).
  // One buffer's pairs; their records live on the buffer's arena (one
  // allocation block per buffer instead of several per record).
  struct Collected {
    std::unique_ptr<google::protobuf::Arena> arena;
    std::vector<Pair> pairs;
    // For a sink that TakesPrepared: the pairs' records prepared (once
    // their bin offsets are assigned); `ready` once that is done (under
    // writer_mu_). Null `prepared` with `ready`: the records go as
    // messages (a sink that takes those, or a record the preparation
    // refused, which the sink then refuses in its own words).
    std::unique_ptr<PreparedRecords> prepared;
    bool ready = true;
  };
  Collected CollectBuffer(RegionTransport& transport, uint32_t thread, uint32_t buffer);
  // Gives the pairs' payloads the next args.bin offsets; writer_mu_ held.
  void AssignBinOffsets(Collected* collected);
  // Assigns bin offsets in order under the narrow lock and queues the
  // pairs; prepares them (Prepare) on the calling thread, outside the lock.
  void SubmitPairs(Collected collected);
  // Fills collected->prepared for a sink that TakesPrepared.
  void Prepare(Collected* collected);
  void WriteBatch(std::deque<Collected>& batch);
  // After Stop (the writer thread is gone): one buffer's pairs, written on
  // this thread through the same path.
  void WriteNow(Collected collected);
  void NoteError(const absl::Status& status);
  void AddStats(const CollectorStats& delta);

  const CollectorOptions options_;
  std::unique_ptr<DumpRegion> region_;
  std::unique_ptr<RegionTransport> transport_;
  CaptureSink* sink_ = nullptr;

  std::vector<std::unique_ptr<DrainState>> drains_;
  std::vector<std::unique_ptr<ShardState>> shards_;
  std::vector<uint64_t> next_sequence_;  // per device thread, its drain's
  std::atomic<bool> drain_stop_{false};
  std::atomic<bool> shard_stop_{false};

  std::mutex writer_mu_;  // the narrow lock: bin offsets + queue order
  std::condition_variable writer_cv_;
  std::deque<Collected> writer_queue_;  // one entry per buffer
  // Written PreparedRecords, cleared, for the shards to fill again (their
  // capacity kept: no allocation per buffer, nor a free on another thread).
  std::vector<std::unique_ptr<PreparedRecords>> prepared_pool_;
  uint64_t next_bin_offset_ = 0;
  bool writer_stop_ = false;

  std::mutex ack_mu_;
  std::condition_variable ack_cv_;
  std::vector<uint64_t> durable_;  // payload records written, per device thread
  std::vector<uint64_t> acked_;    // replenish thread only
  bool replenish_stop_ = false;

  std::vector<std::thread> shard_threads_;
  std::vector<std::thread> drain_threads_;
  std::thread writer_;
  std::thread replenish_;

  mutable std::mutex stats_mu_;  // guards stats_ and error_
  CollectorStats stats_;
  absl::Status error_;
  v1::CaptureCounters losses_;
  bool started_ = false;
};

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_COLLECTOR_H_
