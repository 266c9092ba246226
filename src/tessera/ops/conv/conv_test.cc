// Unit tests of ops::Conv2d / Conv2dBackward: every algorithm (and the
// reference loops) against an independent scalar oracle written here (a
// gather-form forward and scatter-form adjoints, NCHW, double sums) on odd
// shapes, both layouts, non-contiguous inputs; finite differences of the
// optimized backward; thread-count independence; kAuto's choices; errors.
#include "tessera/ops/conv/conv.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops {
namespace {

struct Spec {
  int64_t N, C, H, W, K, R, S;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool bias = true;
  std::string Name() const {
    return fmt::format("N{} C{} {}x{} K{} {}x{} s({},{}) p({},{}) d({},{}) g{}{}", N, C, H, W, K, R, S, sh, sw, ph, pw,
                       dh, dw, groups, bias ? "" : " nobias");
  }
  Conv2dOptions Options(ImageLayout layout, Conv2dAlgo algo) const {
    Conv2dOptions o;
    o.stride_h = sh, o.stride_w = sw, o.pad_h = ph, o.pad_w = pw, o.dilation_h = dh, o.dilation_w = dw;
    o.groups = groups, o.layout = layout, o.algo = algo;
    return o;
  }
  int64_t P() const { return (H + 2 * ph - dh * (R - 1) - 1) / sh + 1; }
  int64_t Q() const { return (W + 2 * pw - dw * (S - 1) - 1) / sw + 1; }
};

// The oracle, NCHW: y (forward), and the adjoints gx, gw, gb of
// L = <y, gy> accumulated by scattering each term of the forward sum.
struct Oracle {
  std::vector<double> y, gx, gw, gb;
};
Oracle RunOracle(const Spec& s, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                 const std::vector<float>& gy) {
  const int64_t P = s.P(), Q = s.Q(), Cg = s.C / s.groups, Kg = s.K / s.groups;
  Oracle o;
  o.y.assign(s.N * s.K * P * Q, 0.0);
  o.gx.assign(x.size(), 0.0);
  o.gw.assign(w.size(), 0.0);
  o.gb.assign(s.K, 0.0);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          const int64_t yi = ((n * s.K + k) * P + p) * Q + q;
          double acc = s.bias ? b[k] : 0.0;
          o.gb[k] += gy[yi];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < s.R; ++r)
              for (int64_t t = 0; t < s.S; ++t) {
                const int64_t h = p * s.sh - s.ph + r * s.dh, ww = q * s.sw - s.pw + t * s.dw;
                if (h < 0 || h >= s.H || ww < 0 || ww >= s.W) continue;
                const int64_t xi = ((n * s.C + (k / Kg) * Cg + c) * s.H + h) * s.W + ww;
                const int64_t wi = ((k * Cg + c) * s.R + r) * s.S + t;
                acc += static_cast<double>(x[xi]) * w[wi];
                o.gx[xi] += static_cast<double>(gy[yi]) * w[wi];
                o.gw[wi] += static_cast<double>(gy[yi]) * x[xi];
              }
          o.y[yi] = acc;
        }
  return o;
}

std::vector<float> Random(int64_t n, uint64_t seed) {
  Tensor t = Tensor::Empty({n});
  FillUniform(t, seed, -1.0f, 1.0f);
  return t.ToFloatVector();
}

// NCHW data -> a tensor in `layout`: NHWC as a permuted (non-contiguous)
// view when `view`, else contiguous.
Tensor Image(const std::vector<float>& nchw, const Shape& shape, ImageLayout layout, bool view) {
  Tensor t = Tensor::FromVector(nchw, shape);
  if (layout == ImageLayout::kNCHW) {
    if (!view) return t;
    // A strided NCHW view: every other element of a twice-as-wide tensor.
    Shape wide = shape;
    wide[3] *= 2;
    Tensor big = Tensor::Zeros(wide);
    Tensor v = big.Slice(3, 0, wide[3], 2);
    v.CopyFrom(t);
    return v;
  }
  Tensor p = t.Permute({0, 2, 3, 1});
  return view ? p : p.Contiguous();
}
std::vector<float> ToNchw(const Tensor& t, ImageLayout layout) {
  return layout == ImageLayout::kNCHW ? t.ToFloatVector() : t.Permute({0, 3, 1, 2}).Contiguous().ToFloatVector();
}

