#include "collector/collector.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "format/element_stats.h"
#include "format/manifest_fields.h"
#include "format/names.h"
#include "base/thread.h"
#include "collector/abi_convert.h"
#include "collector/refused_record_dump.h"
#include "store/capture_store.h"

namespace argsdump {
namespace {

// Names the calling thread (shown by top -H, perf, gdb); at most 15 chars.
void NameThread(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace

absl::StatusOr<v1::ArgRecord> ConvertRecord(const abi::ArgsDumpRecord& r, uint32_t thread) {
  v1::ArgRecord out;
  if (absl::Status s = ConvertRecordInto(r, thread, &out); !s.ok()) return s;
  return out;
}

namespace {

// What the device gives for each simple field of a record
// (format/manifest_fields.h), `numel` being the shape's product: its value,
// or nullopt for a field set later (nonfinite from the payload, overwritten
// by the transport, bin_offset by the store). A simple field without its
// line here does not build.
template <ManifestField F, FieldStyle S>
std::optional<typename FieldType<S>::type> SimpleFromDevice(const abi::ArgsDumpRecord& r,
                                                            uint64_t numel) = delete;
#define ARGSDUMP_FROM_DEVICE(id, style, value)                                         \
  template <>                                                                          \
  std::optional<FieldType<FieldStyle::style>::type>                                    \
  SimpleFromDevice<ManifestField::k##id, FieldStyle::style>(const abi::ArgsDumpRecord& r, \
                                                            uint64_t numel) {          \
    (void)r;                                                                           \
    (void)numel;                                                                       \
    return value;                                                                      \
  }
ARGSDUMP_FROM_DEVICE(ArgIndex, kUint32, r.arg_index)
ARGSDUMP_FROM_DEVICE(StartOffset, kUint64, r.start_offset)
ARGSDUMP_FROM_DEVICE(IsContiguous, kBool, r.is_contiguous != 0)
ARGSDUMP_FROM_DEVICE(Numel, kUint64, numel)
ARGSDUMP_FROM_DEVICE(ArgIndexAmbiguous, kTrueFlag, (r.flags & abi::kFlagArgIndexAmbiguous) != 0)
ARGSDUMP_FROM_DEVICE(InFlightSnapshot, kTrueFlag, (r.flags & abi::kFlagInFlightSnapshot) != 0)
ARGSDUMP_FROM_DEVICE(Overflow, kTrueFlag, (r.flags & abi::kFlagOverflow) != 0)
ARGSDUMP_FROM_DEVICE(Nonfinite, kTrueFlag, std::nullopt)
ARGSDUMP_FROM_DEVICE(Truncated, kBool, r.truncated != 0)
ARGSDUMP_FROM_DEVICE(Overwritten, kBool, std::nullopt)
ARGSDUMP_FROM_DEVICE(BinOffset, kUint64, std::nullopt)
ARGSDUMP_FROM_DEVICE(BinSize, kUint64, r.payload_size)
ARGSDUMP_FROM_DEVICE(DispatchNs, kNonZero, std::nullopt)  // SetTaskTimes
ARGSDUMP_FROM_DEVICE(CompleteNs, kNonZero, std::nullopt)
#undef ARGSDUMP_FROM_DEVICE

// The task's times (abi::kTimeDispatch), as ns after the capture's time base;
// 0 in the proto is "not known", so a dispatch read at the base itself is
// kept as 1 ns after it. Both fit: 2^56 + 2^40 < 2^64.
void SetTaskTimes(const abi::ArgsDumpRecord& r, v1::ArgRecord* out) {
  if ((r.time_flags & abi::kTimeDispatch) == 0) return;
  const uint64_t dispatch = std::max<uint64_t>(1, abi::DispatchNs(r));
  out->set_dispatch_ns(dispatch);
  if ((r.time_flags & abi::kTimeComplete) != 0) {
    out->set_complete_ns(dispatch + abi::DurationNs(r));
  }
}

}  // namespace

absl::Status ConvertRecordInto(const abi::ArgsDumpRecord& r, uint32_t thread,
                               v1::ArgRecord* out_record) {
  v1::ArgRecord& out = *out_record;
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "record of task ", TaskIdHex(r.task_id), " arg ", r.arg_index, " from device thread ",
        thread, ": ", what));
  };
  if (!IsValidDataType(r.dtype)) return bad(absl::StrCat("unknown dtype ", r.dtype));
  if (r.role > static_cast<uint8_t>(abi::ArgRole::kInOut)) return bad("unknown role");
  if (r.stage > static_cast<uint8_t>(abi::Stage::kAfterCompletion)) return bad("unknown stage");
  if (r.kind > static_cast<uint8_t>(abi::ArgKind::kScalar)) return bad("unknown kind");
  if (r.ndims > abi::kMaxDims) return bad(absl::StrCat("ndims ", r.ndims, " > 5"));
  if (r.func_count > abi::kMaxFuncIds) return bad("func_count > 3");
  const bool scalar = r.kind == static_cast<uint8_t>(abi::ArgKind::kScalar);
  if (scalar && r.payload_size != 0) return bad("a scalar with payload");
  unsigned __int128 product = 1;
  for (uint32_t d = 0; d < r.ndims; ++d) product *= r.shapes[d];
  if (product > (uint64_t{1} << 48)) return bad("shape product overflows");
  const uint64_t numel = static_cast<uint64_t>(product);
  const auto dtype = static_cast<DataType>(r.dtype);
  if (!scalar && r.logical_bytes != PayloadBytes(dtype, numel)) {
    return bad(absl::StrCat("logical_bytes ", r.logical_bytes, " is not numel x element size"));
  }
  if (r.payload_size > r.logical_bytes && !scalar) return bad("payload larger than the view");
  if ((r.truncated != 0) != (r.payload_size != 0 && r.payload_size < r.logical_bytes)) {
    return bad("truncated flag does not match the payload size");
  }
  out.set_task_id(r.task_id);
  for (uint32_t i = 0; i < r.func_count; ++i) {
    if (r.func_ids[i] != abi::kUnknownFuncId) out.add_func_ids(r.func_ids[i]);
  }
  out.set_role(ToProtoRole(static_cast<abi::ArgRole>(r.role)));
  out.set_stage(ToProtoStage(static_cast<abi::Stage>(r.stage)));
  out.set_kind(scalar ? v1::KIND_SCALAR : v1::KIND_TENSOR);
  out.set_dtype(ToProtoDType(dtype));
  for (uint32_t d = 0; d < r.ndims; ++d) {
    out.add_shape(r.shapes[d]);
    out.add_strides(r.strides[d]);
  }
  out.set_scalar_bits(r.scalar_value);
  out.set_logical_bytes(r.logical_bytes);
  out.set_step(r.step);
  SetTaskTimes(r, &out);
  out.set_device_thread(thread);
