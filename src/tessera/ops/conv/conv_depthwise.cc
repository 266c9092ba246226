// Depthwise convolution (groups == C, K = C * multiplier; filter k reads
// channel k / multiplier), forward and backward, both layouts.
//   NCHW: one task per output plane (forward), input plane (grad_x, a
//     scatter within the plane) or filter (grad_w); the inner loops run
//     along a row and vectorize when the stride is 1.
//   NHWC: filters repacked to [R, S, K]; one task per output row (forward)
//     or input row (grad_x, a gather); grad_w in blocks of 64 filters. The
//     inner loops run over channels and vectorize (multiplier 1).
// grad_w sums per image in fp32 and over images in double, in order.
#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/ops/conv/conv_internal.h"
#include "tessera/ops/elementwise/kernel_util.h"

namespace tessera::ops::conv {
namespace {

// Outputs o in [lo, hi) read inputs 0 <= o*stride - pad + off < in.
struct Range {
  int64_t lo, hi;
};
Range Valid(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t off) {
  const int64_t a = pad - off, b = in - 1 + pad - off;
  const int64_t l = std::min(out, a <= 0 ? int64_t{0} : (a + stride - 1) / stride);
  const int64_t h = b < 0 ? 0 : b / stride + 1;
  return {l, std::max(l, std::min(h, out))};
}

std::vector<Range> ColumnRanges(const ConvGeom& g) {
  std::vector<Range> v(g.S);
  for (int64_t s = 0; s < g.S; ++s) v[s] = Valid(g.Q, g.W, g.sw, g.pw, s * g.dw);
  return v;
}

// w [K, 1, R, S] -> wt [R, S, K].
float* RepackRSK(const ConvGeom& g, const float* w) {
  const int64_t rs = g.R * g.S;
  float* wt = ConvScratch(1, g.w_numel());
  for (int64_t k = 0; k < g.K; ++k) {
    for (int64_t i = 0; i < rs; ++i) wt[i * g.K + k] = w[k * rs + i];
  }
  return wt;
}

}  // namespace

void DepthwiseForward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  const int64_t m = g.Kg;
  const std::vector<Range> qr = ColumnRanges(g);
  if (g.nchw()) {
    kern::ParallelFor(g.N * g.K, static_cast<int64_t>(g.flops()), kern::kParallelComputeBound, [&](int64_t t) {
      const int64_t n = t / g.K, k = t % g.K;
      const float* xc = x + (n * g.C + k / m) * g.H * g.W;
      const float* wk = w + k * g.R * g.S;
      float* yk = y + t * g.P * g.Q;
      for (int64_t p = 0; p < g.P; ++p) {
        float* __restrict yrow = yk + p * g.Q;
        const float b = bias ? bias[k] : 0.0f;
        for (int64_t q = 0; q < g.Q; ++q) yrow[q] = b;
        for (int64_t r = 0; r < g.R; ++r) {
          const int64_t h = p * g.sh - g.ph + r * g.dh;
          if (h < 0 || h >= g.H) continue;
          for (int64_t s = 0; s < g.S; ++s) {
            const int64_t lo = qr[s].lo, nq = qr[s].hi - lo;
            if (nq <= 0) continue;
            const float* __restrict xr = xc + h * g.W + lo * g.sw - g.pw + s * g.dw;  // input of output lo
            float* __restrict yq = yrow + lo;
            const float wv = wk[r * g.S + s];
            if (g.sw == 1) {
              for (int64_t t = 0; t < nq; ++t) yq[t] += wv * xr[t];
            } else {
              for (int64_t t = 0; t < nq; ++t) yq[t] += wv * xr[t * g.sw];
            }
          }
        }
      }
    });
    return;
  }
  const float* wt = RepackRSK(g, w);
  kern::ParallelFor(g.N * g.P, static_cast<int64_t>(g.flops()), kern::kParallelComputeBound, [&](int64_t t) {
    const int64_t n = t / g.P, p = t % g.P;
    for (int64_t q = 0; q < g.Q; ++q) {
      float* __restrict acc = y + (t * g.Q + q) * g.K;
      if (bias) {
        std::memcpy(acc, bias, sizeof(float) * g.K);
      } else {
        std::memset(acc, 0, sizeof(float) * g.K);
      }
      for (int64_t r = 0; r < g.R; ++r) {
        const int64_t h = p * g.sh - g.ph + r * g.dh;
        if (h < 0 || h >= g.H) continue;
        for (int64_t s = 0; s < g.S; ++s) {
          const int64_t wi = q * g.sw - g.pw + s * g.dw;
          if (wi < 0 || wi >= g.W) continue;
          const float* __restrict xs = x + ((n * g.H + h) * g.W + wi) * g.C;
          const float* __restrict ws = wt + (r * g.S + s) * g.K;
          if (m == 1) {
            for (int64_t k = 0; k < g.K; ++k) acc[k] += xs[k] * ws[k];
          } else {
            for (int64_t c = 0; c < g.C; ++c) {
              for (int64_t j = 0; j < m; ++j) acc[c * m + j] += xs[c] * ws[c * m + j];
            }
          }
        }
      }
    }
  });
}

