#include "tessera/graph/tape.h"

#include <thread>

#include <gtest/gtest.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/gradcheck_test_util.h"

namespace tessera::graph {
namespace {

using testing::Leaf;
using testing::Project;

TEST(TapeTest, GradientsAccumulateOverBackwardCalls) {
  Tensor w = Leaf({3, 2}, 1);
  Tensor x1 = Tensor::FromVector({1, 2, 3}, {1, 3});
  Tensor x2 = Tensor::FromVector({-1, 0.5f, 4}, {1, 3});
  auto grad_for = [&](const Tensor& x) {
    Tensor single = Leaf({3, 2}, 1);  // same values as w
    Backward(Project(MatMul(x, single)));
    return single.grad().ToFloatVector();
  };
  std::vector<float> g1 = grad_for(x1), g2 = grad_for(x2);
  Backward(Project(MatMul(x1, w)));
  EXPECT_EQ(TapeSize(), 0u);
  Backward(Project(MatMul(x2, w)));
  std::vector<float> both = w.grad().ToFloatVector();
  ASSERT_EQ(both.size(), g1.size());
  for (size_t i = 0; i < both.size(); ++i) EXPECT_FLOAT_EQ(both[i], g1[i] + g2[i]);
  w.ZeroGrad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(TapeTest, NoGradGuardRecordsNothing) {
  Tensor w = Leaf({2, 2}, 2);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(GradEnabled());
    Tensor y = Gelu(MatMul(w, w));
    EXPECT_EQ(TapeSize(), 0u);
    EXPECT_FALSE(y.requires_grad());
    {
      GradModeGuard enable(true);
      Tensor z = Add(w, w);
      EXPECT_EQ(TapeSize(), 1u);
      EXPECT_TRUE(z.requires_grad());
    }
    EXPECT_FALSE(GradEnabled());
  }
  EXPECT_TRUE(GradEnabled());
  ClearTape();
  EXPECT_EQ(TapeSize(), 0u);
}

TEST(TapeTest, InputsWithoutGradAreNotRecorded) {
  Tensor a = Tensor::FromVector({1, 2}, {2});
  Tensor b = Tensor::FromVector({3, 4}, {2});
  Tensor c = Mul(a, b);
  EXPECT_EQ(TapeSize(), 0u);
  EXPECT_FALSE(c.requires_grad());
}

TEST(TapeTest, ExplicitOutputGradientAndIntermediatesKeepNoGrad) {
  Tensor x = Leaf({3}, 3);
  Tensor c = Tensor::FromVector({2, -1, 0.5f}, {3});
  Tensor h = Mul(x, c);
  Tensor y = Affine(h, 1.0f, 1.0f);
  Backward(y, Tensor::FromVector({1, 2, 3}, {3}));
  EXPECT_EQ(x.grad().ToFloatVector(), (std::vector<float>{2, -2, 1.5f}));
  EXPECT_FALSE(h.grad().defined());  // only leaves receive .grad
}

TEST(TapeTest, LossThatIsALeaf) {
  Tensor x = Leaf({2}, 4);
  Backward(x, Tensor::FromVector({5, 6}, {2}));
  EXPECT_EQ(x.grad().ToFloatVector(), (std::vector<float>{5, 6}));
}

TEST(TapeTest, TapeIsPerThread) {
  Tensor w = Leaf({2}, 5);
  Tensor y = Mul(w, w);
  EXPECT_EQ(TapeSize(), 1u);
  size_t other = 99;
  std::thread t([&] {
    other = TapeSize();
    Tensor w2 = Leaf({2}, 6);
    Backward(Sum(Mul(w2, w2)));
  });
  t.join();
  EXPECT_EQ(other, 0u);
  EXPECT_EQ(TapeSize(), 1u);
  Backward(Sum(y));
  EXPECT_EQ(TapeSize(), 0u);
  std::vector<float> wv = w.ToFloatVector(), g = w.grad().ToFloatVector();
  EXPECT_FLOAT_EQ(g[0], 2 * wv[0]);
}

TEST(TapeTest, ActivationsAreReleasedAfterBackward) {
  Tensor w = Leaf({4, 4}, 7);
  std::weak_ptr<TensorImpl> hidden;
  {
    Tensor h = Gelu(MatMul(w, w));
    hidden = h.impl_ptr();
    Tensor loss = Sum(h);
    h = Tensor();
    EXPECT_FALSE(hidden.expired());  // the tape holds it
    Backward(loss);
  }
  EXPECT_TRUE(hidden.expired());
}

TEST(TapeTest, ClearTapeAbandonsAForward) {
  Tensor w = Leaf({4}, 8);
  std::weak_ptr<TensorImpl> hidden;
  {
    Tensor h = Silu(w);
    hidden = h.impl_ptr();
  }
  EXPECT_FALSE(hidden.expired());
  ClearTape();
  EXPECT_TRUE(hidden.expired());
  EXPECT_FALSE(w.grad().defined());
}

}  // namespace
}  // namespace tessera::graph
