// 8-bit floating-point storage types (OCP OFP8 formats, as on H100/MI300):
//
//   fp8_e4m3  "E4M3FN": 1 sign, 4 exponent (bias 7), 3 mantissa bits. No
//             infinities; the only NaN codes are S.1111.111 (0x7f, 0xff).
//             Largest finite 448, smallest normal 2^-6, smallest subnormal 2^-9.
//   fp8_e5m2  IEEE-like: 1 sign, 5 exponent (bias 15), 2 mantissa bits, with
//             ±inf (S.11111.00) and NaNs (S.11111.xx, xx != 0). Largest finite
//             57344, smallest normal 2^-14, smallest subnormal 2^-16.
//
// Conversion from float rounds to nearest, ties to even, and produces
// subnormals. NaN input gives a NaN code with the input's sign (0x7f | sign
// for both formats, as PyTorch does). Overflow — a value whose rounded
// magnitude exceeds the largest finite — depends on `saturate`:
//   saturate = false (the default, and the constructors; matches PyTorch's
//     `.to(torch.float8_*)` and CUDA's __NV_NOSAT): e4m3 gives NaN (it has no
//     infinity), e5m2 gives ±inf. ±inf input behaves the same way.
//   saturate = true (CUDA's __NV_SATFINITE, what FP8 training recipes use
//     after scaling): clamps to ±max finite, ±inf included. NaN stays NaN.
// Signed zeros are preserved. Conversion to float is exact. Arithmetic is done
// by converting to float. All functions are pure and thread-safe.
#pragma once

#include <cstdint>

#include "tessera/base/float16.h"

namespace tessera {
namespace internal {

// Round-to-nearest-even conversion of a float to an 8-bit float format with
// kExp exponent bits and kMant mantissa bits, whose largest finite code
// (magnitude, sign bit clear) is kMaxCode. kOverflowCode is the magnitude
// code for non-saturating overflow (NaN for e4m3, inf for e5m2).
template <int kExp, int kMant, uint32_t kMaxCode, uint32_t kOverflowCode>
inline uint8_t FloatToFp8(float f, bool saturate) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr int kDropBits = 23 - kMant;
  constexpr uint32_t kNanCode = 0x7fu;
  const uint32_t u = FloatBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint8_t>(sign | kNanCode);
  const int exp = static_cast<int>(absu >> 23) - 127;
  uint32_t code;
  if (exp < 1 - kBias) {
    // Subnormal (or zero) in the target: count units of 2^(1 - bias - mant).
    // The float is mant24 * 2^(exp - 23), so shift right by this much.
    const int shift = 23 + 1 - kBias - kMant - exp;
    if ((absu >> 23) == 0 || shift > 24) return static_cast<uint8_t>(sign);  // rounds to zero
    const uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
    code = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (code & 1u))) ++code;  // may carry into the smallest normal
  } else {
    // Normal: round the float's mantissa to kMant bits (a carry bumps the
    // exponent), then rebias the exponent from 127 to kBias.
    const uint32_t rounded = absu + ((1u << (kDropBits - 1)) - 1u) + ((absu >> kDropBits) & 1u);
    code = (rounded >> kDropBits) - (static_cast<uint32_t>(127 - kBias) << kMant);
  }
  if (code > kMaxCode) code = saturate ? kMaxCode : kOverflowCode;
  return static_cast<uint8_t>(sign | code);
}

template <int kExp, int kMant>
inline float Fp8ToFloat(uint8_t bits, bool nan_code, bool inf_code) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t exp = (bits >> kMant) & ((1u << kExp) - 1u);
  const uint32_t mant = bits & ((1u << kMant) - 1u);
  if (nan_code) return BitsFloat(sign | 0x7fc00000u);
  if (inf_code) return BitsFloat(sign | 0x7f800000u);
  if (exp == 0) {
    // Subnormal: mant * 2^(1 - bias - kMant), exact in float.
    constexpr float kUnit = 1.0f / static_cast<float>(1u << (kBias - 1 + kMant));
    const float v = static_cast<float>(mant) * kUnit;
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 127u - kBias) << 23) | (mant << (23 - kMant)));
}

}  // namespace internal

struct fp8_e4m3 {
  uint8_t bits = 0;

  static constexpr float kMax = 448.0f;
  static constexpr float kMinNormal = 0.015625f;       // 2^-6
  static constexpr float kMinSubnormal = 0.001953125f;  // 2^-9

  fp8_e4m3() = default;
  // Non-saturating: overflow and ±inf become NaN.
  explicit fp8_e4m3(float f) : bits(FromFloat(f)) {}
  static fp8_e4m3 FromBits(uint8_t b) {
    fp8_e4m3 h;
    h.bits = b;
    return h;
  }
  static fp8_e4m3 Saturated(float f) { return FromBits(FromFloat(f, /*saturate=*/true)); }

  static uint8_t FromFloat(float f, bool saturate = false) {
    return internal::FloatToFp8<4, 3, 0x7eu, 0x7fu>(f, saturate);
  }
  static float ToFloatBits(uint8_t b) { return internal::Fp8ToFloat<4, 3>(b, IsNanBits(b), false); }
  static bool IsNanBits(uint8_t b) { return (b & 0x7fu) == 0x7fu; }

  explicit operator float() const { return ToFloatBits(bits); }
  float ToFloat() const { return ToFloatBits(bits); }
  bool IsNan() const { return IsNanBits(bits); }
};

struct fp8_e5m2 {
  uint8_t bits = 0;

  static constexpr float kMax = 57344.0f;
  static constexpr float kMinNormal = 6.103515625e-05f;     // 2^-14
  static constexpr float kMinSubnormal = 1.52587890625e-05f;  // 2^-16

  fp8_e5m2() = default;
  // Non-saturating: overflow becomes ±inf.
  explicit fp8_e5m2(float f) : bits(FromFloat(f)) {}
  static fp8_e5m2 FromBits(uint8_t b) {
    fp8_e5m2 h;
    h.bits = b;
    return h;
  }
  static fp8_e5m2 Saturated(float f) { return FromBits(FromFloat(f, /*saturate=*/true)); }

  static uint8_t FromFloat(float f, bool saturate = false) {
    return internal::FloatToFp8<5, 2, 0x7bu, 0x7cu>(f, saturate);
  }
  static float ToFloatBits(uint8_t b) { return internal::Fp8ToFloat<5, 2>(b, IsNanBits(b), IsInfBits(b)); }
  static bool IsNanBits(uint8_t b) { return (b & 0x7fu) > 0x7cu; }
  static bool IsInfBits(uint8_t b) { return (b & 0x7fu) == 0x7cu; }

  explicit operator float() const { return ToFloatBits(bits); }
  float ToFloat() const { return ToFloatBits(bits); }
  bool IsNan() const { return IsNanBits(bits); }
  bool IsInf() const { return IsInfBits(bits); }
};

static_assert(sizeof(fp8_e4m3) == 1 && sizeof(fp8_e5m2) == 1);

}  // namespace tessera
