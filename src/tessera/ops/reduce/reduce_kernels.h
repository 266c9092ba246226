// Optimized reduction kernels (internal). Inputs are contiguous and
// validated; results are deterministic for a given input regardless of the
// thread count (work splits are fixed, partial sums combined in order).
#pragma once

#include <vector>

#include "tessera/tensor/tensor.h"

namespace tessera::ops::kern {

// See ReduceSum in reduce_internal.h; x contiguous.
Tensor ReduceSumOptimized(const Tensor& x, const std::vector<bool>& reduce, DType out_dtype, double scale);

// Max over the middle axis of x viewed as [A, R, B] (R >= 1): values[A*B]
// in x's dtype and int64 indices[A*B] (first index on ties).
void MaxMiddleOptimized(const Tensor& x, int64_t A, int64_t R, int64_t B, Tensor& values, Tensor& indices);

// out = scale * src broadcast to out's shape (src has out's rank with some
// axes of size 1, or fewer leading axes); both contiguous.
void BroadcastScaled(const Tensor& src, float scale, Tensor& out);

}  // namespace tessera::ops::kern
