// Winograd convolution kernels for 3x3, stride-1, dilation-1, groups-1
// layers (Lavin & Gray 2016), fp32, raw contiguous buffers:
//   y = conv2d(x, w) + bias (cross-correlation, as PyTorch),
//   x [N,C,H,W] (NCHW) or [N,H,W,C] (NHWC); w [K,C,3,3] always; bias [K] or
//   nullptr; y [N,K,P,Q] / [N,P,Q,K] in x's layout, overwritten;
//   P = H + 2*pad_h - 2, Q = W + 2*pad_w - 2 (must be >= 1), pad in [0, 2].
// Tile::kF2x2 = F(2x2,3x3) (4x4 input tiles, 2.25x fewer multiplies),
// Tile::kF4x4 = F(4x4,3x3) (6x6 input tiles, points 0, +-1, +-2, inf; 4x fewer
// multiplies, numerically worse). Pipeline per block of tiles: input
// transform B^T d B, one GemmF32 per transform position (U [K x C] times
// V [C x tiles], or its transpose for NHWC), output transform A^T M A + bias.
// Error bound (docs/winograd.md), per output element y[n,k,p,q]:
//   |y - y_exact| <= ErrorBoundFactor(tile, C) * S + 2^-24 * |bias[k]|,
//   S = sum_c max|x[n,c,.,.]| over the (m+2)x(m+2) input patch (zero padded)
//       of the tile holding (p,q) (tiles start at multiples of m = 2 or 4)
//       * sum over the 3x3 filter of |w[k,c,.,.]|.
// (A bound by the 3x3 window alone cannot hold: Winograd mixes the whole
// patch into every output of a tile.) Bad arguments throw OpError. Results
// do not depend on the thread count (the same per-tile arithmetic runs
// whatever the split). Thread-safe; multi-threaded with OpenMP unless called
// inside a parallel region.
//
// Backward data of such a layer is itself such a forward: grad_x =
// Conv3x3Forward(grad_y [N,K,P,Q] as the input with K channels,
// RotatedTransposedWeight(w) [C,K,3,3], pad 2 - pad_h, 2 - pad_w, no bias),
// giving [N,C,H,W].
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/ops/common/image_layout.h"

namespace tessera::ops::winograd {

enum class Tile { kF2x2, kF4x4 };  // F(2x2,3x3): 4x4 input tiles; F(4x4,3x3): 6x6 input tiles
const char* TileName(Tile tile);    // "F(2x2,3x3)" / "F(4x4,3x3)"

void Conv3x3Forward(Tile tile, ImageLayout layout, const float* x, int64_t N, int64_t C, int64_t H, int64_t W,
                    const float* w, int64_t K, int64_t pad_h, int64_t pad_w, const float* bias, float* y);

// The factor of the bound above for C input channels (fp32).
double ErrorBoundFactor(Tile tile, int64_t C);

// Pre-transformed weights U = G w G^T, laid out for `layout`; a layer used
// across calls with unchanged weights can keep one and skip the transform.
struct TransformedWeight {
  Tile tile = Tile::kF4x4;
  ImageLayout layout = ImageLayout::kNCHW;
  int64_t K = 0, C = 0;
  std::vector<float> u;  // (m+2)^2 x [K][C] (NCHW) or [C][K] (NHWC), positions K*C+16 floats apart
};
TransformedWeight TransformWeight(Tile tile, ImageLayout layout, const float* w, int64_t K, int64_t C);

// Same as the simple entry point with U computed beforehand (tile, layout,
// K and C come from `u`).
void Conv3x3Forward(const TransformedWeight& u, const float* x, int64_t N, int64_t H, int64_t W, int64_t pad_h,
                    int64_t pad_w, const float* bias, float* y);

// w [K,C,3,3] -> w_rot [C,K,3,3], w_rot[c][k][i][j] = w[k][c][2-i][2-j]
// (the weight of the backward-data convolution; w_rot has K*C*9 floats).
void RotatedTransposedWeight(const float* w, int64_t K, int64_t C, float* w_rot);

}  // namespace tessera::ops::winograd
