// Broadcast iteration plans for element-wise kernels (internal).
// A plan describes up to kMaxOperands contiguous operands broadcast to an
// output shape: size-1 output axes are dropped and adjacent axes that are
// contiguous for every operand are merged, so the common cases collapse to
// one or two axes ([N] op [N], [N, D] op [D], [N, D] op [N, 1]). The inner
// stride of every operand is then 0 (broadcast) or 1. Pure data; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tessera/base/error.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/tensor/tensor.h"

namespace tessera::ops::kern {

inline constexpr int kMaxDims = 16;
inline constexpr int kMaxOperands = 3;

struct BroadcastPlan {
  int rank = 1;  // merged axes (>= 1)
  int operands = 0;
  int64_t shape[kMaxDims] = {1};
  int64_t strides[kMaxOperands][kMaxDims] = {};
  int64_t numel = 1;

  int64_t inner() const { return shape[rank - 1]; }
  int64_t outer() const { return numel / (inner() == 0 ? 1 : inner()); }
  // Element offset of each operand at the start of outer row `o`.
  void OuterOffsets(int64_t o, int64_t* offsets) const {
    for (int k = 0; k < operands; ++k) offsets[k] = 0;
    for (int d = rank - 2; d >= 0; --d) {
      int64_t i = o % shape[d];
      o /= shape[d];
      for (int k = 0; k < operands; ++k) offsets[k] += i * strides[k][d];
    }
  }
};

// Builds the plan of `count` operand shapes broadcast to `out` (which must be
// their broadcast shape). `merge` = false keeps every non-unit axis (used by
// the reference kernels, which walk the plain index space).
inline BroadcastPlan MakeBroadcastPlan(const Shape& out, const Shape* const* operand_shapes, int count,
                                       bool merge = true) {
  BroadcastPlan p;
  p.operands = count;
  p.numel = NumElements(out);
  int r = static_cast<int>(out.size());
  int64_t shape[kMaxDims];
  int64_t strides[kMaxOperands][kMaxDims];
  int n = 0;
  for (int d = 0; d < r; ++d) {
    if (out[d] == 1) continue;
    TESSERA_CHECK(n < kMaxDims, "broadcast of rank {} exceeds {} axes", r, kMaxDims);
    shape[n] = out[d];
    for (int k = 0; k < count; ++k) {
      const Shape& s = *operand_shapes[k];
      int sd = d - (r - static_cast<int>(s.size()));
      int64_t stride = 0;
      if (sd >= 0 && s[sd] != 1) {
        stride = 1;
        for (int j = sd + 1; j < static_cast<int>(s.size()); ++j) stride *= s[j];
      }
      strides[k][n] = stride;
    }
    ++n;
  }
  if (n == 0) {
    p.rank = 1;
    p.shape[0] = 1;
    for (int k = 0; k < count; ++k) p.strides[k][0] = 0;
    return p;
  }
  int m = 0;
  for (int d = 0; d < n; ++d) {
    bool mergeable = merge && m > 0;
    for (int k = 0; mergeable && k < count; ++k) {
      mergeable = strides[k][m - 1] == strides[k][d] * shape[d];
    }
    if (mergeable) {
      p.shape[m - 1] *= shape[d];
      for (int k = 0; k < count; ++k) p.strides[k][m - 1] = strides[k][d];
    } else {
      p.shape[m] = shape[d];
      for (int k = 0; k < count; ++k) p.strides[k][m] = strides[k][d];
      ++m;
    }
  }
  p.rank = m;
  return p;
}

// Calls fn(offsets, start, len, out_offset) for spans of the plan's inner
// axis: offsets[k] is operand k's element offset of the span start, the
// span covers `len` inner elements from inner index `start`, and
// out_offset is the flat output index of the span start. Spans are grouped
// into tasks of about kChunk elements and run in parallel above threshold.
template <typename F>
void ForEachSpan(const BroadcastPlan& p, int64_t threshold, F&& fn) {
  const int64_t inner = p.inner(), outer = p.outer();
  if (p.numel == 0) return;
  const int last = p.rank - 1;
  if (inner >= kChunk) {
    const int64_t chunks = (inner + kChunk - 1) / kChunk;
    ParallelFor(outer * chunks, p.numel, threshold, [&](int64_t t) {
      int64_t o = t / chunks, start = (t % chunks) * kChunk;
      int64_t off[kMaxOperands];
      p.OuterOffsets(o, off);
      for (int k = 0; k < p.operands; ++k) off[k] += start * p.strides[k][last];
      fn(off, start, std::min(kChunk, inner - start), o * inner + start);
    });
  } else {
    const int64_t rows = std::max<int64_t>(1, kChunk / inner);
    const int64_t tasks = (outer + rows - 1) / rows;
    ParallelFor(tasks, p.numel, threshold, [&](int64_t t) {
      int64_t end = std::min(outer, (t + 1) * rows);
      for (int64_t o = t * rows; o < end; ++o) {
        int64_t off[kMaxOperands];
        p.OuterOffsets(o, off);
        fn(off, int64_t{0}, inner, o * inner);
      }
    });
  }
}

// Shared argument checks for broadcasting operators: both defined, floating,
// same dtype, broadcastable. Returns the broadcast shape; throws OpError.
inline Shape CheckBroadcastOperands(const char* op, const Tensor& a, const Tensor& b) {
  TESSERA_OP_CHECK(a.defined() && b.defined(), "{}: undefined input (a defined: {}, b defined: {})", op, a.defined(),
                   b.defined());
  TESSERA_OP_CHECK(IsFloating(a.dtype()) && a.dtype() == b.dtype(),
                   "{}: inputs must share one floating dtype, got a {} {} and b {} {}", op, DTypeName(a.dtype()),
                   ShapeString(a.shape()), DTypeName(b.dtype()), ShapeString(b.shape()));
  StatusOr<Shape> out = BroadcastShapes(a.shape(), b.shape());
  TESSERA_OP_CHECK(out.ok(), "{}: {}", op, out.status().message());
  TESSERA_OP_CHECK(static_cast<int>(out.value().size()) <= kMaxDims, "{}: rank {} exceeds {} axes", op,
                   out.value().size(), kMaxDims);
  return out.value();
}

}  // namespace tessera::ops::kern
