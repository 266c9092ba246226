#include "tessera/ops/conv/winograd.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/conv/winograd_transforms.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/matmul/gemm.h"

// Driver: validation, blocking, threading and the per-position GEMMs. The
// transforms are in winograd_transforms.cc; design and figures in
// docs/winograd.md.
//
// Two schedules, chosen from the shape only (so results never depend on the
// thread count; the per-tile arithmetic is the same in both):
//  * blocked (>= 4 blocks): tiles are cut into blocks of ~1.2-1.75 MiB of V
//    and M; U is transformed up front; each thread takes whole blocks: input
//    transform, (m+2)^2 single-threaded GEMMs, output transform, while V and
//    M are in L2.
//  * whole (few tiles, deep layers): one block holding every tile; the
//    transforms run in parallel over tile chunks; the products over
//    positions (cached U) or over chunks of output channels, each thread
//    transforming a chunk's U and multiplying it at once (U, large for deep
//    layers, never goes to memory).

namespace tessera::ops::winograd {
namespace {

using detail::Geometry;

int64_t g_block_tiles_for_testing = 0;  // 0: automatic (see BlockTiles)
int64_t g_k_chunk_for_testing = 0;      // 0: automatic (see KChunk)

// V + M of a block (measured on Zen 5, 1 MiB L2: NCHW ~1.2 MiB, NHWC ~1.75 MiB).
constexpr int64_t kBlockBytesNchw = 1216 << 10, kBlockBytesNhwc = 1792 << 10;
constexpr int64_t kMinBlocksForBlocked = 4;

int TileM(Tile tile) { return tile == Tile::kF2x2 ? 2 : 4; }

int64_t BlockTiles(const Geometry& g, ImageLayout layout) {
  if (g_block_tiles_for_testing > 0) return g_block_tiles_for_testing;
  const int64_t a = g.m + 2;
  const int64_t bytes = layout == ImageLayout::kNCHW ? kBlockBytesNchw : kBlockBytesNhwc;
  const int64_t b = bytes / (a * a * (g.C + g.K) * int64_t{sizeof(float)});
  // Whole GEMM panels: the 12 x 32 micro-kernel runs tiles along N (32
  // columns) for NCHW and along M (12 rows) for NHWC.
  const int64_t q = layout == ImageLayout::kNCHW ? 32 : 24;
  return std::clamp<int64_t>((b + q / 2) / q * q, q, 384);
}

void CheckArgs(const char* what, const float* x, int64_t N, int64_t C, int64_t H, int64_t W, const float* w, int64_t K,
               int64_t pad_h, int64_t pad_w, const float* y) {
  if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1) {
    throw OpError(fmt::format("{}: sizes must be >= 1, got N={} C={} H={} W={} K={}", what, N, C, H, W, K));
  }
  if (pad_h < 0 || pad_h > 2 || pad_w < 0 || pad_w > 2) {
    throw OpError(fmt::format("{}: padding must be in [0, 2] for a 3x3 kernel, got pad_h={} pad_w={}", what, pad_h,
                              pad_w));
  }
  const int64_t P = H + 2 * pad_h - 2, Q = W + 2 * pad_w - 2;
  if (P < 1 || Q < 1) {
    throw OpError(fmt::format("{}: empty output {}x{} (input {}x{} with padding {},{} is smaller than the 3x3 kernel)",
                              what, P, Q, H, W, pad_h, pad_w));
  }
  if (x == nullptr || w == nullptr || y == nullptr) throw OpError(fmt::format("{}: null x, w or y buffer", what));
}

// G ⊗ G as a [T x 9] matrix: U[i*a + j] = sum_pq G[i][p] G[j][q] g[p][q]
// (products formed in double, rounded once).
const float* KronG(int m) {
  static const auto tables = [] {
    const double g2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    const double g4[6][3] = {{0.25, 0, 0},         {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                             {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
    std::array<std::vector<float>, 2> t;
    for (int which = 0; which < 2; ++which) {
      const int a = which == 0 ? 4 : 6;
      auto G = [&](int i, int p) { return which == 0 ? g2[i][p] : g4[i][p]; };
      t[which].resize(a * a * 9);
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j)
          for (int p = 0; p < 3; ++p)
            for (int q = 0; q < 3; ++q) t[which][(i * a + j) * 9 + p * 3 + q] = static_cast<float>(G(i, p) * G(j, q));
    }
    return t;
  }();
  return tables[m == 2 ? 0 : 1].data();
}

// U = (G ⊗ G) g for every (k, c): GemmF32 calls [T x 9] x [9 x pairs] whose
// B operand is the weight read transposed ([pairs x 9] row-major), so the
// strided gather of the 9 taps is GemmF32's vectorized packing. The pairs
// are split here (GemmF32 itself would split T and pack w twice). NHWC wants
// pairs in (c, k) order: the 9-tap rows are permuted into that order first.
void TransformWeightInto(int m, ImageLayout layout, const float* w, int64_t K, int64_t C, float* u) {
  const int64_t T = (m + 2) * (m + 2), ups = detail::UPosStride(K, C), F = K * C;
  const float* kron = KronG(m);
  const float* taps = w;
  if (layout == ImageLayout::kNHWC) {
    float* perm = kern::Scratch(5, F * 9);
    kern::ParallelFor(C, F * 9, kern::kParallelMemoryBound, [&](int64_t c) {
      for (int64_t k = 0; k < K; ++k) std::memcpy(perm + (c * K + k) * 9, w + (k * C + c) * 9, 9 * sizeof(float));
    });
    taps = perm;
  }
  constexpr int64_t kTask = 4096;
  const int64_t tasks = (F + kTask - 1) / kTask;
  kern::ParallelFor(tasks, T * 9 * F, kern::kParallelComputeBound, [&](int64_t t) {
    const int64_t f0 = t * kTask, n = std::min(kTask, F - f0);
    GemmF32(false, true, T, n, 9, 1.0f, kron, 9, taps + f0 * 9, 9, 0.0f, u + f0, ups);
  });
}

// The products of positions [p0, p1) of one block of nb tiles (block stride
// ld) for output channels [k0, k0 + kb); u holds U of those channels only
// (laid out as for K = kb).
void BlockGemms(const Geometry& g, ImageLayout layout, const float* u, int64_t k0, int64_t kb, const float* v,
                float* mm, int64_t nb, int64_t ld, int64_t p0, int64_t p1) {
  const int64_t ups = detail::UPosStride(kb, g.C), vps = detail::VPosStride(g, ld), mps = detail::MPosStride(g, ld);
  for (int64_t p = p0; p < p1; ++p) {
    if (layout == ImageLayout::kNCHW) {  // M[kb x nb] = U[kb x C] V[C x nb]
      GemmF32(false, false, kb, nb, g.C, 1.0f, u + p * ups, g.C, v + p * vps, ld, 0.0f, mm + p * mps + k0 * ld, ld);
    } else {  // M[nb x kb] = V[nb x C] U[C x kb]
      GemmF32(false, false, nb, kb, g.C, 1.0f, v + p * vps, g.C, u + p * ups, kb, 0.0f, mm + p * mps + k0, g.K);
    }
  }
}

// Output channels per weight-transform chunk in the whole schedule: U of a
// deep layer (37 MiB for F(4x4,3x3) at C = K = 512) would go to memory and
// back; a chunk of ~kUChunkBytes stays in L3 between its transform and its
// GEMMs. Whole GEMM panels: 12 rows (NCHW) / 32 columns (NHWC).
constexpr int64_t kUChunkBytes = 2 << 20;
int64_t KChunk(const Geometry& g, ImageLayout layout) {
  if (g_k_chunk_for_testing > 0) return std::min(g_k_chunk_for_testing, g.K);
  const int64_t T = (g.m + 2) * (g.m + 2);
  const int64_t q = layout == ImageLayout::kNCHW ? 12 : 32;
  const int64_t kb = kUChunkBytes / (T * g.C * int64_t{sizeof(float)}) / q * q;
  return std::clamp<int64_t>(kb, q, g.K);
}

// u: pre-transformed U of all K channels, or null (then w is transformed here).
void Run(const Geometry& g, ImageLayout layout, const float* x, const float* u, const float* w, const float* bias,
         float* y) {
  const int64_t T = (g.m + 2) * (g.m + 2);
  const int64_t tiles = g.Tiles();
  const int64_t bt = std::min(tiles, BlockTiles(g, layout));
  const int64_t blocks = (tiles + bt - 1) / bt;
  const int64_t work = tiles * T * g.C * g.K;  // multiply-adds of the GEMMs
  if (blocks >= kMinBlocksForBlocked) {
    if (u == nullptr) {
      float* uw = kern::Scratch(0, T * detail::UPosStride(g.K, g.C));
      TransformWeightInto(g.m, layout, w, g.K, g.C, uw);
      u = uw;
    }
    const int64_t scratch_floats = detail::TransformScratchFloats(g, bt);
    kern::ParallelFor(blocks, work, kern::kParallelComputeBound, [&](int64_t b) {
      const int64_t g0 = b * bt, nb = std::min(bt, tiles - g0);
      float* v = kern::Scratch(1, T * detail::VPosStride(g, bt));
      float* mm = kern::Scratch(2, T * detail::MPosStride(g, bt));
      float* scratch = kern::Scratch(3, scratch_floats);
      detail::InputTransform(g, layout, x, g0, g0 + nb, 0, v, bt, scratch);
      BlockGemms(g, layout, u, 0, g.K, v, mm, nb, bt, 0, T);
      detail::OutputTransform(g, layout, mm, bt, g0, g0 + nb, 0, bias, y, scratch);
    });
    return;
  }
  // Whole: every tile in one block (buffers of the calling thread); the
  // transforms split the tiles into chunks (lanes of the NCHW transforms).
  float* v = kern::Scratch(1, T * detail::VPosStride(g, tiles));
  float* mm = kern::Scratch(2, T * detail::MPosStride(g, tiles));
  const int64_t chunk = std::min<int64_t>(tiles, std::max<int64_t>(32, (tiles + 15) / 16));
  const int64_t chunks = (tiles + chunk - 1) / chunk;
  const int64_t scratch_floats = detail::TransformScratchFloats(g, chunk);
  kern::ParallelFor(chunks, tiles * T * g.C, kern::kParallelMemoryBound, [&](int64_t c) {
    const int64_t g0 = c * chunk, g1 = std::min(tiles, g0 + chunk);
    detail::InputTransform(g, layout, x, g0, g1, g0, v, tiles, kern::Scratch(3, scratch_floats));
  });
  const int64_t kb = KChunk(g, layout);
  if (u == nullptr && kb >= g.K) {  // one chunk: transform it in parallel, then the positions in parallel
    float* uw = kern::Scratch(0, T * detail::UPosStride(g.K, g.C));
    TransformWeightInto(g.m, layout, w, g.K, g.C, uw);
    u = uw;
  }
  if (u != nullptr) {
    kern::ParallelFor(T, work, kern::kParallelComputeBound,
                      [&](int64_t p) { BlockGemms(g, layout, u, 0, g.K, v, mm, tiles, tiles, p, p + 1); });
  } else {  // each thread: transform a chunk of output channels, then its T products (U chunk stays in its caches)
    const int64_t kchunks = (g.K + kb - 1) / kb;
    kern::ParallelFor(kchunks, work, kern::kParallelComputeBound, [&](int64_t kc) {
      const int64_t k0 = kc * kb, kn = std::min(kb, g.K - k0);
      float* uc = kern::Scratch(0, T * detail::UPosStride(kn, g.C));
      TransformWeightInto(g.m, layout, w + k0 * g.C * 9, kn, g.C, uc);  // w[k0 : k0 + kn] is a [kn, C, 3, 3] weight
      BlockGemms(g, layout, uc, k0, kn, v, mm, tiles, tiles, 0, T);
    });
  }
  kern::ParallelFor(chunks, tiles * T * g.K, kern::kParallelMemoryBound, [&](int64_t c) {
    const int64_t g0 = c * chunk, g1 = std::min(tiles, g0 + chunk);
    detail::OutputTransform(g, layout, mm, tiles, g0, g1, g0, bias, y, kern::Scratch(3, scratch_floats));
  });
}

Geometry MakeGeometry(int m, int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t pad_h, int64_t pad_w) {
  Geometry g;
  g.m = m;
  g.N = N, g.C = C, g.H = H, g.W = W, g.K = K, g.pad_h = pad_h, g.pad_w = pad_w;
  g.P = H + 2 * pad_h - 2, g.Q = W + 2 * pad_w - 2;
  g.th = (g.P + m - 1) / m, g.tw = (g.Q + m - 1) / m;
  return g;
}

}  // namespace

namespace detail {
void SetBlockTilesForTesting(int64_t tiles) { g_block_tiles_for_testing = tiles; }
void SetKChunkForTesting(int64_t channels) { g_k_chunk_for_testing = channels; }
}  // namespace detail

const char* TileName(Tile tile) { return tile == Tile::kF2x2 ? "F(2x2,3x3)" : "F(4x4,3x3)"; }

void Conv3x3Forward(Tile tile, ImageLayout layout, const float* x, int64_t N, int64_t C, int64_t H, int64_t W,
                    const float* w, int64_t K, int64_t pad_h, int64_t pad_w, const float* bias, float* y) {
  CheckArgs("winograd::Conv3x3Forward", x, N, C, H, W, w, K, pad_h, pad_w, y);
  Run(MakeGeometry(TileM(tile), N, C, H, W, K, pad_h, pad_w), layout, x, nullptr, w, bias, y);
}

TransformedWeight TransformWeight(Tile tile, ImageLayout layout, const float* w, int64_t K, int64_t C) {
  if (K < 1 || C < 1 || w == nullptr) {
    throw OpError(fmt::format("winograd::TransformWeight: need K, C >= 1 and a weight buffer, got K={} C={}", K, C));
  }
  TransformedWeight t;
  t.tile = tile, t.layout = layout, t.K = K, t.C = C;
  const int m = TileM(tile);
  t.u.resize(static_cast<size_t>((m + 2) * (m + 2) * detail::UPosStride(K, C)));
  TransformWeightInto(m, layout, w, K, C, t.u.data());
  return t;
}

void Conv3x3Forward(const TransformedWeight& u, const float* x, int64_t N, int64_t H, int64_t W, int64_t pad_h,
                    int64_t pad_w, const float* bias, float* y) {
  const int m = TileM(u.tile);
  if (u.K < 1 || u.C < 1 || static_cast<int64_t>(u.u.size()) != (m + 2) * (m + 2) * detail::UPosStride(u.K, u.C)) {
    throw OpError("winograd::Conv3x3Forward: TransformedWeight is empty or inconsistent (use TransformWeight)");
  }
  CheckArgs("winograd::Conv3x3Forward", x, N, u.C, H, W, u.u.data(), u.K, pad_h, pad_w, y);
  Run(MakeGeometry(m, N, u.C, H, W, u.K, pad_h, pad_w), u.layout, x, u.u.data(), nullptr, bias, y);
}

void RotatedTransposedWeight(const float* w, int64_t K, int64_t C, float* w_rot) {
  if (K < 1 || C < 1 || w == nullptr || w_rot == nullptr) {
    throw OpError(fmt::format("winograd::RotatedTransposedWeight: need K, C >= 1 and buffers, got K={} C={}", K, C));
  }
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      for (int e = 0; e < 9; ++e) w_rot[(c * K + k) * 9 + e] = w[(k * C + c) * 9 + (8 - e)];
    }
  }
}

double ErrorBoundFactor(Tile tile, int64_t C) {
  // docs/winograd.md: kappa * gamma_n, kappa the worst-case growth of the
  // transforms (16 for F(2x2,3x3), (88/3)^2 for F(4x4,3x3)), n the number of
  // roundings on the longest path (transforms + product + C-term sum).
  const double u = std::ldexp(1.0, -24);
  const double kappa = tile == Tile::kF2x2 ? 16.0 : (88.0 / 3.0) * (88.0 / 3.0);
  const double n = static_cast<double>(std::max<int64_t>(C, 1)) + (tile == Tile::kF2x2 ? 24.0 : 28.0);
  return kappa * n * u / (1.0 - n * u);
}

}  // namespace tessera::ops::winograd
