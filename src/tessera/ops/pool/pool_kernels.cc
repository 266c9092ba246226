// Optimized pooling kernels. NCHW: one task per (n, c) plane; max pooling
// and average pooling reduce each window's rows first (vectorized along W),
// then its columns; the backward uses scalar window loops. NHWC: the innermost loop runs along C in chunks of kChannelBlock
// channels (auto-vectorized, TESSERA_MULTIVERSION); forward tasks are
// output rows (n, oh), backward tasks are (n, channel block) so that the
// scatter into overlapping windows never races. Every output element is
// computed by one task in a fixed order, so results do not depend on the
// thread count. Max pooling keeps PyTorch's rule: the first maximum of the
// window (row-major) wins, a NaN wins over numbers.
#include <algorithm>
#include <atomic>
#include <limits>
#include <vector>

#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/pool/pool_kernels.h"

namespace tessera::ops::kern {
namespace {

using pool_internal::Window;
using pool_internal::WindowAt;

constexpr int64_t kChannelBlock = 64;

int64_t ChannelBlocks(int64_t C) { return (C + kChannelBlock - 1) / kChannelBlock; }

// ---- NCHW: one plane per call -------------------------------------------

// Scalar max over windows of output row oh (PyTorch's scan: row-major,
// first maximum wins, a NaN replaces anything).
void MaxRowScalar(const PoolGeom& g, const float* __restrict x, int64_t oh, float* __restrict y,
                  int64_t* __restrict idx) {
  for (int64_t ow = 0; ow < g.OW; ++ow) {
    const Window win = WindowAt(g, oh, ow);
    float best = -std::numeric_limits<float>::infinity();
    int64_t arg = win.h0 * g.W + win.w0;
    for (int64_t h = win.h0; h < win.h1; ++h) {
      const float* row = x + h * g.W;
      for (int64_t w = win.w0; w < win.w1; ++w) {
        const float v = row[w];
        if (v > best || v != v) {
          best = v;
          arg = h * g.W + w;
        }
      }
    }
    y[ow] = best;
    idx[ow] = arg;
  }
}

// One plane, two stages per output row: (1) the maximum of each input column
// over the window's rows (vectorized along W; first row wins ties), (2) the
// maximum over the window's columns of those, ties going to the smaller flat
// index h*W + w, i.e. the first in row-major order, as the scalar scan. Rows
// holding a NaN are redone by the scalar scan (which NaN wins differs).
TESSERA_MULTIVERSION void MaxPlane(const PoolGeom& g, const float* __restrict x, float* __restrict y,
                                   int64_t* __restrict idx, float* __restrict colmax, int32_t* __restrict colarg) {
  const int64_t W = g.W;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const Window rows = WindowAt(g, oh, 0);
    int nan_seen = 0;
    for (int64_t w = 0; w < W; ++w) {
      colmax[w] = -std::numeric_limits<float>::infinity();
      colarg[w] = static_cast<int32_t>(rows.h0);
    }
    for (int64_t h = rows.h0; h < rows.h1; ++h) {
      const float* row = x + h * W;
      for (int64_t w = 0; w < W; ++w) {
        const float v = row[w];
        const bool take = v > colmax[w];
        nan_seen |= v != v;
        colmax[w] = take ? v : colmax[w];
        colarg[w] = take ? static_cast<int32_t>(h) : colarg[w];
      }
    }
    if (nan_seen) {
      MaxRowScalar(g, x, oh, y + oh * g.OW, idx + oh * g.OW);
      continue;
    }
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const Window win = WindowAt(g, oh, ow);
      float best = colmax[win.w0];
      int64_t arg = colarg[win.w0] * W + win.w0;
      for (int64_t w = win.w0 + 1; w < win.w1; ++w) {
        const float v = colmax[w];
        const int64_t k = colarg[w] * W + w;
        if (v > best || (v == best && k < arg)) {
          best = v;
          arg = k;
        }
      }
      y[oh * g.OW + ow] = best;
      idx[oh * g.OW + ow] = arg;
    }
  }
}

