#include "tessera/ops/reduce/reduce_kernels.h"

#include <algorithm>
#include <cstdint>

#include "tessera/ops/elementwise/binary_kernels.h"
#include "tessera/ops/elementwise/broadcast.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/elementwise/simd.h"

// 64-byte vectors only live inside AVX-512 functions (see simd.h).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tessera::ops::kern {
namespace {

// Rows of a [.., R] row reduction beyond which R is split into fixed blocks.
constexpr int64_t kRowBlock = 1 << 16;
// Columns of a [R, B] column reduction handled per task.
constexpr int64_t kColChunk = 512;
// Fixed number of row blocks a column reduction is split into when there is
// too little other parallelism (fixed so results do not depend on threads).
constexpr int64_t kColRowBlocks = 8;
// Rows summed in fp32 before being added to a column reduction's total.
constexpr int64_t kColBlockRows = 128;

TESSERA_MULTIVERSION float SumF32(const float* x, int64_t n) { return SumLanes(x, n); }
// Maximum of x[0:n] and the first index holding it (n < 2^31), in one
// pass: each vector lane keeps its own maximum and first index (strict >),
// then lanes combine preferring the smaller index on equal values. NaNs are
// skipped unless x[0] is NaN (then the result is NaN at 0), exactly like the
// reference's sequential scan.
template <int W>
TESSERA_ALWAYS_INLINE void ArgMaxF32Impl(const float* __restrict x, int64_t n, float* value, int64_t* index) {
  using VFW = VF<W>;
  using VIW = VI<W>;
  VIW lane;
  for (int j = 0; j < W; ++j) lane[j] = j;
  VFW b0 = Splat<W>(x[0]), b1 = b0;
  VIW i0 = VIW{} + 0, i1 = i0;
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    VFW a = Load<W>(x + i), c = Load<W>(x + i + W);
    VIW ia = lane + static_cast<int32_t>(i), ic = ia + W;
    VIW ga = a > b0, gc = c > b1;
    b0 = ga ? a : b0;
    i0 = ga ? ia : i0;
    b1 = gc ? c : b1;
    i1 = gc ? ic : i1;
  }
  float m = b0[0];
  for (int j = 0; j < W; ++j) {
    m = b0[j] > m ? b0[j] : m;
    m = b1[j] > m ? b1[j] : m;
  }
  int32_t k = INT32_MAX;
  for (int j = 0; j < W; ++j) {
    k = (b0[j] == m && i0[j] < k) ? i0[j] : k;
    k = (b1[j] == m && i1[j] < k) ? i1[j] : k;
  }
  if (k == INT32_MAX) k = 0;
  for (; i < n; ++i) {
    if (x[i] > m) {
      m = x[i];
      k = static_cast<int32_t>(i);
    }
  }
  *value = m;
  *index = k;
}
TESSERA_SIMD_DISPATCH(ArgMaxF32, (const float* x, int64_t n, float* value, int64_t* index), (x, n, value, index))

TESSERA_MULTIVERSION void ColSumF32(const float* __restrict x, int64_t rows, int64_t ld, int64_t len,
                                    float* __restrict out) {
  for (int64_t i = 0; i < len; ++i) out[i] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    for (int64_t i = 0; i < len; ++i) out[i] += row[i];
  }
}

TESSERA_MULTIVERSION void AddRowF32(float* __restrict out, const float* __restrict row, int64_t len) {
  for (int64_t i = 0; i < len; ++i) out[i] += row[i];
}

TESSERA_MULTIVERSION void MaxUpdateF32(const float* __restrict row, float* __restrict best, int64_t* __restrict idx,
                                       int64_t r, int64_t len) {
  for (int64_t i = 0; i < len; ++i) {
    bool gt = row[i] > best[i];
    best[i] = gt ? row[i] : best[i];
    idx[i] = gt ? r : idx[i];
  }
}

