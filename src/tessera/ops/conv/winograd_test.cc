// Winograd 3x3 kernels against an independent double-precision direct
// convolution, with the documented error bound (winograd.h, docs/winograd.md).
#include "tessera/ops/conv/winograd.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/conv/winograd_transforms.h"

namespace tessera::ops::winograd {
namespace {

struct Problem {
  ImageLayout layout = ImageLayout::kNCHW;
  int64_t N = 1, C = 1, H = 1, W = 1, K = 1, pad_h = 0, pad_w = 0;
  bool has_bias = false;
  int64_t P() const { return H + 2 * pad_h - 2; }
  int64_t Q() const { return W + 2 * pad_w - 2; }
};

struct Data {
  std::vector<float> x, w, bias;
};

// Uniform in [-1, 1], or (adversarial) +-10^U(-4, 4): eight decades, mixed signs.
Data MakeData(const Problem& p, uint64_t seed, bool adversarial) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0), dec(-4.0, 4.0);
  auto value = [&] {
    if (!adversarial) return static_cast<float>(uni(rng));
    const double sign = uni(rng) < 0 ? -1.0 : 1.0;
    return static_cast<float>(sign * std::pow(10.0, dec(rng)));
  };
  Data d;
  d.x.resize(p.N * p.C * p.H * p.W);
  d.w.resize(p.K * p.C * 9);
  for (float& v : d.x) v = value();
  for (float& v : d.w) v = value();
  if (p.has_bias) {
    d.bias.resize(p.K);
    for (float& v : d.bias) v = value();
  }
  return d;
}

int64_t XIndex(const Problem& p, int64_t n, int64_t c, int64_t h, int64_t w) {
  return p.layout == ImageLayout::kNCHW ? ((n * p.C + c) * p.H + h) * p.W + w : ((n * p.H + h) * p.W + w) * p.C + c;
}
int64_t YIndex(const Problem& p, int64_t n, int64_t k, int64_t i, int64_t j) {
  return p.layout == ImageLayout::kNCHW ? ((n * p.K + k) * p.P() + i) * p.Q() + j
                                        : ((n * p.P() + i) * p.Q() + j) * p.K + k;
}

struct Check {
  double max_ratio = 0;         // max |err| / bound
  double max_window_rel = 0;    // max |err| / sum over the 3x3 window of |x||w|
  int64_t failures = 0;
};

// Direct convolution in double and the bound of winograd.h for each output.
void CheckAgainstDirect(const Problem& p, const Data& d, Tile tile, const std::vector<float>& y, Check& check) {
  const int64_t m = tile == Tile::kF2x2 ? 2 : 4;
  const double factor = ErrorBoundFactor(tile, p.C);
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t k = 0; k < p.K; ++k) {
      for (int64_t i = 0; i < p.P(); ++i) {
        for (int64_t j = 0; j < p.Q(); ++j) {
          double exact = p.has_bias ? d.bias[k] : 0.0, window = 0.0, patch_sum = 0.0;
          const int64_t ph0 = i / m * m - p.pad_h, pw0 = j / m * m - p.pad_w;  // tile's input patch
          for (int64_t c = 0; c < p.C; ++c) {
            double wsum = 0, xmax = 0;
            for (int64_t r = 0; r < 3; ++r) {
              for (int64_t s = 0; s < 3; ++s) {
                const double wv = d.w[(k * p.C + c) * 9 + r * 3 + s];
                wsum += std::fabs(wv);
                const int64_t h = i + r - p.pad_h, w = j + s - p.pad_w;
                if (h < 0 || h >= p.H || w < 0 || w >= p.W) continue;
                const double xv = d.x[XIndex(p, n, c, h, w)];
                exact += xv * wv;
                window += std::fabs(xv * wv);
              }
            }
            for (int64_t h = std::max<int64_t>(ph0, 0); h < std::min(ph0 + m + 2, p.H); ++h) {
              for (int64_t w = std::max<int64_t>(pw0, 0); w < std::min(pw0 + m + 2, p.W); ++w) {
                xmax = std::max(xmax, std::fabs(static_cast<double>(d.x[XIndex(p, n, c, h, w)])));
              }
            }
            patch_sum += xmax * wsum;
          }
          const double got = y[YIndex(p, n, k, i, j)];
          const double err = std::fabs(got - exact);
          const double bound = factor * patch_sum + std::ldexp(std::fabs(p.has_bias ? d.bias[k] : 0.0), -24);
          if (!(err <= bound)) {
            if (++check.failures <= 5) {
              ADD_FAILURE() << TileName(tile) << " " << ImageLayoutName(p.layout) << " N=" << p.N << " C=" << p.C
                            << " H=" << p.H << " W=" << p.W << " K=" << p.K << " pad=" << p.pad_h << "," << p.pad_w
                            << " bias=" << p.has_bias << " at n=" << n << " k=" << k << " (" << i << "," << j
                            << "): got " << got << " exact " << exact << " err " << err << " bound " << bound;
            }
          }
          if (bound > 0) check.max_ratio = std::max(check.max_ratio, err / bound);
          if (window > 0) check.max_window_rel = std::max(check.max_window_rel, err / window);
        }
      }
    }
  }
}

