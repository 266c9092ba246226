// graph::Conv2d: gradients through the tape against central finite
// differences (graph/gradcheck_test_util.h) on small shapes — both layouts,
// stride, padding, dilation, groups, depthwise, 1x1, with and without bias,
// two convolutions chained — and which inputs receive gradients. Calls are
// qualified: ADL on ops::Conv2dOptions also finds ops::Conv2d.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

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

struct Case {
  int64_t N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, groups;
  bool bias;
};

ops::Conv2dOptions Options(const Case& c, ops::ImageLayout layout) {
  ops::Conv2dOptions o;
  o.stride_h = c.sh, o.stride_w = c.sw, o.pad_h = c.ph, o.pad_w = c.pw, o.dilation_h = c.dh, o.dilation_w = c.dw;
  o.groups = c.groups;
  o.layout = layout;
  return o;
}

TEST(GradCheckTest, Conv2d) {
  const Case cases[] = {
      {2, 3, 5, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},   // 3x3 same
      {2, 3, 7, 6, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},  // stride 2, no bias
      {1, 2, 7, 7, 3, 3, 2, 1, 2, 2, 0, 2, 1, 1, true},   // dilation, asymmetric
      {2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true},   // groups 2
      {2, 3, 6, 5, 6, 3, 3, 2, 1, 1, 1, 1, 1, 3, true},   // depthwise, multiplier 2
      {3, 5, 4, 3, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},   // 1x1
  };
  for (const Case& c : cases) {
    for (ops::ImageLayout layout : {ops::ImageLayout::kNCHW, ops::ImageLayout::kNHWC}) {
      const ops::Conv2dOptions o = Options(c, layout);
      const Shape xs = layout == ops::ImageLayout::kNCHW ? Shape{c.N, c.C, c.H, c.W} : Shape{c.N, c.H, c.W, c.C};
      Ins in{Leaf(xs, 1), Leaf({c.K, c.C / c.groups, c.R, c.S}, 2)};
      if (c.bias) in.push_back(Leaf({c.K}, 3));
      const std::string what = fmt::format("conv2d {} x {} w [{}, {}, {}, {}] g{}", ops::ImageLayoutName(layout),
                                           ShapeString(xs), c.K, c.C / c.groups, c.R, c.S, c.groups);
      ExpectGradientsMatch(what, in, [o](const Ins& v) {
        return Project(graph::Conv2d(v[0], v[1], v.size() > 2 ? v[2] : Tensor(), o));
      });
    }
  }
}

TEST(GradCheckTest, Conv2dChained) {
  for (ops::ImageLayout layout : {ops::ImageLayout::kNCHW, ops::ImageLayout::kNHWC}) {
    ops::Conv2dOptions a;
    a.pad_h = a.pad_w = 1;
    a.layout = layout;
    ops::Conv2dOptions b = a;
    b.stride_h = b.stride_w = 2;
    const Shape xs = layout == ops::ImageLayout::kNCHW ? Shape{2, 3, 6, 7} : Shape{2, 6, 7, 3};
    ExpectGradientsMatch(fmt::format("conv2d chained {}", ops::ImageLayoutName(layout)),
                         {Leaf(xs, 4), Leaf({4, 3, 3, 3}, 5), Leaf({4}, 6), Leaf({5, 4, 3, 3}, 7)},
                         [a, b](const Ins& v) {
                           Tensor h = Gelu(graph::Conv2d(v[0], v[1], v[2], a));
                           return Project(graph::Conv2d(h, v[3], Tensor(), b));
                         });
  }
}

TEST(Conv2dGraph, OnlyInputsThatRequireGradGetOne) {
  Tensor x = Leaf({2, 3, 5, 5}, 1);
  x.set_requires_grad(false);
  Tensor w = Leaf({4, 3, 3, 3}, 2), bias = Leaf({4}, 3);
  bias.set_requires_grad(false);
  Backward(Project(graph::Conv2d(x, w, bias, ops::Conv2dOptions{})));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(bias.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().shape(), w.shape());
  {
    NoGradGuard no_grad;
    Tensor y = graph::Conv2d(x, w, bias, ops::Conv2dOptions{});
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_EQ(TapeSize(), 0u);
}

}  // namespace
}  // namespace tessera::graph