// Two stages per output row, as MaxPlane: column sums over the window's rows
// (vectorized along W), then sums of those over the window's columns.
TESSERA_MULTIVERSION void AvgPlane(const PoolGeom& g, const float* __restrict x, float* __restrict y,
                                   float* __restrict colsum) {
  const int64_t W = g.W;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const Window rows = WindowAt(g, oh, 0);
    for (int64_t w = 0; w < W; ++w) colsum[w] = 0.0f;
    for (int64_t h = rows.h0; h < rows.h1; ++h) {
      const float* row = x + h * W;
      for (int64_t w = 0; w < W; ++w) colsum[w] += row[w];
    }
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const Window win = WindowAt(g, oh, ow);
      float sum = 0.0f;
      for (int64_t w = win.w0; w < win.w1; ++w) sum += colsum[w];
      y[oh * g.OW + ow] = sum / static_cast<float>(win.divisor(g.o.count_include_pad));
    }
  }
}

// Returns false when an index is outside the plane (that gradient is dropped).
TESSERA_MULTIVERSION bool MaxBackwardPlane(const PoolGeom& g, const float* __restrict dy,
                                           const int64_t* __restrict idx, float* __restrict dx) {
  const int64_t plane = g.H * g.W;
  for (int64_t i = 0; i < plane; ++i) dx[i] = 0.0f;
  bool ok = true;
  for (int64_t i = 0; i < g.OH * g.OW; ++i) {
    const int64_t k = idx[i];
    if (k < 0 || k >= plane) {
      ok = false;
      continue;
    }
    dx[k] += dy[i];
  }
  return ok;
}

TESSERA_MULTIVERSION void AvgBackwardPlane(const PoolGeom& g, const float* __restrict dy, float* __restrict dx) {
  for (int64_t i = 0; i < g.H * g.W; ++i) dx[i] = 0.0f;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const Window win = WindowAt(g, oh, ow);
      const float v = dy[oh * g.OW + ow] / static_cast<float>(win.divisor(g.o.count_include_pad));
      for (int64_t h = win.h0; h < win.h1; ++h) {
        float* row = dx + h * g.W;
        for (int64_t w = win.w0; w < win.w1; ++w) row[w] += v;
      }
    }
  }
}

// ---- NHWC: one output pixel (all channels) or one channel block ---------

// xn: x at [n, 0, 0, 0]; y, idx: the output pixel's C values.
TESSERA_MULTIVERSION void MaxPixelNhwc(const PoolGeom& g, const float* __restrict xn, const Window& win,
                                       float* __restrict y, int64_t* __restrict idx) {
  const int64_t C = g.C;
  for (int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
    const int64_t len = std::min(kChannelBlock, C - c0);
    float m[kChannelBlock];
    int64_t id[kChannelBlock];
    const int64_t first = win.h0 * g.W + win.w0;
    for (int64_t j = 0; j < len; ++j) {
      m[j] = -std::numeric_limits<float>::infinity();
      id[j] = first;
    }
    for (int64_t h = win.h0; h < win.h1; ++h) {
      for (int64_t w = win.w0; w < win.w1; ++w) {
        const float* xp = xn + (h * g.W + w) * C + c0;
        const int64_t k = h * g.W + w;
        for (int64_t j = 0; j < len; ++j) {
          const float v = xp[j];
          const bool take = v > m[j] || v != v;
          m[j] = take ? v : m[j];
          id[j] = take ? k : id[j];
        }
      }
    }
    for (int64_t j = 0; j < len; ++j) {
      y[c0 + j] = m[j];
      idx[c0 + j] = id[j];
    }
  }
}

TESSERA_MULTIVERSION void AvgPixelNhwc(const PoolGeom& g, const float* __restrict xn, const Window& win,
                                       float* __restrict y) {
  const int64_t C = g.C;
  const float inv = 1.0f / static_cast<float>(win.divisor(g.o.count_include_pad));
  for (int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
    const int64_t len = std::min(kChannelBlock, C - c0);
    float acc[kChannelBlock] = {};
    for (int64_t h = win.h0; h < win.h1; ++h) {
      for (int64_t w = win.w0; w < win.w1; ++w) {
        const float* xp = xn + (h * g.W + w) * C + c0;
        for (int64_t j = 0; j < len; ++j) acc[j] += xp[j];
      }
    }
    for (int64_t j = 0; j < len; ++j) y[c0 + j] = acc[j] * inv;
  }
}

