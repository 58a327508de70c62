// TestHost plays the host side of a DumpRegion for tests and benchmarks:
// drains ready buffers, copies each record and its payload out, acknowledges
// payloads per thread, and returns buffers. It runs either on a background
// thread (Start/Stop) or step by step (DrainOnce). Acknowledgement can be
// held back per thread to exercise the device's arena backpressure.
// Waiting is event-driven: WaitForRecords blocks on a condition variable.
#ifndef ARGSDUMP_DEVICE_TESTING_TEST_HOST_H_
#define ARGSDUMP_DEVICE_TESTING_TEST_HOST_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "device/abi.h"
#include "device/host_endpoint.h"
#include "device/recorder.h"
#include "device/region.h"

namespace argsdump {

struct CapturedArg {
  uint32_t thread = 0;
  abi::ArgsDumpRecord record{};
  std::vector<uint8_t> payload;
};

class TestHost {
 public:
  // `copy_payload` false: records only (benchmarks measuring the device).
  explicit TestHost(const DumpRegion& region, bool copy_payload = true);
  ~TestHost();

  // Background draining; Stop() drains what is left, recovers unflushed
  // buffers, and joins. Returns the first error met (bad index or offset).
  void Start();
  absl::Status Stop();

  // One pass over `thread`'s ready queue; returns records taken.
  uint64_t DrainOnce(uint32_t thread);
  // Takes the records of buffers the device never published (after stop).
  uint64_t RecoverUnflushed();

  // While false, payloads of `thread` are copied but not acknowledged; the
  // backlog is acknowledged when it is set back to true.
  void SetAck(uint32_t thread, bool enabled);

  // Blocks until at least `count` records were taken, or `timeout` passes.
  bool WaitForRecords(uint64_t count, std::chrono::milliseconds timeout);
  // Blocks until `thread` has published at least `buffers` buffers.
  bool WaitForPublished(uint32_t thread, uint64_t buffers,
                        std::chrono::milliseconds timeout);

  std::vector<CapturedArg> TakeRecords();
  uint64_t records_taken() const;
  uint64_t acked(uint32_t thread) const;
  absl::Status status() const;

 private:
  void Loop();
  uint64_t TakeBuffer(uint32_t thread, uint32_t buffer);

  const DumpRegion& region_;
  HostEndpoint endpoint_;
  const bool copy_payload_;
  std::thread worker_;
  std::atomic<bool> stop_{false};
  // Per thread, touched only by the draining thread (or the caller in step
  // mode), except under mu_.
  std::vector<uint64_t> next_sequence_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<CapturedArg> records_;
  uint64_t taken_ = 0;
  std::vector<bool> ack_enabled_;
  std::vector<uint64_t> unacked_;
  std::vector<uint64_t> acked_;
  absl::Status status_;
};

// A dump region, its recorder, and a TestHost already draining it in the
// background: what a test of the device side needs to capture a run.
struct RecordingHarness {
  // Aborts on a config DumpRegion::Create rejects (a test bug).
  explicit RecordingHarness(const DumpRegionConfig& config);

  std::unique_ptr<DumpRegion> region;
  std::unique_ptr<DumpRecorder> recorder;
  std::unique_ptr<TestHost> host;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_TESTING_TEST_HOST_H_
