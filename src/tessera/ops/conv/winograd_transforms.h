// Internal to the Winograd kernels (winograd.h): the input and output
// transforms on raw buffers, single-threaded (the driver in
// winograd.cc splits the work and runs the GEMMs). Layouts:
//   tiles: global index g = (n * th + tr) * tw + tc, tile (tr, tc) covers
//     outputs [tr*m, tr*m+m) x [tc*m, tc*m+m) and inputs from
//     (tr*m - pad_h, tc*m - pad_w), (m+2) x (m+2), zero outside the image;
//   a block holds tiles [g0, g0 + ld) at columns 0..ld-1 (ld = block stride);
//   NCHW: V [T][C][ld], M [T][K][ld], U [T][K][C]  (M = U * V per position)
//   NHWC: V [T][ld][C], M [T][ld][K], U [T][C][K]  (M = V * U per position)
//   with T = (m+2)^2 positions, position index i*(m+2) + j, and positions
//   kPosPad floats further apart than their size (VPosStride etc.): the
//   transforms write all T positions at once, and T streams a multiple of
//   4 KiB apart would share L1 sets.
// The AVX-512 clones are chosen at load time (TESSERA_MULTIVERSION).
#pragma once

#include <cstdint>

#include "tessera/ops/common/image_layout.h"

namespace tessera::ops::winograd::detail {

struct Geometry {
  int m = 4;  // output tile size (2 or 4); input tile a = m + 2
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, pad_h = 0, pad_w = 0;
  int64_t P = 0, Q = 0, th = 0, tw = 0;  // output size, tiles per column / row
  int64_t Tiles() const { return N * th * tw; }
};

inline constexpr int64_t kPosPad = 16;
inline int64_t VPosStride(const Geometry& g, int64_t ld) { return g.C * ld + kPosPad; }
inline int64_t MPosStride(const Geometry& g, int64_t ld) { return g.K * ld + kPosPad; }
inline int64_t UPosStride(int64_t K, int64_t C) { return K * C + kPosPad; }

// Floats of per-thread temporary space the transforms below need for
// ranges of at most max_tiles tiles.
int64_t TransformScratchFloats(const Geometry& g, int64_t max_tiles);

// Transforms the tiles [g0, g1) of x into V at block columns col0.. .
void InputTransform(const Geometry& g, ImageLayout layout, const float* x, int64_t g0, int64_t g1, int64_t col0,
                    float* v, int64_t ld, float* scratch);

// Inverse-transforms block columns col0.. of M (tiles [g0, g1)) into y, adding bias (may be null).
void OutputTransform(const Geometry& g, ImageLayout layout, const float* mm, int64_t ld, int64_t g0, int64_t g1,
                     int64_t col0, const float* bias, float* y, float* scratch);

// Forces the block size in tiles (0: automatic), e.g. to cut blocks inside
// tile rows and to force the blocked schedule. Not thread-safe; tests only.
void SetBlockTilesForTesting(int64_t tiles);
// Forces the output channels per weight-transform chunk of the whole
// schedule (0: automatic). Tests only.
void SetKChunkForTesting(int64_t channels);

}  // namespace tessera::ops::winograd::detail
