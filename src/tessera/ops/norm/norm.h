// LayerNorm and RMSNorm over the last axis, forward and backward. The
// forward returns the per-row statistics (fp32) that the backward reuses.
//   layernorm: y = (x - mean) * rstd * gamma + beta
//   rmsnorm:   y = x * rstd * gamma,  rstd = 1/sqrt(mean(x^2) + eps)
// gamma/beta have shape [D] and may be fp32 while x is bf16 (mixed
// precision); grad_gamma takes gamma's dtype, and grad_beta (the backward
// does not see beta) takes gamma's dtype too. Statistics and parameter
// gradients accumulate in fp32 (double in the reference); parameter
// gradients are summed over fixed row blocks, so results do not depend on
// the thread count. RmsNorm leaves NormResult::mean undefined. Bad shapes,
// dtypes or stats throw OpError. Thread-safe (no shared state).
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

struct NormResult {
  Tensor y;
  Tensor mean;  // [rows] fp32 (layernorm only)
  Tensor rstd;  // [rows] fp32
};
struct NormGrads {
  Tensor grad_x;
  Tensor grad_gamma;
  Tensor grad_beta;  // layernorm only
};

NormResult LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps = 1e-5f);
NormGrads LayerNormBackward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const NormResult& fwd);
NormResult RmsNorm(const Tensor& x, const Tensor& gamma, float eps = 1e-6f);
NormGrads RmsNormBackward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const NormResult& fwd);

}  // namespace tessera::ops
