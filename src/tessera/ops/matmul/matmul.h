// Matrix multiplication, forward and backward.
//   MatMul(a, b, trans_a, trans_b): op(a) @ op(b) where op transposes the last
//   two axes when asked. Shapes: a [..., M, K], b [K, N] (a's leading axes
//   are folded into M) or b [..., K, N] with the same leading axes as a
//   (batched matmul). fp32, bf16 and fp16; bf16/fp16 accumulate in fp32 and
//   round once on output. Invalid shapes/dtypes throw OpError naming both.
// The optimized path packs panels and runs per-ISA micro-kernels
// (gemm_kernels.h) under OpenMP; the reference path is a triple loop.
// Any strided view is accepted (transposed views cost nothing, others are
// copied). MatMulBackward returns gradients in the inputs' shapes and
// dtypes; for a 2-D b with batched a, grad_b sums over the batch.
// Thread-safe (no shared mutable state). See docs/gemm.md.
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor MatMul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// y = x @ weight^T + bias, x [..., in], weight [out, in], bias [out] (or
// undefined: no bias). The bias is added by the GEMM's epilogue while each
// block is in cache; the result is bitwise that of MatMul(x, weight, false,
// true) followed by an element-wise Add of the bias (for bf16 / fp16: the
// product rounded, then the sum rounded), so fusing changes speed only.
// The backward is MatMulBackward's plus SumToShape(grad, bias shape).
Tensor Linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

struct MatMulGrads {
  Tensor grad_a;  // undefined unless need_a
  Tensor grad_b;  // undefined unless need_b
};
MatMulGrads MatMulBackward(const Tensor& grad_out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                           bool need_a = true, bool need_b = true);

}  // namespace tessera::ops