#define ARGSDUMP_SET_FROM_DEVICE(id, style, member)                                        \
  if (auto v = SimpleFromDevice<ManifestField::k##id, FieldStyle::style>(r, numel); v) { \
    out.set_##member(*v);                                                               \
  }
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_SET_FROM_DEVICE)
#undef ARGSDUMP_SET_FROM_DEVICE
  return absl::OkStatus();
}

namespace {

// The elements of `record` that `payload` holds.
uint64_t PresentElements(const v1::ArgRecord& record, DataType dtype, absl::string_view payload) {
  return std::min<uint64_t>(record.numel(),
                            payload.size() * 8 / std::max<uint32_t>(1, ElementBits(dtype)));
}

}  // namespace

void FlagNonFinite(v1::ArgRecord& record, absl::string_view payload) {
  const auto dtype = FromProtoDType(record.dtype());
  if (!dtype || record.kind() != v1::KIND_TENSOR) return;
  record.set_nonfinite(HasNonFinite(*dtype, reinterpret_cast<const uint8_t*>(payload.data()),
                                    PresentElements(record, *dtype, payload)));
}

void AddPayloadStats(v1::ArgRecord& record, absl::string_view payload) {
  const auto dtype = FromProtoDType(record.dtype());
  if (!dtype) return;
  const ElementStats s = ComputeElementStats(
      *dtype, reinterpret_cast<const uint8_t*>(payload.data()), PresentElements(record, *dtype, payload));
  record.set_nonfinite(s.has_nonfinite());
  v1::TensorStats* out = record.mutable_stats();
  out->set_count(s.count);
  out->set_min(s.min);
  out->set_max(s.max);
  out->set_mean(s.mean());
  out->set_l2(s.l2());
  out->set_nan(s.nan);
  out->set_pos_inf(s.pos_inf);
  out->set_neg_inf(s.neg_inf);
  out->set_zeros(s.zeros);
}