TESSERA_MULTIVERSION void BroadcastSpanF32(const float* __restrict src, bool stride, float scale, float* __restrict out,
                                           int64_t n) {
  if (stride) {
    for (int64_t i = 0; i < n; ++i) out[i] = src[i] * scale;
  } else {
    const float v = src[0] * scale;
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

// Sum of n contiguous elements of dtype dt: lane sums over kChunk-element
// pieces (each lane adds at most kChunk / kLanes values in fp32), pieces
// combined in double.
float RowSum(DType dt, const void* p, int64_t n) {
  if (n <= kChunk) return SumF32(AsF32(dt, p, n, 0), n);
  double total = 0.0;
  for (int64_t s = 0; s < n; s += kChunk) {
    int64_t len = std::min(kChunk, n - s);
    total += SumF32(AsF32(dt, ElemPtr(p, dt, s), len, 0), len);
  }
  return static_cast<float>(total);
}

// out[0:len] = sum over `rows` rows (leading dimension ld) of x. Rows are
// summed in blocks of kColBlockRows into a scratch row that is then added
// to out, which bounds the fp32 rounding error growth for tall columns.
void ColSum(DType dt, const void* x, int64_t rows, int64_t ld, int64_t len, float* out) {
  std::fill(out, out + len, 0.0f);
  float* block = Scratch(3, len);
  for (int64_t r0 = 0; r0 < rows; r0 += kColBlockRows) {
    const int64_t nr = std::min(kColBlockRows, rows - r0);
    if (dt == DType::kF32) {
      ColSumF32(static_cast<const float*>(x) + r0 * ld, nr, ld, len, block);
    } else {
      std::fill(block, block + len, 0.0f);
      for (int64_t r = r0; r < r0 + nr; ++r) AddRowF32(block, AsF32(dt, ElemPtr(x, dt, r * ld), len, 0), len);
    }
    AddRowF32(out, block, len);
  }
}

// dst[A*B] = sum over the middle axis of src viewed as [A, R, B].
void SumMiddle(DType dt, const void* src, int64_t A, int64_t R, int64_t B, float* dst) {
  const int64_t work = A * R * B;
  if (B == 1) {
    const int64_t blocks = (R + kRowBlock - 1) / kRowBlock;
    if (blocks == 1) {
      const int64_t rows_per_task = std::max<int64_t>(1, kChunk * 8 / std::max<int64_t>(R, 1));
      ParallelFor((A + rows_per_task - 1) / rows_per_task, work, kParallelMemoryBound, [&](int64_t t) {
        for (int64_t a = t * rows_per_task, e = std::min(A, a + rows_per_task); a < e; ++a) {
          dst[a] = RowSum(dt, ElemPtr(src, dt, a * R), R);
        }
      });
      return;
    }
    Tensor partial = Tensor::Empty({A * blocks}, DType::kF32);
    float* pp = partial.data<float>();
    ParallelFor(A * blocks, work, kParallelMemoryBound, [&](int64_t t) {
      int64_t a = t / blocks, r0 = (t % blocks) * kRowBlock;
      pp[t] = RowSum(dt, ElemPtr(src, dt, a * R + r0), std::min(kRowBlock, R - r0));
    });
    for (int64_t a = 0; a < A; ++a) {
      double s = 0.0;
      for (int64_t k = 0; k < blocks; ++k) s += pp[a * blocks + k];
      dst[a] = static_cast<float>(s);
    }
    return;
  }
  const int64_t nb = (B + kColChunk - 1) / kColChunk;
  const int64_t nrb = (A * nb < 2 * kColRowBlocks && work > 4 * kParallelMemoryBound) ? std::min(kColRowBlocks, R) : 1;
  if (nrb == 1) {
    ParallelFor(A * nb, work, kParallelMemoryBound, [&](int64_t t) {
      int64_t a = t / nb, b0 = (t % nb) * kColChunk, len = std::min(kColChunk, B - b0);
      ColSum(dt, ElemPtr(src, dt, a * R * B + b0), R, B, len, dst + a * B + b0);
    });
    return;
  }
  const int64_t rows_per_block = (R + nrb - 1) / nrb;
  Tensor partial = Tensor::Empty({nrb * A * B}, DType::kF32);
  float* pp = partial.data<float>();
  ParallelFor(nrb * A * nb, work, kParallelMemoryBound, [&](int64_t t) {
    int64_t k = t / (A * nb), rest = t % (A * nb);
    int64_t a = rest / nb, b0 = (rest % nb) * kColChunk, len = std::min(kColChunk, B - b0);
    int64_t r0 = k * rows_per_block, rows = std::max<int64_t>(0, std::min(R, r0 + rows_per_block) - r0);
    ColSum(dt, ElemPtr(src, dt, (a * R + r0) * B + b0), rows, B, len, pp + (k * A + a) * B + b0);
  });
  for (int64_t i = 0; i < A * B; ++i) {
    float s = 0.0f;
    for (int64_t k = 0; k < nrb; ++k) s += pp[k * A * B + i];
    dst[i] = s;
  }
}

}  // namespace

Tensor ReduceSumOptimized(const Tensor& x, const std::vector<bool>& reduce, DType out_dtype, double scale) {
  Shape out_shape = x.shape();
  int64_t size[kMaxDims];
  bool red[kMaxDims];
  int groups = 0;
  for (int d = 0; d < x.dim(); ++d) {
    if (reduce[d]) out_shape[d] = 1;
    if (x.shape()[d] == 1) continue;
    if (groups > 0 && red[groups - 1] == reduce[d]) {
      size[groups - 1] *= x.shape()[d];
    } else {
      TESSERA_CHECK(groups < kMaxDims, "reduction of rank {} exceeds {} axes", x.dim(), kMaxDims);
      size[groups] = x.shape()[d];
      red[groups] = reduce[d];
      ++groups;
    }
  }
  Tensor out = Tensor::Empty(out_shape, out_dtype);
  if (x.numel() == 0) {
    out.ZeroFill();
    return out;
  }
  Tensor cur = x;
  for (;;) {
    int j = groups - 1;
    while (j >= 0 && !red[j]) --j;
    if (j < 0) break;
    int64_t A = 1, B = 1;
    for (int d = 0; d < j; ++d) A *= size[d];
    for (int d = j + 1; d < groups; ++d) B *= size[d];
    bool last = true;
    for (int d = 0; d < j; ++d) last = last && !red[d];
    Tensor dst = (last && out_dtype == DType::kF32 && scale == 1.0) ? out : Tensor::Empty({A * B}, DType::kF32);
    SumMiddle(cur.dtype(), cur.raw_data(), A, size[j], B, dst.data<float>());
    cur = dst;
    groups = j;
    if (B > 1) {
      size[groups] = B;
      red[groups] = false;
      ++groups;
    }
  }
  if (cur.impl() != out.impl()) AffineForward(cur, static_cast<float>(scale), 0.0f, out);
  return out;
}

void MaxMiddleOptimized(const Tensor& x, int64_t A, int64_t R, int64_t B, Tensor& values, Tensor& indices) {
  const DType dt = x.dtype();
  const void* xp = x.raw_data();
  void* vp = values.raw_data();
  int64_t* ip = indices.data<int64_t>();
  const int64_t work = A * R * B;
  if (B == 1) {
    const int64_t rows_per_task = std::max<int64_t>(1, kChunk * 8 / R);
    ParallelFor((A + rows_per_task - 1) / rows_per_task, work, kParallelMemoryBound, [&](int64_t t) {
      for (int64_t a = t * rows_per_task, e = std::min(A, a + rows_per_task); a < e; ++a) {
        const float* row = AsF32(dt, ElemPtr(xp, dt, a * R), R, 0);
        float m;
        ArgMaxF32(row, R, &m, ip + a);
        StoreF32(dt, &m, ElemPtr(vp, dt, a), 1);
      }
    });
    return;
  }
  const int64_t nb = (B + kColChunk - 1) / kColChunk;
  ParallelFor(A * nb, work, kParallelMemoryBound, [&](int64_t t) {
    int64_t a = t / nb, b0 = (t % nb) * kColChunk, len = std::min(kColChunk, B - b0);
    float* best = Scratch(1, len);
    int64_t* idx = ip + a * B + b0;
    LoadF32(dt, ElemPtr(xp, dt, a * R * B + b0), best, len);
    std::fill(idx, idx + len, 0);
    for (int64_t r = 1; r < R; ++r) {
      MaxUpdateF32(AsF32(dt, ElemPtr(xp, dt, (a * R + r) * B + b0), len, 0), best, idx, r, len);
    }
    StoreF32(dt, best, ElemPtr(vp, dt, a * B + b0), len);
  });
}

void BroadcastScaled(const Tensor& src, float scale, Tensor& out) {
  const Shape* shapes[1] = {&src.shape()};
  BroadcastPlan p = MakeBroadcastPlan(out.shape(), shapes, 1);
  const bool stride = p.strides[0][p.rank - 1] != 0;
  const DType sdt = src.dtype(), odt = out.dtype();
  const void* sp = src.raw_data();
  void* op_base = out.raw_data();
  ForEachSpan(p, kParallelMemoryBound, [&](const int64_t* off, int64_t, int64_t len, int64_t out_off) {
    const float* sf = AsF32(sdt, ElemPtr(sp, sdt, off[0]), stride ? len : 1, 0);
    void* dst = ElemPtr(op_base, odt, out_off);
    float* of = OutF32(odt, dst, len, 1);
    BroadcastSpanF32(sf, stride, scale, of, len);
    FinishF32(odt, of, dst, len);
  });
}

}  // namespace tessera::ops::kern
