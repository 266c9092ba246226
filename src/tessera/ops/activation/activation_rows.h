// The optimized fp32 activation kernels on raw buffers, for fused epilogues
// (ops/matmul's GEMM epilogue): the same vectorized code, and so the same
// bits, as Gelu / Silu / Relu on tensors. y may equal x (in place). Pure
// functions; thread-safe.
#pragma once

#include <cstdint>

namespace tessera::ops {

void GeluRowF32(const float* x, float* y, int64_t n);
void SiluRowF32(const float* x, float* y, int64_t n);
void ReluRowF32(const float* x, float* y, int64_t n);

}  // namespace tessera::ops