Collector::~Collector() {
  if (started_) Stop().IgnoreError();
}

absl::StatusOr<const DumpRegion*> Collector::Initialize(const DumpRegionConfig& config) {
  if (region_ != nullptr) return absl::FailedPreconditionError("collector: already initialized");
  if (options_.drain_threads == 0 || options_.collector_shards == 0) {
    return absl::InvalidArgumentError("collector: needs at least one drain thread and one shard");
  }
  auto region = DumpRegion::Create(config);
  if (!region.ok()) return region.status();
  auto transport = MakeTransport(options_.platform, **region);
  if (!transport.ok()) return transport.status();
  region_ = std::move(region).value();
  transport_ = std::move(transport).value();
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_ = CollectorStats();
    error_ = absl::OkStatus();
  }
  losses_ = v1::CaptureCounters();
  return region_.get();
}

absl::Status Collector::Start(CaptureSink* sink) {
  if (region_ == nullptr) return absl::FailedPreconditionError("collector: not initialized");
  if (started_) return absl::FailedPreconditionError("collector: already started");
  sink_ = sink;
  const uint32_t n = region_->num_threads();
  next_sequence_.assign(n, 0);
  durable_.assign(n, 0);
  acked_.assign(n, 0);
  drains_.clear();
  shards_.clear();
  for (uint32_t i = 0; i < options_.drain_threads; ++i) drains_.push_back(std::make_unique<DrainState>());
  for (uint32_t i = 0; i < options_.collector_shards; ++i) shards_.push_back(std::make_unique<ShardState>());
  drain_stop_ = false;
  shard_stop_ = false;
  writer_stop_ = false;
  replenish_stop_ = false;
  next_bin_offset_ = 0;
  started_ = true;
  // Each thread as a status: a refused one (ulimit -v, a thread limit)
  // stops the ones already started and is the answer.
  absl::Status st = StartThread("the collector's writer thread", &writer_, [this] {
    NameThread("ad-writer");
    WriterLoop();
  });
  if (st.ok()) {
    st = StartThread("the collector's replenish thread", &replenish_, [this] {
      NameThread("ad-replenish");
      ReplenishLoop();
    });
  }
  for (uint32_t i = 0; st.ok() && i < options_.collector_shards; ++i) {
    shard_threads_.emplace_back();
    st = StartThread("a collector shard thread", &shard_threads_.back(), [this, i] {
      NameThread(absl::StrCat("ad-shard-", i));
      ShardLoop(i);
    });
  }
  for (uint32_t i = 0; st.ok() && i < options_.drain_threads; ++i) {
    drain_threads_.emplace_back();
    st = StartThread("a collector drain thread", &drain_threads_.back(), [this, i] {
      NameThread(absl::StrCat("ad-drain-", i));
      DrainLoop(i);
    });
  }
  if (!st.ok()) {
    Stop().IgnoreError();
    return st;
  }
  return absl::OkStatus();
}

void Collector::NoteError(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (error_.ok()) error_ = status;
}

CollectorStats Collector::stats_snapshot() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Collector::AddStats(const CollectorStats& d) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.buffers += d.buffers;
  stats_.records += d.records;
  stats_.payload_bytes += d.payload_bytes;
  stats_.overwritten += d.overwritten;
  stats_.recovered_records += d.recovered_records;
  stats_.invalid_records += d.invalid_records;
  stats_.snapshot_records += d.snapshot_records;
}

