#include "tessera/graph/layers_cnn.h"

#include <cmath>

#include "tessera/base/error.h"

namespace tessera::graph::nn {

Conv2d::Conv2d(const Conv2dSpec& spec, ops::ImageLayout layout) : spec_(spec) {
  TESSERA_CHECK(spec.in_channels > 0 && spec.out_channels > 0 && spec.kernel_h > 0 && spec.kernel_w > 0 &&
                    spec.groups > 0 && spec.in_channels % spec.groups == 0 && spec.out_channels % spec.groups == 0,
                "Conv2d({} -> {}, {}x{}, groups {})", spec.in_channels, spec.out_channels, spec.kernel_h,
                spec.kernel_w, spec.groups);
  options_.stride_h = options_.stride_w = spec.stride;
  options_.pad_h = options_.pad_w = spec.padding;
  options_.dilation_h = options_.dilation_w = spec.dilation;
  options_.groups = spec.groups;
  options_.layout = layout;
  // torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu").
  const double fan_out = static_cast<double>(spec.out_channels) * spec.kernel_h * spec.kernel_w / spec.groups;
  const float std = static_cast<float>(std::sqrt(2.0 / fan_out));
  weight_ = RegisterParameter(
      "weight", Tensor::Empty({spec.out_channels, spec.in_channels / spec.groups, spec.kernel_h, spec.kernel_w}),
      ParamInit::Normal(std));
  if (spec.bias) bias_ = RegisterParameter("bias", Tensor::Empty({spec.out_channels}), ParamInit::Zeros());
}

Tensor Conv2d::Forward(const Tensor& x) const { return graph::Conv2d(x, weight_, bias_, options_); }

int64_t Conv2d::MacsPerImage(int64_t h, int64_t w) const {
  const int64_t p = ops::WindowOutputSize(h, spec_.kernel_h, spec_.stride, spec_.padding, spec_.dilation);
  const int64_t q = ops::WindowOutputSize(w, spec_.kernel_w, spec_.stride, spec_.padding, spec_.dilation);
  return p * q * spec_.out_channels * (spec_.in_channels / spec_.groups) * spec_.kernel_h * spec_.kernel_w;
}

BatchNorm2d::BatchNorm2d(int64_t channels, ops::ImageLayout layout, bool zero_gamma, float momentum, float eps) {
  TESSERA_CHECK(channels > 0, "BatchNorm2d({})", channels);
  options_.momentum = momentum;
  options_.eps = eps;
  options_.layout = layout;
  gamma_ = RegisterParameter("weight", Tensor::Empty({channels}), zero_gamma ? ParamInit::Zeros() : ParamInit::Ones());
  beta_ = RegisterParameter("bias", Tensor::Empty({channels}), ParamInit::Zeros());
  running_mean_ = RegisterBuffer("running_mean", Tensor::Empty({channels}), ParamInit::Zeros());
  running_var_ = RegisterBuffer("running_var", Tensor::Empty({channels}), ParamInit::Ones());
}

Tensor BatchNorm2d::Forward(const Tensor& x, bool fuse_relu) const {
  ops::BatchNormOptions options = options_;
  options.training = training();
  options.fuse_relu = fuse_relu;
  return graph::BatchNorm2d(x, gamma_, beta_, running_mean_, running_var_, options);
}

}  // namespace tessera::graph::nn
