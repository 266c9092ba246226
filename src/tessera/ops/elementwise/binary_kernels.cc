#include "tessera/ops/elementwise/binary_kernels.h"

#include <algorithm>
#include <cstring>

#include "tessera/ops/elementwise/broadcast.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/reduce/reduce_internal.h"

namespace tessera::ops::kern {
namespace {

template <BinaryOp kOp>
TESSERA_ALWAYS_INLINE float Apply(float a, float b) {
  if constexpr (kOp == BinaryOp::kAdd) return a + b;
  if constexpr (kOp == BinaryOp::kSub) return a - b;
  if constexpr (kOp == BinaryOp::kMul) return a * b;
  if constexpr (kOp == BinaryOp::kDiv) return a / b;
}

// Element access for fp32 and bf16 (raw bits) spans; bf16 rounds to nearest
// even exactly like bf16::FromFloat. Both auto-vectorize.
TESSERA_ALWAYS_INLINE float Ld(const float* p, int64_t i) { return p[i]; }
TESSERA_ALWAYS_INLINE float Ld(const uint16_t* p, int64_t i) { return Bf16BitsToF32(p[i]); }
TESSERA_ALWAYS_INLINE void St(float* p, int64_t i, float v) { p[i] = v; }
TESSERA_ALWAYS_INLINE void St(uint16_t* p, int64_t i, float v) { p[i] = F32ToBf16Bits(v); }

template <BinaryOp kOp, typename T>
TESSERA_ALWAYS_INLINE void ForwardLoop(const T* __restrict a, bool sa, const T* __restrict b, bool sb,
                                       T* __restrict out, int64_t n) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) St(out, i, Apply<kOp>(Ld(a, i), Ld(b, i)));
  } else if (sa) {
    const float y = Ld(b, 0);
    for (int64_t i = 0; i < n; ++i) St(out, i, Apply<kOp>(Ld(a, i), y));
  } else if (sb) {
    const float x = Ld(a, 0);
    for (int64_t i = 0; i < n; ++i) St(out, i, Apply<kOp>(x, Ld(b, i)));
  } else {
    const float v = Apply<kOp>(Ld(a, 0), Ld(b, 0));
    for (int64_t i = 0; i < n; ++i) St(out, i, v);
  }
}

template <typename T>
TESSERA_ALWAYS_INLINE void ForwardDispatch(BinaryOp op, const T* a, bool sa, const T* b, bool sb, T* out, int64_t n) {
  switch (op) {
    case BinaryOp::kAdd:
      ForwardLoop<BinaryOp::kAdd>(a, sa, b, sb, out, n);
      break;
    case BinaryOp::kSub:
      ForwardLoop<BinaryOp::kSub>(a, sa, b, sb, out, n);
      break;
    case BinaryOp::kMul:
      ForwardLoop<BinaryOp::kMul>(a, sa, b, sb, out, n);
      break;
    case BinaryOp::kDiv:
      ForwardLoop<BinaryOp::kDiv>(a, sa, b, sb, out, n);
      break;
  }
}

TESSERA_MULTIVERSION void ForwardF32(BinaryOp op, const float* a, bool sa, const float* b, bool sb, float* out,
                                     int64_t n) {
  ForwardDispatch(op, a, sa, b, sb, out, n);
}

// bf16 in, bf16 out, converted in registers (no scratch round trip).
TESSERA_MULTIVERSION void ForwardBf16(BinaryOp op, const uint16_t* a, bool sa, const uint16_t* b, bool sb,
                                      uint16_t* out, int64_t n) {
  ForwardDispatch(op, a, sa, b, sb, out, n);
}

// Gradients of mul/div for one span: ga = dL/da, gb = dL/db (unreduced).
template <BinaryOp kOp, bool kSA, bool kSB>
TESSERA_ALWAYS_INLINE void BackwardLoop(const float* __restrict g, const float* __restrict a, const float* __restrict b,
                                        float* __restrict ga, float* __restrict gb, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float x = a[kSA ? i : 0], y = b[kSB ? i : 0];
    if constexpr (kOp == BinaryOp::kMul) {
      ga[i] = g[i] * y;
      gb[i] = g[i] * x;
    } else {
      ga[i] = g[i] / y;
      gb[i] = -g[i] * x / (y * y);
    }
  }
}

