#include "device/testing/test_host.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace argsdump {

TestHost::TestHost(const DumpRegion& region, bool copy_payload)
    : region_(region),
      endpoint_(region),
      copy_payload_(copy_payload),
      next_sequence_(region.num_threads(), 0),
      ack_enabled_(region.num_threads(), true),
      unacked_(region.num_threads(), 0),
      acked_(region.num_threads(), 0) {}

TestHost::~TestHost() {
  if (worker_.joinable()) {
    stop_.store(true);
    worker_.join();
  }
}

void TestHost::Start() { worker_ = std::thread([this] { Loop(); }); }

absl::Status TestHost::Stop() {
  stop_.store(true);
  if (worker_.joinable()) worker_.join();
  for (uint32_t t = 0; t < region_.num_threads(); ++t) DrainOnce(t);
  RecoverUnflushed();
  return status();
}

void TestHost::Loop() {
  // Poll with a short back-off while idle: the device never signals.
  auto idle = std::chrono::microseconds(20);
  while (!stop_.load()) {
    uint64_t got = 0;
    for (uint32_t t = 0; t < region_.num_threads(); ++t) got += DrainOnce(t);
    if (got > 0) {
      idle = std::chrono::microseconds(20);
    } else {
      std::this_thread::sleep_for(idle);
      idle = std::min(idle * 2, std::chrono::microseconds(500));
    }
  }
}

uint64_t TestHost::TakeBuffer(uint32_t thread, uint32_t buffer) {
  const uint32_t count = endpoint_.RecordCount(buffer);
  std::vector<CapturedArg> batch;
  batch.reserve(count);
  uint64_t payloads = 0;
  for (uint32_t i = 0; i < count; ++i) {
    CapturedArg arg;
    arg.thread = thread;
    arg.record = endpoint_.Record(buffer, i);
    if (arg.record.payload_size > 0) {
      ++payloads;
      auto bytes = endpoint_.Payload(thread, arg.record);
      if (!bytes.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (status_.ok()) status_ = bytes.status();
      } else if (copy_payload_) {
        arg.payload.assign(bytes->begin(), bytes->end());
      }
    }
    batch.push_back(std::move(arg));
  }
  uint64_t ack = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    unacked_[thread] += payloads;
    if (ack_enabled_[thread]) {
      ack = unacked_[thread];
      unacked_[thread] = 0;
      acked_[thread] += ack;
    }
    for (auto& arg : batch) records_.push_back(std::move(arg));
    taken_ += count;
  }
  endpoint_.AckPayloads(thread, ack);
  cv_.notify_all();
  return count;
}

uint64_t TestHost::DrainOnce(uint32_t thread) {
  uint64_t taken = 0;
  for (;;) {
    uint32_t buffer = 0;
    auto popped = endpoint_.PopReady(thread, &buffer);
    if (!popped.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_.ok()) status_ = popped.status();
      return taken;
    }
    if (!*popped) return taken;
    const abi::MetaBufferHeader& header = region_.buffer_header(buffer);
    if (header.sequence != next_sequence_[thread]) {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_.ok()) {
        status_ = absl::DataLossError("buffer sequence out of order");
      }
    }
    next_sequence_[thread] = header.sequence + 1;
    taken += TakeBuffer(thread, buffer);
    endpoint_.ReturnBuffer(thread, buffer);
  }
}

uint64_t TestHost::RecoverUnflushed() {
  uint64_t taken = 0;
  for (uint32_t t = 0; t < region_.num_threads(); ++t) {
    if (auto buffer = endpoint_.UnflushedBuffer(t, next_sequence_[t])) {
      taken += TakeBuffer(t, *buffer);
    }
  }
  return taken;
}

void TestHost::SetAck(uint32_t thread, bool enabled) {
  uint64_t ack = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ack_enabled_[thread] = enabled;
    if (enabled) {
      ack = unacked_[thread];
      unacked_[thread] = 0;
      acked_[thread] += ack;
    }
  }
  endpoint_.AckPayloads(thread, ack);
}

bool TestHost::WaitForRecords(uint64_t count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return taken_ >= count; });
}

bool TestHost::WaitForPublished(uint32_t thread, uint64_t buffers,
                                std::chrono::milliseconds timeout) {
  // The device does not signal; poll its counter with a short back-off.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (region_.thread_state(thread).published_buffer_count.load(
             std::memory_order_acquire) < buffers) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

std::vector<CapturedArg> TestHost::TakeRecords() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(records_);
}

uint64_t TestHost::records_taken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return taken_;
}

uint64_t TestHost::acked(uint32_t thread) const {
  std::lock_guard<std::mutex> lock(mu_);
  return acked_[thread];
}

absl::Status TestHost::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

RecordingHarness::RecordingHarness(const DumpRegionConfig& config) {
  auto created = DumpRegion::Create(config);
  if (!created.ok()) {
    std::fprintf(stderr, "RecordingHarness: %s\n", created.status().ToString().c_str());
    std::abort();
  }
  region = std::move(created).value();
  recorder = std::make_unique<DumpRecorder>(*region);
  host = std::make_unique<TestHost>(*region);
  host->Start();
}

}  // namespace argsdump
