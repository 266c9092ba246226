// Kernels of the loss family, declared for register.cc and the unit tests.
#pragma once

#include "tessera/onnx/op.h"

namespace tessera::onnx {

Status NegativeLogLikelihoodLossKernel(OpContext& ctx);  // nll.cc
Status SoftmaxCrossEntropyLossKernel(OpContext& ctx);    // softmax_cross_entropy.cc

}  // namespace tessera::onnx
