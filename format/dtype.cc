#include "format/dtype.h"

#include <cmath>
#include <cstring>

#include <array>
#include <cctype>

namespace argsdump {
namespace {

struct DataTypeInfo {
  DataType dtype;
  uint32_t bits;
  std::string_view name;
  ElementKind kind;
  std::string_view npy;  // the .npy descriptor it is exported as
  bool npy_widened;      // exported widened to float32 (NumPy has no such type)
  // Floats: %.<text_digits>g in text exports (the reference viewer's for
  // its dtypes; ours the fewest that tell every value apart); the most
  // digits a scalar's shortest round-trip text needs (0: a scalar of it
  // is written as its raw bits). Integers and bool: 0, 0.
  int text_digits;
  int json_digits;
};

constexpr ElementKind F = ElementKind::kFloat, S = ElementKind::kSigned,
                      U = ElementKind::kUnsigned, B = ElementKind::kBool;

// Indexed by the enum value; the static_assert below keeps them in step.
constexpr std::array<DataTypeInfo, kDataTypeCount> kTable = {{
    {DataType::kFloat32, 32, "FLOAT32", F, "<f4", false, 6, 9},
    {DataType::kFloat16, 16, "FLOAT16", F, "<f2", false, 4, 9},
    {DataType::kInt32, 32, "INT32", S, "<i4", false, 0, 0},
    {DataType::kInt16, 16, "INT16", S, "<i2", false, 0, 0},
    {DataType::kInt8, 8, "INT8", S, "|i1", false, 0, 0},
    {DataType::kUint8, 8, "UINT8", U, "|u1", false, 0, 0},
    {DataType::kBfloat16, 16, "BFLOAT16", F, "<f4", true, 3, 9},
    {DataType::kInt64, 64, "INT64", S, "<i8", false, 0, 0},
    {DataType::kUint64, 64, "UINT64", U, "<u8", false, 0, 0},
    {DataType::kUint16, 16, "UINT16", U, "<u2", false, 0, 0},
    {DataType::kUint32, 32, "UINT32", U, "<u4", false, 0, 0},
    {DataType::kBool, 8, "BOOL", B, "|b1", false, 0, 0},
    {DataType::kFp8E4M3Fn, 8, "FP8E4M3FN", F, "<f4", true, 3, 0},
    {DataType::kFp8E8M0, 8, "FP8E8M0", F, "<f4", true, 2, 0},
    {DataType::kFp4E2M1, 4, "FP4E2M1", F, "<f4", true, 2, 0},
    {DataType::kFloat64, 64, "FLOAT64", F, "<f8", false, 15, 17},
}};

constexpr bool TableIsIndexedByEnum() {
  for (int i = 0; i < kDataTypeCount; ++i) {
    if (static_cast<int>(kTable[i].dtype) != i) return false;
  }
  return true;
}
static_assert(TableIsIndexedByEnum(), "kTable must be ordered by enum value");

// A dtype added without every column fails to build, never falls back.
constexpr bool TableIsComplete() {
  for (const DataTypeInfo& t : kTable) {
    if (t.bits == 0 || t.name.empty() || t.npy.empty()) return false;
    if ((t.kind == ElementKind::kFloat) != (t.text_digits > 0)) return false;
  }
  return true;
}
static_assert(TableIsComplete(),
              "a kTable row lacks its width, name, .npy descriptor or (a float) its digits");

}  // namespace

uint32_t ElementBits(DataType dtype) {
  return kTable[static_cast<uint8_t>(dtype)].bits;
}

ElementKind KindOf(DataType dtype) { return kTable[static_cast<uint8_t>(dtype)].kind; }

std::string_view NpyDescriptor(DataType dtype) { return kTable[static_cast<uint8_t>(dtype)].npy; }

bool NpyWidened(DataType dtype) { return kTable[static_cast<uint8_t>(dtype)].npy_widened; }

int TextDigits(DataType dtype) { return kTable[static_cast<uint8_t>(dtype)].text_digits; }

int ScalarJsonDigits(DataType dtype) { return kTable[static_cast<uint8_t>(dtype)].json_digits; }

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

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, frac = h & 0x3FF;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(frac), -24);
  } else if (exp == 31) {
    v = frac ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(frac | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

float Bfloat16ToFloat(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

float Fp8E4M3FnToFloat(uint8_t b) {
  const uint32_t sign = b >> 7, exp = (b >> 3) & 0xF, frac = b & 0x7;
  if (exp == 0xF && frac == 0x7) return NAN;
  const float v = exp == 0 ? std::ldexp(static_cast<float>(frac), -9)  // frac/8 * 2^-6
                           : std::ldexp(static_cast<float>(frac | 0x8), static_cast<int>(exp) - 10);
  return sign ? -v : v;
}

float Fp8E8M0ToFloat(uint8_t b) {
  if (b == 0xFF) return NAN;
  return std::ldexp(1.0f, static_cast<int>(b) - 127);
}

float Fp4E2M1ToFloat(uint8_t nibble) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kValues[nibble & 0x7];
  return (nibble & 0x8) ? -v : v;
}

double ElementAsDouble(DataType dtype, const uint8_t* p, uint64_t i) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return v;
  };
  // A dtype added without a case here does not build.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
  switch (dtype) {
    case DataType::kFloat32: return load(float{});
    case DataType::kFloat64: return load(double{});
    case DataType::kFloat16: return HalfToFloat(load(uint16_t{}));
    case DataType::kBfloat16: return Bfloat16ToFloat(load(uint16_t{}));
    case DataType::kInt8: return load(int8_t{});
    case DataType::kInt16: return load(int16_t{});
    case DataType::kInt32: return load(int32_t{});
    case DataType::kInt64: return static_cast<double>(load(int64_t{}));
    case DataType::kUint8: return load(uint8_t{});
    case DataType::kUint16: return load(uint16_t{});
    case DataType::kUint32: return load(uint32_t{});
    case DataType::kUint64: return static_cast<double>(load(uint64_t{}));
    case DataType::kBool: return load(uint8_t{}) != 0 ? 1.0 : 0.0;
    case DataType::kFp8E4M3Fn: return Fp8E4M3FnToFloat(p[i]);
    case DataType::kFp8E8M0: return Fp8E8M0ToFloat(p[i]);
    case DataType::kFp4E2M1: return Fp4E2M1ToFloat(i % 2 == 0 ? p[i / 2] & 0xF : p[i / 2] >> 4);
  }
#pragma GCC diagnostic pop
  return NAN;
}

uint64_t ElementAsUint64(DataType dtype, const uint8_t* p, uint64_t i) {
  const ElementKind kind = KindOf(dtype);
  if (kind == ElementKind::kFloat) return 0;
  const uint32_t bytes = ElementBits(dtype) / 8;
  uint64_t v = 0;
  std::memcpy(&v, p + i * bytes, bytes);  // little endian, as the payload is
  if (kind == ElementKind::kBool) return v != 0;
  if (kind == ElementKind::kSigned && bytes < 8 && (v >> (8 * bytes - 1)) != 0) {
    v |= ~uint64_t{0} << (8 * bytes);  // sign-extend
  }
  return v;
}

int64_t ElementAsInt64(DataType dtype, const uint8_t* p, uint64_t i) {
  return static_cast<int64_t>(ElementAsUint64(dtype, p, i));
}

}  // namespace argsdump
