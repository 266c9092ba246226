// BatchNorm2d vs a double-precision reference written here (NCHW; NHWC
// inputs are transposed), for both implementations and layouts, training
// and inference, with and without the fused ReLU, on odd shapes. Gradients
// are checked against central differences of that reference (in double).
// Also: running-statistics updates against hand-computed numbers (the same
// values PyTorch 1.13's F.batch_norm produces), N*H*W = 1 in inference,
// cancellation with a large mean, thread-count independence, errors.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/norm/batch_norm.h"
#include "tessera/tensor/rng.h"
#include "tessera/ops/testing/thread_count.h"

namespace tessera::ops {
namespace {

struct Dims {
  int64_t N, C, H, W;
  int64_t numel() const { return N * C * H * W; }
  int64_t hw() const { return H * W; }
};

std::vector<float> ToNhwc(const std::vector<float>& v, Dims d) {
  std::vector<float> o(v.size());
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t i = 0; i < d.hw(); ++i) o[(n * d.hw() + i) * d.C + c] = v[(n * d.C + c) * d.hw() + i];
  return o;
}
std::vector<float> ToNchw(const std::vector<float>& v, Dims d) {
  std::vector<float> o(v.size());
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t i = 0; i < d.hw(); ++i) o[(n * d.C + c) * d.hw() + i] = v[(n * d.hw() + i) * d.C + c];
  return o;
}
Shape LayoutShape(Dims d, ImageLayout l) {
  return l == ImageLayout::kNCHW ? Shape{d.N, d.C, d.H, d.W} : Shape{d.N, d.H, d.W, d.C};
}

std::vector<float> Random(int64_t n, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::Empty({n});
  FillUniform(t, seed, lo, hi);
  return t.ToFloatVector();
}

struct Params {
  std::vector<double> x, gamma, beta, rm, rv;  // x NCHW
};

struct RefResult {
  std::vector<double> y, mean, var;  // var: biased batch variance (training) or running var
};

// y = relu?((x - mean) / sqrt(var + eps) * gamma + beta), batch or running statistics.
RefResult RefForward(const Params& p, Dims d, bool training, bool relu, double eps) {
  RefResult r;
  r.y.resize(p.x.size());
  const double m = static_cast<double>(d.N * d.hw());
  for (int64_t c = 0; c < d.C; ++c) {
    double mean = p.rm[c], var = p.rv[c];
    if (training) {
      double s = 0, s2 = 0;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t i = 0; i < d.hw(); ++i) s += p.x[(n * d.C + c) * d.hw() + i];
      mean = s / m;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t i = 0; i < d.hw(); ++i) s2 += std::pow(p.x[(n * d.C + c) * d.hw() + i] - mean, 2);
      var = s2 / m;
    }
    r.mean.push_back(mean);
    r.var.push_back(var);
    for (int64_t n = 0; n < d.N; ++n)
      for (int64_t i = 0; i < d.hw(); ++i) {
        const int64_t k = (n * d.C + c) * d.hw() + i;
        const double v = (p.x[k] - mean) / std::sqrt(var + eps) * p.gamma[c] + p.beta[c];
        r.y[k] = relu ? std::max(v, 0.0) : v;
      }
  }
  return r;
}

// Central differences (double, step 1e-6) of L = sum(y * g) w.r.t. x, gamma, beta.
std::vector<std::vector<double>> RefGrads(Params p, Dims d, bool training, bool relu, double eps,
                                          const std::vector<float>& g) {
  auto loss = [&]() {
    RefResult r = RefForward(p, d, training, relu, eps);
    double s = 0;
    for (size_t i = 0; i < g.size(); ++i) s += r.y[i] * g[i];
    return s;
  };
  std::vector<std::vector<double>> out;
  for (std::vector<double>* v : {&p.x, &p.gamma, &p.beta}) {
    std::vector<double> grad(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      const double orig = (*v)[i], h = 1e-6;
      (*v)[i] = orig + h;
      const double plus = loss();
      (*v)[i] = orig - h;
      const double minus = loss();
      (*v)[i] = orig;
      grad[i] = (plus - minus) / (2 * h);
    }
    out.push_back(grad);
  }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double atol, double rtol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " element " << i;
  }
}