void Collector::DrainLoop(uint32_t index) {
  DrainState& me = *drains_[index];
  const uint32_t n = region_->num_threads();
  // Passes in a row that found nothing: a few are polled (yielding the
  // core), then the drain sleeps on the doorbell. Polling alone (a wake
  // every 10-50 us) cost 74 % of all CPU with 64 runs on 2 cores.
  constexpr int kPollRounds = 8;
  constexpr std::chrono::microseconds kDoorbellBound{20000};
  int idle_rounds = 0;
  for (;;) {
    // Read before the pass: a stop seen here means the device had finished
    // before this pass looked at its queues.
    const bool stopping = drain_stop_.load();
    bool progressed = false;
    std::deque<Ticket> done;
    {
      std::lock_guard<std::mutex> lock(me.mu);
      done.swap(me.done);
      me.outstanding -= done.size();
    }
    for (const Ticket& t : done) transport_->ReturnBuffer(t.thread, t.buffer);
    progressed = !done.empty();
    for (uint32_t t = index; t < n; t += options_.drain_threads) {
      for (;;) {
        uint32_t buffer = 0;
        auto popped = transport_->PopReady(t, &buffer);
        if (!popped.ok()) {
          NoteError(popped.status());
          break;
        }
        if (!*popped) break;
        progressed = true;
        const uint64_t seq = transport_->BufferSequence(t, buffer);
        if (seq != next_sequence_[t]) {
          NoteError(absl::DataLossError(absl::StrCat(
              "device thread ", t, " published buffer sequence ", seq, ", expected ",
              next_sequence_[t])));
        }
        next_sequence_[t] = seq + 1;
        {
          std::lock_guard<std::mutex> lock(me.mu);
          ++me.outstanding;
        }
        ShardState& shard = *shards_[t % shards_.size()];
        {
          std::lock_guard<std::mutex> lock(shard.mu);
          shard.tickets.push_back(Ticket{t, buffer});
        }
        shard.cv.notify_one();
      }
    }
    if (progressed) {
      idle_rounds = 0;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(me.mu);
      if (stopping && me.done.empty() && me.outstanding == 0) return;
    }
    // Nothing to do: look again a few times at once (a busy device publishes
    // within microseconds), then sleep on the region's doorbell, which the
    // device rings when it publishes and the shards when they hand a buffer
    // back; the bound only backs that up.
    if (++idle_rounds <= kPollRounds) {
      std::this_thread::yield();
      continue;
    }
    region_->WaitHostDoorbell(
        [&] {
          if (drain_stop_.load()) return true;
          for (uint32_t t = index; t < n; t += options_.drain_threads) {
            if (region_->ready_queue(t).HasItem()) return true;
          }
          std::lock_guard<std::mutex> lock(me.mu);
          return !me.done.empty();
        },
        kDoorbellBound);
  }
}

Collector::Collected Collector::CollectBuffer(RegionTransport& transport, uint32_t thread,
                                              uint32_t buffer) {
  const BufferRecords b = transport.ReadBuffer(thread, buffer);
  Collected out;
  google::protobuf::ArenaOptions options;
  options.start_block_size = 256 * uint64_t{b.count} + 256;
  out.arena = std::make_unique<google::protobuf::Arena>(options);
  out.pairs.reserve(b.count + 1);
  CollectorStats delta;
  delta.buffers = 1;
  uint32_t pending_acks = 0;  // payload records that produced no pair
  for (uint32_t i = 0; i < b.count; ++i) {
    const abi::ArgsDumpRecord& r = b.records[i];
    const uint32_t acks = r.payload_size > 0 ? 1 : 0;
    v1::ArgRecord* record = google::protobuf::Arena::CreateMessage<v1::ArgRecord>(out.arena.get());
    absl::Status status = ConvertRecordInto(r, thread, record);
    Pair pair;
    pair.thread = thread;
    if (status.ok() && r.payload_size > 0) {
      bool overwritten = false;
      auto view = transport.PayloadView(thread, r, &overwritten);
      if (!view.ok()) {
        status = view.status();
      } else {
        pair.payload = *view;
        record->set_overwritten(overwritten);
        delta.overwritten += overwritten;
        delta.payload_bytes += r.payload_size;
        if ((r.flags & abi::kFlagStats) != 0 && !overwritten) {
          AddPayloadStats(*record, pair.payload);  // the nonfinite flag too
          if ((r.flags & abi::kFlagStatsOnly) != 0 && !record->overflow()) {
            // Stats only: the numbers are kept, the bytes are not.
            pair.payload = absl::string_view();
            record->set_bin_size(0);
            record->set_truncated(false);
            delta.payload_bytes -= r.payload_size;
          }
        } else if (options_.flag_nonfinite && !overwritten) {
          FlagNonFinite(*record, pair.payload);
        }
      }
    }
    if (!status.ok()) {
      NoteError(status);
      if (options_.refused_records != nullptr) {
        options_.refused_records->Dump(transport, r, RefusedRecordPlace{thread, b.sequence, i},
                                       status);
      }
      ++delta.invalid_records;
      pending_acks += acks;
      continue;
    }
    pair.record = record;
    pair.acks = acks + pending_acks;
    pending_acks = 0;
    ++delta.records;
    out.pairs.push_back(pair);
  }
  if (pending_acks > 0) {
    Pair settle;
    settle.thread = thread;
    settle.acks = pending_acks;
    out.pairs.push_back(settle);
  }
  AddStats(delta);
  return out;
}

