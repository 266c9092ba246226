// Optimized element-wise kernels (internal). Inputs are contiguous and
// validated by the callers in elementwise.cc; outputs are preallocated and
// contiguous. Vectorized (AVX-512 clone selected at load time, AVX2
// otherwise) and multi-threaded over chunks above a size threshold.
#pragma once

#include "tessera/ops/elementwise/elementwise.h"
#include "tessera/tensor/tensor.h"

namespace tessera::ops::kern {

// out = a op b with numpy broadcasting (out has the broadcast shape).
void BinaryForward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
// Gradients of a op b for contiguous g (broadcast shape), a and b.
BinaryGrads BinaryBackwardOptimized(BinaryOp op, const Tensor& g, const Tensor& a, const Tensor& b);
// out = x * scale + shift.
void AffineForward(const Tensor& x, float scale, float shift, Tensor& out);
// dst += src (same shape, both contiguous; dst fp32 or src's dtype).
void AccumulateInto(Tensor& dst, const Tensor& src);
// dst = src converted to dst's dtype (same element count, both contiguous);
// chunked over threads.
void CopyConvert(const Tensor& src, Tensor& dst);
// Sums grad (broadcast shape) down to `shape`, result in `out_dtype`.
// Always returns a fresh tensor (never aliases grad).
Tensor SumToShapeAs(const Tensor& grad, const Shape& shape, DType out_dtype);

}  // namespace tessera::ops::kern