std::vector<double> D(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
std::vector<float> F(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }
Tensor T(const std::vector<double>& v) { return Tensor::FromVector(F(v), {static_cast<int64_t>(v.size())}); }

TEST(BatchNormTest, MatchesReferenceAllCases) {
  const std::vector<Dims> dims = {{3, 5, 7, 3}, {1, 17, 5, 5}, {2, 1, 1, 3},  {3, 17, 1, 1},
                                  {1, 5, 13, 11}, {2, 70, 3, 5}, {4, 3, 16, 17}};
  const double eps = 1e-5;
  int checked = 0;
  for (const Dims& d : dims) {
    Params p;
    p.x = D(Random(d.numel(), d.numel(), -2.0f, 3.0f));
    p.gamma = D(Random(d.C, d.C + 1, 0.5f, 1.5f));
    p.beta = D(Random(d.C, d.C + 2, -0.5f, 0.5f));
    p.rm = D(Random(d.C, d.C + 3, -0.5f, 0.5f));
    p.rv = D(Random(d.C, d.C + 4, 0.5f, 1.5f));
    const std::vector<float> g = Random(d.numel(), d.numel() + 5, -1.0f, 1.0f);
    for (bool training : {true, false}) {
      for (bool relu : {false, true}) {
        const RefResult want = RefForward(p, d, training, relu, eps);
        const auto want_grads = RefGrads(p, d, training, relu, eps, g);
        double gscale = 0;
        for (double v : want_grads[0]) gscale = std::max(gscale, std::abs(v));
        for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
          for (bool ref : {false, true}) {
            ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
            const std::string what = fmt::format("[{},{},{},{}] training={} relu={} {} {}", d.N, d.C, d.H, d.W,
                                                 training, relu, ImageLayoutName(l), ref ? "reference" : "optimized");
            const bool nhwc = l == ImageLayout::kNHWC;
            Tensor x = Tensor::FromVector(nhwc ? ToNhwc(F(p.x), d) : F(p.x), LayoutShape(d, l));
            Tensor rm = T(p.rm), rv = T(p.rv);
            BatchNormOptions o;
            o.training = training;
            o.fuse_relu = relu;
            o.layout = l;
            BatchNormResult r = BatchNorm2d(x, T(p.gamma), T(p.beta), rm, rv, o);
            std::vector<float> y = r.y.ToFloatVector();
            ExpectNear(nhwc ? ToNchw(y, d) : y, want.y, 2e-5, 2e-5, what + " y");
            std::vector<double> rstd;
            for (double v : want.var) rstd.push_back(1.0 / std::sqrt(v + eps));
            ExpectNear(r.save_mean.ToFloatVector(), want.mean, 1e-6, 1e-5, what + " save_mean");
            ExpectNear(r.save_rstd.ToFloatVector(), rstd, 1e-6, 1e-5, what + " save_rstd");
            // Running statistics: momentum 0.1 and the unbiased variance in training; untouched in inference.
            std::vector<double> want_rm = p.rm, want_rv = p.rv;
            if (training) {
              const double m = static_cast<double>(d.N * d.hw());
              for (int64_t c = 0; c < d.C; ++c) {
                want_rm[c] = 0.9 * p.rm[c] + 0.1 * want.mean[c];
                want_rv[c] = 0.9 * p.rv[c] + 0.1 * want.var[c] * m / (m - 1);
              }
            }
            ExpectNear(rm.ToFloatVector(), want_rm, 1e-6, 1e-5, what + " running_mean");
            ExpectNear(rv.ToFloatVector(), want_rv, 1e-6, 1e-5, what + " running_var");

            Tensor gt = Tensor::FromVector(nhwc ? ToNhwc(g, d) : g, x.shape());
            BatchNormGrads gr = BatchNorm2dBackward(gt, x, r.y, T(p.gamma), r, o);
            std::vector<float> dx = gr.grad_x.ToFloatVector();
            ExpectNear(nhwc ? ToNchw(dx, d) : dx, want_grads[0], 2e-5 * (1 + gscale), 1e-4, what + " grad_x");
            ExpectNear(gr.grad_gamma.ToFloatVector(), want_grads[1], 1e-4, 1e-4, what + " grad_gamma");
            ExpectNear(gr.grad_beta.ToFloatVector(), want_grads[2], 1e-4, 1e-4, what + " grad_beta");
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(dims.size()) * 16);
}

// x: [2, 2, 1, 2]; channel 0 holds {1, 2, -1, 0.5}, channel 1 {3, 4, 2, 8}.
// mean = {0.625, 4.25}; biased var = {4.6875 / 4, 20.75 / 4}; unbiased = {1.5625, 6.916667}.
// running_mean = 0.9 * {0, 1} + 0.1 * mean = {0.0625, 1.325};
// running_var = 0.9 * {1, 2} + 0.1 * unbiased = {1.05625, 2.4916667}
// (PyTorch 1.13's F.batch_norm(training=True, momentum=0.1) gives the same).
TEST(BatchNormTest, RunningStatsHandComputed) {
  for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    for (bool ref : {false, true}) {
      ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
      std::vector<float> x = {1, 2, 3, 4, -1, 0.5f, 2, 8};
      const Dims d{2, 2, 1, 2};
      if (l == ImageLayout::kNHWC) x = ToNhwc(x, d);
      Tensor rm = Tensor::FromVector({0, 1}, {2}), rv = Tensor::FromVector({1, 2}, {2});
      BatchNormOptions o;
      o.layout = l;
      BatchNormResult r = BatchNorm2d(Tensor::FromVector(x, LayoutShape(d, l)), Tensor::Full({2}, 1.0),
                                      Tensor::Zeros({2}), rm, rv, o);
      std::vector<float> m = rm.ToFloatVector(), v = rv.ToFloatVector();
      EXPECT_NEAR(m[0], 0.0625f, 1e-7);
      EXPECT_NEAR(m[1], 1.325f, 1e-6);
      EXPECT_NEAR(v[0], 1.05625f, 1e-6);
      EXPECT_NEAR(v[1], 2.4916667f, 1e-6);
      EXPECT_NEAR(r.save_mean.ToFloatVector()[1], 4.25f, 1e-6);
      EXPECT_NEAR(r.save_rstd.ToFloatVector()[0], 1.0 / std::sqrt(4.6875 / 4 + 1e-5), 1e-6);
      // ONNX's rule: the running variance follows the biased batch variance.
      Tensor rv_onnx = Tensor::FromVector({1, 2}, {2});
      BatchNormOptions onnx = o;
      onnx.unbiased_running_var = false;
      BatchNorm2d(Tensor::FromVector(x, LayoutShape(d, l)), Tensor::Full({2}, 1.0), Tensor::Zeros({2}),
                  Tensor::FromVector({0, 1}, {2}), rv_onnx, onnx);
      EXPECT_NEAR(rv_onnx.ToFloatVector()[0], 0.9 * 1 + 0.1 * 4.6875 / 4, 1e-6);
      EXPECT_NEAR(rv_onnx.ToFloatVector()[1], 0.9 * 2 + 0.1 * 20.75 / 4, 1e-6);
      // Momentum 0 leaves the buffers alone; undefined buffers are allowed in training.
      o.momentum = 0.0f;
      BatchNorm2d(Tensor::FromVector(x, LayoutShape(d, l)), Tensor::Full({2}, 1.0), Tensor::Zeros({2}), rm, rv, o);
      EXPECT_EQ(rm.ToFloatVector(), m);
      EXPECT_NO_THROW(BatchNorm2d(Tensor::FromVector(x, LayoutShape(d, l)), Tensor::Full({2}, 1.0),
                                  Tensor::Zeros({2}), Tensor(), Tensor(), o));
    }
  }
}

// Non-contiguous x (an NHWC buffer viewed as NCHW) and running statistics
// that are strided views: same results as contiguous copies, buffers updated
// through the view.
TEST(BatchNormTest, NonContiguousInputsAndBuffers) {
  const Dims d{2, 3, 4, 5};
  Tensor nhwc = Tensor::FromVector(Random(d.numel(), 31, -1.0f, 1.0f), {2, 4, 5, 3});
  Tensor x = nhwc.Permute({0, 3, 1, 2});  // [2, 3, 4, 5], not contiguous
  ASSERT_FALSE(x.is_contiguous());
  Tensor storage = Tensor::Zeros({6});
  Tensor rm = storage.Slice(0, 0, 6, 2);  // every other element
  Tensor rv = Tensor::Full({3}, 1.0);
  BatchNormOptions o;
  BatchNormResult r = BatchNorm2d(x, Tensor::Full({3}, 1.0), Tensor::Zeros({3}), rm, rv, o);
  Tensor rm2 = Tensor::Zeros({3}), rv2 = Tensor::Full({3}, 1.0);
  BatchNormResult r2 = BatchNorm2d(x.Contiguous(), Tensor::Full({3}, 1.0), Tensor::Zeros({3}), rm2, rv2, o);
  EXPECT_EQ(r.y.ToFloatVector(), r2.y.ToFloatVector());
  EXPECT_EQ(rm.ToFloatVector(), rm2.ToFloatVector());
  std::vector<float> raw = storage.ToFloatVector();
  EXPECT_EQ(raw[1], 0.0f);
  EXPECT_EQ(raw[2], rm2.ToFloatVector()[1]);
  EXPECT_NE(raw[2], 0.0f);
}

// N*H*W = 1: inference works (running statistics); training has no variance and throws.
TEST(BatchNormTest, SinglePixelInference) {
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f};
  const std::vector<float> rm = {0.1f, 0.2f, -0.3f, 0.4f, 0.0f}, rv = {1.0f, 0.5f, 2.0f, 0.25f, 4.0f};
  const std::vector<float> gamma = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f}, beta = {0.0f, 0.1f, -0.2f, 0.3f, 0.0f};
  for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    for (bool ref : {false, true}) {
      ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
      const Shape shape = LayoutShape({1, 5, 1, 1}, l);
      BatchNormOptions o;
      o.training = false;
      o.layout = l;
      Tensor trm = Tensor::FromVector(rm, {5}), trv = Tensor::FromVector(rv, {5});
      BatchNormResult r = BatchNorm2d(Tensor::FromVector(x, shape), Tensor::FromVector(gamma, {5}),
                                      Tensor::FromVector(beta, {5}), trm, trv, o);
      std::vector<float> y = r.y.ToFloatVector();
      for (int c = 0; c < 5; ++c) {
        EXPECT_NEAR(y[c], (x[c] - rm[c]) / std::sqrt(rv[c] + 1e-5) * gamma[c] + beta[c], 1e-6) << c;
      }
      EXPECT_EQ(trm.ToFloatVector(), rm);
      EXPECT_EQ(trv.ToFloatVector(), rv);
      BatchNormGrads g = BatchNorm2dBackward(Tensor::Full(shape, 1.0), Tensor::FromVector(x, shape), r.y,
                                             Tensor::FromVector(gamma, {5}), r, o);
      std::vector<float> dx = g.grad_x.ToFloatVector();
      for (int c = 0; c < 5; ++c) EXPECT_NEAR(dx[c], gamma[c] / std::sqrt(rv[c] + 1e-5), 1e-6) << c;
      o.training = true;
      EXPECT_THROW(BatchNorm2d(Tensor::FromVector(x, shape), Tensor::FromVector(gamma, {5}),
                               Tensor::FromVector(beta, {5}), trm, trv, o),
                   OpError);
    }
  }
}

