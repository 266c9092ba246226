// Unit tests of softmax / log_softmax: known values, normalization, shift
// invariance (stability), -inf entries, inner axes and argument errors.
#include "tessera/ops/softmax/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops {
namespace {

const Impl kImpls[] = {Impl::kReference, Impl::kOptimized};

TEST(Softmax, KnownValues) {
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor x = Tensor::FromVector({1, 2, 3}, {1, 3});
    std::vector<float> y = Softmax(x).ToFloatVector();
    EXPECT_NEAR(y[0], e1 / s, 1e-6);
    EXPECT_NEAR(y[1], e2 / s, 1e-6);
    EXPECT_NEAR(y[2], e3 / s, 1e-6);
    std::vector<float> ly = LogSoftmax(x).ToFloatVector();
    EXPECT_NEAR(ly[0], 1 - std::log(s), 1e-6);
    EXPECT_NEAR(ly[2], 3 - std::log(s), 1e-6);
  }
}

TEST(Softmax, RowsSumToOneAndShiftInvariant) {
  Tensor x = Tensor::Empty({37, 301});
  FillUniform(x, 1, -5, 5);
  Tensor shifted = Tensor::Empty({37, 301});
  std::vector<float> v = x.ToFloatVector();
  for (float& e : v) e += 1000.0f;  // would overflow exp without the max shift
  shifted.CopyFrom(Tensor::FromVector(v, {37, 301}));
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    std::vector<float> y = Softmax(x).ToFloatVector(), ys = Softmax(shifted).ToFloatVector();
    for (int r = 0; r < 37; ++r) {
      double s = 0;
      for (int c = 0; c < 301; ++c) s += y[r * 301 + c];
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(std::isfinite(ys[i]));
      EXPECT_NEAR(ys[i], y[i], 2e-4 * y[i] + 1e-7);  // the shifted input lost ~1e-4 absolute precision
    }
  }
}

TEST(Softmax, NegativeInfinityGetsZeroProbability) {
  const float inf = std::numeric_limits<float>::infinity();
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    std::vector<float> y = Softmax(Tensor::FromVector({0.0f, -inf, 0.0f}, {3})).ToFloatVector();
    EXPECT_FLOAT_EQ(y[0], 0.5f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_FLOAT_EQ(y[2], 0.5f);
  }
}

TEST(Softmax, InnerAxisMatchesTransposedLastAxis) {
  Tensor x = Tensor::Empty({4, 9, 6});
  FillUniform(x, 2, -3, 3);
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor a = Softmax(x, 1);
    Tensor b = Softmax(x.Transpose(1, 2).Contiguous(), -1).Transpose(1, 2).Contiguous();
    std::vector<float> av = a.ToFloatVector(), bv = b.ToFloatVector();
    for (size_t i = 0; i < av.size(); ++i) EXPECT_NEAR(av[i], bv[i], 1e-6);
    Tensor g = Tensor::Empty({4, 9, 6});
    FillUniform(g, 3, -1, 1);
    Tensor ga = LogSoftmaxBackward(g, LogSoftmax(x, 1), 1);
    EXPECT_EQ(ga.shape(), x.shape());
  }
}

TEST(Softmax, EmptyTensors) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    EXPECT_EQ(Softmax(Tensor::Zeros({0, 5})).shape(), (Shape{0, 5}));
    EXPECT_EQ(LogSoftmax(Tensor::Zeros({3, 0})).shape(), (Shape{3, 0}));
    EXPECT_EQ(SoftmaxBackward(Tensor::Zeros({3, 0}), Tensor::Zeros({3, 0})).shape(), (Shape{3, 0}));
  }
}

TEST(Softmax, RejectsBadArguments) {
  Tensor x = Tensor::Zeros({2, 3});
  EXPECT_THROW(Softmax(x, 2), OpError);
  EXPECT_THROW(LogSoftmax(x, -3), OpError);
  EXPECT_THROW(Softmax(Tensor::Zeros({3}, DType::kI32)), OpError);
  EXPECT_THROW(SoftmaxBackward(Tensor::Zeros({3, 2}), x), OpError);
  EXPECT_THROW(LogSoftmaxBackward(Tensor::Zeros({2, 3}, DType::kBF16), x), OpError);
}

}  // namespace
}  // namespace tessera::ops
