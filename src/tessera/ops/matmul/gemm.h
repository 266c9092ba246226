// Raw GEMM entry points on row-major buffers (BLAS-like, used by MatMul and
// by other kernels such as attention):
//   C[M,N] = alpha * op(A) @ op(B) + beta * C
// op(A) is A[M,K] (lda >= K) or, if trans_a, A stored [K,M] (lda >= M);
// likewise B. beta == 0 means C is not read. Multi-threaded with OpenMP
// unless called from inside a parallel region (then single-threaded), or
// when the problem is too small to repay a fork/join. Thread-safe: calls from
// different threads on disjoint C are independent (packing buffers are
// thread-local). Bad sizes / leading dimensions throw OpError.
// Under ops::UseReference() both run a plain triple loop (the oracle).
// Design and kernels: docs/gemm.md.
#pragma once

#include <cstdint>

#include "tessera/base/float16.h"

namespace tessera::ops {

void GemmF32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// bf16 inputs, fp32 accumulation and fp32 output (AVX512-BF16 VDPBF16PS
// when available, else converted to fp32 while packing).
void GemmBF16F32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                 int64_t lda, const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Name of the micro-kernel the dispatch table picked for this CPU, e.g.
// "f32_gemm_12x32_avx512" or "f32_gemm_6x16_avx2" (for `tessera info`
// and logs).
const char* GemmKernelName();

}  // namespace tessera::ops
