// What the CaptureHub tests share: an open request, append jobs of known
// records and payloads, and a waiter for the writer thread's callbacks.
// Test-only.
#ifndef ARGSDUMP_SERVER_CAPTURE_HUB_TESTING_H_
#define ARGSDUMP_SERVER_CAPTURE_HUB_TESTING_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/capture_hub.h"
#include "tests/testing/arg_records.h"

namespace argsdump {

inline v1::IngestOpen OpenRequest(const std::string& name, bool resume = false) {
  v1::IngestOpen o;
  o.set_capture(name);
  o.set_level(v1::DUMP_LEVEL_FULL);
  o.set_resume(resume);
  (*o.mutable_labels())["case"] = "hub";
  return o;
}

// Tasks [first, first + n), each an input tensor of 64 bytes and a scalar.
inline AppendJob Job(uint64_t first_record, uint64_t first_task, int n, uint64_t* bin_offset) {
  AppendJob job;
  job.first_record = first_record;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(job.records.Add(TensorRecord(first_task + i).Shape({16}).BinOffset(*bin_offset)).ok());
    *bin_offset += 64;
    job.chunks.emplace_back(64, static_cast<char>(first_task + i));
    EXPECT_TRUE(job.records.Add(ScalarRecord(first_task + i).Arg(1)).ok());
  }
  return job;
}

// What a callback saw. Plain values, not absl::Status: a non-OK status is
// reference counted inside Debian's (uninstrumented) Abseil, so sharing one
// across threads reads as a race to TSan.
struct Outcome {
  absl::StatusCode code;
  std::string message;
  bool ok() const { return code == absl::StatusCode::kOk; }
};
inline std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << static_cast<int>(o.code) << " " << o.message;
}

// Waits for callbacks from the writer thread.
class Waiter {
 public:
  HubCapture::DoneCallback Callback() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++expected_;
    }
    return [this](absl::Status s, Watermark w) {
      std::lock_guard<std::mutex> lock(mu_);
      statuses_.push_back(Outcome{s.code(), std::string(s.message())});
      last_ = w;
      cv_.notify_all();
    };
  }
  std::vector<Outcome> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return statuses_.size() == expected_; });
    return statuses_;
  }
  Watermark last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t expected_ = 0;
  std::vector<Outcome> statuses_;
  Watermark last_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_CAPTURE_HUB_TESTING_H_