// Fused ReLU: y = max(unfused y, 0); the backward masks dy by y > 0.
TEST(BatchNormTest, FusedReluMask) {
  const Dims d{2, 5, 3, 4};
  const std::vector<float> xv = Random(d.numel(), 3, -2.0f, 2.0f), gv = Random(d.numel(), 4, -1.0f, 1.0f);
  for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    for (bool training : {true, false}) {
      Tensor x = Tensor::FromVector(xv, LayoutShape(d, l)), dy = Tensor::FromVector(gv, x.shape());
      Tensor gamma = Tensor::Full({d.C}, 1.25), beta = Tensor::Full({d.C}, 0.1);
      BatchNormOptions o;
      o.training = training;
      o.layout = l;
      Tensor rm = Tensor::Zeros({d.C}), rv = Tensor::Full({d.C}, 1.0);
      BatchNormResult plain = BatchNorm2d(x, gamma, beta, rm, rv, o);
      o.fuse_relu = true;
      BatchNormResult fused = BatchNorm2d(x, gamma, beta, rm, rv, o);
      std::vector<float> a = plain.y.ToFloatVector(), b = fused.y.ToFloatVector();
      std::vector<float> masked_dy = gv;
      int zeros = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(b[i], std::max(a[i], 0.0f)) << i;
        if (!(b[i] > 0.0f)) masked_dy[i] = 0.0f, ++zeros;
      }
      EXPECT_GT(zeros, 10);
      EXPECT_LT(zeros, static_cast<int>(a.size()) - 10);
      // Same as the unfused backward fed with the masked gradient.
      BatchNormGrads gf = BatchNorm2dBackward(dy, x, fused.y, gamma, fused, o);
      o.fuse_relu = false;
      BatchNormGrads gp = BatchNorm2dBackward(Tensor::FromVector(masked_dy, x.shape()), x, Tensor(), gamma, plain, o);
      ExpectNear(gf.grad_x.ToFloatVector(), D(gp.grad_x.ToFloatVector()), 1e-6, 1e-5, "grad_x");
      ExpectNear(gf.grad_beta.ToFloatVector(), D(gp.grad_beta.ToFloatVector()), 1e-6, 1e-5, "grad_beta");
      ExpectNear(gf.grad_gamma.ToFloatVector(), D(gp.grad_gamma.ToFloatVector()), 1e-6, 1e-5, "grad_gamma");
      if (!training) {  // constants statistics: masked elements get no gradient at all
        std::vector<float> dx = gf.grad_x.ToFloatVector();
        for (size_t i = 0; i < dx.size(); ++i) {
          if (!(b[i] > 0.0f)) {
            EXPECT_EQ(dx[i], 0.0f) << i;
          }
        }
      }
    }
  }
}

