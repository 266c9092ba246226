#include "tessera/ops/conv/winograd_transforms.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/ops/elementwise/kernel_util.h"

// Every transform is separable (X^T d X = rows then columns), so it runs as
// 1-D transforms over "lanes": out[k][l] = sum_i X[k][i] * in[i][l] for l
// in [0, n), each in[i] / out[k] a pointer to n contiguous floats. The lanes
// are channels (NHWC) or the tiles of a block (NCHW, see below). These loops
// auto-vectorize (ivdep: the pointers never alias). GCC contracts a*b+c into FMAs in the vector body and the
// scalar remainder alike, so a lane's value does not depend on its position
// in a vector (nor, therefore, on blocking or threads).

// The short row copies below must stay inline loops: as memcpy / memset
// calls they cost more than the copies (measured: ~15% of an NCHW layer).
#pragma GCC optimize("no-tree-loop-distribute-patterns")

namespace tessera::ops::winograd::detail {
namespace {

constexpr int64_t kLaneChunk = 64;  // channel lanes per pass (NHWC)
alignas(64) const float kZeros[kLaneChunk] = {};

// ---- 1-D kernels ----------------------------------------------------------
// B^T (input) and A^T (output) of Lavin & Gray 2016 (G: winograd.cc).

template <int M>
TESSERA_ALWAYS_INLINE void InRows(const float* const* in, float* const* out, int64_t n) {
  if constexpr (M == 2) {
    const float *d0 = in[0], *d1 = in[1], *d2 = in[2], *d3 = in[3];
    float *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3];
#pragma GCC ivdep
    for (int64_t l = 0; l < n; ++l) {
      o0[l] = d0[l] - d2[l];
      o1[l] = d1[l] + d2[l];
      o2[l] = d2[l] - d1[l];
      o3[l] = d1[l] - d3[l];
    }
  } else {
    const float *d0 = in[0], *d1 = in[1], *d2 = in[2], *d3 = in[3], *d4 = in[4], *d5 = in[5];
    float *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3], *o4 = out[4], *o5 = out[5];
#pragma GCC ivdep
    for (int64_t l = 0; l < n; ++l) {
      const float a = d4[l] - 4.0f * d2[l];  // shared terms (Lavin's wincnn form)
      const float b = d3[l] - 4.0f * d1[l];
      const float c = d4[l] - d2[l];
      const float e = 2.0f * (d3[l] - d1[l]);
      o0[l] = 4.0f * d0[l] - 5.0f * d2[l] + d4[l];
      o1[l] = a + b;
      o2[l] = a - b;
      o3[l] = c + e;
      o4[l] = c - e;
      o5[l] = 4.0f * d1[l] - 5.0f * d3[l] + d5[l];
    }
  }
}

// out[q][l] = sum_i A^T[q][i] in[i][l] + bias[l] (bias: n lanes).
template <int M>
TESSERA_ALWAYS_INLINE void OutRows(const float* const* in, float* const* out, const float* bias, int64_t n) {
  if constexpr (M == 2) {
    const float *d0 = in[0], *d1 = in[1], *d2 = in[2], *d3 = in[3];
    float *o0 = out[0], *o1 = out[1];
#pragma GCC ivdep
    for (int64_t l = 0; l < n; ++l) {
      o0[l] = d0[l] + d1[l] + d2[l] + bias[l];
      o1[l] = d1[l] - d2[l] - d3[l] + bias[l];
    }
  } else {
    const float *d0 = in[0], *d1 = in[1], *d2 = in[2], *d3 = in[3], *d4 = in[4], *d5 = in[5];
    float *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3];
#pragma GCC ivdep
    for (int64_t l = 0; l < n; ++l) {
      const float sp = d1[l] + d2[l], sm = d1[l] - d2[l];
      const float tp = d3[l] + d4[l], tm = d3[l] - d4[l];
      o0[l] = d0[l] + sp + tp + bias[l];
      o1[l] = sm + 2.0f * tm + bias[l];
      o2[l] = sp + 4.0f * tp + bias[l];
      o3[l] = sm + 8.0f * tm + d5[l] + bias[l];
    }
  }
}