std::vector<float> RunWinograd(const Problem& p, const Data& d, Tile tile) {
  std::vector<float> y(p.N * p.K * p.P() * p.Q(), std::nanf(""));
  Conv3x3Forward(tile, p.layout, d.x.data(), p.N, p.C, p.H, p.W, d.w.data(), p.K, p.pad_h, p.pad_w,
                 p.has_bias ? d.bias.data() : nullptr, y.data());
  return y;
}

constexpr Tile kTiles[] = {Tile::kF2x2, Tile::kF4x4};
constexpr ImageLayout kLayouts[] = {ImageLayout::kNCHW, ImageLayout::kNHWC};

// Every (H, W, pad) with H, W in {1,2,3,5,7,8,13,56}; C, K, N and bias cycle
// through {1,3,16,65} x {1,2} x {no, yes}; both tiles and layouts each.
void RunSweep(bool adversarial, int stride, Check (&checks)[2]) {
  const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 13, 56};
  const int64_t channels[] = {1, 3, 16, 65};
  int64_t case_id = 0;
  for (int64_t H : sizes) {
    for (int64_t W : sizes) {
      for (int64_t pad = 0; pad <= 2; ++pad) {
        Problem p;
        p.H = H, p.W = W, p.pad_h = pad, p.pad_w = (pad + case_id) % 3;
        if (p.P() < 1 || p.Q() < 1) continue;
        if (case_id++ % stride != 0) continue;
        p.C = channels[case_id % 4];
        p.K = channels[(case_id / 4 + case_id) % 4];
        if (H * W > 200) p.C = std::min<int64_t>(p.C, 16), p.K = std::min<int64_t>(p.K, 3);  // keep the oracle cheap
        p.N = 1 + case_id % 2;
        p.has_bias = case_id / 2 % 2 == 1;
        const Data d = MakeData(p, 1000 + case_id, adversarial);
        for (ImageLayout layout : kLayouts) {
          p.layout = layout;
          Data dl = d;
          if (layout == ImageLayout::kNHWC) {  // same values, other memory order
            Problem pn = p;
            pn.layout = ImageLayout::kNCHW;
            for (int64_t n = 0; n < p.N; ++n)
              for (int64_t c = 0; c < p.C; ++c)
                for (int64_t h = 0; h < p.H; ++h)
                  for (int64_t w = 0; w < p.W; ++w) dl.x[XIndex(p, n, c, h, w)] = d.x[XIndex(pn, n, c, h, w)];
          }
          for (int t = 0; t < 2; ++t) CheckAgainstDirect(p, dl, kTiles[t], RunWinograd(p, dl, kTiles[t]), checks[t]);
        }
      }
    }
  }
}

