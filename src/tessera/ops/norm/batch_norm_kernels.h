// Optimized BatchNorm2d kernels (internal; batch_norm.cc validates and
// dispatches). Buffers are contiguous fp32 in the call's layout; per-channel
// arrays have C entries. Sums accumulate in double per (n, c) plane (NCHW)
// or per fixed block of pixels (NHWC) and the partial sums are combined in
// a fixed order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace tessera::ops::kern {

struct BnGeom {
  int64_t N, C, HW;
  bool nhwc;
};

// Pass 1 of the training forward: per-channel mean and biased variance.
void BatchNormStatsOptimized(const BnGeom& g, const float* x, double* mean, double* var);

// y = (x - mean[c]) * scale[c] + beta[c], then max(y, 0) when relu. One pass.
void BatchNormApplyOptimized(const BnGeom& g, const float* x, const float* mean, const float* scale,
                             const float* beta, bool relu, float* y);

// Pass 1 of the backward: sum_dy[c] = sum of dy' and sum_dyx[c] = sum of
// dy' * (x - mean[c]), where dy' = dy masked by y > 0 when y is non-null.
void BatchNormBackwardSumsOptimized(const BnGeom& g, const float* dy, const float* x, const float* y,
                                    const float* mean, double* sum_dy, double* sum_dyx);

// Pass 2: dx = k[c] * dy' + p[c] * (x - mean[c]) + q[c] (dy' as above).
void BatchNormBackwardDxOptimized(const BnGeom& g, const float* dy, const float* x, const float* y, const float* k,
                                  const float* p, const float* mean, const float* q, float* dx);

}  // namespace tessera::ops::kern