// |mean| >> std: the statistics must not cancel catastrophically.
TEST(BatchNormTest, LargeMeanStatistics) {
  const Dims d{4, 3, 9, 9};
  std::vector<float> xv = Random(d.numel(), 8, -1.0f, 1.0f);
  for (float& v : xv) v += 1000.0f;
  Params p;
  p.x = D(xv);
  p.gamma = p.beta = p.rm = p.rv = std::vector<double>(d.C, 1.0);
  const RefResult want = RefForward(p, d, true, false, 1e-5);
  for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    Tensor x = Tensor::FromVector(l == ImageLayout::kNHWC ? ToNhwc(xv, d) : xv, LayoutShape(d, l));
    BatchNormOptions o;
    o.layout = l;
    BatchNormResult r = BatchNorm2d(x, T(p.gamma), T(p.beta), Tensor(), Tensor(), o);
    std::vector<double> rstd;
    for (double v : want.var) rstd.push_back(1.0 / std::sqrt(v + 1e-5));
    ExpectNear(r.save_rstd.ToFloatVector(), rstd, 0, 1e-5, "rstd");
    std::vector<float> y = r.y.ToFloatVector();
    ExpectNear(l == ImageLayout::kNHWC ? ToNchw(y, d) : y, want.y, 2e-3, 0, "y");
  }
}