template <BinaryOp kOp>
TESSERA_ALWAYS_INLINE void BackwardDispatch(const float* g, const float* a, bool sa, const float* b, bool sb, float* ga,
                                            float* gb, int64_t n) {
  if (sa && sb)
    BackwardLoop<kOp, true, true>(g, a, b, ga, gb, n);
  else if (sa)
    BackwardLoop<kOp, true, false>(g, a, b, ga, gb, n);
  else if (sb)
    BackwardLoop<kOp, false, true>(g, a, b, ga, gb, n);
  else
    BackwardLoop<kOp, false, false>(g, a, b, ga, gb, n);
}

TESSERA_MULTIVERSION void BackwardF32(BinaryOp op, const float* g, const float* a, bool sa, const float* b, bool sb,
                                      float* ga, float* gb, int64_t n) {
  if (op == BinaryOp::kMul) {
    BackwardDispatch<BinaryOp::kMul>(g, a, sa, b, sb, ga, gb, n);
  } else {
    BackwardDispatch<BinaryOp::kDiv>(g, a, sa, b, sb, ga, gb, n);
  }
}

TESSERA_MULTIVERSION void AffineF32(const float* __restrict x, float scale, float shift, float* __restrict out,
                                    int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale + shift;
}

TESSERA_MULTIVERSION void AccumulateF32(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace

void BinaryForward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const Shape* shapes[2] = {&a.shape(), &b.shape()};
  BroadcastPlan p = MakeBroadcastPlan(out.shape(), shapes, 2);
  const DType dt = a.dtype();
  const bool sa = p.strides[0][p.rank - 1] != 0, sb = p.strides[1][p.rank - 1] != 0;
  const void* ap = a.raw_data();
  const void* bp = b.raw_data();
  void* op_base = out.raw_data();
  if (dt == DType::kBF16) {
    const uint16_t* a16 = static_cast<const uint16_t*>(ap);
    const uint16_t* b16 = static_cast<const uint16_t*>(bp);
    uint16_t* o16 = static_cast<uint16_t*>(op_base);
    ForEachSpan(p, kParallelMemoryBound, [&](const int64_t* off, int64_t, int64_t len, int64_t out_off) {
      ForwardBf16(op, a16 + off[0], sa, b16 + off[1], sb, o16 + out_off, len);
    });
    return;
  }
  ForEachSpan(p, kParallelMemoryBound, [&](const int64_t* off, int64_t, int64_t len, int64_t out_off) {
    const float* af = AsF32(dt, ElemPtr(ap, dt, off[0]), sa ? len : 1, 0);
    const float* bf = AsF32(dt, ElemPtr(bp, dt, off[1]), sb ? len : 1, 1);
    void* dst = ElemPtr(op_base, dt, out_off);
    float* of = OutF32(dt, dst, len, 2);
    ForwardF32(op, af, sa, bf, sb, of, len);
    FinishF32(dt, of, dst, len);
  });
}

