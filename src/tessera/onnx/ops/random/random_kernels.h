// Kernels of the random family, declared for register.cc and the unit tests.
#pragma once

#include "tessera/onnx/op.h"

namespace tessera::onnx {

// random.cc
Status RandomUniformKernel(OpContext& ctx);
Status RandomNormalKernel(OpContext& ctx);
Status RandomUniformLikeKernel(OpContext& ctx);
Status RandomNormalLikeKernel(OpContext& ctx);
Status BernoulliKernel(OpContext& ctx);
Status MultinomialKernel(OpContext& ctx);

}  // namespace tessera::onnx
