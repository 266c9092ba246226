// Top-k along the last axis: the k largest values in descending order and
// their int64 indices (ties: lower index first). Backward scatters the
// values' gradient back to the chosen positions (zeros elsewhere). NaN ranks
// above every number. Values keep x's dtype. k outside [0, n] or indices
// out of range throw OpError. Thread-safe.
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

struct TopKResult {
  Tensor values;   // [..., k]
  Tensor indices;  // [..., k] int64
};

TopKResult TopK(const Tensor& x, int64_t k);
Tensor TopKBackward(const Tensor& grad_values, const Tensor& indices, const Shape& input_shape);

}  // namespace tessera::ops