void Collector::AssignBinOffsets(Collected* collected) {
  for (Pair& p : collected->pairs) {
    if (p.record != nullptr && p.record->bin_size() > 0) {
      p.record->set_bin_offset(next_bin_offset_);
      next_bin_offset_ += p.record->bin_size();
    }
  }
}

void Collector::Prepare(Collected* collected) {
  std::unique_ptr<PreparedRecords> prepared;
  {
    std::lock_guard<std::mutex> lock(writer_mu_);
    if (!prepared_pool_.empty()) {
      prepared = std::move(prepared_pool_.back());
      prepared_pool_.pop_back();
    }
  }
  if (prepared == nullptr) prepared = std::make_unique<PreparedRecords>();
  prepared->Reserve(collected->pairs.size(),
                    collected->pairs.size() * PreparedRecords::kRecordEntryGuess);
  for (const Pair& p : collected->pairs) {
    if (p.record != nullptr && !prepared->Add(*p.record).ok()) {
      return;  // as messages: the sink says what it refuses
    }
  }
  collected->prepared = std::move(prepared);
}

void Collector::SubmitPairs(Collected collected) {
  const bool prepare = sink_->TakesPrepared();
  Collected* queued = nullptr;
  {
    std::lock_guard<std::mutex> lock(writer_mu_);
    AssignBinOffsets(&collected);
    collected.ready = !prepare;
    writer_queue_.push_back(std::move(collected));
    queued = &writer_queue_.back();  // stays put: the writer takes ready entries only
  }
  if (prepare) {
    Prepare(queued);
    std::lock_guard<std::mutex> lock(writer_mu_);
    queued->ready = true;
  }
  writer_cv_.notify_one();
}

void Collector::ShardLoop(uint32_t index) {
  ShardState& me = *shards_[index];
  for (;;) {
    Ticket ticket;
    {
      std::unique_lock<std::mutex> lock(me.mu);
      me.cv.wait(lock, [&] { return shard_stop_.load() || !me.tickets.empty(); });
      if (me.tickets.empty()) return;  // stopping, nothing left
      ticket = me.tickets.front();
      me.tickets.pop_front();
    }
    SubmitPairs(CollectBuffer(*transport_, ticket.thread, ticket.buffer));
    // Records and payload are copied out: the buffer can go back.
    DrainState& drain = *drains_[ticket.thread % drains_.size()];
    {
      std::lock_guard<std::mutex> lock(drain.mu);
      drain.done.push_back(ticket);
    }
    region_->RingHostDoorbell();
  }
}

void Collector::WriteNow(Collected collected) {
  std::deque<Collected> batch;
  {
    std::lock_guard<std::mutex> lock(writer_mu_);
    AssignBinOffsets(&collected);
  }
  if (sink_->TakesPrepared()) Prepare(&collected);
  batch.push_back(std::move(collected));
  WriteBatch(batch);
}

void Collector::WriterLoop() {
  for (;;) {
    std::deque<Collected> batch;
    {
      // Buffers are written in the order their bin offsets were given:
      // the ready ones at the front (a shard may still prepare the next).
      std::unique_lock<std::mutex> lock(writer_mu_);
      writer_cv_.wait(lock, [&] {
        return (writer_stop_ && writer_queue_.empty()) ||
               (!writer_queue_.empty() && writer_queue_.front().ready);
      });
      if (writer_queue_.empty()) return;
      while (!writer_queue_.empty() && writer_queue_.front().ready) {
        batch.push_back(std::move(writer_queue_.front()));
        writer_queue_.pop_front();
      }
    }
    WriteBatch(batch);
  }
}

