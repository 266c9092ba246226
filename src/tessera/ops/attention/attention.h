// Causal scaled-dot-product self-attention, forward and backward.
//   q, k, v: [B, H, T, Dh] (same dtype); out[b,h,i] = Σ_{j<=i} softmax_j(q_i·k_j·scale) v_j
// The forward also returns the per-row log-sum-exp (fp32 [B, H, T]) so the
// backward recomputes probabilities instead of storing the T×T matrix. The
// optimized path is a tiled (flash-attention style) kernel with online
// softmax, 64x64 tiles (diagonal tiles in 16-row sub-blocks), AVX-512 or
// AVX2 chosen at run time (TESSERA_KERNEL_ISA), parallel over (B·H, query
// tiles) forward and over heads (or (head, key tile) when B·H < 4)
// backward; the reference materializes one row of scores at a time.
// Inputs of any floating dtype are computed in fp32 and rounded once;
// gradients come back in q's dtype. Results do not depend on the thread
// count. Bad shapes/dtypes throw OpError. Thread-safe.
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
