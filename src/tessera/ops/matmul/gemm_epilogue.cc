// The GEMM's fused epilogue (gemm.h): bias, activation, scale and residual
// applied to each block of C as the tile GEMM finishes it (still in cache),
// using ops/activation's vectorized row kernels; and the scalar reference.
#include <algorithm>
#include <cmath>

#include "tessera/base/error.h"
#include "tessera/ops/activation/activation_rows.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/matmul/gemm_internal.h"

namespace tessera::ops {
namespace {

TESSERA_MULTIVERSION void AddRow(float* __restrict y, const float* __restrict x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += x[j];
}
TESSERA_MULTIVERSION void ScaleRow(float* y, float s, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] *= s;
}

}  // namespace

void CheckEpilogue(const char* op, const GemmEpilogue& epi, int64_t m, int64_t n, const float* c, int64_t ldc) {
  if (epi.residual == nullptr || m == 0 || n == 0) return;
  TESSERA_OP_CHECK(epi.ldr >= n, "{}: residual pitch ldr={} < n={}", op, epi.ldr, n);
  const float* r_end = epi.residual + (m - 1) * epi.ldr + n;
  const float* c_end = c + (m - 1) * ldc + n;
  TESSERA_OP_CHECK(r_end <= c || c_end <= epi.residual,
                   "{}: the residual overlaps C (use beta = 1 to add C itself)", op);
}

void ApplyActivationRow(GemmActivation act, float* y, int64_t n) {
  switch (act) {
    case GemmActivation::kNone:
      return;
    case GemmActivation::kRelu:
      ReluRowF32(y, y, n);
      return;
    case GemmActivation::kGelu:
      GeluRowF32(y, y, n);
      return;
    case GemmActivation::kSilu:
      SiluRowF32(y, y, n);
      return;
  }
}

float ActivationReference(GemmActivation act, float v) {
  switch (act) {
    case GemmActivation::kNone:
      return v;
    case GemmActivation::kRelu:
      return v > 0.0f ? v : 0.0f;
    case GemmActivation::kGelu:
      return 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case GemmActivation::kSilu:
      return v / (1.0f + std::exp(-v));
  }
  return v;
}

void ApplyEpilogueBlock(void* ctx_ptr, const void*, int64_t, int64_t row, int64_t rows, int64_t col, int64_t cols) {
  const auto* ctx = static_cast<const EpilogueContext*>(ctx_ptr);
  const GemmEpilogue& e = *ctx->spec;
  for (int64_t r = row; r < row + rows; ++r) {
    float* y = ctx->c + r * ctx->ldc + col;
    if (e.bias != nullptr) AddRow(y, e.bias + col, cols);
    ApplyActivationRow(e.activation, y, cols);
    if (e.scale != 1.0f) ScaleRow(y, e.scale, cols);
    if (e.residual != nullptr) AddRow(y, e.residual + r * e.ldr + col, cols);
  }
}

void ApplyEpilogueReference(const GemmEpilogue& e, int64_t m, int64_t n, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float v = c[i * ldc + j];
      if (e.bias != nullptr) v += e.bias[j];
      v = ActivationReference(e.activation, v) * e.scale;
      if (e.residual != nullptr) v += e.residual[i * e.ldr + j];
      c[i * ldc + j] = v;
    }
  }
}

}  // namespace tessera::ops
