#include "tessera/ops/norm/norm_kernels.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/elementwise/simd.h"

// 64-byte vectors only live inside AVX-512 functions (see simd.h).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tessera::ops::kern {
namespace {

// Elements of x per parameter-gradient block (rows per block = this / D).
constexpr int64_t kGradBlockElems = 1 << 14;

// Runs body(i, std::integral_constant<bool, partial>) over x[0:n] in steps
// of W: full vectors first, then one partial vector for the tail.
template <int W, typename Body>
TESSERA_ALWAYS_INLINE void ForVectors(int64_t n, Body&& body) {
  int64_t i = 0;
  for (; i + W <= n; i += W) body(i, std::false_type{});
  if (i < n) body(i, std::true_type{});
}
template <int W, bool kPartial>
TESSERA_ALWAYS_INLINE VF<W> LoadV(const float* x, int64_t i, int64_t n) {
  if constexpr (kPartial) {
    return LoadPartial<W>(x + i, n - i);
  } else {
    return Load<W>(x + i);
  }
}
template <int W, bool kPartial>
TESSERA_ALWAYS_INLINE void StoreV(float* y, int64_t i, int64_t n, VF<W> v) {
  if constexpr (kPartial) {
    StorePartial<W>(y + i, v, n - i);
  } else {
    Store<W>(y + i, v);
  }
}

// One layernorm (rms = false) or rmsnorm row, two passes over the
// (L1-resident) row. Layernorm statistics come from sums of x - shift, with
// shift the mean of the first few elements, so E[d^2] - E[d]^2 does not
// cancel catastrophically when |mean| >> std. Writes stats = {mean, rstd}.
template <int W>
TESSERA_ALWAYS_INLINE void NormRowImpl(bool rms, const float* __restrict x, const float* __restrict g,
                                       const float* __restrict b, float eps, float* __restrict y, int64_t n,
                                       float* stats) {
  float shift = 0.0f;
  if (!rms) {
    const int64_t k = n < W ? n : W;
    for (int64_t i = 0; i < k; ++i) shift += x[i];
    shift /= static_cast<float>(k);
  }
  const VF<W> vs = Splat<W>(shift);
  VF<W> s1a = Splat<W>(0.0f), s1b = s1a, s2a = s1a, s2b = s1a;
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    VF<W> d0 = Load<W>(x + i) - vs, d1 = Load<W>(x + i + W) - vs;
    s1a += d0;
    s1b += d1;
    s2a += d0 * d0;
    s2b += d1 * d1;
  }
  for (; i < n; i += W) {
    VF<W> d = LoadV<W, true>(x, i, n) - vs;
    for (int64_t j = n - i < W ? n - i : W; j < W; ++j) d[j] = 0.0f;  // padding lanes hold 0 - shift
    s1a += d;
    s2a += d * d;
  }
  const float inv_n = 1.0f / static_cast<float>(n);
  const float s1 = kern::HorizontalSum<W>(s1a + s1b) * inv_n;
  float var = kern::HorizontalSum<W>(s2a + s2b) * inv_n;
  float mean = 0.0f;
  if (!rms) {
    var -= s1 * s1;
    var = var > 0.0f ? var : 0.0f;
    mean = shift + s1;
  }
  const float rstd = 1.0f / std::sqrt(var + eps);
  const VF<W> vm = Splat<W>(mean), vr = Splat<W>(rstd);
  if (b != nullptr) {
    ForVectors<W>(
        n, [&](int64_t k, auto partial) __attribute__((always_inline)) {
          constexpr bool p = decltype(partial)::value;
          StoreV<W, p>(y, k, n, (LoadV<W, p>(x, k, n) - vm) * vr * LoadV<W, p>(g, k, n) + LoadV<W, p>(b, k, n));
        });
  } else {
    ForVectors<W>(
        n, [&](int64_t k, auto partial) __attribute__((always_inline)) {
          constexpr bool p = decltype(partial)::value;
          StoreV<W, p>(y, k, n, (LoadV<W, p>(x, k, n) - vm) * vr * LoadV<W, p>(g, k, n));
        });
  }
  stats[0] = mean;
  stats[1] = rstd;
}
TESSERA_SIMD_DISPATCH(NormRow,
                      (bool rms, const float* x, const float* g, const float* b, float eps, float* y, int64_t n,
                       float* stats),
                      (rms, x, g, b, eps, y, n, stats))

