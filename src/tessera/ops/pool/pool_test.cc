// Pooling vs straightforward double-precision references written here (on
// NCHW arrays; NHWC inputs are transposed to NCHW and back), for both
// implementations (optimized and ops::UseReference()) and both layouts, on
// odd shapes; a few small cases whose expected values were produced by
// PyTorch 1.13 (torch.nn.functional); finite differences of the backward;
// thread-count independence; argument errors.

#include <algorithm>
#include <cmath>
#include <string>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/pool/pool.h"
#include "tessera/tensor/rng.h"
#include "tessera/ops/testing/thread_count.h"

namespace tessera::ops {
namespace {

struct Dims {
  int64_t N, C, H, W;
};

// NCHW <-> NHWC copies of contiguous data.
std::vector<float> ToNhwc(const std::vector<float>& v, Dims d) {
  std::vector<float> o(v.size());
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t i = 0; i < d.H * d.W; ++i) o[(n * d.H * d.W + i) * d.C + c] = v[(n * d.C + c) * d.H * d.W + i];
  return o;
}
std::vector<float> ToNchw(const std::vector<float>& v, Dims d) {
  std::vector<float> o(v.size());
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t i = 0; i < d.H * d.W; ++i) o[(n * d.C + c) * d.H * d.W + i] = v[(n * d.H * d.W + i) * d.C + c];
  return o;
}
template <typename T>
std::vector<T> ToNchwT(const std::vector<T>& v, Dims d) {
  std::vector<T> o(v.size());
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t i = 0; i < d.H * d.W; ++i) o[(n * d.C + c) * d.H * d.W + i] = v[(n * d.H * d.W + i) * d.C + c];
  return o;
}

Shape LayoutShape(Dims d, ImageLayout l) {
  return l == ImageLayout::kNCHW ? Shape{d.N, d.C, d.H, d.W} : Shape{d.N, d.H, d.W, d.C};
}

// Output extent by PyTorch's formula (pooling_output_shape), written out here.
int64_t OutSize(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  int64_t num = in + 2 * p - k + (ceil_mode ? s - 1 : 0);
  int64_t out = num / s + 1;  // num >= 0 in all tests
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

struct RefOut {
  Dims out;
  std::vector<double> y;
  std::vector<int64_t> idx;  // max only
};

// Reference pooling on NCHW doubles: window [oh*s - p, oh*s - p + k), max over
// its part inside the input (first maximum wins), average divided by the
// window clipped to the padded input (count_include_pad) or to the input.
RefOut RefPool(bool is_max, const std::vector<float>& x, Dims d, const Pool2dOptions& o) {
  RefOut r;
  r.out = {d.N, d.C, OutSize(d.H, o.kernel_h, o.stride_h, o.pad_h, o.ceil_mode),
           OutSize(d.W, o.kernel_w, o.stride_w, o.pad_w, o.ceil_mode)};
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t oh = 0; oh < r.out.H; ++oh)
        for (int64_t ow = 0; ow < r.out.W; ++ow) {
          double best = -INFINITY, sum = 0;
          int64_t arg = -1, inside = 0, padded = 0;
          for (int64_t kh = 0; kh < o.kernel_h; ++kh)
            for (int64_t kw = 0; kw < o.kernel_w; ++kw) {
              int64_t h = oh * o.stride_h - o.pad_h + kh, w = ow * o.stride_w - o.pad_w + kw;
              if (h < d.H + o.pad_h && w < d.W + o.pad_w) ++padded;
              if (h < 0 || w < 0 || h >= d.H || w >= d.W) continue;
              ++inside;
              double v = x[((n * d.C + c) * d.H + h) * d.W + w];
              sum += v;
              if (arg < 0 || v > best) best = v, arg = h * d.W + w;
            }
          r.y.push_back(is_max ? best : sum / static_cast<double>(o.count_include_pad ? padded : inside));
          r.idx.push_back(arg);
        }
  return r;
}