template <int M>
TESSERA_ALWAYS_INLINE void OutRows(const float* const* in, float* const* out, int64_t n) {
  if constexpr (M == 2) {
    const float *d0 = in[0], *d1 = in[1], *d2 = in[2], *d3 = in[3];
    float *o0 = out[0], *o1 = out[1];
#pragma GCC ivdep
    for (int64_t l = 0; l < n; ++l) {
      o0[l] = d0[l] + d1[l] + d2[l];
      o1[l] = d1[l] - d2[l] - d3[l];
    }
  } else {
    const float *d0 = in[0], *d1 = in[1], *d2 = in[2], *d3 = in[3], *d4 = in[4], *d5 = in[5];
    float *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3];
#pragma GCC ivdep
    for (int64_t l = 0; l < n; ++l) {
      const float sp = d1[l] + d2[l], sm = d1[l] - d2[l];
      const float tp = d3[l] + d4[l], tm = d3[l] - d4[l];
      o0[l] = d0[l] + sp + tp;
      o1[l] = sm + 2.0f * tm;
      o2[l] = sp + 4.0f * tp;
      o3[l] = sm + 8.0f * tm + d5[l];
    }
  }
}

// ---- NHWC: lanes are channels ---------------------------------------------

// One tile (n, h0, w0 = top-left input pixel, may be negative) into
// v[pos * pos_stride + c].
template <int M>
TESSERA_ALWAYS_INLINE void InputTileNhwc(const float* xn, int64_t H, int64_t W, int64_t C, int64_t h0, int64_t w0,
                                         float* v, int64_t pos_stride, float* tmp) {
  constexpr int A = M + 2;
  for (int64_t c0 = 0; c0 < C; c0 += kLaneChunk) {
    const int64_t n = std::min(kLaneChunk, C - c0);
    const float* in[A];
    float* out[A];
    for (int s = 0; s < A; ++s) {  // down each column
      const int64_t w = w0 + s;
      for (int r = 0; r < A; ++r) {
        const int64_t h = h0 + r;
        in[r] = (h >= 0 && h < H && w >= 0 && w < W) ? xn + (h * W + w) * C + c0 : kZeros;
        out[r] = tmp + (r * A + s) * kLaneChunk;
      }
      InRows<M>(in, out, n);
    }
    for (int r = 0; r < A; ++r) {  // along each row
      for (int s = 0; s < A; ++s) {
        in[s] = tmp + (r * A + s) * kLaneChunk;
        out[s] = v + (r * A + s) * pos_stride + c0;
      }
      InRows<M>(in, out, n);
    }
  }
}

template <int M>
TESSERA_ALWAYS_INLINE void OutputTileNhwc(const float* mm, int64_t pos_stride, int64_t P, int64_t Q, int64_t K,
                                          int64_t h0, int64_t w0, const float* bias, float* yn, float* tmp) {
  constexpr int A = M + 2;
  float* dump = tmp + A * A * kLaneChunk;
  for (int64_t k0 = 0; k0 < K; k0 += kLaneChunk) {
    const int64_t n = std::min(kLaneChunk, K - k0);
    const float* in[A];
    float* out[A];
    for (int j = 0; j < A; ++j) {  // down each column: A^T M
      for (int i = 0; i < A; ++i) in[i] = mm + (i * A + j) * pos_stride + k0;
      for (int r = 0; r < M; ++r) out[r] = tmp + (r * A + j) * kLaneChunk;
      OutRows<M>(in, out, n);
    }
    for (int r = 0; r < M && h0 + r < P; ++r) {  // along each row: (A^T M) A + bias
      for (int j = 0; j < A; ++j) in[j] = tmp + (r * A + j) * kLaneChunk;
      for (int q = 0; q < M; ++q) out[q] = w0 + q < Q ? yn + ((h0 + r) * Q + w0 + q) * K + k0 : dump;
      if (bias) {
        OutRows<M>(in, out, bias + k0, n);
      } else {
        OutRows<M>(in, out, n);
      }
    }
  }
}

// ---- NCHW: lanes are the tiles of a block -----------------------------------
// A block is cut into segments (runs of tiles of one tile row). For each
// channel and patch row r, every segment's input row is copied with its zero
// padding into a row buffer and deinterleaved into m phases (phase q holds
// element q of every tile's patch row; elements m, m+1 are phases 0, 1 of the
// next tile), giving a lane arrays over all tiles of the block; then both
// passes run over all nb tiles at once. The output is interleaved back the
// same way. (The deinterleave / interleave loops vectorize with permutes.)

struct Segment {
  int64_t n, tr, tc0, nt, col0;  // image, tile row, first tile column, tiles, first block column
};

