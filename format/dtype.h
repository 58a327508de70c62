// Element types a tensor or scalar argument can have, and the one table that
// says how wide each is and what it is called in the manifest (UPPERCASE).
// Values are part of the shared-memory ABI (ArgsDumpRecord::dtype) and of the
// on-disk format: never renumber, only append.
#ifndef ARGSDUMP_FORMAT_DTYPE_H_
#define ARGSDUMP_FORMAT_DTYPE_H_

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

// What an element's bits are: a floating format, a two's complement or an
// unsigned integer, or a bool byte (0 false, anything else true).
enum class ElementKind : uint8_t { kFloat, kSigned, kUnsigned, kBool };
ElementKind KindOf(DataType dtype);

// How .npy files hold it: the descriptor ("<f4", "|b1", ...), and whether
// the values are widened to float32 for it (BFLOAT16, FP8, FP4: NumPy has
// no such type; every value widens exactly).
std::string_view NpyDescriptor(DataType dtype);
bool NpyWidened(DataType dtype);

// Floats in text exports print as %.<TextDigits>g (float32 6, float16 4,
// bfloat16 3: the reference viewer's; float64 15; the 8- and 4-bit floats
// the fewest digits that tell each of their values apart); 0 for others.
int TextDigits(DataType dtype);
// The most digits a float scalar's shortest round-trip text needs (9 for
// up to 32 bits, 17 for float64); 0: a scalar of this dtype is written as
// its raw bits (the 8- and 4-bit floats). 0 for integers and bool.
int ScalarJsonDigits(DataType dtype);

// Bytes that `numel` densely packed elements occupy (rounded up for FP4).
uint64_t PayloadBytes(DataType dtype, uint64_t numel);

// "FLOAT32", "BFLOAT16", ...: the manifest spelling (a view of a
// NUL-terminated literal: .data() is a C string).
std::string_view DataTypeName(DataType dtype);

// Inverse of DataTypeName; accepts any letter case ("float32" too).
std::optional<DataType> DataTypeFromName(std::string_view name);

// Decoding elements (the viewer, scalar printing). Every narrow float
// format widens exactly to float.
float HalfToFloat(uint16_t bits);        // IEEE binary16
float Bfloat16ToFloat(uint16_t bits);    // the top half of a float32
float Fp8E4M3FnToFloat(uint8_t bits);    // 1-4-3, bias 7, no inf, S.1111.111 = NaN, max 448
float Fp8E8M0ToFloat(uint8_t bits);      // 2^(e-127), 0xFF = NaN (an exponent, no sign)
float Fp4E2M1ToFloat(uint8_t nibble);    // 1-2-1, bias 1: 0, 0.5, 1, 1.5, 2, 3, 4, 6
// Element `index` of a densely packed payload as a double (int64/uint64
// beyond 2^53 round; bool is 0/1). The caller checks the payload holds it:
// PayloadBytes(dtype, index + 1) bytes.
double ElementAsDouble(DataType dtype, const uint8_t* payload, uint64_t index);
// Integer and bool dtypes, exactly: element `index` widened to 64 bits
// (signed ones sign-extended into the int64, bool 0/1). 0 for a float dtype.
int64_t ElementAsInt64(DataType dtype, const uint8_t* payload, uint64_t index);
uint64_t ElementAsUint64(DataType dtype, const uint8_t* payload, uint64_t index);

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

#endif  // ARGSDUMP_FORMAT_DTYPE_H_
