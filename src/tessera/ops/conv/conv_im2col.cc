// im2col + GEMM convolution, forward and backward, both layouts.
//   NCHW, per image n and group: y[Kg, PQ] = w[Kg, Cg*R*S] . cols[Cg*R*S, PQ]
//     (forward in column blocks of PQ, or of several whole small images);
//     grad_x: dcols = w^T . grad_y (chunks of output rows), then a
//     per-channel col2im scatter; grad_w += grad_y[Kg, PQ] . cols^T, images
//     (and PQ chunks) in order, in blocks of rows of cols.
//   NHWC, rows m = (n, p, q): y[M, Kg] = cols[M, R*S*Cg] . w2^T with w2 the
//     weights repacked to [K, R, S, Cg] (forward in row blocks); grad_x:
//     dcols[PQ, R*S*Cg] = grad_y . w2 (chunks of output rows), then a
//     col2im scatter per block of channels; grad_w2 += grad_y^T . cols over
//     row chunks in order, in blocks of (r, s, channels) columns.
// Independent blocks run one per thread (single-threaded GEMMs) when there
// are at least as many as threads, else one after another with
// multi-threaded GEMMs. Block sizes depend on the shape only, never on the thread count.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "tessera/ops/conv/conv_internal.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/matmul/gemm.h"