// Bitwise identical results with 1 and several threads (fixed blocks).
TEST(BatchNormTest, IndependentOfThreadCount) {
  const Dims d{8, 32, 24, 23};
  Tensor x = Tensor::FromVector(Random(d.numel(), 12, -1.0f, 2.0f), {d.N, d.C, d.H, d.W});
  Tensor dy = Tensor::FromVector(Random(d.numel(), 13, -1.0f, 1.0f), x.shape());
  for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    const int64_t C = l == ImageLayout::kNCHW ? d.C : d.W;
    auto run = [&]() {
      BatchNormOptions o;
      o.layout = l;
      o.fuse_relu = true;
      Tensor rm = Tensor::Zeros({C}), rv = Tensor::Full({C}, 1.0);
      Tensor gamma = Tensor::Full({C}, 0.75), beta = Tensor::Full({C}, 0.25);
      BatchNormResult r = BatchNorm2d(x, gamma, beta, rm, rv, o);
      BatchNormGrads g = BatchNorm2dBackward(dy, x, r.y, gamma, r, o);
      return std::vector<std::vector<float>>{r.y.ToFloatVector(),      r.save_mean.ToFloatVector(),
                                             r.save_rstd.ToFloatVector(), rv.ToFloatVector(),
                                             g.grad_x.ToFloatVector(),  g.grad_gamma.ToFloatVector(),
                                             g.grad_beta.ToFloatVector()};
    };
    auto [one, many] = testing::RunWithOneAndManyThreads(run);
    for (size_t k = 0; k < one.size(); ++k) EXPECT_EQ(one[k], many[k]) << "output " << k << " " << ImageLayoutName(l);
  }
}

