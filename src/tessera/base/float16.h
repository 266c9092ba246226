// 16-bit floating-point storage types: bfloat16 (8-bit exponent, 7-bit
// mantissa) and IEEE fp16 (5-bit exponent, 10-bit mantissa). Conversion from
// float rounds to nearest even; NaN stays NaN (quiet), infinities and
// signed zeros are preserved; fp16 overflow saturates to infinity and
// underflow produces subnormals. Arithmetic is done by converting to float.
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float f) : bits(FromFloat(f)) {}
  static bf16 FromBits(uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return BitsFloat(static_cast<uint32_t>(bits) << 16); }
  float ToFloat() const { return static_cast<float>(*this); }

  static uint16_t FromFloat(float f) {
    uint32_t u = FloatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding) >> 16);
  }
};

struct fp16 {
  uint16_t bits = 0;

  fp16() = default;
  explicit fp16(float f) : bits(FromFloat(f)) {}
  static fp16 FromBits(uint16_t b) {
    fp16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return ToFloatBits(bits); }
  float ToFloat() const { return ToFloatBits(bits); }

  static uint16_t FromFloat(float f) {
    uint32_t u = FloatBits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // overflow -> inf
    if (absu < 0x38800000u) {
      // Subnormal or zero in fp16: value = m * 2^-24.
      if (absu < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
      uint32_t exp = absu >> 23;
      uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
      uint32_t shift = 126u - exp;  // shift so result is in units of 2^-24
      uint32_t result = mant >> shift;
      uint32_t rem = mant & ((1u << shift) - 1u);
      uint32_t half = 1u << (shift - 1u);
      if (rem > half || (rem == half && (result & 1u))) ++result;
      return static_cast<uint16_t>(sign | result);
    }
    uint32_t rounded = absu + 0xfffu + ((absu >> 13) & 1u);
    rounded -= 0x38000000u;  // rebias exponent 127 -> 15
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }

  static float ToFloatBits(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu) return BitsFloat(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      if (mant == 0) return BitsFloat(sign);
      float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
      return sign ? -v : v;
    }
    return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

}  // namespace tessera
