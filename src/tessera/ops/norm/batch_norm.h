// Batch normalization over the channel axis of 4-d images (NCHW or NHWC;
// statistics over N, H, W), fp32, optionally fused with a following ReLU.
// Training: y = relu?((x - mean) * rstd * gamma + beta) with the batch's
// mean and biased variance; running_mean / running_var (fp32 [C], may be
// undefined) are updated in place as PyTorch does (running = (1 - momentum)
// * running + momentum * batch value, with the unbiased variance). Training
// needs N*H*W > 1. Inference: the running statistics (then required) are
// used instead and left alone. gamma and beta are required fp32 [C].
// Statistics accumulate in double over fixed blocks, so results do not
// depend on the thread count. The backward needs the forward's saved
// statistics and, with fuse_relu, its output y (the ReLU mask: dy counts
// where y > 0). Bad shapes/dtypes throw OpError naming the argument.
// Thread-safe for distinct tensors. More: docs/pool-batchnorm.md.
#pragma once

#include "tessera/ops/common/image_layout.h"
#include "tessera/tensor/tensor.h"

namespace tessera::ops {

struct BatchNormOptions {
  bool training = true;
  float momentum = 0.1f;
  float eps = 1e-5f;
  bool fuse_relu = false;
  ImageLayout layout = ImageLayout::kNCHW;
  // The running variance follows the batch's unbiased variance (PyTorch);
  // false: the biased one the normalization uses (ONNX's BatchNormalization).
  bool unbiased_running_var = true;
};

struct BatchNormResult {
  Tensor y;
  Tensor save_mean;  // [C] fp32: the batch mean (training) or running mean (inference)
  Tensor save_rstd;  // [C] fp32: 1/sqrt(var + eps) of the statistics used
};
BatchNormResult BatchNorm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor running_mean,
                            Tensor running_var, const BatchNormOptions& options);

struct BatchNormGrads {
  Tensor grad_x;
  Tensor grad_gamma;  // [C]
  Tensor grad_beta;   // [C]
};
// y: the forward's output (read only with fuse_relu). In inference mode the
// statistics are constants (grad_x = dy * gamma * rstd).
BatchNormGrads BatchNorm2dBackward(const Tensor& grad_y, const Tensor& x, const Tensor& y, const Tensor& gamma,
                                   const BatchNormResult& forward, const BatchNormOptions& options);

}  // namespace tessera::ops
