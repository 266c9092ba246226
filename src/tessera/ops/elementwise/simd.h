// Portable fixed-width SIMD for the transcendental kernels (internal).
// GCC vector extensions (no intrinsics), so one templated kernel body
// compiles to AVX2 (W = 8, the build's baseline) or AVX-512 (W = 16, inside
// a TESSERA_TARGET_AVX512 function). GCC's auto-vectorizer handles exp-style
// code poorly (it if-converts the range clamps into masked or scalar code),
// hence explicit vectors here. Typical use:
//
//   template <int W> TESSERA_ALWAYS_INLINE void FooImpl(...) { ... Exp<W>(v) ... }
//   TESSERA_TARGET_AVX512 void Foo512(...) { FooImpl<16>(...); }
//   void Foo256(...) { FooImpl<8>(...); }
//   void Foo(...) { HasAvx512() ? Foo512(...) : Foo256(...); }
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <cstring>

#define TESSERA_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#ifndef TESSERA_ALWAYS_INLINE
#define TESSERA_ALWAYS_INLINE [[gnu::always_inline]] inline
#endif

// The 64-byte vector types are only ever used inside AVX-512 functions (all
// helpers below are always_inline), so the ABI note GCC emits for them in
// baseline-compiled templates does not apply.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tessera::ops::kern {

// True when the CPU runs AVX-512 F/BW/VL/DQ and no test forced the AVX2 path.
bool HasAvx512();
// Forces the AVX2 variant of the explicitly dispatched kernels (simd.h users
// and dropout's Philox) so tests cover both paths on one machine; the
// auto-vectorized TESSERA_MULTIVERSION kernels keep their load-time clone.
// Process-wide, not meant to be toggled while kernels run.
void ForceAvx2ForTesting(bool force);

template <int W>
struct SimdTypes;
template <>
struct SimdTypes<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int32_t I __attribute__((vector_size(32)));
  typedef uint32_t U __attribute__((vector_size(32)));
  typedef uint64_t U64 __attribute__((vector_size(64)));
};
template <>
struct SimdTypes<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef int32_t I __attribute__((vector_size(64)));
  typedef uint32_t U __attribute__((vector_size(64)));
  typedef uint64_t U64 __attribute__((vector_size(128)));
};
template <int W>
using VF = typename SimdTypes<W>::F;
template <int W>
using VI = typename SimdTypes<W>::I;
template <int W>
using VU = typename SimdTypes<W>::U;

template <int W>
TESSERA_ALWAYS_INLINE VF<W> Splat(float v) {
  return VF<W>{} + v;
}
template <int W>
TESSERA_ALWAYS_INLINE VF<W> Load(const float* p) {
  VF<W> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <int W>
TESSERA_ALWAYS_INLINE void Store(float* p, VF<W> v) {
  std::memcpy(p, &v, sizeof(v));
}
// First n (< W) lanes from p, the rest `fill`.
template <int W>
TESSERA_ALWAYS_INLINE VF<W> LoadPartial(const float* p, int64_t n, float fill = 0.0f) {
  float buf[W];
  for (int i = 0; i < W; ++i) buf[i] = fill;
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
  return Load<W>(buf);
}
template <int W>
TESSERA_ALWAYS_INLINE void StorePartial(float* p, VF<W> v, int64_t n) {
  float buf[W];
  Store<W>(buf, v);
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
}
template <int W>
TESSERA_ALWAYS_INLINE float HorizontalSum(VF<W> v) {
  float buf[W];
  Store<W>(buf, v);
  for (int w = W / 2; w >= 1; w /= 2) {
    for (int i = 0; i < w; ++i) buf[i] += buf[i + w];
  }
  return buf[0];
}

// exp(x), Cephes-style: x = k ln2 + r, |r| <= ln2/2, degree-6 polynomial,
// relative error < 3e-7. exp(x) = 0 below -87.3 (including -inf); above
// 88.3 it saturates at ~2e38 (finite); NaN propagates.
template <int W>
TESSERA_ALWAYS_INLINE VF<W> Exp(VF<W> x) {
  const VF<W> lo = Splat<W>(-87.3f), hi = Splat<W>(88.3f);
  VF<W> c = x < lo ? lo : x;
  c = c > hi ? hi : c;
  VF<W> k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  VF<W> r = c - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  VF<W> p = Splat<W>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  VI<W> e = __builtin_convertvector(k, VI<W>);
  VF<W> y = reinterpret_cast<VF<W>>(reinterpret_cast<VI<W>>(p) + (e << 23));
  y = x < lo ? Splat<W>(0.0f) : y;
  return x != x ? x : y;
}

// 1 / (1 + exp(-x)).
template <int W>
TESSERA_ALWAYS_INLINE VF<W> Sigmoid(VF<W> x) {
  return 1.0f / (1.0f + Exp<W>(-x));
}

// tanh(x) = 1 - 2 / (exp(2x) + 1), absolute error ~1e-7.
template <int W>
TESSERA_ALWAYS_INLINE VF<W> Tanh(VF<W> x) {
  return 1.0f - 2.0f / (Exp<W>(x + x) + 1.0f);
}

// Defines Name512 (AVX-512, W = 16) and Name256 (AVX2, W = 8) around the
// always_inline template NameImpl<W>, and Name, which picks one at run time.
#define TESSERA_SIMD_DISPATCH(Name, Params, Args)                      \
  TESSERA_TARGET_AVX512 void Name##512 Params { Name##Impl<16> Args; } \
  void Name##256 Params { Name##Impl<8> Args; }                        \
  void Name Params {                                                   \
    if (::tessera::ops::kern::HasAvx512()) {                           \
      Name##512 Args;                                                  \
    } else {                                                           \
      Name##256 Args;                                                  \
    }                                                                  \
  }

// y[i] = f(x[i]) for vectors of W lanes (the tail in a partial vector).
template <int W, typename F>
TESSERA_ALWAYS_INLINE void Map1(const float* __restrict x, float* __restrict y, int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + W <= n; i += W) Store<W>(y + i, f(Load<W>(x + i)));
  if (i < n) StorePartial<W>(y + i, f(LoadPartial<W>(x + i, n - i)), n - i);
}

// y[i] = f(a[i], b[i]).
template <int W, typename F>
TESSERA_ALWAYS_INLINE void Map2(const float* __restrict a, const float* __restrict b, float* __restrict y, int64_t n,
                                F&& f) {
  int64_t i = 0;
  for (; i + W <= n; i += W) Store<W>(y + i, f(Load<W>(a + i), Load<W>(b + i)));
  if (i < n) StorePartial<W>(y + i, f(LoadPartial<W>(a + i, n - i), LoadPartial<W>(b + i, n - i)), n - i);
}

}  // namespace tessera::ops::kern

#pragma GCC diagnostic pop