// Zeroes channels [c0, c0 + len) of every pixel of image n (dxn at [n, 0, 0, 0]).
TESSERA_MULTIVERSION void ZeroChannelsNhwc(float* __restrict dxn, int64_t pixels, int64_t C, int64_t c0,
                                           int64_t len) {
  for (int64_t p = 0; p < pixels; ++p) {
    float* d = dxn + p * C + c0;
    for (int64_t j = 0; j < len; ++j) d[j] = 0.0f;
  }
}

// Channel block [c0, c0 + len) of image n: dyn, idxn at [n, 0, 0, 0] of the output.
TESSERA_MULTIVERSION bool MaxBackwardBlockNhwc(const PoolGeom& g, const float* __restrict dyn,
                                               const int64_t* __restrict idxn, float* __restrict dxn, int64_t c0,
                                               int64_t len) {
  const int64_t C = g.C, plane = g.H * g.W;
  ZeroChannelsNhwc(dxn, plane, C, c0, len);
  bool ok = true;
  for (int64_t p = 0; p < g.OH * g.OW; ++p) {
    const float* d = dyn + p * C + c0;
    const int64_t* id = idxn + p * C + c0;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t k = id[j];
      if (k < 0 || k >= plane) {
        ok = false;
        continue;
      }
      dxn[k * C + c0 + j] += d[j];
    }
  }
  return ok;
}

TESSERA_MULTIVERSION void AvgBackwardBlockNhwc(const PoolGeom& g, const float* __restrict dyn, float* __restrict dxn,
                                               int64_t c0, int64_t len) {
  const int64_t C = g.C;
  ZeroChannelsNhwc(dxn, g.H * g.W, C, c0, len);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const Window win = WindowAt(g, oh, ow);
      const float inv = 1.0f / static_cast<float>(win.divisor(g.o.count_include_pad));
      const float* d = dyn + (oh * g.OW + ow) * C + c0;
      float v[kChannelBlock];
      for (int64_t j = 0; j < len; ++j) v[j] = d[j] * inv;
      for (int64_t h = win.h0; h < win.h1; ++h) {
        for (int64_t w = win.w0; w < win.w1; ++w) {
          float* o = dxn + (h * g.W + w) * C + c0;
          for (int64_t j = 0; j < len; ++j) o[j] += v[j];
        }
      }
    }
  }
}

// Global average of channel block [c0, c0 + len) of image n (double sums).
TESSERA_MULTIVERSION void GlobalAvgBlockNhwc(const float* __restrict xn, int64_t pixels, int64_t C, int64_t c0,
                                             int64_t len, float* __restrict y) {
  double acc[kChannelBlock] = {};
  for (int64_t p = 0; p < pixels; ++p) {
    const float* xp = xn + p * C + c0;
    for (int64_t j = 0; j < len; ++j) acc[j] += xp[j];
  }
  const double inv = 1.0 / static_cast<double>(pixels);
  for (int64_t j = 0; j < len; ++j) y[c0 + j] = static_cast<float>(acc[j] * inv);
}

TESSERA_MULTIVERSION void GlobalAvgBackwardImageNhwc(const float* __restrict dyn, int64_t pixels, int64_t C,
                                                     float* __restrict dxn) {
  const float inv = 1.0f / static_cast<float>(pixels);
  for (int64_t p = 0; p < pixels; ++p) {
    float* d = dxn + p * C;
    for (int64_t c = 0; c < C; ++c) d[c] = dyn[c] * inv;
  }
}

TESSERA_MULTIVERSION void FillPlane(float* __restrict dx, int64_t n, float v) {
  for (int64_t i = 0; i < n; ++i) dx[i] = v;
}

}  // namespace

void MaxPoolForwardOptimized(const PoolGeom& g, const float* x, float* y, int64_t* idx) {
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  if (!g.nhwc()) {
    ParallelFor(g.N * g.C, g.N * g.C * in_plane, kParallelMemoryBound, [&](int64_t p) {
      thread_local std::vector<int32_t> colarg;
      if (static_cast<int64_t>(colarg.size()) < g.W) colarg.resize(g.W);
      MaxPlane(g, x + p * in_plane, y + p * out_plane, idx + p * out_plane, Scratch(0, g.W), colarg.data());
    });
    return;
  }
  ParallelFor(g.N * g.OH, g.N * g.C * in_plane, kParallelMemoryBound, [&](int64_t t) {
    const int64_t n = t / g.OH, oh = t % g.OH;
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t o = ((n * g.OH + oh) * g.OW + ow) * g.C;
      MaxPixelNhwc(g, x + n * in_plane * g.C, WindowAt(g, oh, ow), y + o, idx + o);
    }
  });
}