namespace tessera::ops::conv {
namespace {

// Outputs o in [*lo, *hi) read inputs 0 <= o*stride - pad + off < in.
void ValidRange(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t off, int64_t* lo, int64_t* hi) {
  const int64_t a = pad - off, b = in - 1 + pad - off;
  const int64_t l = a <= 0 ? 0 : (a + stride - 1) / stride;
  const int64_t h = b < 0 ? 0 : b / stride + 1;
  *lo = std::min(l, out);
  *hi = std::max(*lo, std::min(h, out));
}

// Runs f(t) for t in [0, tasks): one task per thread (single-threaded
// GEMMs, one parallel region) when there are at least as many tasks as
// threads, else serially (so the GEMMs inside thread themselves). Parallel
// regions are kept few: on a loaded machine a woken OpenMP worker can wait
// a scheduler tick per region.
// Problems under ~64k multiply-adds stay on the calling thread.
template <typename F>
void ForTasks(const ConvGeom& g, int64_t tasks, F&& f) {
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool parallel = threads > 1 && tasks >= threads && g.flops() > (1 << 17);
  kern::ParallelFor(tasks, parallel ? 1 : 0, 0, f);
}

// NCHW: cols[i, j] = x[c, h, w] for the rows i = (c*R + r)*S + s - row0 of
// [row0, row1) and the output positions pq0 + j, j < nb, of one image and
// group (x points at channel 0 of the group); rows of cols are ld apart.
void Im2colNchw(const ConvGeom& g, const float* x, int64_t pq0, int64_t nb, float* cols, int64_t row0,
                int64_t row1, int64_t ld) {
  for (int64_t row = row0; row < row1; ++row) {
    const int64_t c = row / (g.R * g.S), r = (row / g.S) % g.R, s = row % g.S;
    const float* xc = x + c * g.H * g.W;
    float* dst = cols + (row - row0) * ld;
    int64_t qlo, qhi;
    ValidRange(g.Q, g.W, g.sw, g.pw, s * g.dw, &qlo, &qhi);
    int64_t j = 0, p = pq0 / g.Q, q = pq0 % g.Q;
    while (j < nb) {
      const int64_t run = std::min(g.Q - q, nb - j), qend = q + run;
      const int64_t h = p * g.sh - g.ph + r * g.dh;
      if (h < 0 || h >= g.H) {
        std::memset(dst + j, 0, sizeof(float) * run);
      } else {
        // Output columns q .. qend go to dst[j ..]; [a, b) read the input.
        const int64_t a = std::clamp(qlo, q, qend), b = std::clamp(qhi, a, qend);
        float* d = dst + j;
        std::memset(d, 0, sizeof(float) * (a - q));
        if (b > a) {
          const float* xs = xc + h * g.W + a * g.sw - g.pw + s * g.dw;
          if (g.sw == 1) {
            std::memcpy(d + (a - q), xs, sizeof(float) * (b - a));
          } else {
            for (int64_t t = 0; t < b - a; ++t) d[a - q + t] = xs[t * g.sw];
          }
        }
        std::memset(d + (b - q), 0, sizeof(float) * (qend - b));
      }
      j += run;
      q = 0;
      ++p;
    }
  }
}

// NCHW col2im for channel c of one image and group: adds to gx[c] the dcols
// rows (c, r, s) (ld apart; column (p - p0)*Q + q) of output rows [p0, p1),
// in the fixed order (r, s, p, q); zeroes the plane first when `zero`.
void Col2imNchw(const ConvGeom& g, const float* dcols, int64_t ld, float* gx, int64_t c, int64_t p0, int64_t p1,
                bool zero) {
  float* gxc = gx + c * g.H * g.W;
  if (zero) std::memset(gxc, 0, sizeof(float) * g.H * g.W);
  for (int64_t r = 0; r < g.R; ++r) {
    for (int64_t s = 0; s < g.S; ++s) {
      const float* src = dcols + ((c * g.R + r) * g.S + s) * ld;
      int64_t qlo, qhi, plo, phi;
      ValidRange(g.Q, g.W, g.sw, g.pw, s * g.dw, &qlo, &qhi);
      ValidRange(g.P, g.H, g.sh, g.ph, r * g.dh, &plo, &phi);
      if (qhi <= qlo) continue;
      for (int64_t p = std::max(plo, p0); p < std::min(phi, p1); ++p) {
        float* __restrict row = gxc + (p * g.sh - g.ph + r * g.dh) * g.W + qlo * g.sw - g.pw + s * g.dw;
        const float* __restrict srow = src + (p - p0) * g.Q + qlo;
        if (g.sw == 1) {
          for (int64_t t = 0; t < qhi - qlo; ++t) row[t] += srow[t];
        } else {
          for (int64_t t = 0; t < qhi - qlo; ++t) row[t * g.sw] += srow[t];
        }
      }
    }
  }
}

// NHWC col2im of one image and group for channels [c0, c1): adds to gx the
// dcols rows of output rows [p0, p1) (row (p - p0)*Q + q, columns
// (r*S + s)*Cg + c), in the fixed order (p, q, r, s); zeroes the channels
// of the image first when `zero` (gx points at the image, dcols at row p0).
void Col2imNhwc(const ConvGeom& g, const float* dcols, float* gx, int64_t c0, int64_t c1, int64_t p0, int64_t p1,
                bool zero) {
  const int64_t crs = g.Cg * g.R * g.S, cn = c1 - c0;
  if (zero) {
    for (int64_t i = 0; i < g.H * g.W; ++i) std::memset(gx + i * g.C + c0, 0, sizeof(float) * cn);
  }
  for (int64_t p = p0; p < p1; ++p) {
    for (int64_t q = 0; q < g.Q; ++q) {
      const float* src = dcols + ((p - p0) * g.Q + q) * crs + c0;
      for (int64_t r = 0; r < g.R; ++r) {
        const int64_t h = p * g.sh - g.ph + r * g.dh;
        if (h < 0 || h >= g.H) continue;
        for (int64_t s = 0; s < g.S; ++s) {
          const int64_t w = q * g.sw - g.pw + s * g.dw;
          if (w < 0 || w >= g.W) continue;
          float* __restrict dst = gx + (h * g.W + w) * g.C + c0;
          const float* __restrict sv = src + (r * g.S + s) * g.Cg;
          for (int64_t c = 0; c < cn; ++c) dst[c] += sv[c];
        }
      }
    }
  }
}

// NHWC: cols[i, (r*S + s)*Cg + c] = x[n, h, w, grp*Cg + c] for rows
// m0 + i, i < mb (x points at channel 0 of the group).
void Im2colNhwcRows(const ConvGeom& g, const float* x, int64_t m0, int64_t i_begin, int64_t i_end, float* cols) {
  const int64_t rsc = g.R * g.S * g.Cg, pq = g.P * g.Q;
  // One group, no dilation: a filter row inside the image is one contiguous
  // run of S*C input values.
  const bool dense = g.G == 1 && g.dw == 1;
  for (int64_t i = i_begin; i < i_end; ++i) {
    const int64_t m = m0 + i, n = m / pq, p = (m % pq) / g.Q, q = m % g.Q;
    float* dst = cols + i * rsc;
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t h = p * g.sh - g.ph + r * g.dh, w0 = q * g.sw - g.pw;
      if (dense && h >= 0 && h < g.H && w0 >= 0 && w0 + g.S <= g.W) {
        std::memcpy(dst, x + ((n * g.H + h) * g.W + w0) * g.C, sizeof(float) * g.S * g.C);
        dst += g.S * g.Cg;
        continue;
      }
      for (int64_t s = 0; s < g.S; ++s, dst += g.Cg) {
        const int64_t w = q * g.sw - g.pw + s * g.dw;
        if (h < 0 || h >= g.H || w < 0 || w >= g.W) {
          std::memset(dst, 0, sizeof(float) * g.Cg);
        } else {
          std::memcpy(dst, x + ((n * g.H + h) * g.W + w) * g.C, sizeof(float) * g.Cg);
        }
      }
    }
  }
}

// w [K, Cg, R, S] -> w2 [K, R, S, Cg] (and back).
void RepackToRSC(const ConvGeom& g, const float* w, float* w2) {
  const int64_t rs = g.R * g.S;
  for (int64_t k = 0; k < g.K; ++k) {
    for (int64_t c = 0; c < g.Cg; ++c) {
      for (int64_t i = 0; i < rs; ++i) w2[(k * rs + i) * g.Cg + c] = w[(k * g.Cg + c) * rs + i];
    }
  }
}
void RepackFromRSC(const ConvGeom& g, const float* w2, float* w) {
  const int64_t rs = g.R * g.S;
  for (int64_t k = 0; k < g.K; ++k) {
    for (int64_t c = 0; c < g.Cg; ++c) {
      for (int64_t i = 0; i < rs; ++i) w[(k * g.Cg + c) * rs + i] = w2[(k * rs + i) * g.Cg + c];
    }
  }
}

// Columns (NCHW) or rows (NHWC) per block so that a block of cols holds
// about `floats` values: a multiple of 16, at least 16.
int64_t BlockExtent(int64_t width, int64_t floats, int64_t total) {
  int64_t b = std::max<int64_t>(16, floats / std::max<int64_t>(1, width) / 16 * 16);
  return std::min(b, total);
}

}  // namespace

