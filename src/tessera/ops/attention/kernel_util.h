// Small helpers shared by the attention, loss, embedding, rope, gather and
// top-k kernels: fp32 row load/store for every floating dtype (rounded once
// on store), integer index access, a vectorized exp (AVX2 baseline and an
// AVX-512 variant for functions compiled with that target), and the OpenMP
// "is this worth a parallel region" rule. All functions are pure and
// thread-safe.
#pragma once

// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized through
// _mm512_undefined_ps when inlined; the state is attached to the header's
// lines, so silence it around the include only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/tensor/tensor.h"

namespace tessera::ops::detail {

// Work (≈ scalar operations) below which kernels stay single-threaded: an
// OpenMP fork/join costs a few microseconds, so only bigger work pays.
inline constexpr int64_t kParallelGrain = 1 << 15;

// Copies n floats with an inline vector loop: the rows copied here are
// short (one head row, 32..512 bytes), where a libc memcpy call (rep movsb
// on many CPUs) costs more than the copy itself.
inline void CopyF32(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
  if (i < n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lane);
    _mm256_maskstore_ps(dst + i, mask, _mm256_maskload_ps(src + i, mask));
  }
}

// Loads n elements of T as fp32.
template <typename T>
inline void LoadF32(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    CopyF32(src, dst, n);
  } else if constexpr (std::is_same_v<T, bf16>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = BitsFloat(static_cast<uint32_t>(src[i].bits) << 16);
  } else {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
    for (; i < n; ++i) dst[i] = src[i].ToFloat();
  }
}

// Stores n fp32 values as T (round to nearest even).
template <typename T>
inline void StoreF32(const float* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    CopyF32(src, dst, n);
  } else if constexpr (std::is_same_v<T, bf16>) {
    for (int64_t i = 0; i < n; ++i) dst[i].bits = bf16::FromFloat(src[i]);
  } else {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; ++i) dst[i] = fp16(src[i]);
  }
}

// dst[c][r] = src[r][c] for an 8x8 fp32 block (row strides lds / ldd).
inline void Transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

inline bool IsIndexType(DType dtype) { return dtype == DType::kI64 || dtype == DType::kI32; }

// Contiguous int64 view of an index tensor (int64 or int32): returns a
// pointer into `t` when it is already int64, else converts into `storage`.
inline const int64_t* IndexData(const Tensor& t, std::vector<int64_t>& storage) {
  if (t.dtype() == DType::kI64) return t.data<int64_t>();
  const int32_t* p = t.data<int32_t>();
  storage.assign(p, p + t.numel());
  return storage.data();
}

// exp(x) for 8 lanes, relative error ~2 ulp; exp(x) = 0 for x < -87.3
// (including -inf) and saturates for x > 88.7.
inline __m256 Exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f);
  __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.7f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(underflow, y);
}

#define TESSERA_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

// The 16-lane version of Exp256, for functions compiled for AVX-512.
TESSERA_AVX512_TARGET inline __m512 Exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.7f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  __m512 y = _mm512_scalef_ps(p, n);
  return _mm512_maskz_mov_ps(keep, y);
}

// Whether the AVX-512 variants of these kernels run: the CPU (and OS) has
// AVX-512 F/BW/VL/DQ and the TESSERA_KERNEL_ISA knob is "auto" or
// "avx512"; "avx2" forces the AVX2 baseline (tests use it to cover both).
bool UseAvx512();
// Sets TESSERA_KERNEL_ISA for this process ("auto", "avx512", "avx2");
// an empty string returns to the environment/default value.
void SetKernelIsa(const std::string& isa);

}  // namespace tessera::ops::detail
