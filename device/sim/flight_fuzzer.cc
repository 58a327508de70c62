// libFuzzer target: any bytes as a flight table slot left by a dead device
// (the host reads it as untrusted shared memory). ReadTask must drop what
// does not fit the device memory, and every view it keeps must be readable
// whole (GatherLogical over it stays inside the mapping), and so must every
// input copy it keeps (snapshot_inputs): never a crash.
//   bazel build --config=fuzz //device:flight_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "device/sim/device_memory.h"
#include "device/sim/flight.h"
#include "device/tensor_view.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using argsdump::DeviceMemory;
  using argsdump::FlightTable;
  static DeviceMemory* memory = DeviceMemory::Create(uint64_t{1} << 20).value().release();
  static FlightTable* flight = FlightTable::Create(1, 1, 1).value().release();
  argsdump::abi::FlightSlot& slot = flight->slot(0);
  uint8_t* raw = reinterpret_cast<uint8_t*>(&slot);
  std::memset(raw, 0, sizeof(slot));
  std::memcpy(raw, data, std::min(size, sizeof(slot)));
  slot.state.store(1);
  argsdump::FlightTask task;
  if (!flight->ReadTask(0, *memory, &task)) return 0;
  std::vector<uint8_t> out;
  for (uint32_t i = 0; i < task.task.tensor_count; ++i) {
    const argsdump::TensorView& v = task.task.tensors[i].view;
    const uint64_t bytes = std::min<uint64_t>(v.logical_bytes(), uint64_t{1} << 20);
    out.resize(bytes);
    argsdump::GatherLogical(v, out.data(), bytes);
  }
  // The input copies it kept lie whole inside the mapping.
  for (const argsdump::DispatchedInput& in : task.inputs) {
    const uint64_t bytes = std::min<uint64_t>(in.arg.view.logical_bytes(), uint64_t{1} << 20);
    out.resize(bytes);
    std::memcpy(out.data(), in.copy, bytes);
  }
  return 0;
}
