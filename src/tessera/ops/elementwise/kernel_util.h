// Internal helpers for the optimized element-wise, reduction, softmax, norm,
// activation and dropout kernels (namespace tessera::ops::kern):
//   - fp32 block load/store for every floating dtype (bf16 rounds to nearest
//     even with NaN kept quiet, fp16 through F16C), written so that GCC
//     auto-vectorizes them;
//   - a branch-free exp that auto-vectorizes (|rel err| < 2e-7 on the range
//     that matters, exp(-inf) = 0, NaN propagates);
//   - TESSERA_MULTIVERSION: compiles a kernel twice (x86-64-v4 with AVX-512
//     and the build's default x86-64-v3) and picks the clone at load time via
//     an ifunc resolver, so binaries still run on machines without AVX-512;
//   - per-thread scratch buffers (grown once, reused: no per-call heap
//     allocation) and the OpenMP parallel-for with a work threshold.
// OpenMP regions must stay outside multiversioned functions (the outlined
// region body would not inherit the clone's target), so kernels are
// "row/chunk" functions called from ParallelFor.
#pragma once

#include <omp.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "tessera/tensor/tensor.h"

#if defined(__SANITIZE_THREAD__)
// The ifunc resolvers of target_clones run during relocation, before
// ThreadSanitizer's runtime is up, and crash there (GCC 12): TSan builds
// use the default clone only.
#define TESSERA_MULTIVERSION
#else
#define TESSERA_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "default")))
#endif
#define TESSERA_ALWAYS_INLINE [[gnu::always_inline]] inline

namespace tessera::ops::kern {

// Element counts above which a kernel opens an OpenMP parallel region. A
// fork/join costs ~1-2 us when the worker is spinning (more when it has to
// be woken); memory-bound kernels take ~0.05-0.1 ns per element per core and
// exp-based ones ~0.3-0.5 ns, so both thresholds are ~5-10 us of serial work.
inline constexpr int64_t kParallelMemoryBound = 1 << 16;
inline constexpr int64_t kParallelComputeBound = 1 << 14;

// Elements per task of flat element-wise loops (fits the scratch in L1/L2).
inline constexpr int64_t kChunk = 2048;

// A thread-local fp32 buffer of at least n floats; `slot` in [0, 8) selects
// one of several independent buffers. Valid until the next call with the
// same slot on this thread.
float* Scratch(int slot, int64_t n);

// Runs f(task) for task in [0, tasks), in an OpenMP parallel region (static
// schedule) when `work` exceeds `threshold`, more than one thread is
// available and we are not already inside a parallel region.
template <typename F>
void ParallelFor(int64_t tasks, int64_t work, int64_t threshold, F&& f) {
  if (tasks > 1 && work > threshold && !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) f(t);
  } else {
    for (int64_t t = 0; t < tasks; ++t) f(t);
  }
}

TESSERA_ALWAYS_INLINE float Bf16BitsToF32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// Same rounding as bf16::FromFloat, branch-free.
TESSERA_ALWAYS_INLINE uint16_t F32ToBf16Bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// Converts n elements of dtype `dt` at `src` to fp32 (dst may not alias).
void LoadF32(DType dt, const void* src, float* dst, int64_t n);
// Converts n fp32 values to dtype `dt` at `dst`, rounding to nearest even.
void StoreF32(DType dt, const float* src, void* dst, int64_t n);

// `src` (n elements of dtype dt) as fp32: `src` itself for fp32, otherwise
// converted into Scratch(slot).
inline const float* AsF32(DType dt, const void* src, int64_t n, int slot) {
  if (dt == DType::kF32) return static_cast<const float*>(src);
  float* buf = Scratch(slot, n);
  LoadF32(dt, src, buf, n);
  return buf;
}
// Where to compute n fp32 outputs destined for `dst` of dtype dt: dst itself
// for fp32, else Scratch(slot); finish with FinishF32.
inline float* OutF32(DType dt, void* dst, int64_t n, int slot) {
  return dt == DType::kF32 ? static_cast<float*>(dst) : Scratch(slot, n);
}
inline void FinishF32(DType dt, const float* buf, void* dst, int64_t n) {
  if (dt != DType::kF32) StoreF32(dt, buf, dst, n);
}

// Element pointer arithmetic on untyped data.
inline const void* ElemPtr(const void* base, DType dt, int64_t i) {
  return static_cast<const char*>(base) + i * static_cast<int64_t>(DTypeSize(dt));
}
inline void* ElemPtr(void* base, DType dt, int64_t i) {
  return static_cast<char*>(base) + i * static_cast<int64_t>(DTypeSize(dt));
}

// exp(x), Cephes-style: x = k ln2 + r, |r| <= ln2/2, degree-6 polynomial.
// Returns 0 below -87.3 (including -inf), saturates above 88.3 (to ~2e38), keeps NaN.
TESSERA_ALWAYS_INLINE float FastExp(float x) {
  float c = x < -87.3f ? -87.3f : x;
  c = c > 88.3f ? 88.3f : c;                                         // keeps the exponent k <= 127
  float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = c - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t e = static_cast<int32_t>(k);
  float y = std::bit_cast<float>(std::bit_cast<int32_t>(p) + (e << 23));
  y = x < -87.3f ? 0.0f : y;
  return x != x ? x : y;
}

// 1 / (1 + exp(-x)).
TESSERA_ALWAYS_INLINE float FastSigmoid(float x) { return 1.0f / (1.0f + FastExp(-x)); }

// tanh(x) = 1 - 2 / (exp(2x) + 1) (absolute error ~1e-7).
TESSERA_ALWAYS_INLINE float FastTanh(float x) { return 1.0f - 2.0f / (FastExp(2.0f * x) + 1.0f); }

// Lane-parallel reductions: kLanes independent accumulators (one zmm pair
// or four ymm registers after vectorization), combined pairwise in a fixed
// order, so results do not depend on the ISA clone or thread count.
inline constexpr int kLanes = 64;

TESSERA_ALWAYS_INLINE float CombineSum(float* acc) {
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0];
}

TESSERA_ALWAYS_INLINE float SumLanes(const float* __restrict x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += x[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
  return CombineSum(acc);
}

TESSERA_ALWAYS_INLINE float DotLanes(const float* __restrict x, const float* __restrict y, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += x[i + j] * y[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j] * y[i + j];
  return CombineSum(acc);
}

// Maximum of n >= 1 values (NaNs are skipped unless every value is NaN).
TESSERA_ALWAYS_INLINE float MaxLanes(const float* __restrict x, int64_t n) {
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] = acc[j + w] > acc[j] ? acc[j + w] : acc[j];
  }
  return acc[0];
}

}  // namespace tessera::ops::kern
