// ops::Pointwise: every function against a double-precision formula, its
// derivative against central differences of that formula, bf16 inputs,
// thread-count independence, large arguments, and bad dtypes.
#include "tessera/ops/pointwise/pointwise.h"

#include <omp.h>

#include <cmath>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/base/error.h"

namespace tessera::ops {
namespace {

struct Case {
  PointwiseFn fn;
  float alpha;
  double lo, hi;  // the domain sampled
  std::function<double(double)> f;
  float beta = 0.0f;
};

std::vector<Case> Cases() {
  return {
      {PointwiseFn::kSigmoid, 0, -6, 6, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {PointwiseFn::kTanh, 0, -4, 4, [](double x) { return std::tanh(x); }},
      {PointwiseFn::kExp, 0, -3, 3, [](double x) { return std::exp(x); }},
      {PointwiseFn::kLog, 0, 0.1, 5, [](double x) { return std::log(x); }},
      {PointwiseFn::kSqrt, 0, 0.1, 5, [](double x) { return std::sqrt(x); }},
      {PointwiseFn::kReciprocal, 0, 0.2, 4, [](double x) { return 1 / x; }},
      {PointwiseFn::kAbs, 0, -3, 3, [](double x) { return std::fabs(x); }},
      {PointwiseFn::kErf, 0, -2.5, 2.5, [](double x) { return std::erf(x); }},
      {PointwiseFn::kPow, 2.0f, -3, 3, [](double x) { return x * x; }},
      {PointwiseFn::kPow, 0.5f, 0.1, 4, [](double x) { return std::sqrt(x); }},
      {PointwiseFn::kPow, -1.5f, 0.2, 4, [](double x) { return std::pow(x, -1.5); }},
      {PointwiseFn::kLeakyRelu, 0.1f, -3, 3, [](double x) { return x > 0 ? x : 0.1 * x; }},
      {PointwiseFn::kElu, 0.7f, -3, 3, [](double x) { return x > 0 ? x : 0.7 * std::expm1(x); }},
      {PointwiseFn::kSoftplus, 0, -8, 8, [](double x) { return std::log1p(std::exp(x)); }},
      {PointwiseFn::kSoftsign, 0, -5, 5, [](double x) { return x / (1 + std::fabs(x)); }},
      {PointwiseFn::kClip, -1.0f, -3, 3, [](double x) { return std::min(std::max(x, -1.0), 2.0); }, 2.0f},
      {PointwiseFn::kHardSigmoid, 0.2f, -4, 4, [](double x) { return std::max(0.0, std::min(1.0, 0.2 * x + 0.5)); },
       0.5f},
      {PointwiseFn::kHardSwish, 0, -5, 5, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); }},
  };
}

std::vector<float> Grid(double lo, double hi, int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) {
    double x = lo + (hi - lo) * (i + 0.37) / n;  // avoids 0 and the kinks' exact points
    v.push_back(static_cast<float>(x));
  }
  return v;
}

TEST(Pointwise, ValuesAndDerivativesMatchTheFormulas) {
  for (const Case& c : Cases()) {
    const std::vector<float> xs = Grid(c.lo, c.hi, 97);
    const Tensor x = Tensor::FromVector(xs, {97});
    const Tensor y = Pointwise(c.fn, x, c.alpha, c.beta);
    const Tensor g = Tensor::FromVector(std::vector<float>(97, 1.5f), {97});
    const std::vector<float> ys = y.ToFloatVector();
    const std::vector<float> ds = PointwiseBackward(c.fn, g, x, y, c.alpha, c.beta).ToFloatVector();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = c.f(xs[i]);
      EXPECT_NEAR(ys[i], want, 2e-6 + 2e-6 * std::fabs(want)) << PointwiseFnName(c.fn) << " at " << xs[i];
      const double h = 1e-5;
      const double fd = 1.5 * (c.f(xs[i] + h) - c.f(xs[i] - h)) / (2 * h);
      EXPECT_NEAR(ds[i], fd, 1e-4 + 1e-4 * std::fabs(fd)) << PointwiseFnName(c.fn) << "' at " << xs[i];
    }
  }
}

TEST(Pointwise, HalfPrecisionThreadsAndLargeArguments) {
  // bf16 in, bf16 out: the fp32 result rounded once.
  const Tensor x = Tensor::FromVector(Grid(-3, 3, 64), {8, 8});
  const Tensor xb = x.To(DType::kBF16);
  const Tensor yb = Pointwise(PointwiseFn::kTanh, xb);
  EXPECT_EQ(yb.dtype(), DType::kBF16);
  EXPECT_EQ(yb.ToFloatVector(), Pointwise(PointwiseFn::kTanh, xb.To(DType::kF32)).To(DType::kBF16).ToFloatVector());
  // The thread count does not change a bit (large enough to run in parallel).
  std::vector<float> big = Grid(-4, 4, 300000);
  const Tensor xl = Tensor::FromVector(big, {300000});
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = Pointwise(PointwiseFn::kErf, xl).ToFloatVector();
  omp_set_num_threads(std::max(2, saved));
  const std::vector<float> many = Pointwise(PointwiseFn::kErf, xl).ToFloatVector();
  omp_set_num_threads(saved);
  EXPECT_EQ(one, many);
  // No overflow at the ends.
  const std::vector<float> ends =
      Pointwise(PointwiseFn::kSoftplus, Tensor::FromVector({-100.0f, 100.0f}, {2})).ToFloatVector();
  EXPECT_NEAR(ends[0], 0.0f, 1e-30);
  EXPECT_EQ(ends[1], 100.0f);
  const std::vector<float> sig =
      Pointwise(PointwiseFn::kSigmoid, Tensor::FromVector({-100.0f, 100.0f}, {2})).ToFloatVector();
  EXPECT_EQ(sig[0], 0.0f);
  EXPECT_EQ(sig[1], 1.0f);
  // A strided view is read correctly.
  const Tensor t = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3}).Transpose(0, 1);
  EXPECT_EQ(Pointwise(PointwiseFn::kAbs, t).ToFloatVector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Pointwise, BadArgumentsThrow) {
  EXPECT_THROW(Pointwise(PointwiseFn::kExp, Tensor::FromInts({1, 2}, {2})), OpError);
  const Tensor x = Tensor::FromVector({1, 2}, {2});
  EXPECT_THROW(PointwiseBackward(PointwiseFn::kExp, Tensor::FromVector({1, 2, 3}, {3}), x, x), OpError);
}

}  // namespace
}  // namespace tessera::ops
