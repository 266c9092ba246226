// Internal entry points of the reduction kernels shared with other op
// families (element-wise backward uses ReduceSum for SumToShape).
#pragma once

#include <vector>

#include "tessera/tensor/tensor.h"

namespace tessera::ops::kern {

// Sums x (any layout, floating) over the axes d with reduce[d] true and
// multiplies by `scale`. The result keeps x's rank (reduced axes have size
// 1), is contiguous and has dtype `out_dtype` (rounded once). Runs the
// reference kernel (double accumulators) when UseReference(), else the
// optimized one (fp32 accumulators, vectorized, multi-threaded). Arguments
// must already be validated.
Tensor ReduceSum(const Tensor& x, const std::vector<bool>& reduce, DType out_dtype, double scale = 1.0);

}  // namespace tessera::ops::kern
