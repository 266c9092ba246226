// Optimized LayerNorm / RMSNorm kernels (internal). x, dy are contiguous
// [rows, D] in one floating dtype; gamma/beta fp32 [D] (converted by the
// caller); outputs preallocated. Rows run in parallel above a threshold;
// gamma/beta gradients are summed over fixed row blocks and combined in
// block order, so they do not depend on the thread count.
#pragma once

#include <cstdint>

#include "tessera/tensor/tensor.h"

namespace tessera::ops::kern {

// rms = false: layernorm (beta may be null); rms = true: rmsnorm (mean
// unused, may be null).
void NormForwardOptimized(bool rms, const Tensor& x, const float* gamma, const float* beta, float eps, Tensor& y,
                          float* mean, float* rstd, int64_t rows, int64_t D);

// grad_gamma / grad_beta: fp32 [D] outputs (grad_beta null for rmsnorm).
void NormBackwardOptimized(bool rms, const Tensor& dy, const Tensor& x, const float* gamma, const float* mean,
                           const float* rstd, Tensor& dx, float* grad_gamma, float* grad_beta, int64_t rows, int64_t D);

}  // namespace tessera::ops::kern
