// Internal pieces shared by the MatMul front end (matmul.cc) and its
// reference implementation (matmul_reference.cc): argument validation and the
// scalar reference forward/backward. Not part of the public API.
#pragma once

#include <cstdint>

#include "tessera/ops/matmul/matmul.h"
#include "tessera/tensor/tensor.h"

namespace tessera::ops::internal {

// Problem sizes of MatMul(a, b, trans_a, trans_b), as validated.
struct MatMulDims {
  Shape batch_shape;  // a's leading axes (all but the last two)
  int64_t batch = 1;  // product of batch_shape
  int64_t m = 0, n = 0, k = 0;
  bool batched_b = false;  // b has a's leading axes; else b is 2-D and shared
  Shape out_shape;         // batch_shape + [m, n]
};

// Validates shapes and dtypes; throws OpError naming both operands otherwise.
MatMulDims CheckMatMulArgs(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);

// Also checks that grad_out has the forward output's shape and dtype.
MatMulDims CheckMatMulBackwardArgs(const Tensor& grad_out, const Tensor& a, const Tensor& b, bool trans_a,
                                   bool trans_b);

// Plain loops with fp32 accumulation, rounding once to the input dtype.
Tensor ReferenceMatMul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);
// ReferenceMatMul(x, weight, false, true) + bias, each sum rounded to x's dtype.
Tensor ReferenceLinear(const Tensor& x, const Tensor& weight, const Tensor& bias);
MatMulGrads ReferenceMatMulBackward(const Tensor& grad_out, const Tensor& a, const Tensor& b, bool trans_a,
                                    bool trans_b, bool need_a, bool need_b);

}  // namespace tessera::ops::internal