// d(sum y*g)/dx of the reference pooling (NCHW).
std::vector<double> RefPoolBackward(bool is_max, const std::vector<float>& x, Dims d, const Pool2dOptions& o,
                                    const std::vector<float>& g) {
  RefOut r = RefPool(is_max, x, d, o);
  std::vector<double> dx(x.size(), 0.0);
  int64_t q = 0;
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t oh = 0; oh < r.out.H; ++oh)
        for (int64_t ow = 0; ow < r.out.W; ++ow, ++q) {
          if (is_max) {
            dx[(n * d.C + c) * d.H * d.W + r.idx[q]] += g[q];
            continue;
          }
          std::vector<int64_t> cells;
          int64_t padded = 0;
          for (int64_t kh = 0; kh < o.kernel_h; ++kh)
            for (int64_t kw = 0; kw < o.kernel_w; ++kw) {
              int64_t h = oh * o.stride_h - o.pad_h + kh, w = ow * o.stride_w - o.pad_w + kw;
              if (h < d.H + o.pad_h && w < d.W + o.pad_w) ++padded;
              if (h >= 0 && w >= 0 && h < d.H && w < d.W) cells.push_back(((n * d.C + c) * d.H + h) * d.W + w);
            }
          const double div = static_cast<double>(o.count_include_pad ? padded : static_cast<int64_t>(cells.size()));
          for (int64_t k : cells) dx[k] += g[q] / div;
        }
  return dx;
}

std::vector<float> Random(int64_t n, uint64_t seed, float lo = -2.0f, float hi = 2.0f) {
  Tensor t = Tensor::Empty({n});
  FillUniform(t, seed, lo, hi);
  return t.ToFloatVector();
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << what << " element " << i;
  }
}

struct PoolCase {
  Dims d;
  int64_t k, s, p;
  bool ceil_mode, count_include_pad;
};

const std::vector<PoolCase>& Cases() {
  static const std::vector<PoolCase> cases = {
      {{1, 1, 1, 1}, 1, 1, 0, false, true},  {{1, 1, 1, 1}, 3, 2, 1, false, true},
      {{3, 5, 7, 11}, 3, 2, 1, false, true}, {{3, 5, 7, 11}, 3, 2, 1, true, false},
      {{1, 17, 13, 5}, 2, 2, 0, true, true}, {{2, 17, 13, 5}, 2, 2, 1, true, false},
      {{1, 3, 6, 6}, 3, 2, 1, true, true},   {{2, 1, 5, 9}, 3, 1, 1, false, false},
      {{1, 70, 9, 9}, 3, 2, 1, false, true}, {{2, 5, 8, 7}, 4, 3, 2, true, false},
  };
  return cases;
}

Pool2dOptions Options(const PoolCase& pc, ImageLayout layout) {
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = pc.k;
  o.stride_h = o.stride_w = pc.s;
  o.pad_h = o.pad_w = pc.p;
  o.ceil_mode = pc.ceil_mode;
  o.count_include_pad = pc.count_include_pad;
  o.layout = layout;
  return o;
}

std::string Label(const PoolCase& pc, ImageLayout l, bool ref) {
  return fmt::format("[{},{},{},{}] k{} s{} p{} ceil={} cip={} {} {}", pc.d.N, pc.d.C, pc.d.H, pc.d.W, pc.k, pc.s,
                     pc.p, pc.ceil_mode, pc.count_include_pad, ImageLayoutName(l), ref ? "reference" : "optimized");
}

