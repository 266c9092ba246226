// Concatenate tensors along an axis / split one into pieces. All inputs
// share dtype and every other axis. Each is the other's backward. Any dtype
// (integers too); outputs are fresh contiguous tensors (Split copies, it
// does not return views). Mismatched shapes/dtypes, a bad axis or sizes
// that do not sum to the axis length throw OpError. Thread-safe.
#pragma once

#include <vector>

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor Concat(const std::vector<Tensor>& xs, int axis);
std::vector<Tensor> Split(const Tensor& x, const std::vector<int64_t>& sizes, int axis);

}  // namespace tessera::ops