TEST(BatchNormTest, RejectsBadArguments) {
  Tensor x = Tensor::Zeros({2, 3, 4, 4});
  Tensor g3 = Tensor::Full({3}, 1.0), b3 = Tensor::Zeros({3});
  BatchNormOptions o;
  EXPECT_THROW(BatchNorm2d(Tensor::Zeros({2, 3, 4}), g3, b3, Tensor(), Tensor(), o), OpError);
  EXPECT_THROW(BatchNorm2d(x.To(DType::kBF16), g3, b3, Tensor(), Tensor(), o), OpError);
  EXPECT_THROW(BatchNorm2d(x, Tensor::Full({4}, 1.0), b3, Tensor(), Tensor(), o), OpError);  // gamma [4] for C = 3
  try {
    BatchNorm2d(x, Tensor::Full({4}, 1.0), b3, Tensor(), Tensor(), o);
  } catch (const OpError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("gamma"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 3, 4, 4]"), std::string::npos) << msg;
  }
  EXPECT_THROW(BatchNorm2d(x, g3, b3.To(DType::kBF16), Tensor(), Tensor(), o), OpError);
  EXPECT_THROW(BatchNorm2d(x, g3, b3, Tensor::Zeros({3}), Tensor::Zeros({2}), o), OpError);  // running_var
  BatchNormOptions nhwc = o;
  nhwc.layout = ImageLayout::kNHWC;  // C = 4 now
  EXPECT_THROW(BatchNorm2d(x, g3, b3, Tensor(), Tensor(), nhwc), OpError);
  BatchNormOptions eval = o;
  eval.training = false;
  EXPECT_THROW(BatchNorm2d(x, g3, b3, Tensor(), Tensor(), eval), OpError);  // inference needs running stats
  BatchNormOptions bad_eps = o;
  bad_eps.eps = -1.0f;
  EXPECT_THROW(BatchNorm2d(x, g3, b3, Tensor(), Tensor(), bad_eps), OpError);

  BatchNormResult r = BatchNorm2d(x, g3, b3, Tensor(), Tensor(), o);
  EXPECT_THROW(BatchNorm2dBackward(Tensor::Zeros({2, 3, 4, 5}), x, r.y, g3, r, o), OpError);  // grad_y shape
  BatchNormResult no_stats{r.y, Tensor(), r.save_rstd};
  EXPECT_THROW(BatchNorm2dBackward(r.y, x, r.y, g3, no_stats, o), OpError);
  BatchNormOptions relu = o;
  relu.fuse_relu = true;
  EXPECT_THROW(BatchNorm2dBackward(r.y, x, Tensor(), g3, r, relu), OpError);  // fuse_relu needs y
  EXPECT_NO_THROW(BatchNorm2dBackward(r.y, x, Tensor(), g3, r, o));          // y unused otherwise
}

}  // namespace
}  // namespace tessera::ops
