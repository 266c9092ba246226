// Softmax / log-softmax: argument checks, reference kernels (scalar, double
// sums, std::exp) and optimized row kernels (vectorized exp, lane sums,
// threads over rows). A non-last axis is moved last for the optimized path.
#include "tessera/ops/softmax/softmax.h"

#include <algorithm>
#include <cmath>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/elementwise/simd.h"

// 64-byte vectors only live inside AVX-512 functions (see simd.h).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tessera::ops {
namespace {

using kern::HasAvx512;
using kern::Splat;
using kern::VF;

enum class Kind { kSoftmax, kLogSoftmax };

const char* KindName(Kind k) { return k == Kind::kSoftmax ? "softmax" : "log_softmax"; }

// ---- optimized row kernels (fp32, explicit W-lane vectors) ----

// Forward of one row: max, then sum of exp(x - max) (stored into y for
// softmax), then normalize. Tails load as -inf so exp gives exactly 0.
template <int W>
TESSERA_ALWAYS_INLINE void ForwardRowImpl(bool log, const float* __restrict x, float* __restrict y, int64_t n) {
  constexpr float kNegInf = -__builtin_inff();
  const int64_t full = n / W * W, rem = n - full;
  VF<W> m0 = Splat<W>(kNegInf), m1 = m0;
  int64_t i = 0;
  for (; i + 2 * W <= full; i += 2 * W) {
    VF<W> a = kern::Load<W>(x + i), b = kern::Load<W>(x + i + W);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
  }
  if (i < full) {
    VF<W> a = kern::Load<W>(x + i);
    m0 = a > m0 ? a : m0;
  }
  if (rem > 0) {
    VF<W> a = kern::LoadPartial<W>(x + full, rem, kNegInf);
    m1 = a > m1 ? a : m1;
  }
  m0 = m1 > m0 ? m1 : m0;
  float m = kNegInf;
  for (int k = 0; k < W; ++k) m = m0[k] > m ? m0[k] : m;
  const VF<W> vm = Splat<W>(m);
  VF<W> s0 = Splat<W>(0.0f), s1 = s0;
  for (i = 0; i + 2 * W <= full; i += 2 * W) {
    VF<W> a = kern::Exp<W>(kern::Load<W>(x + i) - vm), b = kern::Exp<W>(kern::Load<W>(x + i + W) - vm);
    if (!log) {
      kern::Store<W>(y + i, a);
      kern::Store<W>(y + i + W, b);
    }
    s0 += a;
    s1 += b;
  }
  if (i < full) {
    VF<W> a = kern::Exp<W>(kern::Load<W>(x + i) - vm);
    if (!log) kern::Store<W>(y + i, a);
    s0 += a;
  }
  if (rem > 0) {
    VF<W> a = kern::Exp<W>(kern::LoadPartial<W>(x + full, rem, kNegInf) - vm);
    if (!log) kern::StorePartial<W>(y + full, a, rem);
    s1 += a;
  }
  const float sum = kern::HorizontalSum<W>(s0 + s1);
  if (!log) {
    const float inv = 1.0f / sum;
    for (int64_t k = 0; k < n; ++k) y[k] *= inv;
  } else {
    const float shift = m + std::log(sum);
    for (int64_t k = 0; k < n; ++k) y[k] = x[k] - shift;
  }
}
TESSERA_SIMD_DISPATCH(ForwardRow, (bool log, const float* x, float* y, int64_t n), (log, x, y, n))

// log_softmax backward: dx = dy - exp(y) * sum(dy).
template <int W>
TESSERA_ALWAYS_INLINE void LogSoftmaxGradRowImpl(const float* __restrict dy, const float* __restrict y,
                                                 float* __restrict dx, int64_t n) {
  const VF<W> s = Splat<W>(kern::SumLanes(dy, n));
  kern::Map2<W>(
      dy, y, dx, n, [s](VF<W> g, VF<W> v) __attribute__((always_inline)) { return g - kern::Exp<W>(v) * s; });
}
TESSERA_SIMD_DISPATCH(LogSoftmaxGradRow, (const float* dy, const float* y, float* dx, int64_t n), (dy, y, dx, n))

// softmax backward: dx = y * (dy - sum(dy * y)) (auto-vectorized).
TESSERA_MULTIVERSION void SoftmaxGradRow(const float* __restrict dy, const float* __restrict y, float* __restrict dx,
                                         int64_t n) {
  const float dot = kern::DotLanes(dy, y, n);
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] * (dy[i] - dot);
}

