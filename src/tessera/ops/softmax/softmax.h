// Softmax and log-softmax along one axis (numerically stable: max-shifted),
// forward and backward. Backward takes the forward output y.
//   softmax:     dx = y * (dy - sum(dy * y))
//   log_softmax: dx = dy - exp(y) * sum(dy)
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor Softmax(const Tensor& x, int axis = -1);
Tensor SoftmaxBackward(const Tensor& grad_out, const Tensor& y, int axis = -1);
Tensor LogSoftmax(const Tensor& x, int axis = -1);
Tensor LogSoftmaxBackward(const Tensor& grad_out, const Tensor& y, int axis = -1);

}  // namespace tessera::ops