void DepthwiseBackwardX(const ConvGeom& g, const float* gy, const float* w, float* gx) {
  const int64_t m = g.Kg;
  const std::vector<Range> qr = ColumnRanges(g);
  if (g.nchw()) {
    kern::ParallelFor(g.N * g.C, static_cast<int64_t>(g.flops()), kern::kParallelComputeBound, [&](int64_t t) {
      const int64_t n = t / g.C, c = t % g.C;
      float* gxc = gx + t * g.H * g.W;
      std::memset(gxc, 0, sizeof(float) * g.H * g.W);
      for (int64_t j = 0; j < m; ++j) {
        const int64_t k = c * m + j;
        const float* gyk = gy + (n * g.K + k) * g.P * g.Q;
        const float* wk = w + k * g.R * g.S;
        for (int64_t p = 0; p < g.P; ++p) {
          const float* __restrict gyrow = gyk + p * g.Q;
          for (int64_t r = 0; r < g.R; ++r) {
            const int64_t h = p * g.sh - g.ph + r * g.dh;
            if (h < 0 || h >= g.H) continue;
            for (int64_t s = 0; s < g.S; ++s) {
              const int64_t lo = qr[s].lo, nq = qr[s].hi - lo;
              if (nq <= 0) continue;
              float* __restrict row = gxc + h * g.W + lo * g.sw - g.pw + s * g.dw;  // read by output lo
              const float* __restrict gq = gyrow + lo;
              const float wv = wk[r * g.S + s];
              if (g.sw == 1) {
                for (int64_t t = 0; t < nq; ++t) row[t] += wv * gq[t];
              } else {
                for (int64_t t = 0; t < nq; ++t) row[t * g.sw] += wv * gq[t];
              }
            }
          }
        }
      }
    });
    return;
  }
  const float* wt = RepackRSK(g, w);
  kern::ParallelFor(g.N * g.H, static_cast<int64_t>(g.flops()), kern::kParallelComputeBound, [&](int64_t t) {
    const int64_t n = t / g.H, h = t % g.H;
    for (int64_t wi = 0; wi < g.W; ++wi) {
      float* __restrict dst = gx + (t * g.W + wi) * g.C;
      std::memset(dst, 0, sizeof(float) * g.C);
      for (int64_t r = 0; r < g.R; ++r) {
        const int64_t hp = h + g.ph - r * g.dh;
        if (hp < 0 || hp % g.sh != 0 || hp / g.sh >= g.P) continue;
        for (int64_t s = 0; s < g.S; ++s) {
          const int64_t wq = wi + g.pw - s * g.dw;
          if (wq < 0 || wq % g.sw != 0 || wq / g.sw >= g.Q) continue;
          const float* __restrict src = gy + ((n * g.P + hp / g.sh) * g.Q + wq / g.sw) * g.K;
          const float* __restrict ws = wt + (r * g.S + s) * g.K;
          if (m == 1) {
            for (int64_t c = 0; c < g.C; ++c) dst[c] += src[c] * ws[c];
          } else {
            for (int64_t c = 0; c < g.C; ++c) {
              float a = 0.0f;
              for (int64_t j = 0; j < m; ++j) a += src[c * m + j] * ws[c * m + j];
              dst[c] += a;
            }
          }
        }
      }
    }
  });
}