// Forward and backward of max and average pooling against RefPool on every case.
TEST(PoolTest, MatchesReferenceAllCases) {
  int checked = 0;
  for (const PoolCase& pc : Cases()) {
    const Dims d = pc.d;
    const int64_t numel = d.N * d.C * d.H * d.W;
    const std::vector<float> x = Random(numel, 7 + numel);
    for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      for (bool ref : {false, true}) {
        ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
        const std::string what = Label(pc, l, ref);
        const Pool2dOptions o = Options(pc, l);
        const bool nhwc = l == ImageLayout::kNHWC;
        Tensor xt = Tensor::FromVector(nhwc ? ToNhwc(x, d) : x, LayoutShape(d, l));
        for (bool is_max : {true, false}) {
          RefOut want = RefPool(is_max, x, d, o);
          const Shape out_shape = LayoutShape(want.out, l);
          Tensor y, idx;
          if (is_max) {
            MaxPool2dResult r = MaxPool2d(xt, o);
            y = r.y, idx = r.indices;
            ASSERT_EQ(idx.shape(), out_shape) << what;
            std::vector<int64_t> got = idx.ToIntVector();
            EXPECT_EQ(nhwc ? ToNchwT(got, want.out) : got, want.idx) << what;
          } else {
            y = AvgPool2d(xt, o);
          }
          ASSERT_EQ(y.shape(), out_shape) << what;
          std::vector<float> yv = y.ToFloatVector();
          ExpectNear(nhwc ? ToNchw(yv, want.out) : yv, want.y, 1e-6, what + (is_max ? " max" : " avg"));

          const std::vector<float> g = Random(static_cast<int64_t>(want.y.size()), 99 + numel);
          Tensor gt = Tensor::FromVector(nhwc ? ToNhwc(g, want.out) : g, out_shape);
          Tensor dx = is_max ? MaxPool2dBackward(gt, idx, xt.shape(), o) : AvgPool2dBackward(gt, xt.shape(), o);
          ASSERT_EQ(dx.shape(), xt.shape()) << what;
          std::vector<float> dxv = dx.ToFloatVector();
          ExpectNear(nhwc ? ToNchw(dxv, d) : dxv, RefPoolBackward(is_max, x, d, o, g), 1e-5,
                     what + (is_max ? " max backward" : " avg backward"));
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(Cases().size()) * 8);
}

// Expected values produced by PyTorch 1.13: F.avg_pool2d(arange(1, 37).reshape(1, 1, 6, 6),
// 3, 2, 1, ceil_mode=True, count_include_pad=...) and F.avg_pool2d(arange(1, 26).reshape(1, 1, 5, 5),
// 2, 2, 0, ceil_mode=True).
TEST(PoolTest, AvgPoolCeilModeMatchesTorch) {
  std::vector<float> v(36);
  for (int i = 0; i < 36; ++i) v[i] = static_cast<float>(i + 1);
  const std::vector<std::vector<float>> want = {
      {2.0f, 4.0f, 5.333333492f, 3.0f, 9.0f, 15.0f, 17.0f, 9.0f, 17.0f, 27.0f, 29.0f, 15.0f, 10.5f, 16.5f, 17.5f, 9.0f},
      {4.5f, 6.0f, 8.0f, 9.0f, 13.5f, 15.0f, 17.0f, 18.0f, 25.5f, 27.0f, 29.0f, 30.0f, 31.5f, 33.0f, 35.0f, 36.0f}};
  for (bool ref : {false, true}) {
    ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
    for (int cip = 0; cip < 2; ++cip) {
      Pool2dOptions o;
      o.kernel_h = o.kernel_w = 3;
      o.pad_h = o.pad_w = 1;
      o.ceil_mode = true;
      o.count_include_pad = cip == 0;
      Tensor y = AvgPool2d(Tensor::FromVector(v, {1, 1, 6, 6}), o);
      ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
      std::vector<float> got = y.ToFloatVector();
      for (int i = 0; i < 16; ++i) EXPECT_NEAR(got[i], want[cip][i], 1e-5) << "cip " << (cip == 0) << " " << i;
    }
    Pool2dOptions o2;
    o2.ceil_mode = true;
    std::vector<float> v5(v.begin(), v.begin() + 25);
    std::vector<float> got = AvgPool2d(Tensor::FromVector(v5, {1, 1, 5, 5}), o2).ToFloatVector();
    const std::vector<float> want5 = {4.0f, 6.0f, 7.5f, 14.0f, 16.0f, 17.5f, 21.5f, 23.5f, 25.0f};
    ASSERT_EQ(got.size(), want5.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want5[i], 1e-6) << i;
  }
}

// Ties: the first maximum in row-major window order wins. Expected values
// produced by PyTorch 1.13 (F.max_pool2d(..., return_indices=True)).
TEST(PoolTest, MaxPoolTiesPickFirstLikeTorch) {
  const std::vector<float> t = {1, 3, 3, 0, 3, 2, 1, 3, 0, 3, 3, 1, 2, 2, 2, 2};
  const Dims d{1, 1, 4, 4};
  for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    for (bool ref : {false, true}) {
      ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
      Pool2dOptions o;
      o.layout = l;
      o.kernel_h = o.kernel_w = 3;
      o.pad_h = o.pad_w = 1;
      MaxPool2dResult r = MaxPool2d(Tensor::FromVector(t, LayoutShape(d, l)), o);
      EXPECT_EQ(r.indices.ToIntVector(), (std::vector<int64_t>{1, 1, 4, 7}));
      o.kernel_h = o.kernel_w = 2;
      o.pad_h = o.pad_w = 0;
      r = MaxPool2d(Tensor::FromVector(t, LayoutShape(d, l)), o);
      EXPECT_EQ(r.indices.ToIntVector(), (std::vector<int64_t>{1, 2, 9, 10}));
      EXPECT_EQ(r.y.ToFloatVector(), (std::vector<float>{3, 3, 3, 3}));
    }
  }
  // Constant planes with many channels (vectorized NHWC path): every index is the window's first cell.
  const Dims dc{2, 19, 5, 5};
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = 3;
  o.pad_h = o.pad_w = 1;
  o.layout = ImageLayout::kNHWC;
  MaxPool2dResult r = MaxPool2d(Tensor::Full(LayoutShape(dc, o.layout), 0.5), o);
  std::vector<float> x(dc.N * dc.C * dc.H * dc.W, 0.5f);
  EXPECT_EQ(ToNchwT(r.indices.ToIntVector(), {2, 19, 3, 3}), RefPool(true, x, dc, o).idx);
}

// Many ties (values in {0, 1, 2}) and -inf: indices must equal the row-major
// first maximum of RefPool on every case, in both layouts and implementations.
TEST(PoolTest, MaxPoolManyTiesMatchReference) {
  for (const PoolCase& pc : Cases()) {
    const Dims d = pc.d;
    std::vector<float> x = Random(d.N * d.C * d.H * d.W, 3, 0.0f, 3.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = i % 11 == 0 ? -INFINITY : std::floor(x[i]);
    for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      for (bool ref : {false, true}) {
        ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
        const Pool2dOptions o = Options(pc, l);
        const bool nhwc = l == ImageLayout::kNHWC;
        RefOut want = RefPool(true, x, d, o);
        MaxPool2dResult r = MaxPool2d(Tensor::FromVector(nhwc ? ToNhwc(x, d) : x, LayoutShape(d, l)), o);
        std::vector<int64_t> got = r.indices.ToIntVector();
        EXPECT_EQ(nhwc ? ToNchwT(got, want.out) : got, want.idx) << Label(pc, l, ref);
      }
    }
  }
}

// A NaN wins over numbers (PyTorch: `val > max || isnan(val)`, the last NaN in
// row-major order when several); the optimized NCHW kernel redoes such rows.
TEST(PoolTest, MaxPoolNaNRowsMatchReference) {
  const Dims d{1, 2, 6, 7};
  std::vector<float> x = Random(d.N * d.C * d.H * d.W, 21, -1.0f, 1.0f);
  x[3] = x[8] = x[42 + 20] = std::numeric_limits<float>::quiet_NaN();  // (0, 3), (1, 1); plane 1: (2, 6)
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = 3;
  o.pad_h = o.pad_w = 1;
  std::vector<int64_t> want;
  {
    ScopedImpl impl(Impl::kReference);
    want = MaxPool2d(Tensor::FromVector(x, {1, 2, 6, 7}), o).indices.ToIntVector();
  }
  EXPECT_EQ(MaxPool2d(Tensor::FromVector(x, {1, 2, 6, 7}), o).indices.ToIntVector(), want);
  // Output 3x4. Window (0, 0) = rows 0-1, cols 0-1: NaN at 8 only. Window (0, 1) = rows 0-1,
  // cols 1-3: NaNs at 3 (0, 3) and 8 (1, 1); the last in row-major order wins (not the last column).
  // PyTorch 1.13 gives the same indices [8, 8] for these two windows.
  EXPECT_EQ(want[0], 8);
  EXPECT_EQ(want[1], 8);
  EXPECT_EQ(want[12 + 7], 20);  // plane 1, window (1, 3) = rows 1-3, cols 5-6
}

TEST(PoolTest, MaxPoolPropagatesNaN) {
  std::vector<float> v = {1, 2, 3, 4};
  v[2] = std::numeric_limits<float>::quiet_NaN();
  for (bool ref : {false, true}) {
    ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
    for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      Pool2dOptions o;
      o.layout = l;
      MaxPool2dResult r = MaxPool2d(Tensor::FromVector(v, LayoutShape({1, 1, 2, 2}, l)), o);
      EXPECT_TRUE(std::isnan(r.y.ToFloatVector()[0]));
      EXPECT_EQ(r.indices.ToIntVector()[0], 2);
    }
  }
}

