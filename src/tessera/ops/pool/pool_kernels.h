// Pooling internals shared by the dispatcher/reference (pool.cc) and the
// optimized kernels (pool_kernels.cc): the validated geometry of one call
// and PyTorch's window rule. Kernels take contiguous fp32 buffers in the
// call's layout; outputs are written whole (no accumulation into them).
// Windows are never empty: WindowOutputSize keeps the last window starting
// inside the input or the left padding and padding <= kernel/2, so every
// window holds at least one input element.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tessera/ops/pool/pool.h"

namespace tessera::ops::pool_internal {

struct PoolGeom {
  int64_t N, C, H, W;  // input extents (whatever the layout)
  int64_t OH, OW;      // output extents
  Pool2dOptions o;
  bool nhwc() const { return o.layout == ImageLayout::kNHWC; }
};

// One output position's window, clipped to the input, and PyTorch's average
// divisor: the window clipped to the padded input (count_include_pad) or to
// the input itself.
struct Window {
  int64_t h0, h1, w0, w1;  // [h0, h1) x [w0, w1) inside the input
  int64_t padded_size;     // elements of the window inside the padded input
  int64_t divisor(bool count_include_pad) const { return count_include_pad ? padded_size : (h1 - h0) * (w1 - w0); }
};

inline Window WindowAt(const PoolGeom& g, int64_t oh, int64_t ow) {
  Window w;
  int64_t h0 = oh * g.o.stride_h - g.o.pad_h, w0 = ow * g.o.stride_w - g.o.pad_w;
  int64_t h1 = std::min(h0 + g.o.kernel_h, g.H + g.o.pad_h), w1 = std::min(w0 + g.o.kernel_w, g.W + g.o.pad_w);
  w.padded_size = (h1 - h0) * (w1 - w0);
  w.h0 = std::max<int64_t>(h0, 0);
  w.w0 = std::max<int64_t>(w0, 0);
  w.h1 = std::min(h1, g.H);
  w.w1 = std::min(w1, g.W);
  return w;
}

}  // namespace tessera::ops::pool_internal

namespace tessera::ops::kern {

using pool_internal::PoolGeom;

// x: input, y: output ([N, C, OH, OW] or [N, OH, OW, C]), idx: int64 like y.
void MaxPoolForwardOptimized(const PoolGeom& g, const float* x, float* y, int64_t* idx);
// Returns false (dx then partly written) when an index lies outside its plane.
bool MaxPoolBackwardOptimized(const PoolGeom& g, const float* dy, const int64_t* idx, float* dx);
void AvgPoolForwardOptimized(const PoolGeom& g, const float* x, float* y);
void AvgPoolBackwardOptimized(const PoolGeom& g, const float* dy, float* dx);
// Global average: y is [N, C]; OH/OW of g are unused.
void GlobalAvgPoolForwardOptimized(const PoolGeom& g, const float* x, float* y);
void GlobalAvgPoolBackwardOptimized(const PoolGeom& g, const float* dy, float* dx);

}  // namespace tessera::ops::kern
