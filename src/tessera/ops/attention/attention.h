// Causal scaled-dot-product self-attention, forward and backward.
//   q, k, v: [B, H, T, Dh] (same dtype); out[b,h,i] = Σ_{j<=i} softmax_j(q_i·k_j·scale) v_j
// The forward also returns the per-row log-sum-exp (fp32 [B, H, T]) so the
// backward recomputes probabilities instead of storing the T×T matrix. The
// optimized path is a tiled (flash-attention style) kernel with online
// softmax; the reference materializes scores.
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

struct AttentionResult {
  Tensor out;  // [B, H, T, Dh]
  Tensor lse;  // [B, H, T] fp32
};
struct AttentionGrads {
  Tensor grad_q;
  Tensor grad_k;
  Tensor grad_v;
};

AttentionResult CausalAttention(const Tensor& q, const Tensor& k, const Tensor& v, float scale);
AttentionGrads CausalAttentionBackward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionResult& fwd, float scale);

}  // namespace tessera::ops
