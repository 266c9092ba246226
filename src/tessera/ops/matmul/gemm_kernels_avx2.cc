// AVX2+FMA micro-kernel: fp32 6x16 (12 ymm accumulators, two B vectors and
// one broadcast per k). The fallback for CPUs without AVX-512; bf16 inputs
// are converted to fp32 while packing. Also the kernel-set selection.
#include <immintrin.h>

#include <string>

#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/ops/matmul/gemm_kernels.h"

#define TESSERA_AVX2 __attribute__((target("avx2,fma")))

namespace tessera::ops::gemm {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

base::Knob<std::string> kGemmIsaKnob("TESSERA_GEMM_ISA", "auto",
                                     "GEMM micro-kernel ISA: auto (best the CPU supports), avx512 or avx2");

template <bool kRowsA>
TESSERA_AVX2 void F32Kernel6x16(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                int64_t ldc, int mv, int nv, float alpha, float beta) {
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const int64_t row_step = kRowsA ? lda : 1;
  const int64_t k_step = kRowsA ? 1 : lda;
  const float* a0 = a;
  const float* a3 = a + 3 * row_step;
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    b += ldb;
    const float* bases[2] = {a0, a3};
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const __m256 ai = _mm256_broadcast_ss(bases[i / 3] + (i % 3) * row_step);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a0 += k_step;
    a3 += k_step;
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  if (mv == kMr && nv == kNr) {
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      float* ci = c + i * ldc;
      __m256 r0 = _mm256_mul_ps(acc[i][0], va), r1 = _mm256_mul_ps(acc[i][1], va);
      if (beta != 0.0f) {
        r0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), r0);
        r1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), r1);
      }
      _mm256_storeu_ps(ci, r0);
      _mm256_storeu_ps(ci + 8, r1);
    }
    return;
  }
  alignas(32) float tile[kNr];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {
    if (i >= mv) break;
    float* ci = c + i * ldc;
    _mm256_store_ps(tile, _mm256_mul_ps(acc[i][0], va));
    _mm256_store_ps(tile + 8, _mm256_mul_ps(acc[i][1], va));
    for (int j = 0; j < nv; ++j) ci[j] = beta == 0.0f ? tile[j] : tile[j] + beta * ci[j];
  }
}

const KernelSet* ChooseKernelSet() {
  std::string want = kGemmIsaKnob.Get();
  const KernelSet* set = nullptr;
  if (want == "avx2") {
    set = Avx2KernelSet();
  } else {
    if (want != "auto" && want != "avx512") {
      TLOG(WARN, "TESSERA_GEMM_ISA={} is not one of auto, avx512, avx2; using auto", want);
    }
    set = Avx512KernelSet();
    if (set == nullptr) set = Avx2KernelSet();
  }
  if (set == nullptr) set = Avx2KernelSet();  // the build's baseline ISA (x86-64-v3)
  TLOG(INFO, "gemm: using {} (fp32) and {} (bf16); TESSERA_GEMM_ISA={}", set->f32_name, set->bf16_name, want);
  return set;
}

const KernelSet* g_override = nullptr;

}  // namespace

const KernelSet* Avx2KernelSet() {
  static const KernelSet s{"avx2", "f32_gemm_6x16_avx2", "bf16f32_gemm_6x16_avx2_via_f32", kMr, kNr, 256, 256,
                           144, 2048, &F32Kernel6x16<true>, &F32Kernel6x16<false>, nullptr, nullptr};
  return &s;
}

const KernelSet& ActiveKernelSet() {
  if (g_override != nullptr) return *g_override;
  static const KernelSet* chosen = ChooseKernelSet();
  return *chosen;
}

void SetKernelSetForTesting(const KernelSet* set) { g_override = set; }

}  // namespace tessera::ops::gemm
