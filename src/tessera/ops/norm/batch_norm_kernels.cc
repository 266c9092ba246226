// Optimized BatchNorm2d kernels: auto-vectorized loops (TESSERA_MULTIVERSION)
// run by ParallelFor. NCHW: tasks are (n, c) planes; plane sums use kLanes
// double lanes combined pairwise, per-channel totals add the planes in n
// order. NHWC: tasks are fixed blocks of kBlockPixels pixels, each keeping
// per-channel double sums (vectorized along C), added in block order.
// Statistics are sums of x - shift[c] (shift = the channel's first element)
// so that E[d^2] - E[d]^2 does not cancel when |mean| >> std.
#include "tessera/ops/norm/batch_norm_kernels.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "tessera/ops/elementwise/kernel_util.h"

namespace tessera::ops::kern {
namespace {

constexpr int kDLanes = 16;                 // double accumulators per plane sum
constexpr int64_t kBlockPixels = 256;       // NHWC pixels per partial-sum block

TESSERA_ALWAYS_INLINE double CombineD(double* acc) {
  for (int w = kDLanes / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0];
}

// d where y > 0, else +0: a bitwise AND with the comparison's mask (the
// vectorizer handles it better than a select feeding a double conversion).
TESSERA_ALWAYS_INLINE float MaskBy(float d, float y) {
  const uint32_t keep = 0u - static_cast<uint32_t>(y > 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(d) & keep);
}

// out = {sum(x - shift), sum((x - shift)^2)} over one plane.
TESSERA_MULTIVERSION void PlaneStats(const float* __restrict x, int64_t n, double shift, double* out) {
  double a1[kDLanes] = {}, a2[kDLanes] = {};
  int64_t i = 0;
  for (; i + kDLanes <= n; i += kDLanes) {
    for (int j = 0; j < kDLanes; ++j) {
      const double d = static_cast<double>(x[i + j]) - shift;
      a1[j] += d;
      a2[j] += d * d;
    }
  }
  for (int j = 0; i + j < n; ++j) {
    const double d = static_cast<double>(x[i + j]) - shift;
    a1[j] += d;
    a2[j] += d * d;
  }
  out[0] = CombineD(a1);
  out[1] = CombineD(a2);
}

TESSERA_MULTIVERSION void PlaneApply(const float* __restrict x, int64_t n, float mean, float scale, float beta,
                                     bool relu, float* __restrict y) {
  if (relu) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = (x[i] - mean) * scale + beta;
      y[i] = v > 0.0f ? v : 0.0f;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * scale + beta;
  }
}

// out = {sum(dy'), sum(dy' * (x - mean))}; dy' = dy, or dy masked by y > 0 (kMask).
template <bool kMask>
TESSERA_ALWAYS_INLINE void PlaneBackwardSumsImpl(const float* __restrict dy, const float* __restrict x,
                                                 const float* __restrict y, int64_t n, double mean, double* out) {
  double a1[kDLanes] = {}, a2[kDLanes] = {};
  auto step = [&](int64_t i, int j) __attribute__((always_inline)) {
    float df = dy[i];
    if constexpr (kMask) df = MaskBy(df, y[i]);
    const double d = static_cast<double>(df);
    a1[j] += d;
    a2[j] += d * (static_cast<double>(x[i]) - mean);
  };
  int64_t i = 0;
  for (; i + kDLanes <= n; i += kDLanes) {
    for (int j = 0; j < kDLanes; ++j) step(i + j, j);
  }
  for (int j = 0; i + j < n; ++j) step(i + j, j);
  out[0] = CombineD(a1);
  out[1] = CombineD(a2);
}
TESSERA_MULTIVERSION void PlaneBackwardSums(const float* __restrict dy, const float* __restrict x,
                                            const float* __restrict y, int64_t n, double mean, double* out) {
  if (y != nullptr) {
    PlaneBackwardSumsImpl<true>(dy, x, y, n, mean, out);
  } else {
    PlaneBackwardSumsImpl<false>(dy, x, y, n, mean, out);
  }
}

TESSERA_MULTIVERSION void PlaneBackwardDx(const float* __restrict dy, const float* __restrict x,
                                          const float* __restrict y, int64_t n, float k, float p, float mean,
                                          float q, float* __restrict dx) {
  if (y != nullptr) {
    for (int64_t i = 0; i < n; ++i) dx[i] = (y[i] > 0.0f ? k * dy[i] : 0.0f) + p * (x[i] - mean) + q;
  } else {
    for (int64_t i = 0; i < n; ++i) dx[i] = k * dy[i] + p * (x[i] - mean) + q;
  }
}

// NHWC sums over `rows` rows of C channels, kChanChunk channels at a time so
// that the double accumulators stay in registers: s1[c] += f1, s2[c] += f2
// with (f1, f2) = term(row, c). Full chunks have a constant width.
constexpr int64_t kChanChunk = 16;
template <typename Term>
TESSERA_ALWAYS_INLINE void RowsSums(int64_t rows, int64_t C, double* __restrict s1, double* __restrict s2, Term term) {
  int64_t c0 = 0;
  for (; c0 + kChanChunk <= C; c0 += kChanChunk) {
    double a1[kChanChunk] = {}, a2[kChanChunk] = {};
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < kChanChunk; ++j) term(r, c0 + j, a1[j], a2[j]);
    }
    for (int64_t j = 0; j < kChanChunk; ++j) s1[c0 + j] = a1[j], s2[c0 + j] = a2[j];
  }
  if (c0 < C) {
    double a1[kChanChunk] = {}, a2[kChanChunk] = {};
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < C - c0; ++j) term(r, c0 + j, a1[j], a2[j]);
    }
    for (int64_t j = 0; j < C - c0; ++j) s1[c0 + j] = a1[j], s2[c0 + j] = a2[j];
  }
}

