// The blocked GEMM driver behind GemmF32 / GemmBF16F32 (internal; arguments
// are validated by the callers). BLIS-style loops, with A and B's roles
// mirrored because the register tile is vectorized along N:
//   M blocks (mc rows) > K blocks (kc; A's mc x kc block packed into
//   mr-high micro-panels, or read in place when row-major, N is small and
//   rows do not alias in L1) > N blocks (nc; B's kc x nc block packed into
//   nr-wide micro-panels, L2-resident) > A micro-panel (L1) > B micro-panel
//   > micro-kernel (gemm_kernels.h).
// Packing buffers are thread-local, grown once and reused (no per-call
// allocation). bf16 inputs use the VDPBF16PS kernels on k-pairs, or are
// converted to fp32 while packing on CPUs without AVX512-BF16.
// Large problems split C into one block per OpenMP thread (a grid chosen to
// balance compute against duplicated packing); inside a parallel region, or
// below ~kMinMacsPerThread multiply-adds per thread, it runs single-threaded.
#pragma once

#include <cstdint>

#include "tessera/base/float16.h"

namespace tessera::ops::gemm {

// Multiply-adds a thread must have before a GEMM is split across threads.
inline constexpr int64_t kMinMacsPerThread = int64_t{1} << 19;

// Called once for every finished block of C (rows [row, row+rows), columns
// [col, col+cols)), right after its last K block, while it is still in
// cache, with the block's values at block[r*ld + c] (r, c relative to the
// block; ld may be 0 for a block of identical rows). MatMul rounds fp32
// results to bf16/fp16 here instead of in a separate pass over C. Blocks are
// disjoint and together cover C; calls may come concurrently from threads.
struct RowEpilogue {
  void (*fn)(void* ctx, const float* block, int64_t ld, int64_t row, int64_t rows, int64_t col, int64_t cols);
  void* ctx;
};

// Whether K fits in one K block of the active kernels. Then c may be null
// (with beta == 0 and an epilogue): results only go through the epilogue, C
// is never materialized and strips of it stay in L1.
bool FitsOneKBlock(int64_t k, bool bf16_inputs);

void RunF32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const RowEpilogue* epilogue = nullptr);
void RunBf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
             const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc, const RowEpilogue* epilogue = nullptr);

}  // namespace tessera::ops::gemm
