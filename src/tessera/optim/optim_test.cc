#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/optim/adamw.h"
#include "tessera/optim/clip.h"
#include "tessera/optim/schedule.h"
#include "tessera/tensor/rng.h"

namespace tessera::optim {
namespace {

Tensor Param(const std::vector<float>& values, const Shape& shape, DType dtype = DType::kF32) {
  Tensor t = Tensor::FromVector(values, shape, dtype);
  t.set_requires_grad(true);
  return t;
}

void SetGrad(Tensor& p, const std::vector<float>& g) { p.set_grad(Tensor::FromVector(g, p.shape())); }

// Double-precision AdamW (torch.optim.AdamW semantics) on one vector.
struct RefAdamW {
  std::vector<double> p, m, v;
  int t = 0;
  void Step(const std::vector<double>& g, double lr, double b1, double b2, double eps, double wd) {
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

TEST(AdamWTest, FirstStepMatchesHandComputedValues) {
  // Step 1: m̂ = g, v̂ = g², so p ← p(1 − lr·wd) − lr·g/(|g| + eps).
  Tensor w = Param({1.0f, -2.0f, 0.5f, 3.0f}, {2, 2});
  SetGrad(w, {0.1f, -0.2f, 0.3f, -4.0f});
  AdamWOptions opt;
  opt.beta1 = 0.9;
  opt.beta2 = 0.999;
  opt.weight_decay = 0.1;
  AdamW adam({{"w", w}}, opt);
  adam.Step(0.01);
  std::vector<float> got = w.ToFloatVector();
  EXPECT_NEAR(got[0], 0.989, 1e-6);
  EXPECT_NEAR(got[1], -1.988, 1e-6);
  EXPECT_NEAR(got[2], 0.4895, 1e-6);
  EXPECT_NEAR(got[3], 3.0 * 0.999 + 0.01, 1e-6);
  EXPECT_EQ(adam.steps(), 1);
}

TEST(AdamWTest, SeveralStepsMatchDoubleReference) {
  const int64_t n = 70000;  // above the threaded-update threshold
  Tensor w = Tensor::Empty({700, 100});  // 2-D: in the weight-decay group
  FillNormal(w, 7, 0.0f, 1.0f);
  w.set_requires_grad(true);
  RefAdamW ref;
  for (float x : w.ToFloatVector()) ref.p.push_back(x);
  ref.m.assign(n, 0.0);
  ref.v.assign(n, 0.0);
  AdamWOptions opt;
  opt.weight_decay = 0.05;
  AdamW adam({{"w", w}}, opt);
  for (int step = 0; step < 4; ++step) {
    Tensor g = Tensor::Empty({700, 100});
    FillNormal(g, 100 + step, 0.0f, 0.01f * (step + 1));
    w.set_grad(g);
    std::vector<double> gd;
    for (float x : g.ToFloatVector()) gd.push_back(x);
    double lr = 1e-2 / (step + 1);
    adam.Step(lr);
    ref.Step(gd, lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay);
  }
  std::vector<float> got = w.ToFloatVector();
  double max_err = 0.0;
  for (int64_t i = 0; i < n; ++i) max_err = std::max(max_err, std::abs(got[i] - ref.p[i]));
  EXPECT_LT(max_err, 2e-6);
}

TEST(AdamWTest, DefaultGroupsExemptVectorsFromDecay) {
  Tensor matrix = Param({1.0f, 1.0f}, {1, 2});
  Tensor bias = Param({1.0f, 1.0f}, {2});
  auto groups = DefaultParamGroups({{"m", matrix}, {"b", bias}}, 0.5);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].params[0].first, "m");
  EXPECT_EQ(groups[0].weight_decay, 0.5);
  EXPECT_EQ(groups[1].params[0].first, "b");
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  // Zero gradient: Adam's update is 0, only decoupled decay moves weights.
  SetGrad(matrix, {0.0f, 0.0f});
  SetGrad(bias, {0.0f, 0.0f});
  AdamWOptions opt;
  opt.weight_decay = 0.5;
  AdamW adam({{"m", matrix}, {"b", bias}}, opt);
  adam.Step(0.1);
  EXPECT_NEAR(matrix.ToFloatVector()[0], 0.95, 1e-7);
  EXPECT_EQ(bias.ToFloatVector()[0], 1.0f);
}

TEST(AdamWTest, ParametersWithoutGradientAreSkippedAndKeepTheirStepCount) {
  Tensor a = Param({1.0f}, {1});
  Tensor b = Param({1.0f}, {1});
  AdamWOptions opt;
  opt.weight_decay = 0.0;
  AdamW adam({{"a", a}, {"b", b}}, opt);
  SetGrad(a, {1.0f});
  adam.Step(0.1);
  EXPECT_NEAR(a.ToFloatVector()[0], 0.9, 1e-6);
  EXPECT_EQ(b.ToFloatVector()[0], 1.0f);
  auto state = adam.StateDict();
  EXPECT_EQ(state.at("a.step").Item(), 1);
  EXPECT_EQ(state.at("b.step").Item(), 0);
  // b's first real step is bias-corrected as step 1: a full lr-sized move.
  SetGrad(b, {-3.0f});
  a.ZeroGrad();
  adam.Step(0.1);
  EXPECT_NEAR(b.ToFloatVector()[0], 1.1, 1e-6);
  EXPECT_NEAR(a.ToFloatVector()[0], 0.9, 1e-6);
}

TEST(AdamWTest, GroupLearningRateScale) {
  Tensor a = Param({0.0f}, {1});
  ParamGroup group{{{"a", a}}, 0.0, 0.5};
  AdamW adam(std::vector<ParamGroup>{group}, AdamWOptions{});
  SetGrad(a, {2.0f});
  adam.Step(0.2);
  EXPECT_NEAR(a.ToFloatVector()[0], -0.1, 1e-6);
}

TEST(AdamWTest, Bf16ParameterUpdatedThroughFp32) {
  Tensor w = Param({1.0f, -1.0f}, {2}, DType::kBF16);
  SetGrad(w, {0.5f, -0.5f});
  AdamWOptions opt;
  opt.weight_decay = 0.0;
  AdamW adam({{"w", w}}, opt);
  adam.Step(0.125);
  EXPECT_EQ(w.dtype(), DType::kBF16);
  EXPECT_NEAR(w.ToFloatVector()[0], 0.875, 1e-3);
  EXPECT_NEAR(w.ToFloatVector()[1], -0.875, 1e-3);
}

TEST(AdamWTest, StateDictRoundTripResumesIdentically) {
  auto make = [] { return Param({0.3f, -0.7f, 1.1f}, {3}); };
  Tensor w1 = make(), w2 = make();
  AdamW a1({{"w", w1}}, AdamWOptions{}), a2({{"w", w2}}, AdamWOptions{});
  for (int i = 0; i < 3; ++i) {
    SetGrad(w1, {0.1f * i, -0.2f, 0.05f});
    a1.Step(0.01);
  }
  std::map<std::string, Tensor> saved;
  for (auto& [k, v] : a1.StateDict()) saved.emplace(k, v.Clone());
  w2.CopyFrom(w1);
  ASSERT_TRUE(a2.LoadStateDict(saved).ok());
  EXPECT_EQ(a2.steps(), 3);
  SetGrad(w1, {0.4f, 0.4f, -0.4f});
  SetGrad(w2, {0.4f, 0.4f, -0.4f});
  a1.Step(0.01);
  a2.Step(0.01);
  EXPECT_EQ(w1.ToFloatVector(), w2.ToFloatVector());
}

TEST(AdamWTest, LoadStateDictErrorsNameTheKeys) {
  Tensor w = Param({1.0f, 2.0f}, {2});
  AdamW adam({{"w", w}}, AdamWOptions{});
  auto state = adam.StateDict();
  auto missing = state;
  missing.erase("w.exp_avg");
  Status st = adam.LoadStateDict(missing);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing key 'w.exp_avg'"), std::string::npos) << st.message();
  auto wrong = state;
  wrong["w.exp_avg_sq"] = Tensor::Zeros({3});
  wrong["extra"] = Tensor::Zeros({1});
  st = adam.LoadStateDict(wrong);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'w.exp_avg_sq' is [3] fp32, expected [2] fp32"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("unexpected key 'extra'"), std::string::npos) << st.message();
}

TEST(ScheduleTest, WarmupThenCosineToFloor) {
  WarmupCosineSchedule s{1.0, 0.1, 10, 110};
  ASSERT_TRUE(s.Validate().ok());
  EXPECT_DOUBLE_EQ(s.LearningRate(0), 0.1);
  EXPECT_DOUBLE_EQ(s.LearningRate(4), 0.5);
  EXPECT_DOUBLE_EQ(s.LearningRate(9), 1.0);
  EXPECT_DOUBLE_EQ(s.LearningRate(10), 1.0);
  EXPECT_NEAR(s.LearningRate(60), 0.55, 1e-12);   // half-way: midpoint of max and min
  EXPECT_NEAR(s.LearningRate(35), 0.1 + 0.45 * (1 + std::cos(M_PI / 4)), 1e-12);
  EXPECT_NEAR(s.LearningRate(110), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(s.LearningRate(500), 0.1);
  for (int64_t step = 10; step < 110; ++step) EXPECT_GE(s.LearningRate(step), s.LearningRate(step + 1));
}

TEST(ScheduleTest, ValidateRejectsBadSettings) {
  EXPECT_FALSE((WarmupCosineSchedule{0.1, 1.0, 0, 10}).Validate().ok());
  EXPECT_FALSE((WarmupCosineSchedule{1.0, 0.1, 11, 10}).Validate().ok());
  EXPECT_FALSE((WarmupCosineSchedule{1.0, 0.1, 0, 0}).Validate().ok());
  Status st = (WarmupCosineSchedule{1.0, 0.1, -1, 10}).Validate();
  EXPECT_NE(st.message().find("warmup_steps"), std::string::npos);
}

TEST(ClipTest, ScalesToMaxNormAndReturnsPreClipNorm) {
  Tensor a = Param({0, 0}, {2}), b = Param({0}, {1}), none = Param({5}, {1});
  SetGrad(a, {3.0f, 4.0f});
  SetGrad(b, {12.0f});
  EXPECT_NEAR(GradNorm({a, b, none}), 13.0, 1e-12);
  double norm = ClipGradNorm({a, b, none}, 6.5);
  EXPECT_NEAR(norm, 13.0, 1e-12);
  const double scale = 6.5 / (13.0 + 1e-6);
  EXPECT_NEAR(a.grad().ToFloatVector()[0], 3.0 * scale, 1e-6);
  EXPECT_NEAR(b.grad().ToFloatVector()[0], 12.0 * scale, 1e-6);
  EXPECT_NEAR(GradNorm({a, b}), 6.5, 1e-5);
  // Below the threshold nothing changes.
  double again = ClipGradNorm({a, b}, 100.0);
  EXPECT_NEAR(again, 6.5, 1e-5);
  EXPECT_NEAR(b.grad().ToFloatVector()[0], 12.0 * scale, 1e-6);
}

TEST(ClipTest, NonFiniteNormIsReportedWithoutScaling) {
  Tensor a = Param({0, 0}, {2});
  SetGrad(a, {INFINITY, 1.0f});
  double norm = ClipGradNorm({a}, 1.0);
  EXPECT_TRUE(std::isinf(norm));
  EXPECT_EQ(a.grad().ToFloatVector()[1], 1.0f);
}

TEST(ClipTest, SumOfSquaresMatchesADoubleReferenceAtEverySize) {
  // Sizes around the 16-lane boundary, and one large enough for
  // ClipGradNorm's multi-threaded path.
  for (int64_t n : {0, 1, 31, 32, 33, 4095, 4096, 4097, 100003, 300007}) {
    std::vector<float> x(static_cast<size_t>(n));
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * (1 + i % 7));
      expected += static_cast<double>(x[i]) * x[i];
    }
    EXPECT_NEAR(SumOfSquares(x.data(), n), expected, 1e-12 * expected + 1e-30) << "n = " << n;
    Tensor p = Param(std::vector<float>(x.size(), 0.0f), {n});
    if (n > 0) {
      SetGrad(p, x);
      EXPECT_NEAR(GradNorm({p}), std::sqrt(expected), 1e-12 * std::sqrt(expected)) << "n = " << n;
    }
  }
  // Large finite gradients: their squares overflow a float, not the norm.
  std::vector<float> big(40, 1e30f);
  EXPECT_NEAR(SumOfSquares(big.data(), 40), 40e60, 1e-6 * 40e60);  // 1e30f is 1e30 to 7 digits
}

}  // namespace
}  // namespace tessera::optim
