// graph:: pooling and BatchNorm2d: tape gradients vs central finite
// differences (graph/gradcheck_test_util.h) through small compositions, both
// layouts; what gets recorded; running statistics stay out of the tape.
#include <string>

#include <gtest/gtest.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/functional_cnn.h"
#include "tessera/graph/gradcheck_test_util.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::Leaf;
using testing::Project;
using Ins = std::vector<Tensor>;
constexpr ops::ImageLayout kNCHW = ops::ImageLayout::kNCHW, kNHWC = ops::ImageLayout::kNHWC;

// A leaf holding distinct values 0.05 apart (shuffled): a 1e-2 step never changes a max-pool argmax.
Tensor DistinctLeaf(const Shape& shape) {
  const int64_t n = NumElements(shape);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.05f * static_cast<float>((i * 37) % n) - 0.025f * static_cast<float>(n);
  Tensor t = Tensor::FromVector(v, shape);
  t.set_requires_grad(true);
  return t;
}

ops::Pool2dOptions ResNetMaxPool(ops::ImageLayout layout) {
  ops::Pool2dOptions o;
  o.kernel_h = o.kernel_w = 3;
  o.stride_h = o.stride_w = 2;
  o.pad_h = o.pad_w = 1;
  o.layout = layout;
  return o;
}

TEST(PoolNormGradCheck, MaxPool2d) {
  for (ops::ImageLayout l : {kNCHW, kNHWC}) {
    ExpectGradientsMatch("max_pool2d 3x3/2", {DistinctLeaf({2, 3, 7, 6})},
                         [l](const Ins& in) { return Project(graph::MaxPool2d(in[0], ResNetMaxPool(l))); });
    ops::Pool2dOptions ceil = ResNetMaxPool(l);
    ceil.kernel_h = ceil.kernel_w = 2;
    ceil.ceil_mode = true;
    ExpectGradientsMatch("max_pool2d 2x2/2 ceil", {DistinctLeaf({1, 5, 5, 5})},
                         [ceil](const Ins& in) { return Project(graph::MaxPool2d(in[0], ceil)); });
  }
}

TEST(PoolNormGradCheck, AvgAndGlobalAvgPool2d) {
  for (ops::ImageLayout l : {kNCHW, kNHWC}) {
    for (bool cip : {true, false}) {
      ops::Pool2dOptions o = ResNetMaxPool(l);
      o.ceil_mode = true;
      o.count_include_pad = cip;
      ExpectGradientsMatch("avg_pool2d", {Leaf({2, 5, 6, 3}, 41)},
                           [o](const Ins& in) { return Project(graph::AvgPool2d(in[0], o)); });
    }
    ExpectGradientsMatch("global_avg_pool2d", {Leaf({3, 4, 5, 2}, 42)},
                         [l](const Ins& in) { return Project(graph::GlobalAvgPool2d(in[0], l)); });
  }
}

TEST(PoolNormGradCheck, BatchNorm2d) {
  for (ops::ImageLayout l : {kNCHW, kNHWC}) {
    for (bool training : {true, false}) {
      for (bool relu : {false, true}) {
        const Shape x_shape = l == kNCHW ? Shape{3, 5, 3, 2} : Shape{3, 3, 2, 5};
        Ins in = {Leaf(x_shape, 51, -2.0f, 2.0f), Leaf({5}, 52, 0.5f, 1.5f), Leaf({5}, 53, -0.5f, 0.5f)};
        ops::BatchNormOptions o;
        o.training = training;
        o.fuse_relu = relu;
        o.layout = l;
        // Fresh running statistics per evaluation (training updates them in place).
        auto f = [o](const Ins& x) {
          Tensor rm = Tensor::Zeros({5}), rv = Tensor::Full({5}, 1.0);
          // Squared: the loss is not linear in y (whose sum is constant in training), and relu(v)^2
          // is smooth at 0, so finite differences do not see the ReLU's kink.
          Tensor y = graph::BatchNorm2d(x[0], x[1], x[2], rm, rv, o);
          return Project(Mul(y, y));
        };
        ExpectGradientsMatch(std::string("batch_norm2d ") + ops::ImageLayoutName(l) +
                                 (training ? " training" : " inference") + (relu ? " relu" : ""),
                             in, f);
      }
    }
  }
}

// Composition as in a ResNet stem: BN(relu) -> (squared) average pool -> global average.
TEST(PoolNormGradCheck, StemComposition) {
  ops::BatchNormOptions bn;
  bn.fuse_relu = true;
  Ins in = {Leaf({2, 3, 6, 6}, 61, -2.0f, 2.0f), Leaf({3}, 62, 0.5f, 1.5f), Leaf({3}, 63, -0.2f, 0.2f)};
  ExpectGradientsMatch("stem", in, [bn](const Ins& x) {
    Tensor y = graph::BatchNorm2d(x[0], x[1], x[2], Tensor(), Tensor(), bn);
    return Project(
        graph::GlobalAvgPool2d(graph::AvgPool2d(Mul(y, y), ResNetMaxPool(kNCHW)), kNCHW));  // squared: smooth at 0
  });
}

TEST(PoolNormTape, RecordsOnlyDifferentiableInputs) {
  ClearTape();
  Tensor x = Leaf({2, 3, 4, 4}, 71);
  Tensor gamma = Tensor::Full({3}, 1.0), beta = Tensor::Zeros({3});
  Tensor rm = Tensor::Zeros({3}), rv = Tensor::Full({3}, 1.0);
  ops::BatchNormOptions o;
  Tensor y = graph::BatchNorm2d(x, gamma, beta, rm, rv, o);
  EXPECT_EQ(TapeSize(), 1u);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_NE(rm.ToFloatVector()[0], 0.0f);  // updated in place
  Tensor loss = Sum(Mul(y, y));
  Backward(loss);
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(gamma.grad().defined());
  EXPECT_FALSE(rm.grad().defined());
  {
    NoGradGuard no_grad;
    graph::MaxPool2d(x, ResNetMaxPool(kNCHW));
    EXPECT_EQ(TapeSize(), 0u);
  }
  Tensor plain = Tensor::Zeros({1, 1, 4, 4});
  graph::MaxPool2d(plain, ResNetMaxPool(kNCHW));
  EXPECT_EQ(TapeSize(), 0u);
}

}  // namespace
}  // namespace tessera::graph