int64_t Segments(const Geometry& g, int64_t g0, int64_t g1, Segment* seg) {
  int64_t count = 0;
  for (int64_t t = g0; t < g1;) {
    const int64_t n = t / (g.th * g.tw), tr = t / g.tw % g.th, tc = t % g.tw;
    const int64_t nt = std::min(g1 - t, g.tw - tc);
    seg[count++] = Segment{n, tr, tc, nt, t - g0};
    t += nt;
  }
  return count;
}

// Short copies inline (libc calls cost more than the copy at these sizes).
TESSERA_ALWAYS_INLINE void Copy(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
TESSERA_ALWAYS_INLINE void Fill(float* dst, float value, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = value;
}

int64_t LaneStride(int64_t nb) { return (nb + 1 + 15) / 16 * 16; }  // room for one extra lane

template <int M>
TESSERA_ALWAYS_INLINE void InputBlockNchw(const Geometry& g, const float* x, const Segment* segs, int64_t nseg,
                                          int64_t nb, float* v, int64_t ld, int64_t col0, float* scratch) {
  constexpr int A = M + 2;
  const int64_t s = LaneStride(nb);
  float* ph = scratch;                // A lane arrays: one patch row of every tile
  float* tmp = ph + A * s;            // A * A lane arrays: rows transformed
  float* row = tmp + A * A * s;       // one padded input row of a segment
  const int64_t plane = g.H * g.W;
  const float* in[A];
  float* out[A];
  for (int64_t c = 0; c < g.C; ++c) {
    if (c + 1 < g.C) {  // the next channel's rows: gathered row by row, the hardware prefetchers miss them
      for (int64_t si = 0; si < nseg; ++si) {
        const Segment& sg = segs[si];
        const int64_t h0 = std::max<int64_t>(sg.tr * M - g.pad_h, 0), h1 = std::min<int64_t>(h0 + A, g.H);
        const float* p = x + ((sg.n * g.C + c + 1) * plane + h0 * g.W);
        for (int64_t e = 0; e < (h1 - h0) * g.W; e += 16) __builtin_prefetch(p + e);
      }
    }
    for (int r = 0; r < A; ++r) {
      for (int64_t si = 0; si < nseg; ++si) {
        const Segment& sg = segs[si];
        const int64_t h = sg.tr * M - g.pad_h + r, nt = sg.nt;
        float* p0 = ph + sg.col0;
        if (h < 0 || h >= g.H) {
          for (int i = 0; i < A; ++i) Fill(p0 + i * s, 0.0f, nt);
          continue;
        }
        const int64_t wbeg = sg.tc0 * M - g.pad_w, len = M * nt + 2;
        const int64_t lo = std::clamp<int64_t>(-wbeg, 0, len), hi = std::clamp<int64_t>(g.W - wbeg, lo, len);
        const float* src = x + ((sg.n * g.C + c) * plane + h * g.W + wbeg);
        if (lo != 0 || hi != len) {  // touches the border: padded copy
          Fill(row, 0.0f, lo);
          Copy(row + lo, src + lo, hi - lo);
          Fill(row + hi, 0.0f, len - hi);
          src = row;
        }
        float* __restrict q0 = p0;
        float* __restrict q1 = p0 + s;
        if constexpr (M == 4) {
          float* __restrict q2 = p0 + 2 * s;
          float* __restrict q3 = p0 + 3 * s;
          for (int64_t t = 0; t < nt; ++t) {
            q0[t] = src[4 * t], q1[t] = src[4 * t + 1], q2[t] = src[4 * t + 2], q3[t] = src[4 * t + 3];
          }
        } else {
          for (int64_t t = 0; t < nt; ++t) q0[t] = src[2 * t], q1[t] = src[2 * t + 1];
        }
        q0[nt] = src[M * nt], q1[nt] = src[M * nt + 1];
        Copy(p0 + M * s, q0 + 1, nt);
        Copy(p0 + (M + 1) * s, q1 + 1, nt);
      }
      for (int i = 0; i < A; ++i) {
        in[i] = ph + i * s;
        out[i] = tmp + (r * A + i) * s;
      }
      InRows<M>(in, out, nb);
    }
    for (int j = 0; j < A; ++j) {
      for (int r = 0; r < A; ++r) {
        in[r] = tmp + (r * A + j) * s;
        out[r] = v + (r * A + j) * VPosStride(g, ld) + c * ld + col0;
      }
      InRows<M>(in, out, nb);
    }
  }
}

template <int M>
TESSERA_ALWAYS_INLINE void OutputBlockNchw(const Geometry& g, const float* mm, int64_t ld, int64_t col0,
                                           const Segment* segs, int64_t nseg, int64_t nb, const float* bias,
                                           float* y, float* scratch) {
  constexpr int A = M + 2;
  const int64_t s = LaneStride(nb);
  float* tmp = scratch;          // M * A lane arrays: columns transformed
  float* res = tmp + M * A * s;  // M lane arrays: one output row of every tile
  float* row = res + M * s;      // one output row of a segment
  const int64_t plane = g.P * g.Q;
  const float* in[A];
  float* out[A];
  for (int64_t k = 0; k < g.K; ++k) {
    if (k + 1 < g.K) {  // the next channel's output rows (written row by row: prefetch for writing)
      for (int64_t si = 0; si < nseg; ++si) {
        const Segment& sg = segs[si];
        const int64_t h0 = sg.tr * M, h1 = std::min<int64_t>(h0 + M, g.P);
        float* p = y + ((sg.n * g.K + k + 1) * plane + h0 * g.Q);
        for (int64_t e = 0; e < (h1 - h0) * g.Q; e += 16) __builtin_prefetch(p + e, 1);
      }
    }
    for (int j = 0; j < A; ++j) {
      for (int i = 0; i < A; ++i) in[i] = mm + (i * A + j) * MPosStride(g, ld) + k * ld + col0;
      for (int r = 0; r < M; ++r) out[r] = tmp + (r * A + j) * s;
      OutRows<M>(in, out, nb);
    }
    const float b = bias ? bias[k] : 0.0f;
    for (int r = 0; r < M; ++r) {
      for (int j = 0; j < A; ++j) in[j] = tmp + (r * A + j) * s;
      for (int q = 0; q < M; ++q) out[q] = res + q * s;
      OutRows<M>(in, out, nb);
      for (int64_t si = 0; si < nseg; ++si) {
        const Segment& sg = segs[si];
        const int64_t h = sg.tr * M + r, nt = sg.nt;
        if (h >= g.P) continue;
        const int64_t w0 = sg.tc0 * M, valid = std::min(M * nt, g.Q - w0);
        float* dst = y + ((sg.n * g.K + k) * plane + h * g.Q + w0);
        float* __restrict o = valid == M * nt ? dst : row;
        const float* __restrict q0 = res + sg.col0;
        const float* __restrict q1 = q0 + s;
        if constexpr (M == 4) {
          const float* __restrict q2 = q0 + 2 * s;
          const float* __restrict q3 = q0 + 3 * s;
          for (int64_t t = 0; t < nt; ++t) {
            o[4 * t] = q0[t] + b, o[4 * t + 1] = q1[t] + b, o[4 * t + 2] = q2[t] + b, o[4 * t + 3] = q3[t] + b;
          }
        } else {
          for (int64_t t = 0; t < nt; ++t) o[2 * t] = q0[t] + b, o[2 * t + 1] = q1[t] + b;
        }
        if (o == row) Copy(dst, row, valid);
      }
    }
  }
}

// Multiversioned entry points (non-template: one clone pair each).
TESSERA_MULTIVERSION void InputNhwc2(const Geometry& g, const float* x, int64_t g0, int64_t g1, int64_t col0,
                                     float* v, int64_t ld, float* scratch) {
  for (int64_t t = g0; t < g1; ++t) {
    const int64_t n = t / (g.th * g.tw), tr = t / g.tw % g.th, tc = t % g.tw;
    InputTileNhwc<2>(x + n * g.H * g.W * g.C, g.H, g.W, g.C, tr * 2 - g.pad_h, tc * 2 - g.pad_w,
                     v + (col0 + t - g0) * g.C, VPosStride(g, ld), scratch);
  }
}
TESSERA_MULTIVERSION void InputNhwc4(const Geometry& g, const float* x, int64_t g0, int64_t g1, int64_t col0,
                                     float* v, int64_t ld, float* scratch) {
  for (int64_t t = g0; t < g1; ++t) {
    const int64_t n = t / (g.th * g.tw), tr = t / g.tw % g.th, tc = t % g.tw;
    InputTileNhwc<4>(x + n * g.H * g.W * g.C, g.H, g.W, g.C, tr * 4 - g.pad_h, tc * 4 - g.pad_w,
                     v + (col0 + t - g0) * g.C, VPosStride(g, ld), scratch);
  }
}
TESSERA_MULTIVERSION void OutputNhwc2(const Geometry& g, const float* mm, int64_t ld, int64_t g0, int64_t g1,
                                      int64_t col0, const float* bias, float* y, float* scratch) {
  for (int64_t t = g0; t < g1; ++t) {
    const int64_t n = t / (g.th * g.tw), tr = t / g.tw % g.th, tc = t % g.tw;
    OutputTileNhwc<2>(mm + (col0 + t - g0) * g.K, MPosStride(g, ld), g.P, g.Q, g.K, tr * 2, tc * 2, bias,
                      y + n * g.P * g.Q * g.K, scratch);
  }
}
TESSERA_MULTIVERSION void OutputNhwc4(const Geometry& g, const float* mm, int64_t ld, int64_t g0, int64_t g1,
                                      int64_t col0, const float* bias, float* y, float* scratch) {
  for (int64_t t = g0; t < g1; ++t) {
    const int64_t n = t / (g.th * g.tw), tr = t / g.tw % g.th, tc = t % g.tw;
    OutputTileNhwc<4>(mm + (col0 + t - g0) * g.K, MPosStride(g, ld), g.P, g.Q, g.K, tr * 4, tc * 4, bias,
                      y + n * g.P * g.Q * g.K, scratch);
  }
}
TESSERA_MULTIVERSION void InputNchw2(const Geometry& g, const float* x, const Segment* segs, int64_t nseg, int64_t nb,
                                     float* v, int64_t ld, int64_t col0, float* scratch) {
  InputBlockNchw<2>(g, x, segs, nseg, nb, v, ld, col0, scratch);
}
TESSERA_MULTIVERSION void InputNchw4(const Geometry& g, const float* x, const Segment* segs, int64_t nseg, int64_t nb,
                                     float* v, int64_t ld, int64_t col0, float* scratch) {
  InputBlockNchw<4>(g, x, segs, nseg, nb, v, ld, col0, scratch);
}
TESSERA_MULTIVERSION void OutputNchw2(const Geometry& g, const float* mm, int64_t ld, int64_t col0, const Segment* segs,
                                      int64_t nseg, int64_t nb, const float* bias, float* y, float* scratch) {
  OutputBlockNchw<2>(g, mm, ld, col0, segs, nseg, nb, bias, y, scratch);
}
TESSERA_MULTIVERSION void OutputNchw4(const Geometry& g, const float* mm, int64_t ld, int64_t col0, const Segment* segs,
                                      int64_t nseg, int64_t nb, const float* bias, float* y, float* scratch) {
  OutputBlockNchw<4>(g, mm, ld, col0, segs, nseg, nb, bias, y, scratch);
}
Segment* SegmentBuffer(int64_t n) {
  thread_local std::vector<Segment> segs;
  if (static_cast<int64_t>(segs.size()) < n) segs.resize(static_cast<size_t>(n));
  return segs.data();
}

}  // namespace

