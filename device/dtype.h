// Element types a tensor or scalar argument can have, and the one table that
// says how wide each is and what it is called in the manifest (UPPERCASE).
// Values are part of the shared-memory ABI (ArgsDumpRecord::dtype) and of the
// on-disk format: never renumber, only append.
#ifndef ARGSDUMP_DEVICE_DTYPE_H_
#define ARGSDUMP_DEVICE_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace argsdump {

enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kInt32 = 2,
  kInt16 = 3,
  kInt8 = 4,
  kUint8 = 5,
  kBfloat16 = 6,
  kInt64 = 7,
  kUint64 = 8,
  kUint16 = 9,
  kUint32 = 10,
  kBool = 11,
  kFp8E4M3Fn = 12,
  kFp8E8M0 = 13,
  kFp4E2M1 = 14,  // two elements per byte, low nibble first
  kFloat64 = 15,
};

inline constexpr int kDataTypeCount = 16;

// Width of one element in bits (4 for FP4E2M1, otherwise a multiple of 8).
uint32_t ElementBits(DataType dtype);

// Bytes that `numel` densely packed elements occupy (rounded up for FP4).
uint64_t PayloadBytes(DataType dtype, uint64_t numel);

// "FLOAT32", "BFLOAT16", ...: the manifest spelling.
std::string_view DataTypeName(DataType dtype);

// Inverse of DataTypeName; accepts any letter case ("float32" too).
std::optional<DataType> DataTypeFromName(std::string_view name);

// True for a value that fits the enum (records from shared memory are
// checked before they are trusted).
inline bool IsValidDataType(uint8_t raw) { return raw < kDataTypeCount; }

// The dtype a C++ scalar type is registered with by CoreTaskArgs::add_scalar.
template <typename T>
struct ScalarDataType;
template <> struct ScalarDataType<float> { static constexpr DataType value = DataType::kFloat32; };
template <> struct ScalarDataType<double> { static constexpr DataType value = DataType::kFloat64; };
template <> struct ScalarDataType<int8_t> { static constexpr DataType value = DataType::kInt8; };
template <> struct ScalarDataType<int16_t> { static constexpr DataType value = DataType::kInt16; };
template <> struct ScalarDataType<int32_t> { static constexpr DataType value = DataType::kInt32; };
template <> struct ScalarDataType<int64_t> { static constexpr DataType value = DataType::kInt64; };
template <> struct ScalarDataType<uint8_t> { static constexpr DataType value = DataType::kUint8; };
template <> struct ScalarDataType<uint16_t> { static constexpr DataType value = DataType::kUint16; };
template <> struct ScalarDataType<uint32_t> { static constexpr DataType value = DataType::kUint32; };
template <> struct ScalarDataType<uint64_t> { static constexpr DataType value = DataType::kUint64; };
template <> struct ScalarDataType<bool> { static constexpr DataType value = DataType::kBool; };

}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_DTYPE_H_
