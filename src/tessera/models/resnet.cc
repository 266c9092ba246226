#include "tessera/models/resnet.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"

namespace tessera::models {

namespace {

constexpr int64_t kBottleneckExpansion = 4;

graph::nn::Conv2dSpec ConvSpec(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  graph::nn::Conv2dSpec spec;
  spec.in_channels = in;
  spec.out_channels = out;
  spec.kernel_h = spec.kernel_w = kernel;
  spec.stride = stride;
  spec.padding = padding;
  return spec;
}

int64_t Downscaled(int64_t extent, int64_t stride) { return (extent - 1) / stride + 1; }

}  // namespace

ResNetConfig ResNetConfig::ResNet18() {
  ResNetConfig c;
  c.bottleneck = false;
  c.layers = {2, 2, 2, 2};
  return c;
}

ResNetConfig ResNetConfig::ResNet50() { return ResNetConfig{}; }

Status ResNetConfig::Validate() const {
  if (layers.empty() || layers.size() > 8) {
    return InvalidArgument("resnet: layers must list 1..8 stages, got {}", layers.size());
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 1) return InvalidArgument("resnet: layers[{}] = {} (each stage needs a block)", i, layers[i]);
  }
  if (width < 1) return InvalidArgument("resnet: width = {} (must be positive)", width);
  if (in_channels < 1) return InvalidArgument("resnet: in_channels = {} (must be positive)", in_channels);
  if (num_classes < 1) return InvalidArgument("resnet: num_classes = {} (must be positive)", num_classes);
  return Status::Ok();
}

std::string ResNetConfig::Describe() const {
  return fmt::format("resnet {} [{}] width {} in {} classes {}{} {}", bottleneck ? "bottleneck" : "basic",
                     fmt::join(layers, ","), width, in_channels, num_classes, small_stem ? " small-stem" : "",
                     ops::ImageLayoutName(layout));
}

ResidualBlock::Downsample::Downsample(int64_t in, int64_t out, int64_t stride, ops::ImageLayout layout)
    : conv(ConvSpec(in, out, 1, stride, 0), layout), norm(out, layout) {
  RegisterModule("0", &conv);
  RegisterModule("1", &norm);
}

ResidualBlock::ResidualBlock(const ResNetConfig& config, int64_t in_channels, int64_t width, int64_t stride)
    : bottleneck_(config.bottleneck), stride_(stride) {
  const auto layout = config.layout;
  if (bottleneck_) {
    out_channels_ = width * kBottleneckExpansion;
    convs_.push_back(std::make_unique<graph::nn::Conv2d>(ConvSpec(in_channels, width, 1, 1, 0), layout));
    convs_.push_back(std::make_unique<graph::nn::Conv2d>(ConvSpec(width, width, 3, stride, 1), layout));
    convs_.push_back(std::make_unique<graph::nn::Conv2d>(ConvSpec(width, out_channels_, 1, 1, 0), layout));
  } else {
    out_channels_ = width;
    convs_.push_back(std::make_unique<graph::nn::Conv2d>(ConvSpec(in_channels, width, 3, stride, 1), layout));
    convs_.push_back(std::make_unique<graph::nn::Conv2d>(ConvSpec(width, width, 3, 1, 1), layout));
  }
  for (size_t i = 0; i < convs_.size(); ++i) {
    const bool last = i + 1 == convs_.size();
    norms_.push_back(std::make_unique<graph::nn::BatchNorm2d>(convs_[i]->weight().size(0), layout,
                                                              last && config.zero_init_residual));
  }
  // torchvision registers conv1, bn1, conv2, bn2, (conv3, bn3), downsample.
  for (size_t i = 0; i < convs_.size(); ++i) {
    RegisterModule(fmt::format("conv{}", i + 1), convs_[i].get());
    RegisterModule(fmt::format("bn{}", i + 1), norms_[i].get());
  }
  if (stride != 1 || in_channels != out_channels_) {
    downsample_ = std::make_unique<Downsample>(in_channels, out_channels_, stride, layout);
    RegisterModule("downsample", downsample_.get());
  }
}

Tensor ResidualBlock::Forward(const Tensor& x) const {
  Tensor out = x;
  for (size_t i = 0; i < convs_.size(); ++i) {
    const bool last = i + 1 == convs_.size();
    out = norms_[i]->Forward(convs_[i]->Forward(out), /*fuse_relu=*/!last);
  }
  Tensor identity = downsample_ ? downsample_->norm.Forward(downsample_->conv.Forward(x)) : x;
  return graph::Relu(graph::Add(out, identity));
}

