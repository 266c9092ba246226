// GEMM micro-kernels and the dispatch table that picks them (internal).
//
// A micro-kernel computes one register tile of C:
//   C[i, j] = alpha * sum_{p < kc} A(i, p) * Bp(p, j) + beta * C[i, j]
// for i < mv <= mr, j < nv <= nr (beta == 0: C is not read). Rows i >= mv are
// still computed from A (so A must hold mr readable rows) but not stored.
// Bp is a B micro-panel: fp32 kernels read kc rows of nr contiguous floats,
// row p at b + p*ldb (ldb = nr when packed; B's own row pitch when a full
// panel of a row-major B is read in place); bf16 kernels read a packed panel
// of ceil(kc/2) k-pairs of nr interleaved (even, odd) bf16 pairs, i.e.
// Bp[q*2*nr + 2*j + s] = B(2q + s, j), zero-padded.
// A is read in place or from a packed panel, by addressing mode:
//   *_rows:  A(i, p) = a[i * lda + p]   (row-major A, no packing)
//   *_cols:  A(i, p) = a[p * lda + i]   (packed panel: lda = mr)
//   bf16 *_pairs: A(i, 2q + s) = a[q * lda + 2 * i + s]  (packed, lda = 2*mr)
// bf16 *_rows handles an odd kc itself (the last k has no partner).
//
// The table is chosen once from the CPU's features (TESSERA_GEMM_ISA can
// force "avx2"); kernels are pure functions, safe from any thread.
#pragma once

#include <cstdint>

#include "tessera/base/float16.h"

namespace tessera::ops::gemm {

using F32Kernel = void (*)(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                           int64_t ldc, int mv, int nv, float alpha, float beta);
using Bf16Kernel = void (*)(int64_t kc, const bf16* a, int64_t lda, const bf16* b, float* c, int64_t ldc, int mv,
                            int nv, float alpha, float beta);

struct KernelSet {
  const char* isa;        // "avx512", "avx2"
  const char* f32_name;   // e.g. "f32_gemm_12x32_avx512"
  const char* bf16_name;  // e.g. "bf16f32_gemm_12x32_avx512bf16", or "..._via_f32" when converted
  int mr, nr;             // register tile
  int kc_f32, kc_bf16;    // K block (elements) for each input type
  int mc, nc;             // M and N blocks (multiples of mr / nr)
  F32Kernel f32_rows;
  F32Kernel f32_cols;
  Bf16Kernel bf16_rows;   // null: bf16 inputs are converted to fp32 while packing
  Bf16Kernel bf16_pairs;
};

// Per-ISA tables; null when the CPU lacks the ISA.
const KernelSet* Avx512KernelSet();
const KernelSet* Avx2KernelSet();

// The table in use: chosen on first call (logged at INFO), then fixed.
const KernelSet& ActiveKernelSet();

// Tests only: replaces the active table (nullptr restores the automatic one).
// Not thread-safe against concurrent GEMMs.
void SetKernelSetForTesting(const KernelSet* set);

}  // namespace tessera::ops::gemm