// tol: 2e-4 (absolute and relative) for the exact-arithmetic algorithms;
// Winograd's transforms add error growing with the input patch (its bound
// is checked in winograd_test.cc), so its wiring is checked at 5e-3.
void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, const std::string& what,
                 double tol = 2e-4) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    if (!(std::abs(got[i] - want[i]) <= tol + tol * std::abs(want[i]))) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
      ++bad;
    }
  }
}

std::vector<Spec> Specs() {
  std::vector<Spec> v;
  v.push_back({1, 1, 1, 1, 1, 1, 1});                                  // everything 1
  v.push_back({3, 1, 5, 4, 1, 3, 3, 1, 1, 1, 1});                      // C = K = 1, batch 3, padded
  v.push_back({3, 3, 7, 5, 5, 3, 3, 1, 1, 1, 1});                      // 3x3 same
  v.push_back({1, 5, 11, 13, 7, 3, 2, 2, 1, 1, 0, 1, 2});              // asymmetric stride / pad / dilation
  v.push_back({2, 4, 9, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2});             // groups 2, stride 2
  v.push_back({1, 3, 23, 19, 8, 7, 7, 2, 2, 3, 3});                    // conv1-like 7x7/2
  v.push_back({3, 7, 5, 3, 11, 1, 1});                                 // 1x1
  v.push_back({2, 6, 4, 5, 4, 1, 1, 1, 1, 0, 0, 1, 1, 2, false});      // 1x1 groups 2, no bias
  v.push_back({2, 7, 9, 8, 5, 1, 1, 2, 2});                            // 1x1 stride 2
  v.push_back({2, 5, 9, 8, 10, 3, 3, 1, 1, 1, 1, 1, 1, 5});            // depthwise multiplier 2
  v.push_back({1, 6, 10, 7, 6, 5, 3, 2, 1, 2, 1, 1, 1, 6, false});     // depthwise stride (2,1)
  v.push_back({3, 4, 8, 9, 4, 3, 3, 1, 1, 2, 2, 2, 2, 4});             // depthwise dilation 2
  v.push_back({1, 2, 1, 1, 3, 3, 3, 1, 1, 1, 1});                      // 1x1 image, 3x3 filter padded
  v.push_back({4, 16, 17, 15, 24, 3, 3, 1, 1, 1, 1});                  // big enough to thread
  v.push_back({2, 12, 13, 11, 18, 3, 3, 2, 2, 1, 1, 1, 1, 3});         // groups 3, stride 2
  v.push_back({1, 2, 40, 37, 3, 3, 3, 1, 1, 1, 1});                    // large image: grad_x in row chunks
  v.push_back({2, 4, 33, 29, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2});           // ... with groups
  v.push_back({1, 3, 45, 41, 4, 5, 3, 2, 1, 2, 1, 2, 1});              // ... strided, dilated
  // Large enough (Cg*R*S * N*P*Q > 2^22) for NHWC grad_w in column blocks:
  v.push_back({2, 32, 86, 86, 5, 3, 3, 1, 1, 1, 1});                   // one s, all channels
  v.push_back({1, 3, 340, 340, 4, 7, 7, 2, 2, 3, 3});                  // whole filter rows
  v.push_back({1, 256, 130, 130, 4, 1, 1});                            // blocks of 32 channels
  return v;
}

std::vector<Conv2dAlgo> Algos(const Spec& s) {
  std::vector<Conv2dAlgo> a = {Conv2dAlgo::kAuto, Conv2dAlgo::kDirect, Conv2dAlgo::kIm2col};
  if (s.R == 1 && s.S == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0) a.push_back(Conv2dAlgo::kGemm1x1);
  if (s.groups == s.C && s.groups > 1) a.push_back(Conv2dAlgo::kDepthwise);
  if (s.R == 3 && s.S == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.groups == 1 && s.ph <= 2 &&
      s.pw <= 2) {
    a.push_back(Conv2dAlgo::kWinograd2x2);
    a.push_back(Conv2dAlgo::kWinograd4x4);
  }
  return a;
}

bool IsWinograd(Conv2dAlgo a) { return a == Conv2dAlgo::kWinograd2x2 || a == Conv2dAlgo::kWinograd4x4; }

