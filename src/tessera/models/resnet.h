// ResNet (He et al. 2016) in torchvision's layout: ResNet-18/34 (basic
// blocks) and ResNet-50/101/152 (bottleneck blocks, stride on the 3x3 conv,
// "v1.5"), with torchvision's parameter names ("conv1.weight",
// "layer1.0.bn2.running_var", "layer2.0.downsample.0.weight", "fc.bias"),
// so a torchvision state dict maps 1:1 onto NamedParameters() +
// NamedBuffers(). A small-image variant (CIFAR-style stem: one 3x3 stride-1
// conv, no max pooling) and a narrower base width train in minutes on this
// machine. Images are NCHW or NHWC (ResNetConfig::layout); logits [N, classes].
// Batch norms follow Module::SetTraining (batch statistics while training).
// fp32. Thread-safety: as Module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/graph/layers.h"
#include "tessera/graph/layers_cnn.h"

namespace tessera::models {

struct ResNetConfig {
  bool bottleneck = true;                  // false: basic blocks (ResNet-18/34)
  std::vector<int64_t> layers{3, 4, 6, 3};  // blocks per stage
  int64_t width = 64;                      // stem channels = first stage's width
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  bool small_stem = false;  // 3x3/1 stem, no max pooling (32x32 images)
  bool zero_init_residual = false;  // last norm of each residual branch starts at gamma 0
  ops::ImageLayout layout = ops::ImageLayout::kNCHW;

  static ResNetConfig ResNet18();
  static ResNetConfig ResNet50();
  Status Validate() const;
  std::string Describe() const;  // "resnet50-style bottleneck [3,4,6,3] width 64 ..."
};

// One residual block; `downsample` (1x1 conv + norm) when the shape changes.
class ResidualBlock : public graph::Module {
 public:
  ResidualBlock(const ResNetConfig& config, int64_t in_channels, int64_t width, int64_t stride);
  Tensor Forward(const Tensor& x) const;
  int64_t out_channels() const { return out_channels_; }
  int64_t stride() const { return stride_; }
  // Multiply-accumulates of one forward per image of h x w input pixels.
  int64_t MacsPerImage(int64_t h, int64_t w) const;

 private:
  struct Downsample : graph::Module {
    Downsample(int64_t in, int64_t out, int64_t stride, ops::ImageLayout layout);
    graph::nn::Conv2d conv;
    graph::nn::BatchNorm2d norm;
  };
  bool bottleneck_;
  int64_t out_channels_, stride_;
  std::vector<std::unique_ptr<graph::nn::Conv2d>> convs_;
  std::vector<std::unique_ptr<graph::nn::BatchNorm2d>> norms_;
  std::unique_ptr<Downsample> downsample_;
};

class ResNet : public graph::Module {
 public:
  explicit ResNet(const ResNetConfig& config);  // CHECKs config.Validate()
  // images: [N, C, H, W] or [N, H, W, C] fp32 -> logits [N, num_classes].
  Tensor Forward(const Tensor& images) const;
  const ResNetConfig& config() const { return config_; }
  // Floating-point operations of one forward pass per image (2 per MAC,
  // convolutions and the classifier; norms, pooling and adds not counted).
  // A training step costs three times this (forward + two backward GEMMs).
  double ForwardFlopsPerImage(int64_t h, int64_t w) const;

 private:
  ResNetConfig config_;
  std::unique_ptr<graph::nn::Conv2d> conv1_;
  std::unique_ptr<graph::nn::BatchNorm2d> bn1_;
  std::vector<std::unique_ptr<graph::nn::ModuleList<ResidualBlock>>> stages_;
  std::unique_ptr<graph::nn::Linear> fc_;
};

}  // namespace tessera::models
