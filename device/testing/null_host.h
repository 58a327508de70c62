// NullHost plays the host side of a DumpRegion for benchmarks: it takes
// every published buffer of every recording thread and gives it back at
// once, acknowledging its payloads and copying nothing, so that what a
// benchmark times is the device side of the dump. When a pass finds
// nothing it yields (a host that slept between polls made a stalled
// device wait longer than the work it measures).
#ifndef ARGSDUMP_DEVICE_TESTING_NULL_HOST_H_
#define ARGSDUMP_DEVICE_TESTING_NULL_HOST_H_

#include <atomic>
#include <cstdint>
#include <thread>

#include "device/host_endpoint.h"
#include "device/region.h"

namespace argsdump {

class NullHost {
 public:
  explicit NullHost(const DumpRegion& region) : endpoint_(region) {
    thread_ = std::thread([this] {
      const uint32_t n = endpoint_.region().num_threads();
      while (!stop_.load(std::memory_order_relaxed)) {
        bool any = false;
        for (uint32_t t = 0; t < n; ++t) {
          uint32_t buffer = 0;
          auto popped = endpoint_.PopReady(t, &buffer);
          if (!popped.ok() || !*popped) continue;
          any = true;
          endpoint_.AckPayloads(t, endpoint_.region().buffer_header(buffer).payload_records);
          endpoint_.ReturnBuffer(t, buffer);
        }
        if (!any) std::this_thread::yield();
      }
    });
  }
  ~NullHost() {
    stop_.store(true);
    thread_.join();
  }
  NullHost(const NullHost&) = delete;
  NullHost& operator=(const NullHost&) = delete;

 private:
  HostEndpoint endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_TESTING_NULL_HOST_H_
