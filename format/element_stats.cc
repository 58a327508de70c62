#include "format/element_stats.h"

#include <cstring>

namespace argsdump {
namespace {

// Running sums. `Scaled` is for float64, whose sums and squares can
// overflow: a running mean and a scaled sum of squares (the BLAS nrm2 way),
// a division or two per element. Every narrower format fits a plain double
// sum and sum of squares (float32's largest square times 2^48 elements is
// far below DBL_MAX), which costs no division.
template <bool Scaled>
struct Accumulator {
  ElementStats s;
  double sum = 0, squares = 0;  // !Scaled
  double mean = 0, scaled = 0;  // Scaled

  inline void Add(double v) {
    ++s.count;
    if (!std::isfinite(v)) {
      if (std::isnan(v)) {
        ++s.nan;
      } else {
        ++(v > 0 ? s.pos_inf : s.neg_inf);
      }
      return;
    }
    if (v == 0) ++s.zeros;
    if (s.finite == 0) {
      s.min = s.max = v;
    } else {
      s.min = v < s.min ? v : s.min;
      s.max = v > s.max ? v : s.max;
    }
    ++s.finite;
    const double a = std::fabs(v);
    if constexpr (Scaled) {
      mean += (v - mean) / static_cast<double>(s.finite);
      if (a > s.abs_max) {
        const double r = s.abs_max / a;
        scaled = 1 + scaled * r * r;
      } else if (a > 0) {
        const double r = a / s.abs_max;
        scaled += r * r;
      }
    } else {
      sum += v;
      squares += v * v;
    }
    s.abs_max = a > s.abs_max ? a : s.abs_max;
  }

  ElementStats Done() {
    if constexpr (Scaled) {
      s.mean_value = mean;
      s.l2_value = s.abs_max * std::sqrt(scaled);
    } else {
      s.mean_value = s.finite == 0 ? 0 : sum / static_cast<double>(s.finite);
      s.l2_value = std::sqrt(squares);
    }
    return s;
  }
};

}  // namespace

ElementStats ComputeElementStats(DataType dtype, const uint8_t* payload, uint64_t count) {
  if (dtype == DataType::kFloat64) {
    Accumulator<true> acc;
    for (uint64_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, payload + i * 8, 8);
      acc.Add(v);
    }
    return acc.Done();
  }
  Accumulator<false> acc;
  if (dtype == DataType::kFloat32) {
    // The common case, in blocks: a block without NaN, Inf or zero (one
    // pass over the exponent bits) takes a branch-free loop the compiler can
    // vectorize; any other block goes element by element.
    constexpr uint64_t kBlock = 256;
    float block[kBlock];
    uint64_t i = 0;
    for (; i + kBlock <= count; i += kBlock) {
      std::memcpy(block, payload + i * 4, sizeof(block));
      uint32_t special = 0;
      for (uint64_t j = 0; j < kBlock; ++j) {
        uint32_t bits;
        std::memcpy(&bits, &block[j], 4);
        const uint32_t exponent = bits & 0x7F800000u;
        special |= (exponent == 0x7F800000u) | ((bits & 0x7FFFFFFFu) == 0);
      }
      if (special != 0 || acc.s.finite == 0) {
        for (uint64_t j = 0; j < kBlock; ++j) acc.Add(block[j]);
        continue;
      }
      // Eight independent lanes: the sums do not wait on each other.
      constexpr int kLanes = 8;
      float lo[kLanes], hi[kLanes], abs_hi[kLanes];
      double sums[kLanes] = {}, sqs[kLanes] = {};
      for (int l = 0; l < kLanes; ++l) lo[l] = hi[l] = block[l], abs_hi[l] = 0;
      for (uint64_t j = 0; j < kBlock; j += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const float v = block[j + l];
          lo[l] = v < lo[l] ? v : lo[l];
          hi[l] = v > hi[l] ? v : hi[l];
          const float a = std::fabs(v);
          abs_hi[l] = a > abs_hi[l] ? a : abs_hi[l];
          sums[l] += v;
          sqs[l] += static_cast<double>(v) * v;
        }
      }
      double sum = 0, squares = 0;
      for (int l = 1; l < kLanes; ++l) {
        lo[0] = lo[l] < lo[0] ? lo[l] : lo[0];
        hi[0] = hi[l] > hi[0] ? hi[l] : hi[0];
        abs_hi[0] = abs_hi[l] > abs_hi[0] ? abs_hi[l] : abs_hi[0];
      }
      for (int l = 0; l < kLanes; ++l) {
        sum += sums[l];
        squares += sqs[l];
      }
      const float lo0 = lo[0], hi0 = hi[0], abs0 = abs_hi[0];
      acc.s.count += kBlock;
      acc.s.finite += kBlock;
      acc.s.min = lo0 < acc.s.min ? lo0 : acc.s.min;
      acc.s.max = hi0 > acc.s.max ? hi0 : acc.s.max;
      acc.s.abs_max = abs0 > acc.s.abs_max ? abs0 : acc.s.abs_max;
      acc.sum += sum;
      acc.squares += squares;
    }
    for (; i < count; ++i) {
      float v;
      std::memcpy(&v, payload + i * 4, 4);
      acc.Add(v);
    }
    return acc.Done();
  }
  for (uint64_t i = 0; i < count; ++i) acc.Add(ElementAsDouble(dtype, payload, i));
  return acc.Done();
}

namespace {

// Whether any of `count` `Word`s has all of `exponent`'s bits set: a NaN or
// an infinity of an IEEE-style format whose exponent field is `exponent`.
// Blocks of 256 words OR-reduce in place without an early exit (the
// compiler vectorizes them); the scan stops at the first block with one.
template <typename Word>
bool AnyExponentAllOnes(const uint8_t* payload, uint64_t count, Word exponent) {
  constexpr uint64_t kBlock = 256;
  uint64_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    const uint8_t* block = payload + i * sizeof(Word);
    Word any = 0;
    for (uint64_t j = 0; j < kBlock; ++j) {
      Word w;
      std::memcpy(&w, block + j * sizeof(Word), sizeof(Word));
      any |= static_cast<Word>((w & exponent) == exponent);
    }
    if (any != 0) return true;
  }
  for (; i < count; ++i) {
    Word w;
    std::memcpy(&w, payload + i * sizeof(Word), sizeof(Word));
    if ((w & exponent) == exponent) return true;
  }
  return false;
}

}  // namespace

bool HasNonFinite(DataType dtype, const uint8_t* payload, uint64_t count) {
  switch (dtype) {
    case DataType::kFloat32:
      return AnyExponentAllOnes<uint32_t>(payload, count, 0x7F800000u);
    case DataType::kFloat64:
      return AnyExponentAllOnes<uint64_t>(payload, count, 0x7FF0000000000000ull);
    case DataType::kFloat16:
      return AnyExponentAllOnes<uint16_t>(payload, count, 0x7C00u);
    case DataType::kBfloat16:
      return AnyExponentAllOnes<uint16_t>(payload, count, 0x7F80u);
    default:
      break;
  }
  if (KindOf(dtype) != ElementKind::kFloat) return false;
  // The 8- and 4-bit formats (their NaN encodings differ): decoded.
  for (uint64_t i = 0; i < count; ++i) {
    if (!std::isfinite(ElementAsDouble(dtype, payload, i))) return true;
  }
  return false;
}

}  // namespace argsdump