int64_t TransformScratchFloats(const Geometry& g, int64_t max_tiles) {
  const int64_t a = g.m + 2;
  const int64_t tiles_tmp = (a + a * a) * LaneStride(max_tiles) + g.m * (max_tiles + 1) + 16;
  const int64_t lanes_tmp = (a * a + 1) * kLaneChunk;
  return std::max(tiles_tmp, lanes_tmp) + 64;
}

void InputTransform(const Geometry& g, ImageLayout layout, const float* x, int64_t g0, int64_t g1, int64_t col0,
                    float* v, int64_t ld, float* scratch) {
  if (layout == ImageLayout::kNHWC) {
    (g.m == 2 ? InputNhwc2 : InputNhwc4)(g, x, g0, g1, col0, v, ld, scratch);
    return;
  }
  Segment* segs = SegmentBuffer(g1 - g0);
  const int64_t nseg = Segments(g, g0, g1, segs);
  (g.m == 2 ? InputNchw2 : InputNchw4)(g, x, segs, nseg, g1 - g0, v, ld, col0, scratch);
}

void OutputTransform(const Geometry& g, ImageLayout layout, const float* mm, int64_t ld, int64_t g0, int64_t g1,
                     int64_t col0, const float* bias, float* y, float* scratch) {
  if (layout == ImageLayout::kNHWC) {
    (g.m == 2 ? OutputNhwc2 : OutputNhwc4)(g, mm, ld, g0, g1, col0, bias, y, scratch);
    return;
  }
  Segment* segs = SegmentBuffer(g1 - g0);
  const int64_t nseg = Segments(g, g0, g1, segs);
  (g.m == 2 ? OutputNchw2 : OutputNchw4)(g, mm, ld, col0, segs, nseg, g1 - g0, bias, y, scratch);
}

}  // namespace tessera::ops::winograd::detail
