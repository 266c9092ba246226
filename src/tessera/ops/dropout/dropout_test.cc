// Unit tests of dropout: keep rate, scaling, agreement with UniformAt,
// forward/backward mask identity, stream offsets, thread-count
// independence and argument errors.
#include "tessera/ops/dropout/dropout.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops {
namespace {

TEST(Dropout, KeepRateAndScale) {
  const int64_t n = 1 << 20;
  Tensor x = Tensor::Full({n}, 2.0);
  for (float p : {0.1f, 0.5f, 0.8f}) {
    std::vector<float> y = Dropout(x, p, 1234).ToFloatVector();
    int64_t kept = 0;
    for (float v : y) {
      if (v != 0.0f) {
        ++kept;
        EXPECT_EQ(v, 2.0f * (1.0f / (1.0f - p)));
      }
    }
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.005) << "p=" << p;
  }
}

TEST(Dropout, MaskIsUniformAtStream) {
  Tensor x = Tensor::Full({3, 1001}, 1.0);
  const uint64_t seed = 77, offset = 5000;
  std::vector<float> y = Dropout(x, 0.3f, seed, offset).ToFloatVector();
  for (int64_t i = 0; i < 3003; ++i) {
    bool keep = UniformAt(seed, offset + i) >= 0.3f;
    EXPECT_EQ(y[i] != 0.0f, keep) << i;
  }
  // An offset continues the same stream.
  std::vector<float> whole = Dropout(Tensor::Full({4003}, 1.0), 0.3f, seed, 4000).ToFloatVector();
  for (int64_t i = 0; i < 3003; ++i) ASSERT_EQ(whole[1000 + i], y[i]) << i;
}

TEST(Dropout, BackwardRegeneratesForwardMask) {
  Tensor x = Tensor::Empty({257, 129});
  FillUniform(x, 3, 0.5, 1.5);  // never zero
  Tensor y = Dropout(x, 0.25f, 99, 7);
  Tensor g = DropoutBackward(Tensor::Full({257, 129}, 1.0), 0.25f, 99, 7);
  std::vector<float> yv = y.ToFloatVector(), gv = g.ToFloatVector();
  for (size_t i = 0; i < yv.size(); ++i) {
    ASSERT_EQ(yv[i] == 0.0f, gv[i] == 0.0f) << i;
    if (gv[i] != 0.0f) {
      EXPECT_FLOAT_EQ(gv[i], 1.0f / 0.75f);
    }
  }
}

TEST(Dropout, IndependentOfThreadCountAndImpl) {
  Tensor x = Tensor::Empty({300, 1000});
  FillUniform(x, 4, -1, 1);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<float> one = Dropout(x, 0.1f, 5, 11).ToFloatVector();
  omp_set_num_threads(2);
  std::vector<float> two = Dropout(x, 0.1f, 5, 11).ToFloatVector();
  omp_set_num_threads(saved);
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)));
  ScopedImpl scope(Impl::kReference);
  std::vector<float> ref = Dropout(x, 0.1f, 5, 11).ToFloatVector();
  EXPECT_EQ(0, std::memcmp(one.data(), ref.data(), one.size() * sizeof(float)));
}

TEST(Dropout, EdgeProbabilities) {
  Tensor x = Tensor::FromVector({1, -2, 3}, {3});
  EXPECT_EQ(Dropout(x, 0.0f, 1).ToFloatVector(), x.ToFloatVector());
  EXPECT_EQ(Dropout(x, 1.0f, 1).ToFloatVector(), (std::vector<float>{0, 0, 0}));
  EXPECT_THROW(Dropout(x, -0.1f, 1), OpError);
  EXPECT_THROW(Dropout(x, 1.5f, 1), OpError);
  EXPECT_THROW(DropoutBackward(Tensor::Zeros({3}, DType::kI64), 0.5f, 1), OpError);
}

}  // namespace
}  // namespace tessera::ops