void DepthwiseBackwardW(const ConvGeom& g, const float* gy, const float* x, float* gw) {
  const int64_t m = g.Kg, rs = g.R * g.S;
  const std::vector<Range> qr = ColumnRanges(g);
  if (g.nchw()) {
    // Per image, products are accumulated along q into a row per (r, s)
    // (vectorizes), then each row is summed in order into a double total.
    kern::ParallelFor(g.K, static_cast<int64_t>(g.flops()), kern::kParallelComputeBound, [&](int64_t k) {
      std::vector<double> total(rs, 0.0);
      std::vector<float> part(rs * g.Q);
      for (int64_t n = 0; n < g.N; ++n) {
        std::fill(part.begin(), part.end(), 0.0f);
        const float* xc = x + (n * g.C + k / m) * g.H * g.W;
        const float* gyk = gy + (n * g.K + k) * g.P * g.Q;
        for (int64_t p = 0; p < g.P; ++p) {
          const float* __restrict gyrow = gyk + p * g.Q;
          for (int64_t r = 0; r < g.R; ++r) {
            const int64_t h = p * g.sh - g.ph + r * g.dh;
            if (h < 0 || h >= g.H) continue;
            for (int64_t s = 0; s < g.S; ++s) {
              const int64_t lo = qr[s].lo, nq = qr[s].hi - lo;
              if (nq <= 0) continue;
              const float* __restrict xr = xc + h * g.W + lo * g.sw - g.pw + s * g.dw;  // input of output lo
              const float* __restrict gq = gyrow + lo;
              float* __restrict acc = part.data() + (r * g.S + s) * g.Q + lo;
              if (g.sw == 1) {
                for (int64_t t = 0; t < nq; ++t) acc[t] += gq[t] * xr[t];
              } else {
                for (int64_t t = 0; t < nq; ++t) acc[t] += gq[t] * xr[t * g.sw];
              }
            }
          }
        }
        for (int64_t i = 0; i < rs; ++i) {
          double sum = 0.0;
          for (int64_t q = 0; q < g.Q; ++q) sum += part[i * g.Q + q];
          total[i] += sum;
        }
      }
      for (int64_t i = 0; i < rs; ++i) gw[k * rs + i] = static_cast<float>(total[i]);
    });
    return;
  }
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (g.K + kBlock - 1) / kBlock;
  kern::ParallelFor(blocks, static_cast<int64_t>(g.flops()), kern::kParallelComputeBound, [&](int64_t b) {
    const int64_t k0 = b * kBlock, kb = std::min(kBlock, g.K - k0);
    std::vector<double> total(rs * kBlock, 0.0);
    std::vector<float> part(rs * kBlock);
    for (int64_t n = 0; n < g.N; ++n) {
      std::fill(part.begin(), part.end(), 0.0f);
      for (int64_t p = 0; p < g.P; ++p) {
        for (int64_t r = 0; r < g.R; ++r) {
          const int64_t h = p * g.sh - g.ph + r * g.dh;
          if (h < 0 || h >= g.H) continue;
          for (int64_t s = 0; s < g.S; ++s) {
            float* __restrict acc = part.data() + (r * g.S + s) * kBlock;
            for (int64_t q = qr[s].lo; q < qr[s].hi; ++q) {
              const float* __restrict gyv = gy + ((n * g.P + p) * g.Q + q) * g.K + k0;
              const float* __restrict xs = x + ((n * g.H + h) * g.W + q * g.sw - g.pw + s * g.dw) * g.C;
              if (m == 1) {
                for (int64_t j = 0; j < kb; ++j) acc[j] += gyv[j] * xs[k0 + j];
              } else {
                for (int64_t j = 0; j < kb; ++j) acc[j] += gyv[j] * xs[(k0 + j) / m];
              }
            }
          }
        }
      }
      for (int64_t i = 0; i < rs * kBlock; ++i) total[i] += part[i];
    }
    for (int64_t j = 0; j < kb; ++j) {
      for (int64_t i = 0; i < rs; ++i) gw[(k0 + j) * rs + i] = static_cast<float>(total[i * kBlock + j]);
    }
  });
}

}  // namespace tessera::ops::conv
