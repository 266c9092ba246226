// Raw GEMM entry points on row-major buffers (BLAS-like, used by MatMul and
// by other kernels such as attention and convolution), all running the tile
// layer's GEMM (tile/gemm.h):
//   C[M,N] = alpha * op(A) @ op(B) + beta * C
// op(A) is A[M,K] (lda >= K) or, if trans_a, A stored [K,M] (lda >= M);
// likewise B. beta == 0 means C is not read. Multi-threaded with OpenMP
// over a grid of M x N blocks unless called from inside a parallel region
// (then single-threaded), or when the problem is too small to repay a
// fork/join. Thread-safe: calls from different threads on disjoint C are
// independent. Bad sizes / leading dimensions throw OpError naming them.
// Under ops::UseReference() every entry runs a plain loop (the oracle).
// Design and kernels: docs/gemm.md and docs/kernels.md.
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

// A fused epilogue, applied to each block of C as it finishes (still in
// cache), in this order:
//   y = alpha * op(A) @ op(B) + beta * C
//   y = act(y + bias[j]) * scale + residual[i * ldr + j]
// bias (length N) and residual (M rows of pitch ldr >= N; may alias C only
// exactly, i.e. residual == C with ldr == ldc) are optional. gelu is the tanh
// approximation and silu x*sigmoid(x), as ops/activation computes them.
enum class GemmActivation { kNone, kRelu, kGelu, kSilu };
struct GemmEpilogue {
  const float* bias = nullptr;
  GemmActivation activation = GemmActivation::kNone;
  float scale = 1.0f;
  const float* residual = nullptr;
  int64_t ldr = 0;
};

void GemmF32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const GemmEpilogue& epilogue);
void GemmBF16F32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                 int64_t lda, const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc,
                 const GemmEpilogue& epilogue);

// Integer GEMM: C[M,N] (int32) = A (uint8) @ B (int8), plus C when
// `accumulate`. Exact (VPDPBUSD on AVX512-VNNI, VPMADDWD on AVX2) for
// K < 65793; larger K is refused (the int32 sum could overflow).
void GemmU8S8S32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint8_t* a, int64_t lda,
                 const int8_t* b, int64_t ldb, bool accumulate, int32_t* c, int64_t ldc);

// Quantized GEMM with requantization (the oneDNN / ONNX QLinearMatMul
// convention): real(A) = a_scale * (A - a_zero) per tensor (uint8),
// real(B)[:, j] = b_scale[j] * B[:, j] (int8, symmetric; per column, or one
// scale for all when b_scale_per_column is false). With acc = A @ B (int32)
// and colsum_j = sum_k B[k, j], each element is
//   y = act(a_scale * b_scale[j] * (acc - a_zero * colsum_j) + bias[j])
// in fp32 (the multiplication in that order), written either as fp32 (y_f32)
// or requantized to uint8 (y_u8): clamp(nearbyint(y / y_scale) + y_zero,
// 0, 255). Exactly one of y_f32 / y_u8 is set; ldy is its row pitch.
struct QuantizedGemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const uint8_t* a = nullptr;
  int64_t lda = 0;
  float a_scale = 1.0f;
  int32_t a_zero = 0;
  const int8_t* b = nullptr;
  int64_t ldb = 0;
  const float* b_scale = nullptr;
  bool b_scale_per_column = true;
  const float* bias = nullptr;  // length N, optional
  GemmActivation activation = GemmActivation::kNone;  // kNone or kRelu
  float* y_f32 = nullptr;
  uint8_t* y_u8 = nullptr;
  int64_t ldy = 0;
  float y_scale = 1.0f;
  int32_t y_zero = 0;
};
void QuantizedGemm(const QuantizedGemmArgs& args);

// Name of the default fp32 micro-kernel on this CPU, e.g.
// "f32_gemm_12x32_avx512" (for `tessera info` and logs); likewise bf16 and
// int8.
const char* GemmKernelName();
const char* GemmBf16KernelName();
const char* GemmInt8KernelName();

}  // namespace tessera::ops
