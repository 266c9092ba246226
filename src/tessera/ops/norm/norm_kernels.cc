#include "tessera/ops/norm/norm_kernels.h"

#include <algorithm>
#include <cmath>

#include "tessera/ops/elementwise/kernel_util.h"

namespace tessera::ops::kern {
namespace {

// Elements of x per parameter-gradient block (rows per block = this / D).
constexpr int64_t kGradBlockElems = 1 << 14;

// Returns {mean, rstd} of a layernorm row; two passes over the (L1-resident)
// row: the mean, then the centred sum of squares (no cancellation).
TESSERA_MULTIVERSION void LayerNormRowF32(const float* __restrict x, const float* __restrict g,
                                          const float* __restrict b, float eps, float* __restrict y, int64_t n,
                                          float* stats) {
  const float mean = SumLanes(x, n) / static_cast<float>(n);
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      float d = x[i + j] - mean;
      acc[j] += d * d;
    }
  }
  for (int j = 0; i + j < n; ++j) {
    float d = x[i + j] - mean;
    acc[j] += d * d;
  }
  const float rstd = 1.0f / std::sqrt(CombineSum(acc) / static_cast<float>(n) + eps);
  if (b != nullptr) {
    for (int64_t k = 0; k < n; ++k) y[k] = (x[k] - mean) * rstd * g[k] + b[k];
  } else {
    for (int64_t k = 0; k < n; ++k) y[k] = (x[k] - mean) * rstd * g[k];
  }
  stats[0] = mean;
  stats[1] = rstd;
}

TESSERA_MULTIVERSION void RmsNormRowF32(const float* __restrict x, const float* __restrict g, float eps,
                                        float* __restrict y, int64_t n, float* stats) {
  const float rstd = 1.0f / std::sqrt(DotLanes(x, x, n) / static_cast<float>(n) + eps);
  for (int64_t k = 0; k < n; ++k) y[k] = x[k] * rstd * g[k];
  stats[1] = rstd;
}

// dx for one row; accumulates dy * xhat into dg and dy into db (db may be
// null). For rmsnorm mean = 0 and the c1 term is dropped.
TESSERA_MULTIVERSION void NormBackwardRowF32(bool rms, const float* __restrict x, const float* __restrict dy,
                                             const float* __restrict g, float mean, float rstd,
                                             float* __restrict dx, float* __restrict dg, float* __restrict db,
                                             int64_t n) {
  float a1[kLanes] = {}, a2[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      float xh = (x[i + j] - mean) * rstd;
      float d = dy[i + j] * g[i + j];
      a1[j] += d;
      a2[j] += d * xh;
    }
  }
  for (int j = 0; i + j < n; ++j) {
    float xh = (x[i + j] - mean) * rstd;
    float d = dy[i + j] * g[i + j];
    a1[j] += d;
    a2[j] += d * xh;
  }
  const float inv_n = 1.0f / static_cast<float>(n);
  const float c1 = rms ? 0.0f : CombineSum(a1) * inv_n;
  const float c2 = CombineSum(a2) * inv_n;
  for (int64_t k = 0; k < n; ++k) {
    float xh = (x[k] - mean) * rstd;
    dx[k] = rstd * (dy[k] * g[k] - c1 - xh * c2);
    dg[k] += dy[k] * xh;
  }
  if (db != nullptr) {
    for (int64_t k = 0; k < n; ++k) db[k] += dy[k];
  }
}

TESSERA_MULTIVERSION void ZeroF32(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = 0.0f;
}

// out[i] = sum over blocks k of part[k * n + i], in block order.
TESSERA_MULTIVERSION void SumBlocksF32(const float* __restrict part, int64_t blocks, int64_t n,
                                       float* __restrict out) {
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
      float stats[2] = {0.0f, 0.0f};
      if (rms) {
        RmsNormRowF32(xr, gamma, eps, yr, D, stats);
      } else {
        LayerNormRowF32(xr, gamma, beta, eps, yr, D, stats);
        mean[r] = stats[0];
      }
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
      NormBackwardRowF32(rms, xr, gr, gamma, rms ? 0.0f : mean[r], rstd[r], o, dg, db, D);
      FinishF32(dt, o, dst, D);
    }
  });
  SumBlocksF32(pg, blocks, D, grad_gamma);
  if (has_beta) SumBlocksF32(pb, blocks, D, grad_beta);
}

}  // namespace tessera::ops::kern