BinaryGrads BinaryBackwardOptimized(BinaryOp op, const Tensor& g, const Tensor& a, const Tensor& b) {
  const Shape& out_shape = g.shape();
  const DType dt = a.dtype();
  const bool a_full = a.numel() == g.numel(), b_full = b.numel() == g.numel();
  BinaryGrads grads;
  if (op == BinaryOp::kAdd || op == BinaryOp::kSub) {
    grads.grad_a = SumToShapeAs(g, a.shape(), dt);
    if (op == BinaryOp::kAdd) {
      grads.grad_b = SumToShapeAs(g, b.shape(), dt);
    } else if (b_full) {
      grads.grad_b = Tensor::Empty(b.shape(), dt);
      AffineForward(g, -1.0f, 0.0f, grads.grad_b);
    } else {
      Tensor summed = SumToShapeAs(g, b.shape(), DType::kF32);
      grads.grad_b = Tensor::Empty(b.shape(), dt);
      AffineForward(summed, -1.0f, 0.0f, grads.grad_b);
    }
    return grads;
  }
  // mul / div: unreduced gradients straight into the result when the input
  // is full-size, else into an fp32 temporary that is then summed.
  Tensor ga = a_full ? Tensor::Empty(a.shape(), dt) : Tensor::Empty(out_shape, DType::kF32);
  Tensor gb = b_full ? Tensor::Empty(b.shape(), dt) : Tensor::Empty(out_shape, DType::kF32);
  const Shape* shapes[3] = {&out_shape, &a.shape(), &b.shape()};
  BroadcastPlan p = MakeBroadcastPlan(out_shape, shapes, 3);
  const bool sa = p.strides[1][p.rank - 1] != 0, sb = p.strides[2][p.rank - 1] != 0;
  const DType ga_dt = ga.dtype(), gb_dt = gb.dtype();
  const void* gp = g.raw_data();
  const void* ap = a.raw_data();
  const void* bp = b.raw_data();
  void* gap = ga.raw_data();
  void* gbp = gb.raw_data();
  ForEachSpan(p, kParallelMemoryBound, [&](const int64_t* off, int64_t, int64_t len, int64_t out_off) {
    const float* gf = AsF32(dt, ElemPtr(gp, dt, off[0]), len, 0);
    const float* af = AsF32(dt, ElemPtr(ap, dt, off[1]), sa ? len : 1, 1);
    const float* bf = AsF32(dt, ElemPtr(bp, dt, off[2]), sb ? len : 1, 2);
    void* da = ElemPtr(gap, ga_dt, out_off);
    void* db = ElemPtr(gbp, gb_dt, out_off);
    float* gaf = OutF32(ga_dt, da, len, 3);
    float* gbf = OutF32(gb_dt, db, len, 4);
    BackwardF32(op, gf, af, sa, bf, sb, gaf, gbf, len);
    FinishF32(ga_dt, gaf, da, len);
    FinishF32(gb_dt, gbf, db, len);
  });
  grads.grad_a = a_full ? ga : SumToShapeAs(ga, a.shape(), dt);
  grads.grad_b = b_full ? gb : SumToShapeAs(gb, b.shape(), dt);
  return grads;
}

void AffineForward(const Tensor& x, float scale, float shift, Tensor& out) {
  const int64_t n = x.numel();
  const DType xdt = x.dtype(), odt = out.dtype();
  const void* xp = x.raw_data();
  void* op_base = out.raw_data();
  ParallelFor((n + kChunk - 1) / kChunk, n, kParallelMemoryBound, [&](int64_t t) {
    int64_t start = t * kChunk, len = std::min(kChunk, n - start);
    const float* xf = AsF32(xdt, ElemPtr(xp, xdt, start), len, 0);
    void* dst = ElemPtr(op_base, odt, start);
    float* of = OutF32(odt, dst, len, 1);
    AffineF32(xf, scale, shift, of, len);
    FinishF32(odt, of, dst, len);
  });
}

void CopyConvert(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  const DType sdt = src.dtype(), ddt = dst.dtype();
  const void* sp = src.raw_data();
  void* dp = dst.raw_data();
  ParallelFor((n + kChunk - 1) / kChunk, n, kParallelMemoryBound, [&](int64_t t) {
    int64_t start = t * kChunk, len = std::min(kChunk, n - start);
    if (sdt == ddt) {
      std::memcpy(ElemPtr(dp, ddt, start), ElemPtr(sp, sdt, start), static_cast<size_t>(len) * DTypeSize(sdt));
    } else {
      StoreF32(ddt, AsF32(sdt, ElemPtr(sp, sdt, start), len, 0), ElemPtr(dp, ddt, start), len);
    }
  });
}

void AccumulateInto(Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  const DType ddt = dst.dtype(), sdt = src.dtype();
  const void* sp = src.raw_data();
  void* dp = dst.raw_data();
  ParallelFor((n + kChunk - 1) / kChunk, n, kParallelMemoryBound, [&](int64_t t) {
    int64_t start = t * kChunk, len = std::min(kChunk, n - start);
    const float* sf = AsF32(sdt, ElemPtr(sp, sdt, start), len, 0);
    void* d = ElemPtr(dp, ddt, start);
    float* df = ddt == DType::kF32 ? static_cast<float*>(d) : Scratch(1, len);
    if (ddt != DType::kF32) LoadF32(ddt, d, df, len);
    AccumulateF32(df, sf, len);
    FinishF32(ddt, df, d, len);
  });
}

}  // namespace tessera::ops::kern
