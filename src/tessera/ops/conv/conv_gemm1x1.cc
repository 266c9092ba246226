// 1x1 convolution with stride 1 and no padding as plain GEMMs on the
// activations (no im2col), per group:
//   NCHW, per image: y[Kg, HW] = w[Kg, Cg] . x[Cg, HW] (images under 128
//     pixels: the im2col kernels, which batch several images per GEMM);
//     grad_x[Cg, HW] = w^T . grad_y; grad_w += grad_y[Kg, HW] . x^T (images in order,
//     in blocks of grad_w).
//   NHWC: y[NHW, Kg] = x[NHW, Cg] . w^T; grad_x = grad_y . w;
//     grad_w = grad_y^T . x (one GEMM over all rows).
#include <omp.h>

#include <algorithm>

#include "tessera/ops/conv/conv_internal.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/matmul/gemm.h"

namespace tessera::ops::conv {
namespace {

// One task (image or block) per thread when there are at least as many as
// threads (single-threaded GEMMs), else in turn with multi-threaded GEMMs.
// Problems under ~64k multiply-adds stay on the calling thread.
template <typename F>
void ForImages(const ConvGeom& g, int64_t n, F&& f) {
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  kern::ParallelFor(n, threads > 1 && n >= threads && g.flops() > (1 << 17) ? 1 : 0, 0, f);
}

}  // namespace

// NCHW images smaller than this many pixels go through the im2col kernels,
// which put several images into one GEMM (the weights are then packed once
// per block of images instead of once per image); for a 1x1 filter their
// im2col / col2im are plain copies.
constexpr int64_t kSmallImage = 128;

void Gemm1x1Forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  const int64_t hw = g.H * g.W, m = g.N * hw;
  if (g.nchw() && hw < kSmallImage) return Im2colForward(g, x, w, bias, y);
  if (g.nchw()) {
    ForImages(g, g.N, [&](int64_t n) {
      for (int64_t grp = 0; grp < g.G; ++grp) {
        float* yg = y + (n * g.K + grp * g.Kg) * hw;
        GemmF32(false, false, g.Kg, hw, g.Cg, 1.0f, w + grp * g.Kg * g.Cg, g.Cg, x + (n * g.C + grp * g.Cg) * hw, hw,
                0.0f, yg, hw);
        if (bias) {
          for (int64_t k = 0; k < g.Kg; ++k) {
            const float bk = bias[grp * g.Kg + k];
            for (int64_t j = 0; j < hw; ++j) yg[k * hw + j] += bk;
          }
        }
      }
    });
    return;
  }
  for (int64_t grp = 0; grp < g.G; ++grp) {
    GemmF32(false, true, m, g.Kg, g.Cg, 1.0f, x + grp * g.Cg, g.C, w + grp * g.Kg * g.Cg, g.Cg, 0.0f, y + grp * g.Kg,
            g.K);
  }
  if (bias) {
    kern::ParallelFor((m + 63) / 64, g.y_numel(), kern::kParallelMemoryBound, [&](int64_t b) {
      for (int64_t i = b * 64; i < std::min(m, b * 64 + 64); ++i) {
        float* row = y + i * g.K;
        for (int64_t k = 0; k < g.K; ++k) row[k] += bias[k];
      }
    });
  }
}

void Gemm1x1BackwardX(const ConvGeom& g, const float* gy, const float* w, float* gx) {
  const int64_t hw = g.H * g.W, m = g.N * hw;
  if (g.nchw() && hw < kSmallImage) return Im2colBackwardX(g, gy, w, gx);
  if (g.nchw()) {
    ForImages(g, g.N, [&](int64_t n) {
      for (int64_t grp = 0; grp < g.G; ++grp) {
        GemmF32(true, false, g.Cg, hw, g.Kg, 1.0f, w + grp * g.Kg * g.Cg, g.Cg, gy + (n * g.K + grp * g.Kg) * hw, hw,
                0.0f, gx + (n * g.C + grp * g.Cg) * hw, hw);
      }
    });
    return;
  }
  for (int64_t grp = 0; grp < g.G; ++grp) {
    GemmF32(false, false, m, g.Cg, g.Kg, 1.0f, gy + grp * g.Kg, g.K, w + grp * g.Kg * g.Cg, g.Cg, 0.0f,
            gx + grp * g.Cg, g.C);
  }
}

void Gemm1x1BackwardW(const ConvGeom& g, const float* gy, const float* x, float* gw) {
  const int64_t hw = g.H * g.W, m = g.N * hw;
  if (g.nchw()) {
    // Independent blocks of grad_w (fixed sizes: a function of the shape),
    // each summing its GEMMs over the images in order: one parallel region.
    const int64_t cb = std::clamp<int64_t>((g.Cg / 2 + 31) / 32 * 32, 32, 256), cblocks = (g.Cg + cb - 1) / cb;
    const int64_t kb = 256, kblocks = (g.Kg + kb - 1) / kb;
    ForImages(g, g.G * kblocks * cblocks, [&](int64_t t) {
      const int64_t grp = t / (kblocks * cblocks), k0 = (t / cblocks) % kblocks * kb, c0 = t % cblocks * cb;
      const int64_t kn = std::min(kb, g.Kg - k0), cn = std::min(cb, g.Cg - c0);
      for (int64_t n = 0; n < g.N; ++n) {
        GemmF32(false, true, kn, cn, hw, 1.0f, gy + (n * g.K + grp * g.Kg + k0) * hw, hw,
                x + (n * g.C + grp * g.Cg + c0) * hw, hw, n == 0 ? 0.0f : 1.0f, gw + (grp * g.Kg + k0) * g.Cg + c0,
                g.Cg);
      }
    });
    return;
  }
  for (int64_t grp = 0; grp < g.G; ++grp) {
    GemmF32(true, false, g.Kg, g.Cg, m, 1.0f, gy + grp * g.Kg, g.K, x + grp * g.Cg, g.C, 0.0f,
            gw + grp * g.Kg * g.Cg, g.Cg);
  }
}

}  // namespace tessera::ops::conv
