// 8-bit floating point e4m3 (OCP FP8 "E4M3FN": 1 sign, 4 exponent bits with
// bias 7, 3 mantissa bits; no infinities; S.1111.111 is NaN; largest finite
// ±448, smallest subnormal 2^-9). FloatToE4m3 rounds to nearest even,
// saturates finite values beyond ±448 (and ±inf) to ±448 — the convention
// of scaled quantization, where the scale keeps values in range — and maps
// NaN to NaN. E4m3ToFloat is exact (table lookup). Thread-safe.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "tessera/base/float16.h"

namespace tessera {

inline constexpr float kE4m3Max = 448.0f;

inline uint8_t FloatToE4m3(float f) {
  const uint32_t u = FloatBits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;   // NaN
  if (a >= 0x43e00000u) return sign | 0x7eu;  // >= 448 (and inf): saturate
  if (a < 0x3c800000u) {                      // < 2^-6: subnormal, quantum 2^-9
    const float scaled = BitsFloat(a) * 512.0f;  // exact (power of two)
    return sign | static_cast<uint8_t>(std::nearbyint(scaled));  // 8 -> 0x08 = 2^-6, still right
  }
  uint32_t r = a - (120u << 23);            // rebias 127 -> 7
  r += 0x7ffffu + ((r >> 20) & 1u);         // round to nearest even at mantissa bit 20
  return sign | static_cast<uint8_t>(r >> 20);
}

namespace float8_detail {
constexpr float E4m3Decode(uint8_t v) {
  const int exp = (v >> 3) & 0xf;
  const int man = v & 7;
  float mag = 0;
  if (exp == 0xf && man == 7) {
    mag = __builtin_nanf("");
  } else if (exp == 0) {
    mag = static_cast<float>(man) / 512.0f;
  } else {
    float p = 1;
    for (int i = 7; i < exp; ++i) p *= 2;
    for (int i = exp; i < 7; ++i) p /= 2;
    mag = p * (1.0f + static_cast<float>(man) / 8.0f);
  }
  return (v & 0x80) ? -mag : mag;
}
constexpr std::array<float, 256> MakeE4m3Table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = E4m3Decode(static_cast<uint8_t>(i));
  return t;
}
inline constexpr std::array<float, 256> kE4m3Table = MakeE4m3Table();
}  // namespace float8_detail

inline float E4m3ToFloat(uint8_t v) { return float8_detail::kE4m3Table[v]; }

}  // namespace tessera