void Collector::WriteBatch(std::deque<Collected>& batch) {
  std::vector<const v1::ArgRecord*> records;
  std::vector<absl::string_view> payloads;
  // Acknowledge even a failed write: the bytes are lost either way, and
  // the device must not wait for them forever.
  auto write_messages = [&] {
    if (records.empty()) return;
    if (absl::Status s = sink_->WriteBatch(records, payloads); !s.ok()) NoteError(s);
    records.clear();
    payloads.clear();
  };
  for (const Collected& c : batch) {
    if (c.prepared != nullptr) write_messages();  // what came before, in order
    for (const Pair& p : c.pairs) {
      if (p.record == nullptr) continue;
      if (c.prepared == nullptr) records.push_back(p.record);
      payloads.push_back(p.payload);
    }
    if (c.prepared != nullptr) {
      if (!c.prepared->empty()) {
        if (absl::Status s = sink_->WritePrepared(*c.prepared, payloads); !s.ok()) NoteError(s);
      }
      payloads.clear();
    }
  }
  write_messages();
  // Their prepared records back to the pool, a bounded few.
  constexpr size_t kPooled = 32;
  {
    std::lock_guard<std::mutex> lock(writer_mu_);
    for (Collected& c : batch) {
      if (c.prepared == nullptr || prepared_pool_.size() >= kPooled) continue;
      c.prepared->Clear();
      prepared_pool_.push_back(std::move(c.prepared));
    }
  }
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(ack_mu_);
    for (const Collected& c : batch) {
      for (const Pair& p : c.pairs) {
        durable_[p.thread] += p.acks;
        any = any || p.acks > 0;
      }
    }
  }
  if (any) ack_cv_.notify_one();
}

void Collector::ReplenishLoop() {
  std::unique_lock<std::mutex> lock(ack_mu_);
  for (;;) {
    for (size_t t = 0; t < durable_.size(); ++t) {
      const uint64_t delta = durable_[t] - acked_[t];
      if (delta == 0) continue;
      acked_[t] = durable_[t];
      transport_->AckPayloads(static_cast<uint32_t>(t), delta);
    }
    if (replenish_stop_) return;
    ack_cv_.wait(lock, [&] {
      if (replenish_stop_) return true;
      for (size_t t = 0; t < durable_.size(); ++t) {
        if (durable_[t] != acked_[t]) return true;
      }
      return false;
    });
  }
}

absl::Status Collector::Stop() {
  if (!started_) return absl::FailedPreconditionError("collector: not started");
  started_ = false;
  drain_stop_ = true;
  region_->RingHostDoorbell();
  // Drain threads end last among the producers: they wait for the shards to
  // hand back every buffer they gave out.
  for (std::thread& t : drain_threads_) {
    if (t.joinable()) t.join();
  }
  drain_threads_.clear();
  shard_stop_ = true;
  for (auto& s : shards_) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->cv.notify_all();
  }
  for (std::thread& t : shard_threads_) {
    if (t.joinable()) t.join();
  }
  shard_threads_.clear();
  {
    std::lock_guard<std::mutex> lock(writer_mu_);
    writer_stop_ = true;
  }
  writer_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  {
    std::lock_guard<std::mutex> lock(ack_mu_);
    replenish_stop_ = true;
  }
  ack_cv_.notify_all();
  if (replenish_.joinable()) replenish_.join();
  // Buffers the last shards finished with go back to the device.
  for (auto& d : drains_) {
    for (const Ticket& t : d->done) transport_->ReturnBuffer(t.thread, t.buffer);
    d->done.clear();
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  return error_;
}

absl::Status Collector::Reconcile() {
  if (region_ == nullptr || started_ || sink_ == nullptr ||
      next_sequence_.size() != region_->num_threads()) {
    return absl::FailedPreconditionError("collector: reconcile runs after Start and Stop");
  }
  DeviceThreadCounters total;
  for (uint32_t t = 0; t < region_->num_threads(); ++t) {
    if (auto buffer = transport_->UnflushedBuffer(t, next_sequence_[t])) {
      Collected collected = CollectBuffer(*transport_, t, *buffer);
      CollectorStats delta;
      for (const Pair& p : collected.pairs) delta.recovered_records += p.record != nullptr;
      AddStats(delta);
      WriteNow(std::move(collected));
    }
    const DeviceThreadCounters c = transport_->ReadCounters(t);
    total.dropped += c.dropped;
    total.arena_waits += c.arena_waits;
    total.gate_waits += c.gate_waits;
    for (uint32_t i = 0; i < abi::kDropCauseCount; ++i) {
      total.dropped_by_cause[i] += c.dropped_by_cause[i];
    }
  }
  auto by = [&](abi::DropCause cause) {
    return total.dropped_by_cause[static_cast<uint32_t>(cause)];
  };
  losses_.set_dropped_records(total.dropped);
  losses_.set_arena_waits(total.arena_waits);
  losses_.set_gate_waits(total.gate_waits);
  losses_.set_dropped_ready_queue_full(by(abi::DropCause::kReadyQueueFull));
  losses_.set_dropped_free_queue_empty(by(abi::DropCause::kFreeQueueEmpty));
  losses_.set_dropped_arena_ack_timeout(by(abi::DropCause::kArenaAckTimeout));
  losses_.set_dropped_flush_timeout(by(abi::DropCause::kFlushTimeout));
  losses_.set_dropped_host_gone(by(abi::DropCause::kHostGone));
  std::lock_guard<std::mutex> lock(stats_mu_);
  return error_;
}