bool MaxPoolBackwardOptimized(const PoolGeom& g, const float* dy, const int64_t* idx, float* dx) {
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  std::atomic<bool> ok{true};
  if (!g.nhwc()) {
    ParallelFor(g.N * g.C, g.N * g.C * in_plane, kParallelMemoryBound, [&](int64_t p) {
      if (!MaxBackwardPlane(g, dy + p * out_plane, idx + p * out_plane, dx + p * in_plane)) ok = false;
    });
    return ok;
  }
  const int64_t blocks = ChannelBlocks(g.C);
  ParallelFor(g.N * blocks, g.N * g.C * in_plane, kParallelMemoryBound, [&](int64_t t) {
    const int64_t n = t / blocks, c0 = (t % blocks) * kChannelBlock;
    if (!MaxBackwardBlockNhwc(g, dy + n * out_plane * g.C, idx + n * out_plane * g.C, dx + n * in_plane * g.C, c0,
                              std::min(kChannelBlock, g.C - c0))) {
      ok = false;
    }
  });
  return ok;
}

void AvgPoolForwardOptimized(const PoolGeom& g, const float* x, float* y) {
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  if (!g.nhwc()) {
    ParallelFor(g.N * g.C, g.N * g.C * in_plane, kParallelMemoryBound,
                [&](int64_t p) { AvgPlane(g, x + p * in_plane, y + p * out_plane, Scratch(0, g.W)); });
    return;
  }
  ParallelFor(g.N * g.OH, g.N * g.C * in_plane, kParallelMemoryBound, [&](int64_t t) {
    const int64_t n = t / g.OH, oh = t % g.OH;
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      AvgPixelNhwc(g, x + n * in_plane * g.C, WindowAt(g, oh, ow), y + ((n * g.OH + oh) * g.OW + ow) * g.C);
    }
  });
}

void AvgPoolBackwardOptimized(const PoolGeom& g, const float* dy, float* dx) {
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  if (!g.nhwc()) {
    ParallelFor(g.N * g.C, g.N * g.C * in_plane, kParallelMemoryBound,
                [&](int64_t p) { AvgBackwardPlane(g, dy + p * out_plane, dx + p * in_plane); });
    return;
  }
  const int64_t blocks = ChannelBlocks(g.C);
  ParallelFor(g.N * blocks, g.N * g.C * in_plane, kParallelMemoryBound, [&](int64_t t) {
    const int64_t n = t / blocks, c0 = (t % blocks) * kChannelBlock;
    AvgBackwardBlockNhwc(g, dy + n * out_plane * g.C, dx + n * in_plane * g.C, c0, std::min(kChannelBlock, g.C - c0));
  });
}

void GlobalAvgPoolForwardOptimized(const PoolGeom& g, const float* x, float* y) {
  const int64_t plane = g.H * g.W;
  if (!g.nhwc()) {
    ParallelFor(g.N * g.C, g.N * g.C * plane, kParallelMemoryBound, [&](int64_t p) {
      y[p] = SumLanes(x + p * plane, plane) / static_cast<float>(plane);
    });
    return;
  }
  const int64_t blocks = ChannelBlocks(g.C);
  ParallelFor(g.N * blocks, g.N * g.C * plane, kParallelMemoryBound, [&](int64_t t) {
    const int64_t n = t / blocks, c0 = (t % blocks) * kChannelBlock;
    GlobalAvgBlockNhwc(x + n * plane * g.C, plane, g.C, c0, std::min(kChannelBlock, g.C - c0), y + n * g.C);
  });
}

void GlobalAvgPoolBackwardOptimized(const PoolGeom& g, const float* dy, float* dx) {
  const int64_t plane = g.H * g.W;
  if (!g.nhwc()) {
    ParallelFor(g.N * g.C, g.N * g.C * plane, kParallelMemoryBound,
                [&](int64_t p) { FillPlane(dx + p * plane, plane, dy[p] / static_cast<float>(plane)); });
    return;
  }
  ParallelFor(g.N, g.N * g.C * plane, kParallelMemoryBound,
              [&](int64_t n) { GlobalAvgBackwardImageNhwc(dy + n * g.C, plane, g.C, dx + n * plane * g.C); });
}

}  // namespace tessera::ops::kern
