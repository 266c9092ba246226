// Internal pieces shared by the GEMM entry points (gemm.cc, gemm_int8.cc):
// argument checks and the fused epilogue (gemm_epilogue.cc) — the hook the
// tile GEMM calls on each finished block of C, and its reference twin.
#pragma once

#include <cstdint>

#include "tessera/ops/matmul/gemm.h"

namespace tessera::ops {

// Throws OpError naming `op` and the bad size / leading dimension / pointer.
void CheckGemmArgs(const char* op, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                   int64_t lda, const void* b, int64_t ldb, const void* c, int64_t ldc);
// Throws OpError for a residual pitch < n or a residual overlapping C.
void CheckEpilogue(const char* op, const GemmEpilogue& epi, int64_t m, int64_t n, const float* c, int64_t ldc);

struct EpilogueContext {
  const GemmEpilogue* spec;
  float* c;
  int64_t ldc;
};
// tile::Epilogue::fn: applies ctx's epilogue in place to C's block.
void ApplyEpilogueBlock(void* ctx, const void* block, int64_t ld, int64_t row, int64_t rows, int64_t col,
                        int64_t cols);
// The same, with plain scalar math, over all of C (the oracle).
void ApplyEpilogueReference(const GemmEpilogue& epi, int64_t m, int64_t n, float* c, int64_t ldc);

// Applies an activation (kNone, kRelu, kGelu, kSilu) in place to n floats.
void ApplyActivationRow(GemmActivation act, float* y, int64_t n);
float ActivationReference(GemmActivation act, float v);

}  // namespace tessera::ops