TEST(Conv2d, EveryAlgorithmMatchesTheOracle) {
  int runs = 0;
  for (const Spec& s : Specs()) {
    const Shape xs{s.N, s.C, s.H, s.W}, ws{s.K, s.C / s.groups, s.R, s.S}, ys{s.N, s.K, s.P(), s.Q()};
    const std::vector<float> x = Random(NumElements(xs), 1), w = Random(NumElements(ws), 2), b = Random(s.K, 3),
                             gy = Random(NumElements(ys), 4);
    const Oracle o = RunOracle(s, x, w, b, gy);
    // Large shapes (for block paths): optimized im2col / auto only, contiguous.
    const bool heavy = NumElements(ys) * (s.C / s.groups) * s.R * s.S > 4000000;
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      for (bool view : {false, true}) {
        for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
          ScopedImpl scope(impl);
          for (Conv2dAlgo algo : Algos(s)) {
            if (impl == Impl::kReference && algo != Conv2dAlgo::kAuto) continue;
            if (heavy && (view || impl == Impl::kReference || algo == Conv2dAlgo::kDirect)) continue;
            const std::string what = fmt::format("{} {} {}{} {}", s.Name(), ImageLayoutName(layout),
                                                 Conv2dAlgoName(algo), view ? " view" : "",
                                                 impl == Impl::kReference ? "reference" : "optimized");
            const Conv2dOptions opt = s.Options(layout, algo);
            Tensor xt = Image(x, xs, layout, view), wt = Tensor::FromVector(w, ws);
            Tensor bt = s.bias ? Tensor::FromVector(b, {s.K}) : Tensor();
            Tensor y = Conv2d(xt, wt, bt, opt);
            const bool winograd = IsWinograd(algo) || (algo == Conv2dAlgo::kAuto && impl == Impl::kOptimized &&
                                                      IsWinograd(ChooseConv2dAlgo(xt.shape(), wt.shape(), opt)));
            const double tol = winograd ? 5e-3 : 2e-4;
            ExpectClose(ToNchw(y, layout), o.y, what + " y", tol);
            Conv2dGrads g = Conv2dBackward(Image(gy, ys, layout, view), xt, wt, opt, true, true, true);
            EXPECT_EQ(g.grad_x.shape(), xt.shape()) << what;
            ExpectClose(ToNchw(g.grad_x, layout), o.gx, what + " grad_x", tol);
            ExpectClose(g.grad_w.ToFloatVector(), o.gw, what + " grad_w");
            ExpectClose(g.grad_bias.ToFloatVector(), o.gb, what + " grad_bias");
            ++runs;
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 200);
}

TEST(Conv2d, NeedFlagsSkipGradients) {
  Spec s{2, 4, 6, 5, 3, 3, 3, 1, 1, 1, 1};
  Tensor x = Tensor::FromVector(Random(2 * 4 * 6 * 5, 1), {2, 4, 6, 5}), w = Tensor::FromVector(Random(108, 2), {3, 4, 3, 3});
  Tensor gy = Tensor::FromVector(Random(2 * 3 * 6 * 5, 3), {2, 3, 6, 5});
  Conv2dGrads g = Conv2dBackward(gy, x, w, s.Options(ImageLayout::kNCHW, Conv2dAlgo::kIm2col), false, true, false);
  EXPECT_FALSE(g.grad_x.defined());
  EXPECT_TRUE(g.grad_w.defined());
  EXPECT_FALSE(g.grad_bias.defined());
  g = Conv2dBackward(gy, x, w, s.Options(ImageLayout::kNCHW, Conv2dAlgo::kIm2col), true, false, true);
  EXPECT_TRUE(g.grad_x.defined() && g.grad_bias.defined());
  EXPECT_FALSE(g.grad_w.defined());
}

// Central differences of L = <Conv2d(x, w, b), gy> (optimized forward)
// against the optimized backward, on sampled elements of x, w and b.
TEST(Conv2d, BackwardMatchesFiniteDifferences) {
  const Spec specs[] = {{2, 4, 7, 6, 5, 3, 3, 2, 1, 1, 1, 1, 2, 1}, {2, 6, 5, 5, 4, 1, 1, 1, 1, 0, 0, 1, 1, 2},
                        {2, 3, 6, 7, 6, 3, 3, 1, 2, 1, 1, 1, 1, 3}};
  for (const Spec& s : specs) {
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      const Conv2dOptions opt = s.Options(layout, Conv2dAlgo::kAuto);
      const Shape xs = layout == ImageLayout::kNCHW ? Shape{s.N, s.C, s.H, s.W} : Shape{s.N, s.H, s.W, s.C};
      const Shape ys = layout == ImageLayout::kNCHW ? Shape{s.N, s.K, s.P(), s.Q()} : Shape{s.N, s.P(), s.Q(), s.K};
      Tensor x = Tensor::FromVector(Random(NumElements(xs), 5), xs);
      Tensor w = Tensor::FromVector(Random(s.K * (s.C / s.groups) * s.R * s.S, 6), {s.K, s.C / s.groups, s.R, s.S});
      Tensor b = Tensor::FromVector(Random(s.K, 7), {s.K});
      Tensor gy = Tensor::FromVector(Random(NumElements(ys), 8), ys);
      const std::vector<float> gyv = gy.ToFloatVector();
      auto loss = [&]() {
        std::vector<float> y = Conv2d(x, w, b, opt).ToFloatVector();
        double l = 0;
        for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * gyv[i];
        return l;
      };
      Conv2dGrads g = Conv2dBackward(gy, x, w, opt, true, true, true);
      const Tensor params[] = {x, w, b}, grads[] = {g.grad_x, g.grad_w, g.grad_bias};
      for (int k = 0; k < 3; ++k) {
        float* data = params[k].data<float>();
        const std::vector<float> analytic = grads[k].ToFloatVector();
        const int64_t n = params[k].numel(), step = std::max<int64_t>(1, n / 17);
        for (int64_t i = 0; i < n; i += step) {
          const float orig = data[i];
          data[i] = orig + 0.01f;
          const double up = loss();
          data[i] = orig - 0.01f;
          const double down = loss();
          data[i] = orig;
          const double fd = (up - down) / 0.02;
          EXPECT_NEAR(analytic[i], fd, 2e-3 + 2e-3 * std::abs(fd))
              << s.Name() << " " << ImageLayoutName(layout) << " input " << k << " element " << i;
        }
      }
    }
  }
}

TEST(Conv2d, ResultsDoNotDependOnThreadCount) {
  const Spec specs[] = {{5, 16, 19, 17, 24, 3, 3, 1, 1, 1, 1},       {6, 32, 12, 11, 40, 1, 1},
                        {4, 24, 15, 13, 48, 3, 3, 2, 2, 1, 1, 1, 1, 24}, {3, 8, 29, 31, 12, 5, 5, 2, 2, 2, 2, 1, 1, 2},
                        {2, 6, 41, 38, 10, 3, 3, 1, 1, 1, 1}};
  const int saved = omp_get_max_threads();
  for (const Spec& s : specs) {
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      for (Conv2dAlgo algo : Algos(s)) {
        const Conv2dOptions opt = s.Options(layout, algo);
        const Shape xs = layout == ImageLayout::kNCHW ? Shape{s.N, s.C, s.H, s.W} : Shape{s.N, s.H, s.W, s.C};
        const Shape ys = layout == ImageLayout::kNCHW ? Shape{s.N, s.K, s.P(), s.Q()} : Shape{s.N, s.P(), s.Q(), s.K};
        Tensor x = Tensor::FromVector(Random(NumElements(xs), 1), xs);
        Tensor w = Tensor::FromVector(Random(s.K * (s.C / s.groups) * s.R * s.S, 2), {s.K, s.C / s.groups, s.R, s.S});
        Tensor b = Tensor::FromVector(Random(s.K, 3), {s.K});
        Tensor gy = Tensor::FromVector(Random(NumElements(ys), 4), ys);
        std::vector<std::vector<float>> results[2];
        for (int i = 0; i < 2; ++i) {
          omp_set_num_threads(i == 0 ? 1 : 4);
          Conv2dGrads g = Conv2dBackward(gy, x, w, opt, true, true, true);
          results[i] = {Conv2d(x, w, b, opt).ToFloatVector(), g.grad_x.ToFloatVector(), g.grad_w.ToFloatVector(),
                        g.grad_bias.ToFloatVector()};
        }
        omp_set_num_threads(saved);
        for (int k = 0; k < 4; ++k) {
          EXPECT_EQ(results[0][k], results[1][k])
              << s.Name() << " " << ImageLayoutName(layout) << " " << Conv2dAlgoName(algo) << " output " << k;
        }
      }
    }
  }
}