absl::Status Collector::RecordSnapshots(const std::vector<SnapshotTask>& tasks) {
  if (region_ == nullptr || started_ || sink_ == nullptr) {
    return absl::FailedPreconditionError("collector: snapshots are recorded after Start and Stop");
  }
  // Each task is recorded by the device's own recorder code (the same
  // level, mode and marker rules as a hang's snapshot) into a scratch region
  // of its own, then collected through the same conversion. The scratch is
  // sized to the task (under a memory limit a second region as large as the
  // device's may not be had): twice its largest payload, so that nothing is
  // cut that the device's arena would have kept whole, and room for all of
  // them; never more than the device's arena, so that what the device would
  // have cut is cut the same way.
  const uint64_t device_arena = region_->arena_bytes();
  CollectorStats delta;
  for (const SnapshotTask& t : tasks) {
    const DumpTask& task = *t.task;
    const uint32_t records = task.tensor_count + task.scalar_count;
    if (records == 0) continue;
    uint64_t largest = 0, total = 0;
    for (uint32_t i = 0; i < task.tensor_count; ++i) {
      const uint64_t bytes = std::min(task.tensors[i].view.logical_bytes(), device_arena / 2);
      largest = std::max(largest, bytes);
      total += bytes + abi::kArenaAlignment;
    }
    DumpRegionConfig scratch;
    scratch.level = region_->level();
    scratch.num_threads = t.thread + 1;  // records carry their scheduler thread
    scratch.records_per_buffer = records;
    // A buffer is handed over at a quarter of the arena: room for each.
    scratch.buffers_per_thread = records + 1;
    scratch.ready_queue_depth = records + 1;
    const uint64_t want = std::max<uint64_t>({2 * largest, total, 64 << 10});
    scratch.arena_bytes = std::min<uint64_t>(
        device_arena, (want + abi::kArenaAlignment - 1) / abi::kArenaAlignment * abi::kArenaAlignment);
    scratch.full_policy = abi::FullPolicy::kDrop;
    if (t.thread >= kMaxDumpThreads) continue;
    auto created = DumpRegion::Create(scratch);
    if (!created.ok()) return created.status();
    const DumpRegion& region = **created;
    auto transport = MakeTransport(Platform::kA2a3Sim, region);
    if (!transport.ok()) return transport.status();
    {
      DumpRecorder recorder(region);
      recorder.thread(t.thread).RecordTask(task, abi::Stage::kAfterCompletion,
                                           abi::kFlagInFlightSnapshot);
      recorder.thread(t.thread).Flush();
    }
    uint32_t buffer;
    for (;;) {
      auto popped = (*transport)->PopReady(t.thread, &buffer);
      if (!popped.ok()) return popped.status();
      if (!*popped) break;
      Collected collected = CollectBuffer(**transport, t.thread, buffer);
      for (Pair& p : collected.pairs) {
        p.acks = 0;  // the scratch region's, not the device's
        delta.snapshot_records += p.record != nullptr;
      }
      WriteNow(std::move(collected));
    }
  }
  AddStats(delta);
  std::lock_guard<std::mutex> lock(stats_mu_);
  return error_;
}

absl::Status Collector::Export() {
  if (sink_ == nullptr) return absl::FailedPreconditionError("collector: no sink");
  return sink_->Finish(losses_);
}

void Collector::Finalize() {
  if (started_) Stop().IgnoreError();
  transport_.reset();
  region_.reset();
  sink_ = nullptr;
}

}  // namespace argsdump
