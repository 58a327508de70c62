#include "device/dtype.h"

#include <array>
#include <cctype>

namespace argsdump {
namespace {

struct DataTypeInfo {
  DataType dtype;
  uint32_t bits;
  std::string_view name;
};

// Indexed by the enum value; the static_assert below keeps them in step.
constexpr std::array<DataTypeInfo, kDataTypeCount> kTable = {{
    {DataType::kFloat32, 32, "FLOAT32"},
    {DataType::kFloat16, 16, "FLOAT16"},
    {DataType::kInt32, 32, "INT32"},
    {DataType::kInt16, 16, "INT16"},
    {DataType::kInt8, 8, "INT8"},
    {DataType::kUint8, 8, "UINT8"},
    {DataType::kBfloat16, 16, "BFLOAT16"},
    {DataType::kInt64, 64, "INT64"},
    {DataType::kUint64, 64, "UINT64"},
    {DataType::kUint16, 16, "UINT16"},
    {DataType::kUint32, 32, "UINT32"},
    {DataType::kBool, 8, "BOOL"},
    {DataType::kFp8E4M3Fn, 8, "FP8E4M3FN"},
    {DataType::kFp8E8M0, 8, "FP8E8M0"},
    {DataType::kFp4E2M1, 4, "FP4E2M1"},
    {DataType::kFloat64, 64, "FLOAT64"},
}};

constexpr bool TableIsIndexedByEnum() {
  for (int i = 0; i < kDataTypeCount; ++i) {
    if (static_cast<int>(kTable[i].dtype) != i) return false;
  }
  return true;
}
static_assert(TableIsIndexedByEnum(), "kTable must be ordered by enum value");

}  // namespace

uint32_t ElementBits(DataType dtype) {
  return kTable[static_cast<uint8_t>(dtype)].bits;
}

uint64_t PayloadBytes(DataType dtype, uint64_t numel) {
  return (numel * ElementBits(dtype) + 7) / 8;
}

std::string_view DataTypeName(DataType dtype) {
  return kTable[static_cast<uint8_t>(dtype)].name;
}

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const DataTypeInfo& info : kTable) {
    if (info.name.size() != name.size()) continue;
    bool equal = true;
    for (size_t i = 0; i < name.size() && equal; ++i) {
      equal = std::toupper(static_cast<unsigned char>(name[i])) == info.name[i];
    }
    if (equal) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace argsdump