TEST(PoolTest, GlobalAvgPool) {
  for (Dims d : {Dims{1, 1, 1, 1}, Dims{3, 5, 7, 3}, Dims{2, 17, 1, 13}, Dims{1, 70, 7, 7}}) {
    const int64_t numel = d.N * d.C * d.H * d.W;
    const std::vector<float> x = Random(numel, numel + 3);
    const std::vector<float> g = Random(d.N * d.C, numel + 4);
    std::vector<double> want(d.N * d.C, 0.0), want_dx(numel);
    for (int64_t p = 0; p < d.N * d.C; ++p) {
      for (int64_t i = 0; i < d.H * d.W; ++i) want[p] += x[p * d.H * d.W + i] / static_cast<double>(d.H * d.W);
      for (int64_t i = 0; i < d.H * d.W; ++i) want_dx[p * d.H * d.W + i] = g[p] / static_cast<double>(d.H * d.W);
    }
    for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      for (bool ref : {false, true}) {
        ScopedImpl impl(ref ? Impl::kReference : Impl::kOptimized);
        const bool nhwc = l == ImageLayout::kNHWC;
        const std::string what = fmt::format("[{},{},{},{}] {} ref={}", d.N, d.C, d.H, d.W, ImageLayoutName(l), ref);
        Tensor xt = Tensor::FromVector(nhwc ? ToNhwc(x, d) : x, LayoutShape(d, l));
        Tensor y = GlobalAvgPool2d(xt, l);
        ASSERT_EQ(y.shape(), (Shape{d.N, d.C})) << what;
        ExpectNear(y.ToFloatVector(), want, 1e-6, what);
        Tensor dx = GlobalAvgPool2dBackward(Tensor::FromVector(g, {d.N, d.C}), xt.shape(), l);
        std::vector<float> dxv = dx.ToFloatVector();
        ExpectNear(nhwc ? ToNchw(dxv, d) : dxv, want_dx, 1e-6, what + " backward");
      }
    }
  }
}

