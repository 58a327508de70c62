// 16-bit floats from and to float (sdk/argsdump.h), and tensors of them.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sdk/argsdump.h"

namespace argsdump {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

uint16_t FloatToBfloat16(float value) {
  const uint32_t u = Bits(value);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: its sign and top payload bits; a payload that lived only in the
    // low bits would read as an infinity, so it becomes the quiet bit.
    const uint16_t top = static_cast<uint16_t>(u >> 16);
    return (top & 0x7Fu) != 0 ? top : static_cast<uint16_t>(top | 0x40u);
  }
  // Round to nearest, ties to even: add half an ulp of bf16 less one, plus
  // the bit that makes a tie go to the even side. A carry out of the
  // mantissa raises the exponent, and past the largest finite value makes
  // the infinity.
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

uint16_t FloatToFloat16(float value) {
  const uint32_t u = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {  // infinity or NaN
    if (a == 0x7F800000u) return sign | 0x7C00u;
    const uint16_t payload = static_cast<uint16_t>((a >> 13) & 0x3FFu);
    return sign | 0x7C00u | (payload != 0 ? payload : 0x200u);
  }
  // 65520 (half way between 65504, the largest half, and 65536) and above
  // round to the infinity.
  if (a >= 0x477FF000u) return sign | 0x7C00u;
  if (a >= 0x38800000u) {  // 2^-14 and above: a normal half
    // Rebias the exponent (127 -> 15) and round the 13 bits dropped to
    // nearest even, as above.
    const uint32_t rebiased = a - (uint32_t{112} << 23);
    return sign | static_cast<uint16_t>((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13);
  }
  // Below 2^-14: a multiple of 2^-24 (a subnormal, or 2^-14 itself when it
  // rounds up). Scaling by 2^24 is exact, and nearbyint rounds to nearest
  // even in the default rounding mode.
  const float scaled = FromBits(a) * 16777216.0f;
  return sign | static_cast<uint16_t>(std::nearbyint(scaled));
}

float Float16ToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t exp = (bits >> 10) & 0x1Fu, frac = bits & 0x3FFu;
  if (exp == 0x1F) return FromBits(sign | 0x7F800000u | (frac << 13));  // Inf, NaN (payload kept)
  if (exp != 0) return FromBits(sign | ((exp + 112) << 23) | (frac << 13));
  // Zero or a subnormal: frac * 2^-24, exact in a float.
  const float magnitude = static_cast<float>(frac) * (1.0f / 16777216.0f);
  return FromBits(sign | Bits(magnitude));
}

absl::Status WriteFloats(const Tensor& tensor, const std::vector<float>& values) {
  switch (tensor.dtype()) {
    case DataType::kFloat32:
      return tensor.Write(values);
    case DataType::kFloat16:
    case DataType::kBfloat16: {
      const bool bf16 = tensor.dtype() == DataType::kBfloat16;
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        bits[i] = bf16 ? FloatToBfloat16(values[i]) : FloatToFloat16(values[i]);
      }
      return tensor.Write(bits);
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "WriteFloats: a ", std::string(DataTypeName(tensor.dtype())),
          " tensor does not hold floats of 16 or 32 bits (use Tensor::Write<T>)"));
  }
}

absl::StatusOr<std::vector<float>> ReadFloats(const Tensor& tensor) {
  switch (tensor.dtype()) {
    case DataType::kFloat32:
      return tensor.Read<float>();
    case DataType::kFloat16:
    case DataType::kBfloat16: {
      absl::StatusOr<std::vector<uint16_t>> bits = tensor.Read<uint16_t>();
      if (!bits.ok()) return bits.status();
      const bool bf16 = tensor.dtype() == DataType::kBfloat16;
      std::vector<float> out(bits->size());
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = bf16 ? Bfloat16ToFloat((*bits)[i]) : Float16ToFloat((*bits)[i]);
      }
      return out;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "ReadFloats: a ", std::string(DataTypeName(tensor.dtype())),
          " tensor does not hold floats of 16 or 32 bits (use Tensor::Read<T>)"));
  }
}

}  // namespace argsdump
