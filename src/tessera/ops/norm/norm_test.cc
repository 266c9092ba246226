// Unit tests of layernorm / rmsnorm: known values, normalized statistics,
// mixed precision dtypes, thread-count independence of parameter
// gradients, and argument errors.
#include "tessera/ops/norm/norm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops {
namespace {

const Impl kImpls[] = {Impl::kReference, Impl::kOptimized};

TEST(Norm, LayerNormKnownValues) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor x = Tensor::FromVector({1, 2, 3, 4}, {1, 4});
    NormResult r = LayerNorm(x, Tensor::Full({4}, 2.0), Tensor::Full({4}, 1.0), 0.0f);
    const float rs = 1.0f / std::sqrt(1.25f);
    std::vector<float> y = r.y.ToFloatVector();
    EXPECT_NEAR(y[0], -1.5f * rs * 2 + 1, 1e-6);
    EXPECT_NEAR(y[3], 1.5f * rs * 2 + 1, 1e-6);
    EXPECT_FLOAT_EQ(r.mean.Item(), 2.5f);
    EXPECT_NEAR(r.rstd.Item(), rs, 1e-6);
    NormResult q = RmsNorm(x, Tensor::Full({4}, 1.0), 0.0f);
    const float qs = 1.0f / std::sqrt(7.5f);
    EXPECT_NEAR(q.y.ToFloatVector()[1], 2 * qs, 1e-6);
    EXPECT_FALSE(q.mean.defined());
  }
}

TEST(Norm, OutputsAreNormalized) {
  Tensor x = Tensor::Empty({50, 384});
  FillUniform(x, 4, -3, 7);
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    std::vector<float> y = LayerNorm(x, Tensor::Full({384}, 1.0), Tensor::Zeros({384})).y.ToFloatVector();
    std::vector<float> z = RmsNorm(x, Tensor::Full({384}, 1.0)).y.ToFloatVector();
    for (int r = 0; r < 50; ++r) {
      double m = 0, v = 0, ms = 0;
      for (int c = 0; c < 384; ++c) m += y[r * 384 + c];
      m /= 384;
      for (int c = 0; c < 384; ++c) {
        v += (y[r * 384 + c] - m) * (y[r * 384 + c] - m);
        ms += z[r * 384 + c] * z[r * 384 + c];
      }
      EXPECT_NEAR(m, 0.0, 1e-5);
      EXPECT_NEAR(v / 384, 1.0, 1e-3);
      EXPECT_NEAR(ms / 384, 1.0, 1e-3);
    }
  }
}

TEST(Norm, MixedPrecisionDtypes) {
  Tensor x = Tensor::Empty({8, 64}, DType::kBF16);
  FillUniform(x, 5, -1, 1);
  Tensor gamma = Tensor::Full({64}, 1.0), beta = Tensor::Zeros({64});
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    NormResult r = LayerNorm(x, gamma, beta);
    EXPECT_EQ(r.y.dtype(), DType::kBF16);
    EXPECT_EQ(r.mean.dtype(), DType::kF32);
    EXPECT_EQ(r.rstd.dtype(), DType::kF32);
    NormGrads g = LayerNormBackward(x, x, gamma, r);
    EXPECT_EQ(g.grad_x.dtype(), DType::kBF16);
    EXPECT_EQ(g.grad_gamma.dtype(), DType::kF32);
    EXPECT_EQ(g.grad_beta.dtype(), DType::kF32);
    NormResult q = RmsNorm(x, gamma);
    NormGrads h = RmsNormBackward(x, x, gamma, q);
    EXPECT_EQ(h.grad_gamma.dtype(), DType::kF32);
    EXPECT_FALSE(h.grad_beta.defined());
  }
}

TEST(Norm, GradientsIndependentOfThreadCount) {
  Tensor x = Tensor::Empty({512, 256}), dy = Tensor::Empty({512, 256});
  FillUniform(x, 6, -2, 2);
  FillUniform(dy, 7, -1, 1);
  Tensor gamma = Tensor::Empty({256}), beta = Tensor::Empty({256});
  FillUniform(gamma, 8, 0.5, 1.5);
  FillUniform(beta, 9, -1, 1);
  int saved = omp_get_max_threads();
  std::vector<std::vector<float>> out[2];
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    NormResult r = LayerNorm(x, gamma, beta);
    NormGrads g = LayerNormBackward(dy, x, gamma, r);
    NormResult q = RmsNorm(x, gamma);
    NormGrads h = RmsNormBackward(dy, x, gamma, q);
    out[threads - 1] = {r.y.ToFloatVector(),         g.grad_x.ToFloatVector(), g.grad_gamma.ToFloatVector(),
                        g.grad_beta.ToFloatVector(), h.grad_x.ToFloatVector(), h.grad_gamma.ToFloatVector()};
  }
  omp_set_num_threads(saved);
  for (size_t i = 0; i < out[0].size(); ++i) {
    EXPECT_EQ(0, std::memcmp(out[0][i].data(), out[1][i].data(), out[0][i].size() * sizeof(float))) << i;
  }
}

TEST(Norm, RejectsBadArguments) {
  Tensor x = Tensor::Zeros({3, 8});
  Tensor g = Tensor::Full({8}, 1.0), b = Tensor::Zeros({8});
  EXPECT_THROW(LayerNorm(x, Tensor::Zeros({7}), b), OpError);
  EXPECT_THROW(LayerNorm(x, g, Tensor::Zeros({8, 1})), OpError);
  EXPECT_THROW(RmsNorm(Tensor::Zeros({3, 8}, DType::kI64), g), OpError);
  EXPECT_THROW(RmsNorm(Tensor::Zeros({3, 0}), Tensor::Zeros({0})), OpError);
  EXPECT_THROW(LayerNorm(x, g, b, -1.0f), OpError);
  NormResult r = LayerNorm(x, g, b);
  EXPECT_THROW(LayerNormBackward(Tensor::Zeros({3, 7}), x, g, r), OpError);
  NormResult broken = r;
  broken.rstd = Tensor::Zeros({2});
  EXPECT_THROW(LayerNormBackward(x, x, g, broken), OpError);
  NormResult no_mean = r;
  no_mean.mean = Tensor();
  EXPECT_THROW(LayerNormBackward(x, x, g, no_mean), OpError);
  try {
    RmsNorm(x, Tensor::Zeros({5}));
    FAIL() << "expected OpError";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("rmsnorm: gamma"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::ops