// Central differences of L = sum(y * g) through the optimized forward.
TEST(PoolTest, BackwardMatchesFiniteDifferences) {
  const Dims d{2, 3, 5, 6};
  const int64_t numel = d.N * d.C * d.H * d.W;
  // Distinct values 0.05 apart (shuffled) so a step of 1e-2 never changes an argmax.
  std::vector<float> x(numel);
  for (int64_t i = 0; i < numel; ++i) x[i] = 0.05f * static_cast<float>((i * 37) % numel) - 4.0f;
  for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    for (int kind = 0; kind < 3; ++kind) {  // max, avg, global avg
      Pool2dOptions o;
      o.kernel_h = o.kernel_w = 3;
      o.pad_h = o.pad_w = 1;
      o.ceil_mode = true;
      o.count_include_pad = false;
      o.layout = l;
      Tensor xt = Tensor::FromVector(x, LayoutShape(d, l));
      auto forward = [&](const Tensor& in) {
        return kind == 0 ? MaxPool2d(in, o).y : kind == 1 ? AvgPool2d(in, o) : GlobalAvgPool2d(in, l);
      };
      Tensor y = forward(xt);
      const std::vector<float> g = Random(y.numel(), 5);
      Tensor gt = Tensor::FromVector(g, y.shape());
      Tensor dx = kind == 0   ? MaxPool2dBackward(gt, MaxPool2d(xt, o).indices, xt.shape(), o)
                  : kind == 1 ? AvgPool2dBackward(gt, xt.shape(), o)
                              : GlobalAvgPool2dBackward(gt, xt.shape(), l);
      std::vector<float> dxv = dx.ToFloatVector();
      auto loss = [&](const Tensor& in) {
        std::vector<float> yv = forward(in).ToFloatVector();
        double s = 0;
        for (size_t i = 0; i < yv.size(); ++i) s += static_cast<double>(yv[i]) * g[i];
        return s;
      };
      for (int64_t i = 0; i < numel; i += 7) {
        Tensor xp = xt.Clone(), xm = xt.Clone();
        xp.data<float>()[i] += 1e-2f;
        xm.data<float>()[i] -= 1e-2f;
        const double fd = (loss(xp) - loss(xm)) / 2e-2;
        EXPECT_NEAR(dxv[i], fd, 2e-3) << "kind " << kind << " " << ImageLayoutName(l) << " element " << i;
      }
    }
  }
}

