// Reductions over a set of axes (empty = all axes), forward and backward.
// Sum/Mean accumulate in fp32 (double in the reference); Max returns the
// maximum and, for one axis, the int64 argmax used by its backward (ties: the
// first index). Optimized sums use fixed work splits, so results do not
// depend on the thread count. Bad axes/dtypes/indices throw OpError.
#pragma once

#include <vector>

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor Sum(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
Tensor Mean(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
Tensor SumBackward(const Tensor& grad_out, const Shape& input_shape, const std::vector<int>& axes, bool keepdim);
Tensor MeanBackward(const Tensor& grad_out, const Shape& input_shape, const std::vector<int>& axes, bool keepdim);

struct MaxResult {
  Tensor values;
  Tensor indices;  // int64
};
MaxResult Max(const Tensor& x, int axis, bool keepdim = false);
Tensor MaxBackward(const Tensor& grad_out, const Tensor& indices, const Shape& input_shape, int axis, bool keepdim);

}  // namespace tessera::ops
