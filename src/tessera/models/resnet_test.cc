#include "tessera/models/resnet.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/optim/adamw.h"
#include "tessera/tensor/rng.h"

namespace tessera::models {
namespace {

ResNetConfig Tiny(ops::ImageLayout layout) {
  ResNetConfig c;
  c.layers = {1, 2};
  c.width = 4;
  c.num_classes = 5;
  c.small_stem = true;
  c.layout = layout;
  return c;
}

Tensor RandomImages(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::Empty(shape);
  FillNormal(t, seed, 0.0f, 1.0f);
  return t;
}

TEST(ResNetTest, ResNet50HasTorchvisionsParametersAndNames) {
  ResNet model(ResNetConfig::ResNet50());
  EXPECT_EQ(model.NumParameters(), 25557032);  // torchvision.models.resnet50()
  std::set<std::string> names;
  for (const auto& [name, t] : model.NamedParameters()) names.insert(name);
  for (const char* name : {"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv3.weight",
                           "layer1.0.downsample.0.weight", "layer1.0.downsample.1.bias", "layer2.3.bn2.weight",
                           "layer4.2.conv2.weight", "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  EXPECT_FALSE(names.count("layer1.1.downsample.0.weight"));
  std::set<std::string> buffers;
  for (const auto& [name, t] : model.NamedBuffers()) buffers.insert(name);
  EXPECT_EQ(buffers.size(), 2u * 53u);  // 53 batch norms, running mean and var each
  EXPECT_TRUE(buffers.count("layer4.2.bn3.running_var"));
  EXPECT_TRUE(buffers.count("layer3.0.downsample.1.running_mean"));
}

TEST(ResNetTest, ResNet18HasTorchvisionsParameterCount) {
  ResNet model(ResNetConfig::ResNet18());
  EXPECT_EQ(model.NumParameters(), 11689512);  // torchvision.models.resnet18()
}

TEST(ResNetTest, CountsTheForwardFlops) {
  // torchvision documents ResNet-50 at 4.09 GFLOPS (multiply-adds) at 224x224.
  ResNet model(ResNetConfig::ResNet50());
  const double gmacs = model.ForwardFlopsPerImage(224, 224) / 2e9;
  EXPECT_NEAR(gmacs, 4.09, 0.02);
  ResNet r18(ResNetConfig::ResNet18());
  EXPECT_NEAR(r18.ForwardFlopsPerImage(224, 224) / 2e9, 1.81, 0.02);  // torchvision: 1.81
}

TEST(ResNetTest, LayoutsGiveTheSameLogits) {
  ResNet nchw(Tiny(ops::ImageLayout::kNCHW)), nhwc(Tiny(ops::ImageLayout::kNHWC));
  nchw.InitParameters(5);
  nhwc.InitParameters(5);
  graph::NoGradGuard no_grad;
  Tensor x = RandomImages({3, 3, 9, 7}, 1);
  std::vector<float> a = nchw.Forward(x).ToFloatVector();
  std::vector<float> b = nhwc.Forward(x.Permute({0, 2, 3, 1}).Contiguous()).ToFloatVector();
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 15u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::fabs(a[i]))) << i;
}

TEST(ResNetTest, TrainingUpdatesRunningStatisticsAndEvalUsesThem) {
  ResNet model(Tiny(ops::ImageLayout::kNCHW));
  model.InitParameters(3);
  Tensor x = RandomImages({4, 3, 8, 8}, 2);
  graph::NoGradGuard no_grad;
  Tensor eval_before;
  model.SetTraining(false);
  eval_before = model.Forward(x);
  model.SetTraining(true);
  Tensor train_out = model.Forward(x);
  Tensor mean = model.NamedBuffers()[0].second;  // bn1.running_mean
  EXPECT_EQ(model.NamedBuffers()[0].first, "bn1.running_mean");
  double moved = 0;
  for (float v : mean.ToFloatVector()) moved += std::fabs(v);
  EXPECT_GT(moved, 0.0);  // started at zero; momentum 0.1 moved it
  model.SetTraining(false);
  Tensor eval_after = model.Forward(x);
  std::vector<float> a = eval_before.ToFloatVector(), b = eval_after.ToFloatVector(), t = train_out.ToFloatVector();
  double changed = 0, differs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    changed += std::fabs(a[i] - b[i]);
    differs += std::fabs(b[i] - t[i]);
  }
  EXPECT_GT(changed, 1e-6);  // eval reads the running statistics
  EXPECT_GT(differs, 1e-6);  // which are not the batch's
}

TEST(ResNetTest, OverfitsOneBatch) {
  for (auto layout : {ops::ImageLayout::kNCHW, ops::ImageLayout::kNHWC}) {
    ResNetConfig c = Tiny(layout);
    ResNet model(c);
    model.InitParameters(9);
    const Shape shape = layout == ops::ImageLayout::kNCHW ? Shape{8, 3, 8, 8} : Shape{8, 8, 8, 3};
    Tensor x = RandomImages(shape, 4);
    Tensor y = Tensor::FromInts({0, 1, 2, 3, 4, 0, 1, 2}, {8});
    optim::AdamWOptions opt;
    opt.weight_decay = 0.0;
    optim::AdamW adam(model.NamedParameters(), opt);
    double first = 0, last = 0;
    for (int s = 0; s < 40; ++s) {
      model.ZeroGrad();
      Tensor loss = graph::CrossEntropy(model.Forward(x), y);
      last = loss.Item();
      if (s == 0) first = last;
      graph::Backward(loss);
      adam.Step(1e-2);
    }
    EXPECT_LT(last, 0.3 * first) << ops::ImageLayoutName(layout) << ": " << first << " -> " << last;
  }
}

TEST(ResNetTest, RejectsBadConfigsAndInputs) {
  ResNetConfig c = Tiny(ops::ImageLayout::kNCHW);
  c.layers = {};
  EXPECT_FALSE(c.Validate().ok());
  c = Tiny(ops::ImageLayout::kNCHW);
  c.layers = {1, 0};
  EXPECT_NE(c.Validate().message().find("layers[1]"), std::string::npos);
  ResNet model(Tiny(ops::ImageLayout::kNCHW));
  model.InitParameters(1);
  graph::NoGradGuard no_grad;
  EXPECT_THROW(model.Forward(RandomImages({2, 4, 8, 8}, 1)), OpError);  // 4 channels, model wants 3
  EXPECT_THROW(model.Forward(RandomImages({2, 3, 8}, 1)), OpError);
}

}  // namespace
}  // namespace tessera::models