// Output columns (NCHW) or rows (NHWC) per forward GEMM: enough that
// packing the weights once per block is cheap (>= 128), a block of cols of
// about 2 MiB at most, and `total` split into near-equal blocks.
int64_t ForwardBlock(int64_t crs, int64_t total = 0) {
  const int64_t most = std::clamp<int64_t>((1 << 19) / crs / 16 * 16, 128, 512);
  if (total <= most) return most;
  const int64_t blocks = (total + most - 1) / most;
  return ((total + blocks - 1) / blocks + 15) / 16 * 16;
}

void Im2colForward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  const int64_t crs = g.Cg * g.R * g.S, pq = g.P * g.Q, rs = g.R * g.S;
  if (g.nchw() && pq >= ForwardBlock(crs)) {
    // Blocks of output positions of one image: GEMM straight into y.
    const int64_t nb = ForwardBlock(crs, pq), blocks = (pq + nb - 1) / nb;
    ForTasks(g, g.N * g.G * blocks, [&](int64_t t) {
      const int64_t b = t % blocks, grp = (t / blocks) % g.G, n = t / blocks / g.G;
      const int64_t pq0 = b * nb, nbb = std::min(nb, pq - pq0);
      float* cols = ConvScratch(0, crs * nbb);
      const float* xg = x + (n * g.C + grp * g.Cg) * g.H * g.W;
      kern::ParallelFor(g.Cg, crs * nbb, kern::kParallelMemoryBound, [&](int64_t c) {
        Im2colNchw(g, xg, pq0, nbb, cols + c * rs * nbb, c * rs, (c + 1) * rs, nbb);
      });
      float* yg = y + (n * g.K + grp * g.Kg) * pq + pq0;
      GemmF32(false, false, g.Kg, nbb, crs, 1.0f, w + grp * g.Kg * crs, crs, cols, nbb, 0.0f, yg, pq);
      if (bias) {
        for (int64_t k = 0; k < g.Kg; ++k) {
          const float bk = bias[grp * g.Kg + k];
          for (int64_t j = 0; j < nbb; ++j) yg[k * pq + j] += bk;
        }
      }
    });
    return;
  }
  if (g.nchw()) {
    // Small images: several whole images per GEMM (columns (image, p, q)),
    // the result copied into y.
    const int64_t ipb = std::max<int64_t>(1, ForwardBlock(crs) / pq), blocks = (g.N + ipb - 1) / ipb;
    ForTasks(g, g.G * blocks, [&](int64_t t) {
      const int64_t grp = t / blocks, n0 = (t % blocks) * ipb, ni = std::min(ipb, g.N - n0), width = ni * pq;
      float* cols = ConvScratch(0, crs * width);
      float* out = ConvScratch(2, g.Kg * width);
      kern::ParallelFor(ni * g.Cg, crs * width, kern::kParallelMemoryBound, [&](int64_t u) {
        const int64_t i = u / g.Cg, c = u % g.Cg;
        Im2colNchw(g, x + ((n0 + i) * g.C + grp * g.Cg) * g.H * g.W, 0, pq, cols + c * rs * width + i * pq, c * rs,
                   (c + 1) * rs, width);
      });
      GemmF32(false, false, g.Kg, width, crs, 1.0f, w + grp * g.Kg * crs, crs, cols, width, 0.0f, out, width);
      for (int64_t i = 0; i < ni; ++i) {
        for (int64_t k = 0; k < g.Kg; ++k) {
          const float bk = bias ? bias[grp * g.Kg + k] : 0.0f;
          const float* src = out + k * width + i * pq;
          float* dst = y + ((n0 + i) * g.K + grp * g.Kg + k) * pq;
          for (int64_t j = 0; j < pq; ++j) dst[j] = src[j] + bk;
        }
      }
    });
    return;
  }
  const int64_t m = g.N * pq, mb = std::min(m, ForwardBlock(crs, m)), blocks = (m + mb - 1) / mb;
  float* w2 = ConvScratch(1, g.w_numel());
  RepackToRSC(g, w, w2);
  ForTasks(g, blocks, [&](int64_t b) {
    const int64_t m0 = b * mb, mbb = std::min(mb, m - m0);
    float* cols = ConvScratch(0, crs * mbb);
    for (int64_t grp = 0; grp < g.G; ++grp) {
      kern::ParallelFor(mbb, crs * mbb, kern::kParallelMemoryBound,
                        [&](int64_t i) { Im2colNhwcRows(g, x + grp * g.Cg, m0, i, i + 1, cols); });
      GemmF32(false, true, mbb, g.Kg, crs, 1.0f, cols, crs, w2 + grp * g.Kg * crs, crs, 0.0f,
              y + m0 * g.K + grp * g.Kg, g.K);
    }
    if (bias) {
      for (int64_t i = 0; i < mbb; ++i) {
        float* row = y + (m0 + i) * g.K;
        for (int64_t k = 0; k < g.K; ++k) row[k] += bias[k];
      }
    }
  });
}

