#include "server/ingest_stream.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/capture_store.h"
#include "format/device_crash.h"
#include "format/names.h"
#include "format/record.h"

namespace argsdump {

void IngestStream::Start(const Watermark& w) {
  received_records_ = w.records;
  received_bytes_ = w.bin_bytes;
  assigned_bytes_ = w.bin_bytes;
  pending_records_.Clear();
  pending_chunks_.clear();
  pending_skip_ = 0;
  pending_bytes_ = 0;
}

absl::Status IngestStream::Batch(v1::IngestBatch* batch) {
  if (finishing_) return absl::FailedPreconditionError("ingest: batch after finish");
  if (batch->first_record() != received_records_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ingest: batch starts at record ", batch->first_record(), ", expected ",
        received_records_, " (resume from the watermark in the last ack)"));
  }
  if (batch->payload_offset() != received_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("ingest: payload starts at args.bin offset ",
                                                   batch->payload_offset(), ", expected ",
                                                   received_bytes_));
  }
  // Validate everything before keeping anything.
  uint64_t assigned = assigned_bytes_;
  batch_records_.Clear();
  batch_records_.Reserve(batch->records_size(),
                         batch->records_size() * PreparedRecords::kRecordEntryGuess);
  for (const v1::ArgRecord& r : batch->records()) {
    if (absl::Status s = batch_records_.Add(r); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ingest: ", s.message()));
    }
    if (r.bin_size() > kMaxPendingBytes) {
      // It could never be complete: the stream holds at most that much.
      return absl::InvalidArgumentError(absl::StrCat(
          "ingest: record of task ", TaskIdHex(r.task_id()), " has a ", r.bin_size(),
          "-byte payload, over the ", kMaxPendingBytes, " bytes a record may carry"));
    }
    if (r.bin_size() > 0) {
      if (r.bin_offset() != assigned) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ingest: record of task ", TaskIdHex(r.task_id()), " has bin_offset ",
            r.bin_offset(), ", expected ", assigned, " (payloads are appended in order)"));
      }
      if (assigned > ~uint64_t{0} - r.bin_size()) {
        return absl::InvalidArgumentError("ingest: payload offsets overflow 64 bits");
      }
      assigned += r.bin_size();
    }
  }
  if (received_bytes_ + batch->payload().size() > assigned) {
    return absl::InvalidArgumentError(
        absl::StrCat("ingest: ", received_bytes_ + batch->payload().size() - assigned,
                     " payload bytes belong to no record"));
  }
  if (pending_bytes_ + batch->payload().size() > kMaxPendingBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ingest: more than ", kMaxPendingBytes,
        " payload bytes waiting for their record to complete"));
  }
  assigned_bytes_ = assigned;
  received_records_ += batch->records_size();
  received_bytes_ += batch->payload().size();
  batch_records_.MoveAll(&pending_records_);
  if (!batch->payload().empty()) {
    pending_bytes_ += batch->payload().size();
    pending_chunks_.push_back(std::move(*batch->mutable_payload()));
    batch->mutable_payload()->clear();
    std::string spare;
    if (pool_->Take(&spare)) batch->mutable_payload()->swap(spare);
  }
  return absl::OkStatus();
}

// The common case (a batch carries its records' bytes) moves the records
// and the message's bytes whole; a record that ends inside a message costs
// a copy of the smaller part of that message's bytes.
bool IngestStream::TakeComplete(AppendJob* job) {
  *job = AppendJob();
  job->pool = pool_;
  job->first_record = received_records_ - pending_records_.size();
  const std::vector<ManifestRow>& rows = pending_records_.rows();
  uint64_t bytes = 0;
  size_t n = 0;
  while (n < rows.size() && bytes + rows[n].bin_size <= pending_bytes_) {
    bytes += rows[n].bin_size;
    ++n;
  }
  if (n == 0) return false;
  pending_records_.MoveFront(n, &job->records);
  pending_bytes_ -= bytes;
  while (bytes > 0) {
    std::string& front = pending_chunks_.front();
    const uint64_t available = front.size() - pending_skip_;
    if (available <= bytes) {  // the whole rest of this chunk
      if (job->chunks.empty()) job->skip = pending_skip_;
      job->chunks.push_back(std::move(front));
      pending_chunks_.pop_front();
      pending_skip_ = 0;
      bytes -= available;
      continue;
    }
    // The job ends inside this chunk: copy the smaller part.
    const size_t take = static_cast<size_t>(bytes);
    if (take <= available - take) {
      job->chunks.push_back(front.substr(pending_skip_, take));
      pending_skip_ += take;
    } else {
      std::string rest = front.substr(pending_skip_ + take);
      if (job->chunks.empty()) job->skip = pending_skip_;
      front.resize(pending_skip_ + take);
      job->chunks.push_back(std::move(front));
      front = std::move(rest);
      pending_skip_ = 0;
    }
    bytes = 0;
  }
  return true;
}

absl::Status IngestStream::Finish(const v1::IngestFinish& finish, v1::CaptureInfo* end) {
  if (finishing_) return absl::FailedPreconditionError("ingest: finish sent twice");
  *end = v1::CaptureInfo();
  if (absl::Status s = ValidateCaptureLabels(finish.labels()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("ingest: finish.", s.message()));
  }
  *end->mutable_labels() = finish.labels();
  *end->mutable_step_levels() = finish.step_levels();
  if (absl::Status s = CheckStepLevels(end->step_levels()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("ingest: finish.", s.message()));
  }
  if (finish.has_device_crash()) {
    if (absl::Status s = CheckDeviceCrash(finish.device_crash()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ingest: finish.", s.message()));
    }
    *end->mutable_device_crash() = finish.device_crash();
  }
  if (!pending_records_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("ingest: finished with ",
                                                   pending_records_.size(),
                                                   " records still missing payload bytes"));
  }
  finishing_ = true;
  return absl::OkStatus();
}

}  // namespace argsdump