TEST(Conv2d, AutoChoosesByShape) {
  Conv2dOptions o;
  EXPECT_EQ(ChooseConv2dAlgo({8, 64, 56, 56}, {256, 64, 1, 1}, o), Conv2dAlgo::kGemm1x1);
  EXPECT_EQ(ChooseConv2dAlgo({8, 64, 56, 56}, {64, 64, 3, 3}, o), Conv2dAlgo::kWinograd4x4);
  EXPECT_EQ(ChooseConv2dAlgo({8, 4, 56, 56}, {64, 4, 3, 3}, o), Conv2dAlgo::kIm2col);  // too few channels
  o.pad_h = 3;
  EXPECT_EQ(ChooseConv2dAlgo({8, 64, 56, 56}, {64, 64, 3, 3}, o), Conv2dAlgo::kIm2col);  // beyond Winograd's pad
  o.pad_h = 0;
  EXPECT_EQ(ChooseConv2dAlgo({1, 2, 3, 3}, {2, 2, 3, 3}, o), Conv2dAlgo::kDirect);
  o.stride_h = o.stride_w = 2;
  EXPECT_EQ(ChooseConv2dAlgo({8, 64, 56, 56}, {128, 64, 1, 1}, o), Conv2dAlgo::kIm2col);
  o.groups = 32;
  o.layout = ImageLayout::kNHWC;
  EXPECT_EQ(ChooseConv2dAlgo({8, 56, 56, 32}, {64, 1, 3, 3}, o), Conv2dAlgo::kDepthwise);
  EXPECT_STREQ(Conv2dAlgoName(Conv2dAlgo::kGemm1x1), "gemm1x1");
  EXPECT_STREQ(Conv2dAlgoName(Conv2dAlgo::kWinograd4x4), "winograd4x4");
}