void BackwardRow(Kind kind, const float* dy, const float* y, float* dx, int64_t n) {
  if (kind == Kind::kSoftmax) {
    SoftmaxGradRow(dy, y, dx, n);
  } else {
    LogSoftmaxGradRow(dy, y, dx, n);
  }
}

// Runs fn(in0_row, in1_row, out_row, n) over the rows of contiguous [rows, n]
// tensors (in1 may be undefined), converting bf16/fp16 rows through scratch.
template <typename F>
void ForRows(const Tensor& in0, const Tensor& in1, Tensor& out, int64_t rows, int64_t n, F&& fn) {
  const DType dt = in0.dtype();
  const void* p0 = in0.raw_data();
  const void* p1 = in1.defined() ? in1.raw_data() : nullptr;
  void* po = out.raw_data();
  const int64_t rows_per_task = std::max<int64_t>(1, kern::kChunk / std::max<int64_t>(n, 1));
  kern::ParallelFor((rows + rows_per_task - 1) / rows_per_task, rows * n, kern::kParallelComputeBound, [&](int64_t t) {
    for (int64_t r = t * rows_per_task, e = std::min(rows, r + rows_per_task); r < e; ++r) {
      const float* a = kern::AsF32(dt, kern::ElemPtr(p0, dt, r * n), n, 0);
      const float* b = p1 ? kern::AsF32(dt, kern::ElemPtr(p1, dt, r * n), n, 1) : nullptr;
      void* dst = kern::ElemPtr(po, dt, r * n);
      float* o = kern::OutF32(dt, dst, n, 2);
      fn(a, b, o, n);
      kern::FinishF32(dt, o, dst, n);
    }
  });
}

// ---- reference kernels: x viewed as [A, R, B], reduce over R ----

std::vector<float> ForwardReference(Kind kind, const std::vector<float>& x, int64_t A, int64_t R, int64_t B) {
  std::vector<float> y(x.size());
  if (R == 0) return y;
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t b = 0; b < B; ++b) {
      auto at = [&](int64_t r) { return (a * R + r) * B + b; };
      float m = x[at(0)];
      for (int64_t r = 1; r < R; ++r) m = std::max(m, x[at(r)]);
      double s = 0;
      for (int64_t r = 0; r < R; ++r) s += std::exp(static_cast<double>(x[at(r)]) - m);
      for (int64_t r = 0; r < R; ++r) {
        double shifted = static_cast<double>(x[at(r)]) - m;
        y[at(r)] = static_cast<float>(kind == Kind::kSoftmax ? std::exp(shifted) / s : shifted - std::log(s));
      }
    }
  }
  return y;
}

std::vector<float> BackwardReference(Kind kind, const std::vector<float>& dy, const std::vector<float>& y, int64_t A,
                                     int64_t R, int64_t B) {
  std::vector<float> dx(y.size());
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t b = 0; b < B; ++b) {
      auto at = [&](int64_t r) { return (a * R + r) * B + b; };
      double s = 0;
      for (int64_t r = 0; r < R; ++r)
        s += kind == Kind::kSoftmax ? static_cast<double>(dy[at(r)]) * y[at(r)] : dy[at(r)];
      for (int64_t r = 0; r < R; ++r) {
        double v = kind == Kind::kSoftmax ? y[at(r)] * (dy[at(r)] - s)
                                          : dy[at(r)] - std::exp(static_cast<double>(y[at(r)])) * s;
        dx[at(r)] = static_cast<float>(v);
      }
    }
  }
  return dx;
}

int CheckAxis(const char* op, const Tensor& t, int axis) {
  const int rank = t.dim();
  TESSERA_OP_CHECK(rank >= 1, "{}: input must have at least one axis, got shape {}", op, ShapeString(t.shape()));
  TESSERA_OP_CHECK(axis >= -rank && axis < rank, "{}: axis {} out of range for shape {}", op, axis,
                   ShapeString(t.shape()));
  return axis < 0 ? axis + rank : axis;
}

