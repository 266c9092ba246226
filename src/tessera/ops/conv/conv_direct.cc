// The direct loop nests of 2-d convolution (the reference every other
// algorithm is tested against, and the fallback for tiny problems), the
// bias gradient shared by all algorithms, and the conv scratch buffers.
// Sums are accumulated in double in a fixed order; work is split so that
// each output element belongs to one task.
#include <algorithm>
#include <memory>

#include "tessera/ops/conv/conv_internal.h"
#include "tessera/ops/elementwise/kernel_util.h"

namespace tessera::ops::conv {

float* ConvScratch(int slot, int64_t n) {
  struct Buffer {
    std::unique_ptr<float[]> data;
    int64_t capacity = 0;
  };
  thread_local Buffer buffers[4];
  Buffer& b = buffers[slot];
  if (b.capacity < n) {
    int64_t capacity = std::max<int64_t>(n, b.capacity + b.capacity / 2);
    capacity = (capacity + 15) / 16 * 16;
    b.data.reset(new float[static_cast<size_t>(capacity)]);  // uninitialized: pages are touched on use
    b.capacity = capacity;
  }
  return b.data.get();
}

namespace {

// Offsets of x[n, c, h, w] / y[n, k, p, q] for either layout.
struct Index {
  const ConvGeom& g;
  int64_t x(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return g.nchw() ? ((n * g.C + c) * g.H + h) * g.W + w : ((n * g.H + h) * g.W + w) * g.C + c;
  }
  int64_t y(int64_t n, int64_t k, int64_t p, int64_t q) const {
    return g.nchw() ? ((n * g.K + k) * g.P + p) * g.Q + q : ((n * g.P + p) * g.Q + q) * g.K + k;
  }
  int64_t w(int64_t k, int64_t c, int64_t r, int64_t s) const { return ((k * g.Cg + c) * g.R + r) * g.S + s; }
};

// The scalar loops take ~1 ns per multiply-add: below ~64k of them (flops
// counts two each) a parallel region costs more than it saves, and far more
// when the cores are busy and a woken worker waits a scheduler tick.
constexpr int64_t kDirectParallel = 1 << 17;

}  // namespace

void DirectForward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  const Index ix{g};
  kern::ParallelFor(g.N * g.K, static_cast<int64_t>(g.flops()), kDirectParallel, [&](int64_t t) {
    const int64_t n = t / g.K, k = t % g.K, c0 = (k / g.Kg) * g.Cg;
    for (int64_t p = 0; p < g.P; ++p) {
      for (int64_t q = 0; q < g.Q; ++q) {
        double acc = bias ? bias[k] : 0.0;
        for (int64_t c = 0; c < g.Cg; ++c) {
          for (int64_t r = 0; r < g.R; ++r) {
            const int64_t h = p * g.sh - g.ph + r * g.dh;
            if (h < 0 || h >= g.H) continue;
            for (int64_t s = 0; s < g.S; ++s) {
              const int64_t ww = q * g.sw - g.pw + s * g.dw;
              if (ww < 0 || ww >= g.W) continue;
              acc += static_cast<double>(x[ix.x(n, c0 + c, h, ww)]) * w[ix.w(k, c, r, s)];
            }
          }
        }
        y[ix.y(n, k, p, q)] = static_cast<float>(acc);
      }
    }
  });
}

void DirectBackwardX(const ConvGeom& g, const float* gy, const float* w, float* gx) {
  const Index ix{g};
  kern::ParallelFor(g.N * g.C, static_cast<int64_t>(g.flops()), kDirectParallel, [&](int64_t t) {
    const int64_t n = t / g.C, c = t % g.C, grp = c / g.Cg, cl = c % g.Cg;
    for (int64_t h = 0; h < g.H; ++h) {
      for (int64_t ww = 0; ww < g.W; ++ww) {
        double acc = 0.0;
        for (int64_t kl = 0; kl < g.Kg; ++kl) {
          const int64_t k = grp * g.Kg + kl;
          for (int64_t r = 0; r < g.R; ++r) {
            const int64_t hp = h + g.ph - r * g.dh;
            if (hp < 0 || hp % g.sh != 0 || hp / g.sh >= g.P) continue;
            for (int64_t s = 0; s < g.S; ++s) {
              const int64_t wq = ww + g.pw - s * g.dw;
              if (wq < 0 || wq % g.sw != 0 || wq / g.sw >= g.Q) continue;
              acc += static_cast<double>(gy[ix.y(n, k, hp / g.sh, wq / g.sw)]) * w[ix.w(k, cl, r, s)];
            }
          }
        }
        gx[ix.x(n, c, h, ww)] = static_cast<float>(acc);
      }
    }
  });
}

void DirectBackwardW(const ConvGeom& g, const float* gy, const float* x, float* gw) {
  const Index ix{g};
  kern::ParallelFor(g.K * g.Cg, static_cast<int64_t>(g.flops()), kDirectParallel, [&](int64_t t) {
    const int64_t k = t / g.Cg, cl = t % g.Cg, c = (k / g.Kg) * g.Cg + cl;
    for (int64_t r = 0; r < g.R; ++r) {
      for (int64_t s = 0; s < g.S; ++s) {
        double acc = 0.0;
        for (int64_t n = 0; n < g.N; ++n) {
          for (int64_t p = 0; p < g.P; ++p) {
            const int64_t h = p * g.sh - g.ph + r * g.dh;
            if (h < 0 || h >= g.H) continue;
            for (int64_t q = 0; q < g.Q; ++q) {
              const int64_t ww = q * g.sw - g.pw + s * g.dw;
              if (ww < 0 || ww >= g.W) continue;
              acc += static_cast<double>(gy[ix.y(n, k, p, q)]) * x[ix.x(n, c, h, ww)];
            }
          }
        }
        gw[ix.w(k, cl, r, s)] = static_cast<float>(acc);
      }
    }
  });
}

void BiasBackward(const ConvGeom& g, const float* gy, float* gb) {
  const int64_t pq = g.P * g.Q;
  if (g.nchw()) {
    kern::ParallelFor(g.K, g.y_numel(), kern::kParallelMemoryBound, [&](int64_t k) {
      double acc = 0.0;
      for (int64_t n = 0; n < g.N; ++n) acc += kern::SumLanes(gy + (n * g.K + k) * pq, pq);
      gb[k] = static_cast<float>(acc);
    });
    return;
  }
  // NHWC: blocks of 64 channels, rows summed in order (vectorizes over k).
  constexpr int64_t kBlock = 64;
  const int64_t rows = g.N * pq, blocks = (g.K + kBlock - 1) / kBlock;
  kern::ParallelFor(blocks, g.y_numel(), kern::kParallelMemoryBound, [&](int64_t b) {
    const int64_t k0 = b * kBlock, kn = std::min(kBlock, g.K - k0);
    double acc[kBlock] = {};
    for (int64_t i = 0; i < rows; ++i) {
      const float* row = gy + i * g.K + k0;
      for (int64_t j = 0; j < kn; ++j) acc[j] += row[j];
    }
    for (int64_t j = 0; j < kn; ++j) gb[k0 + j] = static_cast<float>(acc[j]);
  });
}

}  // namespace tessera::ops::conv