// grad_x per block of whole images (several when images are small, so the
// weights are packed once per block), each in chunks of output rows when
// an image is large (dcols stays a few MiB): dcols = GEMM, then col2im.
void Im2colBackwardX(const ConvGeom& g, const float* gy, const float* w, float* gx) {
  const int64_t crs = g.Cg * g.R * g.S, pq = g.P * g.Q, hw = g.H * g.W, target = ForwardBlock(crs);
  const int64_t ipb = std::max<int64_t>(1, target / pq), blocks = (g.N + ipb - 1) / ipb;
  const int64_t rows = ipb > 1 ? g.P : std::clamp<int64_t>(target / g.Q, 1, g.P);  // output rows per chunk
  constexpr int64_t kChannelBlock = 64;
  const float* wt = w;
  if (!g.nchw()) {
    float* w2 = ConvScratch(1, g.w_numel());
    RepackToRSC(g, w, w2);
    wt = w2;
  }
  ForTasks(g, blocks, [&](int64_t b) {
    const int64_t n0 = b * ipb, ni = std::min(ipb, g.N - n0);
    const int64_t max_width = ni * rows * g.Q;
    float* dcols = ConvScratch(0, crs * max_width);
    float* gyb = g.nchw() && ni > 1 ? ConvScratch(2, g.Kg * max_width) : nullptr;
    for (int64_t grp = 0; grp < g.G; ++grp) {
      for (int64_t p0 = 0; p0 < g.P; p0 += rows) {
        const int64_t p1 = std::min(g.P, p0 + rows), width = ni * (p1 - p0) * g.Q;
        if (g.nchw()) {
          const float* a = gy + (n0 * g.K + grp * g.Kg) * pq + p0 * g.Q;
          if (ni > 1) {  // gather grad_y[n0 .. n0 + ni, group] into [Kg, ni * PQ]
            for (int64_t k = 0; k < g.Kg; ++k) {
              for (int64_t i = 0; i < ni; ++i) {
                std::memcpy(gyb + k * width + i * pq, gy + ((n0 + i) * g.K + grp * g.Kg + k) * pq,
                            sizeof(float) * pq);
              }
            }
            a = gyb;
          }
          GemmF32(true, false, crs, width, g.Kg, 1.0f, wt + grp * g.Kg * crs, crs, a, ni > 1 ? width : pq, 0.0f,
                  dcols, width);
          kern::ParallelFor(ni * g.Cg, crs * width, kern::kParallelMemoryBound, [&](int64_t u) {
            const int64_t i = u / g.Cg, c = u % g.Cg;
            Col2imNchw(g, dcols + i * pq, width, gx + ((n0 + i) * g.C + grp * g.Cg) * hw, c, p0, p1, p0 == 0);
          });
        } else {
          // Rows of grad_y (n, p, q) are contiguous over the block's images.
          const int64_t m0 = ni > 1 ? n0 * pq : n0 * pq + p0 * g.Q;
          GemmF32(false, false, width, crs, g.Kg, 1.0f, gy + m0 * g.K + grp * g.Kg, g.K, wt + grp * g.Kg * crs, crs,
                  0.0f, dcols, crs);
          const int64_t cblocks = (g.Cg + kChannelBlock - 1) / kChannelBlock;
          kern::ParallelFor(ni * cblocks, crs * width, kern::kParallelMemoryBound, [&](int64_t u) {
            const int64_t i = u / cblocks, c0 = (u % cblocks) * kChannelBlock;
            const int64_t c1 = std::min(g.Cg, c0 + kChannelBlock);
            Col2imNhwc(g, dcols + i * pq * crs, gx + (n0 + i) * hw * g.C + grp * g.Cg, c0, c1, p0, p1, p0 == 0);
          });
        }
      }
    }
  });
}