int64_t ResidualBlock::MacsPerImage(int64_t h, int64_t w) const {
  int64_t macs = downsample_ ? downsample_->conv.MacsPerImage(h, w) : 0;
  for (size_t i = 0; i < convs_.size(); ++i) {
    macs += convs_[i]->MacsPerImage(h, w);
    if (convs_[i]->options().stride_h != 1) {
      h = Downscaled(h, stride_);
      w = Downscaled(w, stride_);
    }
  }
  return macs;
}

ResNet::ResNet(const ResNetConfig& config) : config_(config) {
  Status valid = config.Validate();
  TESSERA_CHECK(valid.ok(), "{}", valid.ToString());
  const auto layout = config.layout;
  conv1_ = std::make_unique<graph::nn::Conv2d>(
      config.small_stem ? ConvSpec(config.in_channels, config.width, 3, 1, 1)
                        : ConvSpec(config.in_channels, config.width, 7, 2, 3),
      layout);
  bn1_ = std::make_unique<graph::nn::BatchNorm2d>(config.width, layout);
  RegisterModule("conv1", conv1_.get());
  RegisterModule("bn1", bn1_.get());
  int64_t channels = config.width;
  for (size_t s = 0; s < config.layers.size(); ++s) {
    auto stage = std::make_unique<graph::nn::ModuleList<ResidualBlock>>();
    const int64_t width = config.width << s;
    for (int64_t b = 0; b < config.layers[s]; ++b) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      channels = stage->Append(std::make_unique<ResidualBlock>(config, channels, width, stride)).out_channels();
    }
    RegisterModule(fmt::format("layer{}", s + 1), stage.get());
    stages_.push_back(std::move(stage));
  }
  // torchvision's Linear init is Kaiming-uniform; any small init trains.
  fc_ = std::make_unique<graph::nn::Linear>(channels, config.num_classes, /*bias=*/true,
                                            static_cast<float>(1.0 / std::sqrt(static_cast<double>(channels))));
  RegisterModule("fc", fc_.get());
}

Tensor ResNet::Forward(const Tensor& images) const {
  TESSERA_OP_CHECK(images.dim() == 4, "ResNet: images must be 4-d ({}), got {}", ops::ImageLayoutName(config_.layout),
                   ShapeString(images.shape()));
  const int channel_axis = config_.layout == ops::ImageLayout::kNCHW ? 1 : 3;
  TESSERA_OP_CHECK(images.size(channel_axis) == config_.in_channels,
                   "ResNet: images {} ({}) have {} channels, the model expects {}", ShapeString(images.shape()),
                   ops::ImageLayoutName(config_.layout), images.size(channel_axis), config_.in_channels);
  Tensor x = bn1_->Forward(conv1_->Forward(images), /*fuse_relu=*/true);
  if (!config_.small_stem) {
    ops::Pool2dOptions pool;
    pool.kernel_h = pool.kernel_w = 3;
    pool.stride_h = pool.stride_w = 2;
    pool.pad_h = pool.pad_w = 1;
    pool.layout = config_.layout;
    x = graph::MaxPool2d(x, pool);
  }
  for (const auto& stage : stages_) {
    for (size_t b = 0; b < stage->size(); ++b) x = (*stage)[b].Forward(x);
  }
  return fc_->Forward(graph::GlobalAvgPool2d(x, config_.layout));
}

double ResNet::ForwardFlopsPerImage(int64_t h, int64_t w) const {
  double macs = static_cast<double>(conv1_->MacsPerImage(h, w));
  const int64_t stem_stride = config_.small_stem ? 1 : 2;
  h = Downscaled(h, stem_stride);
  w = Downscaled(w, stem_stride);
  if (!config_.small_stem) {
    h = ops::WindowOutputSize(h, 3, 2, 1);
    w = ops::WindowOutputSize(w, 3, 2, 1);
  }
  for (const auto& stage : stages_) {
    for (size_t b = 0; b < stage->size(); ++b) {
      const ResidualBlock& block = (*stage)[b];
      macs += static_cast<double>(block.MacsPerImage(h, w));
      h = Downscaled(h, block.stride());
      w = Downscaled(w, block.stride());
    }
  }
  macs += static_cast<double>(fc_->in_features() * fc_->out_features());
  return 2.0 * macs;
}

}  // namespace tessera::models
