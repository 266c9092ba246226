// AVX-512 micro-kernels: fp32 12x32 (24 zmm accumulators, B loaded as two
// vectors per k, A broadcast from memory) and bf16 12x32 with VDPBF16PS
// (k consumed in pairs). Compiled per function for AVX-512 so the rest of the
// build stays x86-64-v3; selected at run time.
#include <immintrin.h>

#include <cstring>

#include "tessera/ops/matmul/gemm_kernels.h"

#define TESSERA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define TESSERA_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

namespace tessera::ops::gemm {
namespace {

constexpr int kMr = 12;
constexpr int kNr = 32;

// C = alpha * acc + beta * C for the valid mv x nv corner of the tile.
#define TESSERA_STORE_TILE(acc, c, ldc, mv, nv, alpha, beta)                                           \
  do {                                                                                                 \
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);                               \
    if ((mv) == kMr && (nv) == kNr) {                                                                  \
      _Pragma("GCC unroll 12") for (int i = 0; i < kMr; ++i) {                                         \
        float* ci = (c) + i * (ldc);                                                                   \
        __m512 r0 = _mm512_mul_ps(acc[i][0], va), r1 = _mm512_mul_ps(acc[i][1], va);                  \
        if ((beta) != 0.0f) {                                                                          \
          r0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci), r0);                                           \
          r1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci + 16), r1);                                      \
        }                                                                                              \
        _mm512_storeu_ps(ci, r0);                                                                      \
        _mm512_storeu_ps(ci + 16, r1);                                                                 \
      }                                                                                                \
    } else {                                                                                           \
      const __mmask16 m0 = (nv) >= 16 ? 0xffff : static_cast<__mmask16>((1u << (nv)) - 1);             \
      const __mmask16 m1 =                                                                             \
          (nv) >= 32 ? 0xffff : ((nv) > 16 ? static_cast<__mmask16>((1u << ((nv) - 16)) - 1) : 0);      \
      _Pragma("GCC unroll 12") for (int i = 0; i < kMr; ++i) {                                         \
        if (i < (mv)) {                                                                                \
          float* ci = (c) + i * (ldc);                                                                 \
          __m512 r0 = _mm512_mul_ps(acc[i][0], va), r1 = _mm512_mul_ps(acc[i][1], va);                \
          if ((beta) != 0.0f) {                                                                        \
            r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), r0);                               \
            r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), r1);                          \
          }                                                                                            \
          _mm512_mask_storeu_ps(ci, m0, r0);                                                           \
          _mm512_mask_storeu_ps(ci + 16, m1, r1);                                                      \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
  } while (0)

// Starts loading the C tile (2 lines per row) so it arrives while the
// k-loop runs; C often lives in L3 or memory.
inline void PrefetchTile(const float* c, int64_t ldc) {
  for (int i = 0; i < kMr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNr - 1), _MM_HINT_T0);
  }
}

template <bool kRowsA>
TESSERA_AVX512 void F32Kernel12x32(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                   int64_t ldc, int mv, int nv, float alpha, float beta) {
  PrefetchTile(c, ldc);
  __m512 acc[kMr][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  // Row mode: rows 0..11 at a0 + {0,1,2} * lda, a3 + ..., so every address is
  // a base register plus lda scaled by 4 or 8 bytes.
  const int64_t row_step = kRowsA ? lda : 1;
  const int64_t k_step = kRowsA ? 1 : lda;
  const float* a0 = a;
  const float* a3 = a + 3 * row_step;
  const float* a6 = a + 6 * row_step;
  const float* a9 = a + 9 * row_step;
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    b += ldb;
    const float* bases[4] = {a0, a3, a6, a9};
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
      const __m512 ai = _mm512_set1_ps(bases[i / 3][(i % 3) * row_step]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a0 += k_step;
    a3 += k_step;
    a6 += k_step;
    a9 += k_step;
  }
  TESSERA_STORE_TILE(acc, c, ldc, mv, nv, alpha, beta);
}

TESSERA_AVX512BF16 inline __m512bh PairBroadcast(const bf16* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof(w));
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(w)));
}

template <bool kRowsA>
TESSERA_AVX512BF16 void Bf16Kernel12x32(int64_t kc, const bf16* a, int64_t lda, const bf16* b, float* c,
                                        int64_t ldc, int mv, int nv, float alpha, float beta) {
  PrefetchTile(c, ldc);
  __m512 acc[kMr][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  // Rows mode: pair (i, 2q..2q+1) at a[i*lda + 2q]; pairs mode: a[q*lda + 2i].
  const int64_t row_step = kRowsA ? lda : 2;
  const int64_t pair_step = kRowsA ? 2 : lda;
  const int64_t pairs = kRowsA ? kc / 2 : (kc + 1) / 2;
  const bf16* a0 = a;
  const bf16* a3 = a + 3 * row_step;
  const bf16* a6 = a + 6 * row_step;
  const bf16* a9 = a + 9 * row_step;
#pragma GCC unroll 4
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 32));
    b += 2 * kNr;
    const bf16* bases[4] = {a0, a3, a6, a9};
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
      const __m512bh ai = PairBroadcast(bases[i / 3] + (i % 3) * row_step);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
    a0 += pair_step;
    a3 += pair_step;
    a6 += pair_step;
    a9 += pair_step;
  }
  if (kRowsA && (kc & 1)) {  // last k alone: pair it with zero (B's pad is zero too)
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 32));
    const bf16* bases[4] = {a0, a3, a6, a9};
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
      const int w = bases[i / 3][(i % 3) * row_step].bits;
      const __m512bh ai = reinterpret_cast<__m512bh>(_mm512_set1_epi32(w));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  TESSERA_STORE_TILE(acc, c, ldc, mv, nv, alpha, beta);
}

#undef TESSERA_STORE_TILE

bool HasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
}

}  // namespace

const KernelSet* Avx512KernelSet() {
  static const KernelSet* set = []() -> const KernelSet* {
    if (!HasAvx512()) return nullptr;
    // Blocking (Zen 5: 48 KiB L1D, 1 MiB L2): the A micro-panel (12 x kc)
    // stays in L1 while B's kc x nc block (512 KiB for fp32 and bf16) streams
    // from L2; A's mc x kc block is packed once per mc rows.
    static KernelSet s{"avx512", "f32_gemm_12x32_avx512", "bf16f32_gemm_12x32_avx512bf16", kMr, kNr, 256, 512,
                       1920, 512, &F32Kernel12x32<true>, &F32Kernel12x32<false>, nullptr, nullptr};
    if (__builtin_cpu_supports("avx512bf16")) {
      s.bf16_rows = &Bf16Kernel12x32<true>;
      s.bf16_pairs = &Bf16Kernel12x32<false>;
    } else {
      s.bf16_name = "bf16f32_gemm_12x32_avx512_via_f32";
    }
    return &s;
  }();
  return set;
}

}  // namespace tessera::ops::gemm