void SplitAround(const Shape& s, int axis, int64_t& A, int64_t& R, int64_t& B) {
  A = 1;
  B = 1;
  for (int d = 0; d < axis; ++d) A *= s[d];
  R = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d) B *= s[d];
}

Tensor Forward(Kind kind, const Tensor& x_in, int axis) {
  const char* op = KindName(kind);
  TESSERA_OP_CHECK(x_in.defined() && IsFloating(x_in.dtype()), "{}: x must be a floating tensor, got {}", op,
                   x_in.defined() ? DTypeName(x_in.dtype()) : "undefined");
  const int a = CheckAxis(op, x_in, axis);
  int64_t A, R, B;
  SplitAround(x_in.shape(), a, A, R, B);
  if (UseReference()) {
    Tensor out = Tensor::Empty(x_in.shape(), x_in.dtype());
    out.CopyFrom(Tensor::FromVector(ForwardReference(kind, x_in.ToFloatVector(), A, R, B), x_in.shape()));
    return out;
  }
  const int last = x_in.dim() - 1;
  Tensor x = (a == last || B == 1) ? x_in.Contiguous() : x_in.Transpose(a, last).Contiguous();
  Tensor y = Tensor::Empty(x.shape(), x.dtype());
  if (R > 0) {
    ForRows(x, Tensor(), y, x.numel() / R, R, [kind](const float* xr, const float*, float* yr, int64_t n) {
      ForwardRow(kind == Kind::kLogSoftmax, xr, yr, n);
    });
  }
  return (a == last || B == 1) ? y : y.Transpose(a, last).Contiguous();
}

Tensor Backward(Kind kind, const Tensor& grad_out, const Tensor& y_in, int axis) {
  const char* op = kind == Kind::kSoftmax ? "softmax backward" : "log_softmax backward";
  TESSERA_OP_CHECK(y_in.defined() && IsFloating(y_in.dtype()), "{}: y must be a floating tensor", op);
  TESSERA_OP_CHECK(grad_out.defined() && grad_out.shape() == y_in.shape() && grad_out.dtype() == y_in.dtype(),
                   "{}: grad_out must match y ({} {}), got {} {}", op, DTypeName(y_in.dtype()),
                   ShapeString(y_in.shape()), grad_out.defined() ? DTypeName(grad_out.dtype()) : "undefined",
                   grad_out.defined() ? ShapeString(grad_out.shape()) : "");
  const int a = CheckAxis(op, y_in, axis);
  int64_t A, R, B;
  SplitAround(y_in.shape(), a, A, R, B);
  if (UseReference()) {
    Tensor out = Tensor::Empty(y_in.shape(), y_in.dtype());
    out.CopyFrom(Tensor::FromVector(BackwardReference(kind, grad_out.ToFloatVector(), y_in.ToFloatVector(), A, R, B),
                                    y_in.shape()));
    return out;
  }
  const int last = y_in.dim() - 1;
  const bool direct = a == last || B == 1;
  Tensor dy = direct ? grad_out.Contiguous() : grad_out.Transpose(a, last).Contiguous();
  Tensor y = direct ? y_in.Contiguous() : y_in.Transpose(a, last).Contiguous();
  Tensor dx = Tensor::Empty(y.shape(), y.dtype());
  if (R > 0) {
    ForRows(dy, y, dx, y.numel() / R, R,
            [kind](const float* g, const float* yr, float* o, int64_t n) { BackwardRow(kind, g, yr, o, n); });
  }
  return direct ? dx : dx.Transpose(a, last).Contiguous();
}

}  // namespace

Tensor Softmax(const Tensor& x, int axis) { return Forward(Kind::kSoftmax, x, axis); }
Tensor SoftmaxBackward(const Tensor& grad_out, const Tensor& y, int axis) {
  return Backward(Kind::kSoftmax, grad_out, y, axis);
}
Tensor LogSoftmax(const Tensor& x, int axis) { return Forward(Kind::kLogSoftmax, x, axis); }
Tensor LogSoftmaxBackward(const Tensor& grad_out, const Tensor& y, int axis) {
  return Backward(Kind::kLogSoftmax, grad_out, y, axis);
}

}  // namespace tessera::ops
