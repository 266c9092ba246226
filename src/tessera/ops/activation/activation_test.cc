// Unit tests of gelu / silu / relu / swiglu: published values, behaviour at
// extreme inputs, dtypes and argument errors.
#include "tessera/ops/activation/activation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"

namespace tessera::ops {
namespace {

const Impl kImpls[] = {Impl::kReference, Impl::kOptimized};

TEST(Activation, KnownValues) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor x = Tensor::FromVector({-1, 0, 1, 2}, {4});
    std::vector<float> g = Gelu(x).ToFloatVector();
    // tanh-approximation GELU: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).
    EXPECT_NEAR(g[0], -0.158808f, 1e-5);
    EXPECT_EQ(g[1], 0.0f);
    EXPECT_NEAR(g[2], 0.841192f, 1e-5);
    EXPECT_NEAR(g[3], 1.954598f, 1e-5);
    std::vector<float> s = Silu(x).ToFloatVector();
    EXPECT_NEAR(s[0], -0.268941f, 1e-6);
    EXPECT_NEAR(s[2], 0.731059f, 1e-6);
    EXPECT_EQ(Relu(x).ToFloatVector(), (std::vector<float>{0, 0, 1, 2}));
    EXPECT_EQ(ReluBackward(Tensor::Full({4}, 3.0), x).ToFloatVector(), (std::vector<float>{0, 0, 3, 3}));
    Tensor up = Tensor::FromVector({2, 2, 2, 2}, {4});
    std::vector<float> w = SwiGlu(x, up).ToFloatVector();
    EXPECT_NEAR(w[2], 2 * 0.731059f, 1e-6);
    // d silu / dx at 0 is 0.5; d gelu / dx at 0 is 0.5.
    EXPECT_NEAR(SiluBackward(Tensor::Full({4}, 1.0), x).ToFloatVector()[1], 0.5f, 1e-6);
    EXPECT_NEAR(GeluBackward(Tensor::Full({4}, 1.0), x).ToFloatVector()[1], 0.5f, 1e-6);
  }
}

TEST(Activation, ExtremeInputsStayFinite) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor x = Tensor::FromVector({-100, -30, 30, 100}, {4});
    std::vector<float> g = Gelu(x).ToFloatVector(), s = Silu(x).ToFloatVector();
    std::vector<float> dg = GeluBackward(Tensor::Full({4}, 1.0), x).ToFloatVector();
    std::vector<float> ds = SiluBackward(Tensor::Full({4}, 1.0), x).ToFloatVector();
    EXPECT_NEAR(g[0], 0.0f, 1e-6);
    EXPECT_NEAR(g[3], 100.0f, 1e-4);
    EXPECT_NEAR(s[0], 0.0f, 1e-6);
    EXPECT_NEAR(s[3], 100.0f, 1e-4);
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(std::isfinite(dg[i]) && std::isfinite(ds[i])) << i;
    }
    EXPECT_NEAR(dg[3], 1.0f, 1e-5);
    EXPECT_NEAR(ds[0], 0.0f, 1e-5);
  }
}

TEST(Activation, KeepsDtype) {
  Tensor x = Tensor::FromVector({-1, 0.5f, 2}, {3}, DType::kF16);
  EXPECT_EQ(Gelu(x).dtype(), DType::kF16);
  EXPECT_EQ(SwiGluBackward(x, x, x).grad_up.dtype(), DType::kF16);
}

TEST(Activation, RejectsBadArguments) {
  Tensor x = Tensor::Zeros({2, 3});
  EXPECT_THROW(Gelu(Tensor::Zeros({2}, DType::kI64)), OpError);
  EXPECT_THROW(SiluBackward(Tensor::Zeros({3, 2}), x), OpError);
  EXPECT_THROW(SwiGlu(x, Tensor::Zeros({2, 4})), OpError);
  EXPECT_THROW(SwiGlu(x, Tensor::Zeros({2, 3}, DType::kBF16)), OpError);
  EXPECT_THROW(SwiGluBackward(Tensor::Zeros({6}), x, x), OpError);
}

}  // namespace
}  // namespace tessera::ops