// Results must not depend on the number of threads (bitwise).
TEST(PoolTest, IndependentOfThreadCount) {
  const Dims d{4, 64, 33, 31};
  const int64_t numel = d.N * d.C * d.H * d.W;
  Tensor x = Tensor::FromVector(Random(numel, 11), {d.N, d.C, d.H, d.W});
  for (ImageLayout l : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    Pool2dOptions o;
    o.kernel_h = o.kernel_w = 3;
    o.pad_h = o.pad_w = 1;
    o.layout = l;
    auto run = [&]() {
      MaxPool2dResult m = MaxPool2d(x, o);
      std::vector<std::vector<float>> out = {m.y.ToFloatVector(), AvgPool2d(x, o).ToFloatVector(),
                                             GlobalAvgPool2d(x, l).ToFloatVector(),
                                             MaxPool2dBackward(m.y, m.indices, x.shape(), o).ToFloatVector(),
                                             AvgPool2dBackward(m.y, x.shape(), o).ToFloatVector()};
      return out;
    };
    auto [one, many] = testing::RunWithOneAndManyThreads(run);
    for (size_t k = 0; k < one.size(); ++k) EXPECT_EQ(one[k], many[k]) << "output " << k << " " << ImageLayoutName(l);
  }
}

TEST(PoolTest, RejectsBadArguments) {
  Tensor x = Tensor::Zeros({2, 3, 8, 8});
  Pool2dOptions o;
  EXPECT_THROW(MaxPool2d(Tensor::Zeros({3, 8, 8}), o), OpError);          // rank
  EXPECT_THROW(AvgPool2d(x.To(DType::kBF16), o), OpError);                // dtype
  EXPECT_THROW(MaxPool2d(Tensor::Zeros({0, 3, 8, 8}), o), OpError);       // empty input
  Pool2dOptions pad = o;
  pad.pad_h = 2;  // kernel 2: pad must be <= 1
  EXPECT_THROW(MaxPool2d(x, pad), OpError);
  Pool2dOptions big;
  big.kernel_h = big.kernel_w = 9;
  big.stride_h = big.stride_w = 1;
  EXPECT_THROW(AvgPool2d(x, big), OpError);  // window larger than the input: empty output
  try {
    AvgPool2d(x, big);
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3, 8, 8]"), std::string::npos) << e.what();
  }
  Pool2dOptions stride0 = o;
  stride0.stride_w = 0;
  EXPECT_THROW(MaxPool2d(x, stride0), OpError);
  EXPECT_THROW(GlobalAvgPool2d(Tensor::Zeros({2, 3, 8}), ImageLayout::kNCHW), OpError);

  MaxPool2dResult r = MaxPool2d(x, o);
  EXPECT_THROW(MaxPool2dBackward(Tensor::Zeros({2, 3, 4, 5}), r.indices, x.shape(), o), OpError);  // grad shape
  EXPECT_THROW(MaxPool2dBackward(r.y, r.indices.To(DType::kI32), x.shape(), o), OpError);          // index dtype
  Tensor bad = Tensor::FromInts(std::vector<int64_t>(r.indices.numel(), 64), r.indices.shape());   // 8*8 = 64
  EXPECT_THROW(MaxPool2dBackward(r.y, bad, x.shape(), o), OpError);
  {
    ScopedImpl impl(Impl::kReference);
    EXPECT_THROW(MaxPool2dBackward(r.y, bad, x.shape(), o), OpError);
  }
  EXPECT_THROW(AvgPool2dBackward(r.y, {2, 3, 10, 8}, o), OpError);  // x_shape whose output (5x4) is not grad_y's
  EXPECT_THROW(GlobalAvgPool2dBackward(Tensor::Zeros({2, 4}), x.shape(), ImageLayout::kNCHW), OpError);
}

}  // namespace
}  // namespace tessera::ops