TEST(Winograd, RandomInputsWithinBound) {
  Check checks[2];
  RunSweep(false, 1, checks);
  for (int t = 0; t < 2; ++t) {
    std::printf("[ winograd ] %s random: max err/bound %.3g, max err/sum_window|xw| %.3g\n", TileName(kTiles[t]),
                checks[t].max_ratio, checks[t].max_window_rel);
    EXPECT_EQ(checks[t].failures, 0);
    // Typical errors are far below the worst case, and near fp32 rounding of the direct sum.
    EXPECT_LT(checks[t].max_window_rel, t == 0 ? 2e-4 : 3e-4);
  }
}

TEST(Winograd, AdversarialDynamicRangeWithinBound) {
  Check checks[2];
  RunSweep(true, 2, checks);
  for (int t = 0; t < 2; ++t) {
    std::printf("[ winograd ] %s adversarial (1e-4..1e4, mixed signs): max err/bound %.3g, max err/window %.3g\n",
                TileName(kTiles[t]), checks[t].max_ratio, checks[t].max_window_rel);
    EXPECT_EQ(checks[t].failures, 0);
  }
}

// Blocks cut inside tile rows (forced block sizes select the blocked
// schedule), and bit-identical results for any thread count.
TEST(Winograd, BlockingAndThreadCountDoNotChangeResults) {
  Problem p;
  p.N = 2, p.C = 19, p.K = 33, p.H = 29, p.W = 31, p.pad_h = 1, p.pad_w = 2, p.has_bias = true;
  const Data d = MakeData(p, 7, false);
  const int saved = omp_get_max_threads();
  for (ImageLayout layout : kLayouts) {
    p.layout = layout;
    for (Tile tile : kTiles) {
      omp_set_num_threads(1);
      const std::vector<float> ref = RunWinograd(p, d, tile);
      Check check;
      CheckAgainstDirect(p, d, tile, ref, check);
      EXPECT_EQ(check.failures, 0);
      // Blocks of 1..12 tiles: blocked schedule; 100: whole schedule, with
      // the weights transformed in chunks of 5 or 12 output channels.
      for (int64_t block : {1, 5, 7, 12, 100}) {
        for (int64_t k_chunk : {0, 5, 12}) {
          if (block != 100 && k_chunk != 0) continue;
          detail::SetBlockTilesForTesting(block);
          detail::SetKChunkForTesting(k_chunk);
          for (int threads : {1, 3}) {
            omp_set_num_threads(threads);
            const std::vector<float> y = RunWinograd(p, d, tile);
            EXPECT_EQ(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)), 0)
                << TileName(tile) << " " << ImageLayoutName(layout) << " block " << block << " k chunk " << k_chunk
                << " threads " << threads;
          }
        }
      }
      detail::SetBlockTilesForTesting(0);
      detail::SetKChunkForTesting(0);
    }
  }
  omp_set_num_threads(saved);
}

TEST(Winograd, PretransformedWeightMatchesSimpleEntry) {
  Problem p;
  p.N = 2, p.C = 16, p.K = 24, p.H = 13, p.W = 9, p.pad_h = 1, p.pad_w = 1, p.has_bias = true;
  const Data d = MakeData(p, 11, false);
  for (ImageLayout layout : kLayouts) {
    p.layout = layout;
    for (Tile tile : kTiles) {
      const TransformedWeight u = TransformWeight(tile, layout, d.w.data(), p.K, p.C);
      std::vector<float> y(p.N * p.K * p.P() * p.Q());
      Conv3x3Forward(u, d.x.data(), p.N, p.H, p.W, p.pad_h, p.pad_w, d.bias.data(), y.data());
      const std::vector<float> ref = RunWinograd(p, d, tile);
      EXPECT_EQ(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)), 0) << TileName(tile);
    }
  }
}

