// Broadcasting element-wise arithmetic (numpy rules), forward and backward,
// and a few scalar helpers. Outputs take the inputs' dtype (both inputs must
// share one floating dtype); bf16/fp16 compute in fp32 and round once.
// Inputs may be non-contiguous; results are fresh contiguous tensors (a
// gradient never aliases grad_out or another gradient). Bad shapes/dtypes
// throw OpError naming the op and both shapes. Thread-safe.
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

Tensor Binary(BinaryOp op, const Tensor& a, const Tensor& b);
inline Tensor Add(const Tensor& a, const Tensor& b) { return Binary(BinaryOp::kAdd, a, b); }
inline Tensor Sub(const Tensor& a, const Tensor& b) { return Binary(BinaryOp::kSub, a, b); }
inline Tensor Mul(const Tensor& a, const Tensor& b) { return Binary(BinaryOp::kMul, a, b); }
inline Tensor Div(const Tensor& a, const Tensor& b) { return Binary(BinaryOp::kDiv, a, b); }

struct BinaryGrads {
  Tensor grad_a;  // shaped like a (broadcast axes summed)
  Tensor grad_b;  // shaped like b
};
BinaryGrads BinaryBackward(BinaryOp op, const Tensor& grad_out, const Tensor& a, const Tensor& b);

// y = x * scale + shift (same shape/dtype).
Tensor Affine(const Tensor& x, float scale, float shift);
// Sums `grad` (broadcast shape) down to `shape` (the un-broadcast input shape).
Tensor SumToShape(const Tensor& grad, const Shape& shape);
// In-place accumulate: dst += src (same shape; dst fp32 or same dtype as src).
void AddInPlace(Tensor& dst, const Tensor& src);

}  // namespace tessera::ops
