// Packing of GEMM operands into "shared" panels: the cache-resident,
// contiguous layout a tile kernel reads (microkernel.h).
//
// A source matrix S is viewed as x-by-k: element (x, p) at src[x*sx + p*sp]
// (for B, x runs over columns; for A, over rows). The packers copy
// S[0..xs) x [0..kc) into ceil(xs/w) panels of width w (nr for B, mr for A),
// each zero-padded to w:
//   fp32 panels:  out[panel*kc*w + p*w + x]
//   bf16 pairs:   out[panel*kp*w + (p/2)*2*w + 2*x + p%2], kp = kc rounded up
//                 to even, the odd tail zero-padded (the VDPBF16PS layout).
//   k-groups of G (any element types, converted exactly):
//                 out[panel*kg*w + (p/G)*G*w + G*x + p%G], kg = kc rounded up
//                 to a multiple of G, zero-padded (G = 4: the VPDPBUSD
//                 layout of u8/s8; G = 2 of s16: the VPMADDWD layout).
// Contiguous rows are copied with vector moves, contiguous columns go
// through 8x8 register transposes (AVX2, the build's baseline ISA).
// Pure functions; the caller owns the buffers.
#pragma once

#include <cstdint>

#include "tessera/base/float16.h"

namespace tessera::tile {

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// fp32 panels from fp32 or (converted exactly) bf16.
void PackPanelsF32(const float* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, float* out);
void PackPanelsF32(const bf16* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, float* out);

// bf16 pair panels from bf16.
void PackPanelsPairs(const bf16* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, bf16* out);

// Integer panels in k-groups of `group` (1, 2 or 4): u8 / s8 kept, or
// widened to s16 (u8 zero-extended, s8 sign-extended).
void PackPanelsGroups(const uint8_t* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int group,
                      uint8_t* out);
void PackPanelsGroups(const int8_t* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int group,
                      int8_t* out);
void PackPanelsGroups(const uint8_t* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int group,
                      int16_t* out);
void PackPanelsGroups(const int8_t* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int group,
                      int16_t* out);

}  // namespace tessera::tile