// s1/s2 (C doubles each) receive the block's sums of x - shift and its square.
TESSERA_MULTIVERSION void RowsStats(const float* __restrict x, int64_t rows, int64_t C, const double* __restrict shift,
                                    double* __restrict s1, double* __restrict s2) {
  RowsSums(rows, C, s1, s2, [&](int64_t r, int64_t c, double& a1, double& a2) __attribute__((always_inline)) {
    const double d = static_cast<double>(x[r * C + c]) - shift[c];
    a1 += d;
    a2 += d * d;
  });
}

TESSERA_MULTIVERSION void RowsApply(const float* __restrict x, int64_t rows, int64_t C, const float* __restrict mean,
                                    const float* __restrict scale, const float* __restrict beta, bool relu,
                                    float* __restrict y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    if (relu) {
      for (int64_t c = 0; c < C; ++c) {
        const float v = (xr[c] - mean[c]) * scale[c] + beta[c];
        yr[c] = v > 0.0f ? v : 0.0f;
      }
    } else {
      for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - mean[c]) * scale[c] + beta[c];
    }
  }
}

template <bool kMask>
TESSERA_ALWAYS_INLINE void RowsBackwardSumsImpl(const float* __restrict dy, const float* __restrict x,
                                                const float* __restrict y, int64_t rows, int64_t C,
                                                const double* __restrict mean, double* __restrict s1,
                                                double* __restrict s2) {
  RowsSums(rows, C, s1, s2, [&](int64_t r, int64_t c, double& a1, double& a2) __attribute__((always_inline)) {
    float df = dy[r * C + c];
    if constexpr (kMask) df = MaskBy(df, y[r * C + c]);
    const double d = static_cast<double>(df);
    a1 += d;
    a2 += d * (static_cast<double>(x[r * C + c]) - mean[c]);
  });
}
TESSERA_MULTIVERSION void RowsBackwardSums(const float* __restrict dy, const float* __restrict x,
                                           const float* __restrict y, int64_t rows, int64_t C,
                                           const double* __restrict mean, double* __restrict s1,
                                           double* __restrict s2) {
  if (y != nullptr) {
    RowsBackwardSumsImpl<true>(dy, x, y, rows, C, mean, s1, s2);
  } else {
    RowsBackwardSumsImpl<false>(dy, x, y, rows, C, mean, s1, s2);
  }
}

TESSERA_MULTIVERSION void RowsBackwardDx(const float* __restrict dy, const float* __restrict x,
                                         const float* __restrict y, int64_t rows, int64_t C, const float* __restrict k,
                                         const float* __restrict p, const float* __restrict mean,
                                         const float* __restrict q, float* __restrict dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dr = dy + r * C;
    const float* xr = x + r * C;
    float* o = dx + r * C;
    if (y != nullptr) {
      const float* yr = y + r * C;
      for (int64_t c = 0; c < C; ++c) o[c] = (yr[c] > 0.0f ? k[c] * dr[c] : 0.0f) + p[c] * (xr[c] - mean[c]) + q[c];
    } else {
      for (int64_t c = 0; c < C; ++c) o[c] = k[c] * dr[c] + p[c] * (xr[c] - mean[c]) + q[c];
    }
  }
}

// Per-channel totals of per-plane (NCHW, part[(n*C + c)*2 + {0,1}]) partial sums, in n order.
void CombinePlanes(const BnGeom& g, const std::vector<double>& part, double* t1, double* t2) {
  for (int64_t c = 0; c < g.C; ++c) t1[c] = t2[c] = 0.0;
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t c = 0; c < g.C; ++c) {
      t1[c] += part[(n * g.C + c) * 2];
      t2[c] += part[(n * g.C + c) * 2 + 1];
    }
  }
}

// Per-channel totals of NHWC block partials (part[(2*b + {0,1}) * C + c]), in block order.
void CombineBlocks(int64_t blocks, int64_t C, const std::vector<double>& part, double* t1, double* t2) {
  for (int64_t c = 0; c < C; ++c) t1[c] = t2[c] = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      t1[c] += part[(2 * b) * C + c];
      t2[c] += part[(2 * b + 1) * C + c];
    }
  }
}

int64_t Blocks(const BnGeom& g) { return (g.N * g.HW + kBlockPixels - 1) / kBlockPixels; }

}  // namespace

