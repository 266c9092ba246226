// Image layers (namespace graph::nn) on graph/functional_cnn.h, with
// PyTorch's parameter names and layouts so torchvision state dicts map 1:1:
//   Conv2d:      weight [K, C/groups, R, S], bias [K] (optional);
//   BatchNorm2d: weight (gamma) and bias (beta) [C]; buffers running_mean,
//                running_var [C] (torch's num_batches_tracked is not kept:
//                momentum is always a fixed factor here).
// Conv weights are initialized as torchvision's ResNet does (Kaiming normal,
// fan_out, gain sqrt(2)); batch norm gamma 1 (or 0 when asked, for the last
// norm of a residual branch), beta 0, running mean 0 and var 1. BatchNorm2d
// uses batch statistics while the module is training (Module::SetTraining)
// and the running ones otherwise. fp32 only. Thread-safety: as Module.
#pragma once

#include <cstdint>

#include "tessera/graph/functional_cnn.h"
#include "tessera/graph/module.h"

namespace tessera::graph::nn {

struct Conv2dSpec {
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel_h = 3, kernel_w = 3;
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = false;
};

class Conv2d : public Module {
 public:
  Conv2d(const Conv2dSpec& spec, ops::ImageLayout layout);
  Tensor Forward(const Tensor& x) const;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias
  const ops::Conv2dOptions& options() const { return options_; }
  // Multiply-accumulates of one forward for an input of h x w pixels, per image.
  int64_t MacsPerImage(int64_t h, int64_t w) const;

 private:
  Conv2dSpec spec_;
  ops::Conv2dOptions options_;
  Tensor weight_;
  Tensor bias_;
};

class BatchNorm2d : public Module {
 public:
  BatchNorm2d(int64_t channels, ops::ImageLayout layout, bool zero_gamma = false, float momentum = 0.1f,
              float eps = 1e-5f);
  // fuse_relu: y = relu(bn(x)) in one kernel.
  Tensor Forward(const Tensor& x, bool fuse_relu = false) const;
  const Tensor& weight() const { return gamma_; }
  const Tensor& bias() const { return beta_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }

 private:
  ops::BatchNormOptions options_;
  Tensor gamma_, beta_, running_mean_, running_var_;
};

}  // namespace tessera::graph::nn
