#include "server/ingest_stream.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/capture_store.h"
#include "format/device_crash.h"
#include "format/names.h"
#include "format/record.h"

namespace argsdump {

void IngestStream::Start(const Watermark& w) {
  received_records_ = w.records;
  received_bytes_ = w.bin_bytes;
  assigned_bytes_ = w.bin_bytes;
  pending_records_.Clear();
  pending_bytes_.clear();
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
  for (const v1::ArgRecord& r : batch->records()) {
    if (absl::Status s = ValidateRecord(r); !s.ok()) {
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
  if (pending_bytes_.size() + batch->payload().size() > kMaxPendingBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ingest: more than ", kMaxPendingBytes,
        " payload bytes waiting for their record to complete"));
  }
  assigned_bytes_ = assigned;
  const int n_new = batch->records_size();
  received_records_ += batch->records_size();
  received_bytes_ += batch->payload().size();
  if (pending_records_.empty()) {
    pending_records_.Swap(batch->mutable_records());
  } else {
    while (!batch->records().empty()) {
      pending_records_.AddAllocated(batch->mutable_records()->ReleaseLast());
    }
    // ReleaseLast took them last-first: put this batch's part in order.
    std::reverse(pending_records_.pointer_begin() + (pending_records_.size() - n_new),
                 pending_records_.pointer_end());
  }
  if (pending_bytes_.empty()) {
    pending_bytes_.swap(*batch->mutable_payload());
  } else {
    pending_bytes_.append(batch->payload());
  }
  return absl::OkStatus();
}

// The common case (a batch carries its records' bytes) moves the whole
// repeated field, not record by record.
bool IngestStream::TakeComplete(AppendJob* job) {
  *job = AppendJob();
  job->first_record = received_records_ - pending_records_.size();
  uint64_t bytes = 0;
  int n = 0;
  while (n < pending_records_.size() &&
         bytes + pending_records_.Get(n).bin_size() <= pending_bytes_.size()) {
    bytes += pending_records_.Get(n).bin_size();
    ++n;
  }
  if (n == 0) return false;
  if (n == pending_records_.size()) {
    job->records.Swap(&pending_records_);
  } else {
    std::vector<v1::ArgRecord*> taken(n);
    pending_records_.ExtractSubrange(0, n, taken.data());
    for (v1::ArgRecord* r : taken) job->records.AddAllocated(r);
  }
  if (bytes == pending_bytes_.size()) {
    job->bytes.swap(pending_bytes_);
    pending_bytes_.clear();
  } else {
    job->bytes = pending_bytes_.substr(0, bytes);
    pending_bytes_.erase(0, bytes);
  }
  return true;
}

absl::Status IngestStream::Finish(const v1::IngestFinish& finish, v1::CaptureInfo* end) {
  if (finishing_) return absl::FailedPreconditionError("ingest: finish sent twice");
  *end = v1::CaptureInfo();
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