void BatchNormStatsOptimized(const BnGeom& g, const float* x, double* mean, double* var) {
  const double m = static_cast<double>(g.N * g.HW);
  const int64_t total = g.N * g.C * g.HW;
  std::vector<double> shift(g.C), s1(g.C), s2(g.C);
  for (int64_t c = 0; c < g.C; ++c) shift[c] = x[g.nhwc ? c : c * g.HW];
  if (!g.nhwc) {
    std::vector<double> part(2 * g.N * g.C);
    ParallelFor(g.N * g.C, total, kParallelMemoryBound, [&](int64_t p) {
      PlaneStats(x + p * g.HW, g.HW, shift[p % g.C], &part[2 * p]);
    });
    CombinePlanes(g, part, s1.data(), s2.data());
  } else {
    const int64_t blocks = Blocks(g), pixels = g.N * g.HW;
    std::vector<double> part(2 * blocks * g.C);
    ParallelFor(blocks, total, kParallelMemoryBound, [&](int64_t b) {
      const int64_t r0 = b * kBlockPixels, rows = std::min(kBlockPixels, pixels - r0);
      RowsStats(x + r0 * g.C, rows, g.C, shift.data(), &part[2 * b * g.C], &part[(2 * b + 1) * g.C]);
    });
    CombineBlocks(blocks, g.C, part, s1.data(), s2.data());
  }
  for (int64_t c = 0; c < g.C; ++c) {
    const double d = s1[c] / m;
    mean[c] = shift[c] + d;
    var[c] = std::max(0.0, s2[c] / m - d * d);
  }
}

void BatchNormApplyOptimized(const BnGeom& g, const float* x, const float* mean, const float* scale,
                             const float* beta, bool relu, float* y) {
  const int64_t total = g.N * g.C * g.HW;
  if (!g.nhwc) {
    ParallelFor(g.N * g.C, total, kParallelMemoryBound, [&](int64_t p) {
      const int64_t c = p % g.C;
      PlaneApply(x + p * g.HW, g.HW, mean[c], scale[c], beta[c], relu, y + p * g.HW);
    });
    return;
  }
  const int64_t blocks = Blocks(g), pixels = g.N * g.HW;
  ParallelFor(blocks, total, kParallelMemoryBound, [&](int64_t b) {
    const int64_t r0 = b * kBlockPixels, rows = std::min(kBlockPixels, pixels - r0);
    RowsApply(x + r0 * g.C, rows, g.C, mean, scale, beta, relu, y + r0 * g.C);
  });
}

void BatchNormBackwardSumsOptimized(const BnGeom& g, const float* dy, const float* x, const float* y,
                                    const float* mean, double* sum_dy, double* sum_dyx) {
  const int64_t total = g.N * g.C * g.HW;
  if (!g.nhwc) {
    std::vector<double> part(2 * g.N * g.C);
    ParallelFor(g.N * g.C, total, kParallelMemoryBound, [&](int64_t p) {
      const int64_t o = p * g.HW;
      PlaneBackwardSums(dy + o, x + o, y == nullptr ? nullptr : y + o, g.HW, mean[p % g.C], &part[2 * p]);
    });
    CombinePlanes(g, part, sum_dy, sum_dyx);
    return;
  }
  const int64_t blocks = Blocks(g), pixels = g.N * g.HW;
  std::vector<double> meand(mean, mean + g.C), part(2 * blocks * g.C);
  ParallelFor(blocks, total, kParallelMemoryBound, [&](int64_t b) {
    const int64_t r0 = b * kBlockPixels, rows = std::min(kBlockPixels, pixels - r0), o = r0 * g.C;
    RowsBackwardSums(dy + o, x + o, y == nullptr ? nullptr : y + o, rows, g.C, meand.data(), &part[2 * b * g.C],
                     &part[(2 * b + 1) * g.C]);
  });
  CombineBlocks(blocks, g.C, part, sum_dy, sum_dyx);
}

void BatchNormBackwardDxOptimized(const BnGeom& g, const float* dy, const float* x, const float* y, const float* k,
                                  const float* p, const float* mean, const float* q, float* dx) {
  const int64_t total = g.N * g.C * g.HW;
  if (!g.nhwc) {
    ParallelFor(g.N * g.C, total, kParallelMemoryBound, [&](int64_t t) {
      const int64_t c = t % g.C, o = t * g.HW;
      PlaneBackwardDx(dy + o, x + o, y == nullptr ? nullptr : y + o, g.HW, k[c], p[c], mean[c], q[c], dx + o);
    });
    return;
  }
  const int64_t blocks = Blocks(g), pixels = g.N * g.HW;
  ParallelFor(blocks, total, kParallelMemoryBound, [&](int64_t b) {
    const int64_t r0 = b * kBlockPixels, rows = std::min(kBlockPixels, pixels - r0), o = r0 * g.C;
    RowsBackwardDx(dy + o, x + o, y == nullptr ? nullptr : y + o, rows, g.C, k, p, mean, q, dx + o);
  });
}

}  // namespace tessera::ops::kern
