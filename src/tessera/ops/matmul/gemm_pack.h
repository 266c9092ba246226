// Packing of GEMM operands into micro-panels (internal).
//
// A source matrix S is viewed as x-by-k: element (x, p) at src[x*sx + p*sp]
// (for B, x runs over columns; for A, over rows). The packers copy
// S[0..xs) x [0..kc) into ceil(xs/w) panels of width w (nr for B, mr for A),
// each zero-padded to w:
//   fp32 panels:  out[panel*kc*w + p*w + x]
//   bf16 pairs:   out[panel*kp*w + (p/2)*2*w + 2*x + p%2], kp = kc rounded up
//                 to even, the odd tail zero-padded (the VDPBF16PS layout).
// Contiguous rows are copied with vector moves, contiguous columns go
// through 8x8 register transposes (AVX2, the build's baseline ISA).
// Pure functions; the caller owns the buffers.
#pragma once

#include <cstdint>

#include "tessera/base/float16.h"

namespace tessera::ops::gemm {

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// fp32 panels from fp32 or (converted exactly) bf16.
void PackPanelsF32(const float* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, float* out);
void PackPanelsF32(const bf16* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, float* out);

// bf16 pair panels from bf16.
void PackPanelsPairs(const bf16* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, bf16* out);

}  // namespace tessera::ops::gemm