// grad_x of y = conv(x, w, pad) is conv(grad_y, rot180(w)^T, 2 - pad).
TEST(Winograd, BackwardDataIsAForwardWithRotatedWeights) {
  const int64_t N = 2, C = 5, K = 7, H = 9, W = 6;
  for (int64_t pad : {0, 1, 2}) {
    const int64_t P = H + 2 * pad - 2, Q = W + 2 * pad - 2;
    std::mt19937_64 rng(pad);
    std::uniform_real_distribution<float> uni(-1, 1);
    std::vector<float> gy(N * K * P * Q), w(K * C * 9), w_rot(C * K * 9), gx(N * C * H * W);
    for (float& v : gy) v = uni(rng);
    for (float& v : w) v = uni(rng);
    RotatedTransposedWeight(w.data(), K, C, w_rot.data());
    for (Tile tile : kTiles) {
      Conv3x3Forward(tile, ImageLayout::kNCHW, gy.data(), N, K, P, Q, w_rot.data(), C, 2 - pad, 2 - pad, nullptr,
                     gx.data());
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t h = 0; h < H; ++h) {
            for (int64_t x = 0; x < W; ++x) {
              double exact = 0;  // sum over outputs (i, j) that read x[h][x] through w[k][c][r][s]
              for (int64_t k = 0; k < K; ++k)
                for (int64_t r = 0; r < 3; ++r)
                  for (int64_t s = 0; s < 3; ++s) {
                    const int64_t i = h + pad - r, j = x + pad - s;
                    if (i < 0 || i >= P || j < 0 || j >= Q) continue;
                    exact += double{gy[((n * K + k) * P + i) * Q + j]} * w[(k * C + c) * 9 + r * 3 + s];
                  }
              EXPECT_NEAR(gx[((n * C + c) * H + h) * W + x], exact, 1e-4) << TileName(tile) << " pad " << pad;
            }
          }
        }
      }
    }
  }
}

TEST(Winograd, RejectsBadArguments) {
  std::vector<float> x(64, 1.0f), w(9, 1.0f), y(64);
  auto run = [&](int64_t H, int64_t W, int64_t pad_h, int64_t pad_w) {
    Conv3x3Forward(Tile::kF4x4, ImageLayout::kNCHW, x.data(), 1, 1, H, W, w.data(), 1, pad_h, pad_w, nullptr,
                   y.data());
  };
  EXPECT_NO_THROW(run(4, 4, 1, 1));
  EXPECT_THROW(run(4, 4, -1, 0), OpError);
  EXPECT_THROW(run(4, 4, 0, 3), OpError);
  EXPECT_THROW(run(2, 4, 0, 0), OpError);  // P = 0
  EXPECT_THROW(run(4, 1, 1, 0), OpError);  // Q = 0
  EXPECT_THROW(run(0, 4, 1, 1), OpError);
  try {
    run(4, 4, 3, 1);
    ADD_FAILURE() << "no throw";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("padding"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Conv3x3Forward(Tile::kF2x2, ImageLayout::kNHWC, nullptr, 1, 1, 4, 4, w.data(), 1, 0, 0, nullptr,
                              y.data()),
               OpError);
  TransformedWeight empty;
  EXPECT_THROW(Conv3x3Forward(empty, x.data(), 1, 4, 4, 0, 0, nullptr, y.data()), OpError);
  EXPECT_THROW(TransformWeight(Tile::kF2x2, ImageLayout::kNCHW, w.data(), 0, 1), OpError);
}

TEST(Winograd, ErrorBoundFactorIsOrderedAndFinite) {
  EXPECT_LT(ErrorBoundFactor(Tile::kF2x2, 64), ErrorBoundFactor(Tile::kF4x4, 64));
  EXPECT_LT(ErrorBoundFactor(Tile::kF4x4, 64), ErrorBoundFactor(Tile::kF4x4, 512));
  EXPECT_LT(ErrorBoundFactor(Tile::kF4x4, 512), 0.05);
  EXPECT_GT(ErrorBoundFactor(Tile::kF2x2, 1), 0.0);
}

}  // namespace
}  // namespace tessera::ops::winograd