void ExpectError(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no OpError; wanted one containing '" << needle << "'";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Conv2d, BadArgumentsThrow) {
  Tensor x = Tensor::Zeros({2, 4, 5, 5}), w = Tensor::Zeros({6, 4, 3, 3}), none;
  Conv2dOptions o;
  ExpectError([&] { Conv2d(Tensor::Zeros({4, 5, 5}), w, none, o); }, "x must be 4-d");
  ExpectError([&] { Conv2d(x, Tensor::Zeros({6, 4, 3}), none, o); }, "w must be 4-d");
  ExpectError([&] { Conv2d(x.To(DType::kBF16), w, none, o); }, "x must be float32");
  ExpectError([&] { Conv2d(x, Tensor::Zeros({6, 3, 3, 3}), none, o); }, "[6, 4, R, S]");
  ExpectError([&] { Conv2d(x, w, Tensor::Zeros({5}), o); }, "bias must be [K] = [6]");
  ExpectError([&] { Conv2d(x, Tensor::Zeros({6, 4, 7, 7}), none, o); }, "empty output");
  Conv2dOptions g = o;
  g.groups = 3;
  ExpectError([&] { Conv2d(x, w, none, g); }, "groups 3 must divide C = 4");
  Conv2dOptions st = o;
  st.stride_w = 0;
  ExpectError([&] { Conv2d(x, w, none, st); }, "stride must be >= 1");
  Conv2dOptions f = o;
  f.algo = Conv2dAlgo::kGemm1x1;
  ExpectError([&] { Conv2d(x, w, none, f); }, "gemm1x1 needs a 1x1 filter");
  f.algo = Conv2dAlgo::kDepthwise;
  ExpectError([&] { Conv2d(x, w, none, f); }, "depthwise needs groups == C");
  f.algo = Conv2dAlgo::kWinograd2x2;
  f.pad_h = 3;
  ExpectError([&] { Conv2d(Tensor::Zeros({2, 4, 9, 9}), w, none, f); }, "padding <= 2");
  f.pad_h = 0;
  f.algo = Conv2dAlgo::kWinograd4x4;
  f.stride_h = 2;
  ExpectError([&] { Conv2d(x, w, none, f); }, "needs a 3x3 filter, stride 1");
  ExpectError([&] { Conv2dBackward(Tensor::Zeros({2, 6, 5, 5}), x, w, o); }, "grad_y must be [2, 6, 3, 3]");
  Conv2dOptions nhwc = o;
  nhwc.layout = ImageLayout::kNHWC;
  ExpectError([&] { Conv2d(Tensor::Zeros({2, 5, 5, 3}), w, none, nhwc); }, "[6, 3, R, S]");
}

}  // namespace
}  // namespace tessera::ops