// grad_w in independent column blocks of the [Kg, Cg*R*S] (NCHW) or
// [Kg, R*S*Cg] (NHWC) matrix of each group: a task builds only its block of
// columns, for every image / row chunk in order, and accumulates its GEMMs.
// One parallel region in all; no im2col work is repeated.
void Im2colBackwardW(const ConvGeom& g, const float* gy, const float* x, float* gw) {
  const int64_t crs = g.Cg * g.R * g.S, pq = g.P * g.Q;
  if (g.nchw()) {
    // Blocks of a multiple of 32 rows of cols (whole 32-wide column tiles of
    // the GEMM kernel), about 8 blocks per group.
    const int64_t rb = std::clamp<int64_t>((crs / 8 + 31) / 32 * 32, 32, 128), blocks = (crs + rb - 1) / rb;
    const int64_t chunk = BlockExtent(rb, 1 << 16, pq);
    ForTasks(g, g.G * blocks, [&](int64_t t) {
      const int64_t grp = t / blocks, row0 = (t % blocks) * rb, row1 = std::min(crs, row0 + rb);
      float* cols = ConvScratch(0, (row1 - row0) * chunk);
      for (int64_t n = 0; n < g.N; ++n) {
        const float* xg = x + (n * g.C + grp * g.Cg) * g.H * g.W;
        for (int64_t pq0 = 0; pq0 < pq; pq0 += chunk) {
          const int64_t nb = std::min(chunk, pq - pq0);
          Im2colNchw(g, xg, pq0, nb, cols, row0, row1, nb);
          const float beta = (n == 0 && pq0 == 0) ? 0.0f : 1.0f;
          GemmF32(false, true, g.Kg, row1 - row0, nb, 1.0f, gy + (n * g.K + grp * g.Kg) * pq + pq0, pq, cols, nb,
                  beta, gw + grp * g.Kg * crs + row0, crs);
        }
      }
    });
    return;
  }
  // NHWC: a task owns the columns (r, s0 .. s1, c0 .. c1) of one group's
  // [Kg, R*S*Cg] matrix: one s and a block of channels, or all of S and
  // all channels (contiguous columns either way).
  const int64_t m = g.N * pq;
  if (crs * m <= (int64_t{1} << 22)) {
    // Small enough for all of cols (<= 16 MiB): one im2col and one
    // multi-threaded GEMM per group, two parallel regions each.
    float* gw2 = ConvScratch(1, g.w_numel());
    float* cols = ConvScratch(0, crs * m);
    for (int64_t grp = 0; grp < g.G; ++grp) {
      kern::ParallelFor((m + 63) / 64, crs * m, kern::kParallelMemoryBound, [&](int64_t b) {
        Im2colNhwcRows(g, x + grp * g.Cg, 0, b * 64, std::min(m, b * 64 + 64), cols);
      });
      GemmF32(true, false, g.Kg, crs, m, 1.0f, gy + grp * g.Kg, g.K, cols, crs, 0.0f, gw2 + grp * g.Kg * crs, crs);
    }
    RepackFromRSC(g, gw2, gw);
    return;
  }
  // Blocks as wide as possible (every task packs its own copy of grad_y's
  // chunk) while giving at least 8 tasks, unless narrowing further would go
  // below 32 columns: whole filter rows, then one s with all channels, then
  // 128, 64, 32 channels. A function of the shape only.
  bool whole_rows = true;
  int64_t cb = g.Cg;
  {
    const int64_t options[] = {0, g.Cg, 128, 64, 32};  // 0: whole rows
    int64_t chosen = 0;
    for (size_t i = 0; i < std::size(options); ++i) {
      const int64_t c = options[i];
      if (i > 1 && c >= g.Cg) continue;
      const int64_t rows_per_task = std::clamp<int64_t>((64 + g.S * g.Cg - 1) / (g.S * g.Cg), 1, g.R);
      const int64_t tasks = c == 0 ? g.G * ((g.R + rows_per_task - 1) / rows_per_task)
                                   : g.G * g.R * g.S * ((g.Cg + c - 1) / c);
      chosen = c;
      if (tasks >= 8) break;
      int64_t next = -1;  // width of the next narrower option
      for (size_t j = i + 1; j < std::size(options) && next < 0; ++j) {
        if (j > 1 && options[j] >= g.Cg) continue;
        next = options[j];
      }
      if (next < 32) break;
    }
    whole_rows = chosen == 0;
    cb = whole_rows ? g.Cg : chosen;
  }
  // Whole filter rows: several rows per task when a row is narrow (conv1:
  // S*Cg = 21), so the GEMM gets >= 64 columns.
  const int64_t rpt = whole_rows ? std::clamp<int64_t>((64 + g.S * g.Cg - 1) / (g.S * g.Cg), 1, g.R) : 1;
  const int64_t rblocks = (g.R + rpt - 1) / rpt;
  const int64_t cblocks = (g.Cg + cb - 1) / cb, per_r = whole_rows ? 1 : g.S * cblocks;
  const int64_t width = whole_rows ? rpt * g.S * g.Cg : cb, chunk = BlockExtent(width, 1 << 16, m);
  float* gw2 = ConvScratch(1, g.w_numel());
  ForTasks(g, g.G * rblocks * per_r, [&](int64_t t) {
    const int64_t grp = t / (rblocks * per_r), r0 = (t / per_r) % rblocks * rpt, u = t % per_r;
    const int64_t r1 = std::min(g.R, r0 + rpt);
    const int64_t s0 = whole_rows ? 0 : u / cblocks, s1 = whole_rows ? g.S : s0 + 1;
    const int64_t c0 = whole_rows ? 0 : (u % cblocks) * cb, cn = std::min(cb, g.Cg - c0);
    const int64_t cols_n = (r1 - r0) * (s1 - s0) * cn;
    float* cols = ConvScratch(0, cols_n * chunk);
    for (int64_t m0 = 0; m0 < m; m0 += chunk) {
      const int64_t mb = std::min(chunk, m - m0);
      for (int64_t j = 0; j < mb; ++j) {
        const int64_t mm = m0 + j, n = mm / pq, p = (mm % pq) / g.Q, q = mm % g.Q;
        const int64_t w0 = q * g.sw - g.pw;
        float* dst = cols + j * cols_n;
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t h = p * g.sh - g.ph + r * g.dh;
          if (whole_rows && g.G == 1 && g.dw == 1 && h >= 0 && h < g.H && w0 >= 0 && w0 + g.S <= g.W) {
            std::memcpy(dst, x + ((n * g.H + h) * g.W + w0) * g.C, sizeof(float) * g.S * g.C);  // one run
            dst += g.S * g.C;
            continue;
          }
          for (int64_t s = s0; s < s1; ++s, dst += cn) {
            const int64_t w = q * g.sw - g.pw + s * g.dw;
            if (h < 0 || h >= g.H || w < 0 || w >= g.W) {
              std::memset(dst, 0, sizeof(float) * cn);
            } else {
              std::memcpy(dst, x + ((n * g.H + h) * g.W + w) * g.C + grp * g.Cg + c0, sizeof(float) * cn);
            }
          }
        }
      }
      GemmF32(true, false, g.Kg, cols_n, mb, 1.0f, gy + m0 * g.K + grp * g.Kg, g.K, cols, cols_n,
              m0 == 0 ? 0.0f : 1.0f, gw2 + grp * g.Kg * crs + (r0 * g.S + s0) * g.Cg + c0, crs);
    }
  });
  RepackFromRSC(g, gw2, gw);
}

}  // namespace tessera::ops::conv