// Backward of one row, two passes: (1) c1 = mean(dy*g), c2 = mean(dy*g*xhat)
// while accumulating dg += dy*xhat and db += dy (db may be null); (2) dx =
// rstd * (dy*g - c1 - xhat*c2). For rmsnorm mean = 0 and c1 is dropped.
template <int W>
TESSERA_ALWAYS_INLINE void NormBackwardRowImpl(bool rms, const float* __restrict x, const float* __restrict dy,
                                               const float* __restrict g, float mean, float rstd, float* __restrict dx,
                                               float* __restrict dg, float* __restrict db, int64_t n) {
  const VF<W> vm = Splat<W>(mean), vr = Splat<W>(rstd);
  VF<W> a1 = Splat<W>(0.0f), a2 = a1;
  ForVectors<W>(
      n, [&](int64_t i, auto partial) __attribute__((always_inline)) {
        constexpr bool p = decltype(partial)::value;
        VF<W> d = LoadV<W, p>(dy, i, n);  // padding lanes: d = 0, so they add nothing
        VF<W> xh = (LoadV<W, p>(x, i, n) - vm) * vr;
        VF<W> dgin = d * LoadV<W, p>(g, i, n);
        a1 += dgin;
        a2 += dgin * xh;
        StoreV<W, p>(dg, i, n, LoadV<W, p>(dg, i, n) + d * xh);
        if (db != nullptr) StoreV<W, p>(db, i, n, LoadV<W, p>(db, i, n) + d);
      });
  const float inv_n = 1.0f / static_cast<float>(n);
  const VF<W> c1 = Splat<W>(rms ? 0.0f : kern::HorizontalSum<W>(a1) * inv_n);
  const VF<W> c2 = Splat<W>(kern::HorizontalSum<W>(a2) * inv_n);
  ForVectors<W>(
      n, [&](int64_t i, auto partial) __attribute__((always_inline)) {
        constexpr bool p = decltype(partial)::value;
        VF<W> xh = (LoadV<W, p>(x, i, n) - vm) * vr;
        StoreV<W, p>(dx, i, n, vr * (LoadV<W, p>(dy, i, n) * LoadV<W, p>(g, i, n) - c1 - xh * c2));
      });
}
TESSERA_SIMD_DISPATCH(NormBackwardRow,
                      (bool rms, const float* x, const float* dy, const float* g, float mean, float rstd, float* dx,
                       float* dg, float* db, int64_t n),
                      (rms, x, dy, g, mean, rstd, dx, dg, db, n))

TESSERA_MULTIVERSION void ZeroF32(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = 0.0f;
}

// out[i] = sum over blocks k of part[k * n + i], in block order.
TESSERA_MULTIVERSION void SumBlocksF32(const float* __restrict part, int64_t blocks, int64_t n, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
  for (int64_t k = 0; k < blocks; ++k) {
    for (int64_t i = 0; i < n; ++i) out[i] += part[k * n + i];
  }
}

}  // namespace

void NormForwardOptimized(bool rms, const Tensor& x, const float* gamma, const float* beta, float eps, Tensor& y,
                          float* mean, float* rstd, int64_t rows, int64_t D) {
  const DType dt = x.dtype();
  const void* xp = x.raw_data();
  void* yp = y.raw_data();
  const int64_t rows_per_task = std::max<int64_t>(1, kChunk / D);
  ParallelFor((rows + rows_per_task - 1) / rows_per_task, rows * D, kParallelComputeBound, [&](int64_t t) {
    for (int64_t r = t * rows_per_task, e = std::min(rows, r + rows_per_task); r < e; ++r) {
      const float* xr = AsF32(dt, ElemPtr(xp, dt, r * D), D, 0);
      void* dst = ElemPtr(yp, dt, r * D);
      float* yr = OutF32(dt, dst, D, 1);
      float stats[2];
      NormRow(rms, xr, gamma, rms ? nullptr : beta, eps, yr, D, stats);
      if (!rms) mean[r] = stats[0];
      rstd[r] = stats[1];
      FinishF32(dt, yr, dst, D);
    }
  });
}

void NormBackwardOptimized(bool rms, const Tensor& dy, const Tensor& x, const float* gamma, const float* mean,
                           const float* rstd, Tensor& dx, float* grad_gamma, float* grad_beta, int64_t rows,
                           int64_t D) {
  const DType dt = x.dtype();
  const void* xp = x.raw_data();
  const void* dyp = dy.raw_data();
  void* dxp = dx.raw_data();
  const int64_t rows_per_block = std::max<int64_t>(1, kGradBlockElems / D);
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  const bool has_beta = grad_beta != nullptr;
  // Partial parameter gradients per block: [blocks, D] (and [blocks, D] for beta).
  Tensor partial = Tensor::Empty({std::max<int64_t>(blocks, 1) * D * (has_beta ? 2 : 1)}, DType::kF32);
  float* pg = partial.data<float>();
  float* pb = has_beta ? pg + blocks * D : nullptr;
  ParallelFor(blocks, rows * D, kParallelComputeBound, [&](int64_t k) {
    float* dg = pg + k * D;
    float* db = has_beta ? pb + k * D : nullptr;
    ZeroF32(dg, D);
    if (db != nullptr) ZeroF32(db, D);
    for (int64_t r = k * rows_per_block, e = std::min(rows, r + rows_per_block); r < e; ++r) {
      const float* xr = AsF32(dt, ElemPtr(xp, dt, r * D), D, 0);
      const float* gr = AsF32(dt, ElemPtr(dyp, dt, r * D), D, 1);
      void* dst = ElemPtr(dxp, dt, r * D);
      float* o = OutF32(dt, dst, D, 2);
      NormBackwardRow(rms, xr, gr, gamma, rms ? 0.0f : mean[r], rstd[r], o, dg, db, D);
      FinishF32(dt, o, dst, D);
    }
  });
  SumBlocksF32(pg, blocks, D, grad_gamma);
  if (has_beta) SumBlocksF32(pb, blocks, D, grad_beta);
}

}  // namespace tessera::ops::kern
