// Activations: argument checks, reference kernels (scalar, std::tanh /
// std::exp) and optimized kernels (vectorized exp-based tanh/sigmoid,
// chunked over threads).
#include "tessera/ops/activation/activation.h"
#include "tessera/ops/activation/activation_rows.h"

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

using kern::Splat;
using kern::VF;

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

// ---- optimized fp32 kernels (explicit W-lane vectors, see simd.h) ----

template <int W>
TESSERA_ALWAYS_INLINE VF<W> GeluV(VF<W> v) {
  VF<W> t = kern::Tanh<W>(kGeluC * (v + kGeluA * v * v * v));
  return 0.5f * v * (1.0f + t);
}
template <int W>
TESSERA_ALWAYS_INLINE VF<W> GeluGradV(VF<W> v) {
  VF<W> t = kern::Tanh<W>(kGeluC * (v + kGeluA * v * v * v));
  VF<W> du = kGeluC * (1.0f + (3.0f * kGeluA) * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
}
template <int W>
TESSERA_ALWAYS_INLINE VF<W> SiluV(VF<W> v) {
  return v * kern::Sigmoid<W>(v);
}
template <int W>
TESSERA_ALWAYS_INLINE VF<W> SiluGradV(VF<W> v) {
  VF<W> s = kern::Sigmoid<W>(v);
  return s * (1.0f + v * (1.0f - s));
}

#define TESSERA_ACT_LAMBDA(expr) \
  [](auto v) __attribute__((always_inline)) { return expr; }
#define TESSERA_ACT_LAMBDA2(expr) \
  [](auto g, auto v) __attribute__((always_inline)) { return expr; }

template <int W>
TESSERA_ALWAYS_INLINE void GeluF32Impl(const float* x, float* y, int64_t n) {
  kern::Map1<W>(x, y, n, TESSERA_ACT_LAMBDA(GeluV<W>(v)));
}
template <int W>
TESSERA_ALWAYS_INLINE void GeluBackF32Impl(const float* dy, const float* x, float* dx, int64_t n) {
  kern::Map2<W>(dy, x, dx, n, TESSERA_ACT_LAMBDA2(g * GeluGradV<W>(v)));
}
template <int W>
TESSERA_ALWAYS_INLINE void SiluF32Impl(const float* x, float* y, int64_t n) {
  kern::Map1<W>(x, y, n, TESSERA_ACT_LAMBDA(SiluV<W>(v)));
}
template <int W>
TESSERA_ALWAYS_INLINE void SiluBackF32Impl(const float* dy, const float* x, float* dx, int64_t n) {
  kern::Map2<W>(dy, x, dx, n, TESSERA_ACT_LAMBDA2(g * SiluGradV<W>(v)));
}
template <int W>
TESSERA_ALWAYS_INLINE void SwiGluF32Impl(const float* gate, const float* up, float* y, int64_t n) {
  kern::Map2<W>(gate, up, y, n, TESSERA_ACT_LAMBDA2(SiluV<W>(g) * v));
}
// grad_up = dy * silu(gate); grad_gate = dy * up * silu'(gate).
template <int W>
TESSERA_ALWAYS_INLINE void SwiGluBackF32Impl(const float* __restrict dy, const float* __restrict g,
                                             const float* __restrict u, float* __restrict dg, float* __restrict du,
                                             int64_t n) {
  auto body = [&](int64_t i, int64_t len) __attribute__((always_inline)) {
    VF<W> d = len == W ? kern::Load<W>(dy + i) : kern::LoadPartial<W>(dy + i, len);
    VF<W> gv = len == W ? kern::Load<W>(g + i) : kern::LoadPartial<W>(g + i, len);
    VF<W> uv = len == W ? kern::Load<W>(u + i) : kern::LoadPartial<W>(u + i, len);
    VF<W> s = kern::Sigmoid<W>(gv);
    VF<W> a = d * gv * s;
    VF<W> b = d * uv * s * (1.0f + gv * (1.0f - s));
    if (len == W) {
      kern::Store<W>(du + i, a);
      kern::Store<W>(dg + i, b);
    } else {
      kern::StorePartial<W>(du + i, a, len);
      kern::StorePartial<W>(dg + i, b, len);
    }
  };
  int64_t i = 0;
  for (; i + W <= n; i += W) body(i, W);
  if (i < n) body(i, n - i);
}

TESSERA_SIMD_DISPATCH(GeluF32, (const float* x, float* y, int64_t n), (x, y, n))
TESSERA_SIMD_DISPATCH(GeluBackF32, (const float* dy, const float* x, float* dx, int64_t n), (dy, x, dx, n))
TESSERA_SIMD_DISPATCH(SiluF32, (const float* x, float* y, int64_t n), (x, y, n))
TESSERA_SIMD_DISPATCH(SiluBackF32, (const float* dy, const float* x, float* dx, int64_t n), (dy, x, dx, n))
TESSERA_SIMD_DISPATCH(SwiGluF32, (const float* gate, const float* up, float* y, int64_t n), (gate, up, y, n))
TESSERA_SIMD_DISPATCH(SwiGluBackF32, (const float* dy, const float* g, const float* u, float* dg, float* du, int64_t n),
                      (dy, g, u, dg, du, n))

TESSERA_MULTIVERSION void ReluF32(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
TESSERA_MULTIVERSION void ReluBackF32(const float* __restrict dy, const float* __restrict x, float* __restrict dx,
                                      int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
// Runs kernel(in..., out..., len) over kChunk-sized chunks of contiguous
// same-shape tensors (inputs first, then outputs), converting dtypes.
template <int kIn, int kOut, typename K>
void MapChunks(const Tensor* const* in, Tensor* const* out, int64_t threshold, K&& kernel) {
  const int64_t n = in[0]->numel();
  const DType dt = in[0]->dtype();
  kern::ParallelFor((n + kern::kChunk - 1) / kern::kChunk, n, threshold, [&](int64_t t) {
    const int64_t start = t * kern::kChunk, len = std::min(kern::kChunk, n - start);
    const float* src[kIn];
    float* dst[kOut];
    void* dst_raw[kOut];
    for (int k = 0; k < kIn; ++k) src[k] = kern::AsF32(dt, kern::ElemPtr(in[k]->raw_data(), dt, start), len, k);
    for (int k = 0; k < kOut; ++k) {
      dst_raw[k] = kern::ElemPtr(out[k]->raw_data(), dt, start);
      dst[k] = kern::OutF32(dt, dst_raw[k], len, kIn + k);
    }
    kernel(src, dst, len);
    for (int k = 0; k < kOut; ++k) kern::FinishF32(dt, dst[k], dst_raw[k], len);
  });
}

// ---- reference scalar math ----

float GeluRef(float v) { return 0.5f * v * (1.0f + std::tanh(kGeluC * (v + kGeluA * v * v * v))); }
float GeluGradRef(float v) {
  float t = std::tanh(kGeluC * (v + kGeluA * v * v * v));
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * v * v);
}
float SigmoidRef(float v) { return 1.0f / (1.0f + std::exp(-v)); }
float SiluRef(float v) { return v * SigmoidRef(v); }
float SiluGradRef(float v) {
  float s = SigmoidRef(v);
  return s * (1.0f + v * (1.0f - s));
}

enum class Unary { kGelu, kSilu, kRelu };
const char* UnaryName(Unary u) { return u == Unary::kGelu ? "gelu" : u == Unary::kSilu ? "silu" : "relu"; }

void CheckFloatingInput(const char* op, const char* arg, const Tensor& t) {
  TESSERA_OP_CHECK(t.defined() && IsFloating(t.dtype()), "{}: {} must be a floating tensor, got {}", op, arg,
                   t.defined() ? DTypeName(t.dtype()) : "undefined");
}

void CheckSame(const char* op, const char* arg, const Tensor& t, const Tensor& ref, const char* ref_name) {
  TESSERA_OP_CHECK(t.defined() && t.shape() == ref.shape() && t.dtype() == ref.dtype(),
                   "{}: {} must match {} ({} {}), got {} {}", op, arg, ref_name, DTypeName(ref.dtype()),
                   ShapeString(ref.shape()), t.defined() ? DTypeName(t.dtype()) : "undefined",
                   t.defined() ? ShapeString(t.shape()) : "");
}

Tensor FromFloats(const std::vector<float>& v, const Tensor& like) {
  Tensor out = Tensor::Empty(like.shape(), like.dtype());
  out.CopyFrom(Tensor::FromVector(v, like.shape()));
  return out;
}

Tensor UnaryForward(Unary u, const Tensor& x_in) {
  CheckFloatingInput(UnaryName(u), "x", x_in);
  Tensor x = x_in.Contiguous();
  if (UseReference()) {
    std::vector<float> v = x.ToFloatVector();
    for (float& e : v) e = u == Unary::kGelu ? GeluRef(e) : u == Unary::kSilu ? SiluRef(e) : std::max(e, 0.0f);
    return FromFloats(v, x);
  }
  Tensor y = Tensor::Empty(x.shape(), x.dtype());
  const Tensor* in[1] = {&x};
  Tensor* out[1] = {&y};
  int64_t threshold = u == Unary::kRelu ? kern::kParallelMemoryBound : kern::kParallelComputeBound;
  MapChunks<1, 1>(in, out, threshold, [u](const float* const* s, float* const* d, int64_t len) {
    if (u == Unary::kGelu)
      GeluF32(s[0], d[0], len);
    else if (u == Unary::kSilu)
      SiluF32(s[0], d[0], len);
    else
      ReluF32(s[0], d[0], len);
  });
  return y;
}

Tensor UnaryBackward(Unary u, const Tensor& grad_out, const Tensor& x_in) {
  const char* op = u == Unary::kGelu ? "gelu backward" : u == Unary::kSilu ? "silu backward" : "relu backward";
  CheckFloatingInput(op, "x", x_in);
  CheckSame(op, "grad_out", grad_out, x_in, "x");
  Tensor x = x_in.Contiguous(), dy = grad_out.Contiguous();
  if (UseReference()) {
    std::vector<float> xv = x.ToFloatVector(), g = dy.ToFloatVector();
    for (size_t i = 0; i < xv.size(); ++i) {
      float d = u == Unary::kGelu   ? GeluGradRef(xv[i])
                : u == Unary::kSilu ? SiluGradRef(xv[i])
                                    : (xv[i] > 0 ? 1.0f : 0.0f);
      g[i] *= d;
    }
    return FromFloats(g, x);
  }
  Tensor dx = Tensor::Empty(x.shape(), x.dtype());
  const Tensor* in[2] = {&dy, &x};
  Tensor* out[1] = {&dx};
  int64_t threshold = u == Unary::kRelu ? kern::kParallelMemoryBound : kern::kParallelComputeBound;
  MapChunks<2, 1>(in, out, threshold, [u](const float* const* s, float* const* d, int64_t len) {
    if (u == Unary::kGelu)
      GeluBackF32(s[0], s[1], d[0], len);
    else if (u == Unary::kSilu)
      SiluBackF32(s[0], s[1], d[0], len);
    else
      ReluBackF32(s[0], s[1], d[0], len);
  });
  return dx;
}

}  // namespace

Tensor Gelu(const Tensor& x) { return UnaryForward(Unary::kGelu, x); }
Tensor GeluBackward(const Tensor& grad_out, const Tensor& x) { return UnaryBackward(Unary::kGelu, grad_out, x); }
Tensor Silu(const Tensor& x) { return UnaryForward(Unary::kSilu, x); }
Tensor SiluBackward(const Tensor& grad_out, const Tensor& x) { return UnaryBackward(Unary::kSilu, grad_out, x); }
Tensor Relu(const Tensor& x) { return UnaryForward(Unary::kRelu, x); }
Tensor ReluBackward(const Tensor& grad_out, const Tensor& x) { return UnaryBackward(Unary::kRelu, grad_out, x); }

Tensor SwiGlu(const Tensor& gate_in, const Tensor& up_in) {
  CheckFloatingInput("swiglu", "gate", gate_in);
  CheckSame("swiglu", "up", up_in, gate_in, "gate");
  Tensor gate = gate_in.Contiguous(), up = up_in.Contiguous();
  if (UseReference()) {
    std::vector<float> g = gate.ToFloatVector(), u = up.ToFloatVector();
    for (size_t i = 0; i < g.size(); ++i) g[i] = SiluRef(g[i]) * u[i];
    return FromFloats(g, gate);
  }
  Tensor y = Tensor::Empty(gate.shape(), gate.dtype());
  const Tensor* in[2] = {&gate, &up};
  Tensor* out[1] = {&y};
  MapChunks<2, 1>(in, out, kern::kParallelComputeBound,
                  [](const float* const* s, float* const* d, int64_t len) { SwiGluF32(s[0], s[1], d[0], len); });
  return y;
}

SwiGluGrads SwiGluBackward(const Tensor& grad_out, const Tensor& gate_in, const Tensor& up_in) {
  CheckFloatingInput("swiglu backward", "gate", gate_in);
  CheckSame("swiglu backward", "up", up_in, gate_in, "gate");
  CheckSame("swiglu backward", "grad_out", grad_out, gate_in, "gate");
  Tensor gate = gate_in.Contiguous(), up = up_in.Contiguous(), dy = grad_out.Contiguous();
  SwiGluGrads grads;
  if (UseReference()) {
    std::vector<float> g = gate.ToFloatVector(), u = up.ToFloatVector(), d = dy.ToFloatVector();
    std::vector<float> dg(g.size()), du(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      du[i] = d[i] * SiluRef(g[i]);
      dg[i] = d[i] * u[i] * SiluGradRef(g[i]);
    }
    grads.grad_gate = FromFloats(dg, gate);
    grads.grad_up = FromFloats(du, gate);
    return grads;
  }
  grads.grad_gate = Tensor::Empty(gate.shape(), gate.dtype());
  grads.grad_up = Tensor::Empty(gate.shape(), gate.dtype());
  const Tensor* in[3] = {&dy, &gate, &up};
  Tensor* out[2] = {&grads.grad_gate, &grads.grad_up};
  MapChunks<3, 2>(in, out, kern::kParallelComputeBound, [](const float* const* s, float* const* d, int64_t len) {
    SwiGluBackF32(s[0], s[1], s[2], d[0], d[1], len);
  });
  return grads;
}

void GeluRowF32(const float* x, float* y, int64_t n) { GeluF32(x, y, n); }
void SiluRowF32(const float* x, float* y, int64_t n) { SiluF32(x, y, n); }
void ReluRowF32(const float* x, float* y, int64_t n) { ReluF32(x, y, n); }

}  // namespace tessera::ops
