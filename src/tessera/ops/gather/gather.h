// Gather and scatter-add with PyTorch semantics along one axis, plus the row
// forms MoE dispatch uses.
//   Gather(x, axis, index):         out[i][j][k] = x[i][index[i][j][k]][k]   (axis 1)
//   ScatterAdd(base, axis, index, src): out = base; out[i][index[i][j][k]][k] += src[i][j][k]
//   GatherRows(x [N, D], rows [M]) -> [M, D]
//   ScatterAddRows(src [M, D], rows [M], n) -> [n, D]  (sum of src rows per target)
// index/rows are int64 (or int32); out-of-range indices throw OpError naming
// the value and its position. As in PyTorch, index may be smaller than the
// data on axes other than `axis`. Scatter-add is deterministic (each
// destination sums in index-element order, fp32 accumulation, rounded once),
// so results are bitwise independent of the thread count. Gather works on
// any dtype; scatter-add on floating ones. ScatterAddBackwardSrc assumes src
// had the index's shape. Thread-safe.
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor Gather(const Tensor& x, int axis, const Tensor& index);
Tensor GatherBackward(const Tensor& grad_out, int axis, const Tensor& index, const Shape& input_shape);
Tensor ScatterAdd(const Tensor& base, int axis, const Tensor& index, const Tensor& src);
// Gradient of ScatterAdd w.r.t. src (grad of base is grad_out itself).
Tensor ScatterAddBackwardSrc(const Tensor& grad_out, int axis, const Tensor& index);

Tensor GatherRows(const Tensor& x, const Tensor& rows);
Tensor ScatterAddRows(const Tensor& src, const Tensor& rows, int64_t n);

}  // namespace tessera::ops
