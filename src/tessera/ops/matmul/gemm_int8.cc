// Integer GEMMs (gemm.h): GemmU8S8S32 (exact int32 products) and
// QuantizedGemm (zero-point compensation through B's column sums, then
// dequantization, bias, ReLU and optional uint8 requantization in the tile
// GEMM's epilogue, strip by strip while the int32 results are in L1).
#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/matmul/gemm_internal.h"
#include "tessera/tile/gemm.h"

namespace tessera::ops {
namespace {

// The largest K whose int32 sum of u8 x s8 products cannot overflow:
// 255 * 128 * K < 2^31.
constexpr int64_t kMaxInt8K = 65793;

void ReferenceInt8(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint8_t* a, int64_t lda,
                   const int8_t* b, int64_t ldb, bool accumulate, int32_t* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const int32_t x = trans_a ? a[p * lda + i] : a[i * lda + p];
        const int32_t y = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        acc += x * y;
      }
      c[i * ldc + j] = static_cast<int32_t>(accumulate ? c[i * ldc + j] + acc : acc);
    }
  }
}

tile::U8S8Args Int8Args(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint8_t* a, int64_t lda,
                        const int8_t* b, int64_t ldb, bool accumulate, int32_t* c, int64_t ldc,
                        const tile::Epilogue* epilogue) {
  tile::U8S8Args g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.beta = accumulate ? 1.0f : 0.0f;
  g.c = c;
  g.ldc = ldc;
  g.epilogue = epilogue;
  return g;
}

struct Requant {
  const QuantizedGemmArgs* q;
  const int32_t* colsum;
};

// One output row: y = act(a_scale * b_scale[j] * (acc - a_zero * colsum_j)
// + bias[j]), stored as fp32 or requantized to uint8.
TESSERA_MULTIVERSION void RequantRow(const QuantizedGemmArgs& q, const int32_t* __restrict acc,
                                     const int32_t* __restrict colsum, int64_t col, int64_t cols,
                                     float* __restrict y_f32, uint8_t* __restrict y_u8) {
  for (int64_t j = 0; j < cols; ++j) {
    const float b_scale = q.b_scale_per_column ? q.b_scale[col + j] : q.b_scale[0];
    const int64_t centred = static_cast<int64_t>(acc[j]) - static_cast<int64_t>(q.a_zero) * colsum[col + j];
    float v = (q.a_scale * b_scale) * static_cast<float>(centred);
    if (q.bias != nullptr) v += q.bias[col + j];
    if (q.activation == GemmActivation::kRelu) v = v > 0.0f ? v : 0.0f;
    if (y_f32 != nullptr) {
      y_f32[j] = v;
    } else {
      const float r = std::nearbyint(v / q.y_scale) + static_cast<float>(q.y_zero);
      y_u8[j] = static_cast<uint8_t>(std::clamp(r, 0.0f, 255.0f));
    }
  }
}

void RequantBlock(void* ctx_ptr, const void* block, int64_t ld, int64_t row, int64_t rows, int64_t col,
                  int64_t cols) {
  const auto* ctx = static_cast<const Requant*>(ctx_ptr);
  const QuantizedGemmArgs& q = *ctx->q;
  const auto* acc = static_cast<const int32_t*>(block);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = row + r;
    RequantRow(q, acc + r * ld, ctx->colsum, col, cols, q.y_f32 != nullptr ? q.y_f32 + i * q.ldy + col : nullptr,
               q.y_u8 != nullptr ? q.y_u8 + i * q.ldy + col : nullptr);
  }
}

void CheckQuantized(const QuantizedGemmArgs& q) {
  constexpr const char* op = "quantized_gemm";
  const void* y = q.y_f32 != nullptr ? static_cast<const void*>(q.y_f32) : static_cast<const void*>(q.y_u8);
  TESSERA_OP_CHECK((q.y_f32 == nullptr) != (q.y_u8 == nullptr) || q.m * q.n == 0,
                   "{}: set exactly one of y_f32 and y_u8", op);
  CheckGemmArgs(op, q.trans_a, q.trans_b, q.m, q.n, q.k, q.a, q.lda, q.b, q.ldb, y, q.ldy);
  TESSERA_OP_CHECK(q.k <= kMaxInt8K, "{}: k={} > {}: the int32 accumulation could overflow", op, q.k, kMaxInt8K);
  TESSERA_OP_CHECK(q.b_scale != nullptr || q.m * q.n == 0, "{}: b_scale is null", op);
  TESSERA_OP_CHECK(q.a_zero >= 0 && q.a_zero <= 255, "{}: a_zero={} is not a uint8 value", op, q.a_zero);
  TESSERA_OP_CHECK(q.y_u8 == nullptr || (q.y_scale > 0.0f && std::isfinite(q.y_scale) && q.y_zero >= 0 &&
                                         q.y_zero <= 255),
                   "{}: uint8 output needs y_scale > 0 (got {}) and y_zero in [0, 255] (got {})", op, q.y_scale,
                   q.y_zero);
  TESSERA_OP_CHECK(q.activation == GemmActivation::kNone || q.activation == GemmActivation::kRelu,
                   "{}: only no activation or ReLU is fused", op);
}

}  // namespace

void GemmU8S8S32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint8_t* a, int64_t lda,
                 const int8_t* b, int64_t ldb, bool accumulate, int32_t* c, int64_t ldc) {
  CheckGemmArgs("gemm_u8s8s32", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  TESSERA_OP_CHECK(k <= kMaxInt8K, "gemm_u8s8s32: k={} > {}: the int32 accumulation could overflow", k, kMaxInt8K);
  if (UseReference()) {
    ReferenceInt8(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
    return;
  }
  tile::Gemm(Int8Args(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, nullptr));
}

void QuantizedGemm(const QuantizedGemmArgs& q) {
  CheckQuantized(q);
  if (q.m == 0 || q.n == 0) return;
  // Zero-point compensation: sum_k (A - za) B = A @ B - za * colsum(B).
  std::vector<int32_t> colsum(static_cast<size_t>(q.n), 0);
  for (int64_t p = 0; p < q.k; ++p) {
    for (int64_t j = 0; j < q.n; ++j) colsum[j] += q.trans_b ? q.b[j * q.ldb + p] : q.b[p * q.ldb + j];
  }
  Requant ctx{&q, colsum.data()};
  if (UseReference()) {
    std::vector<int32_t> acc(static_cast<size_t>(q.m * q.n));
    ReferenceInt8(q.trans_a, q.trans_b, q.m, q.n, q.k, q.a, q.lda, q.b, q.ldb, false, acc.data(), q.n);
    RequantBlock(&ctx, acc.data(), q.n, 0, q.m, 0, q.n);
    return;
  }
  const tile::Epilogue hook{&RequantBlock, &ctx};
  // One K block: the int32 results only live in L1 strips; otherwise in a
  // scratch C that the epilogue reads back strip by strip.
  std::vector<int32_t> scratch;
  int32_t* c = nullptr;
  if (!tile::FitsOneKBlock(tile::GemmType::kU8S8S32, q.k)) {
    scratch.resize(static_cast<size_t>(q.m * q.n));
    c = scratch.data();
  }
  tile::Gemm(Int8Args(q.trans_a, q.trans_b, q.m, q.n, q.k, q.a, q.lda, q.b, q.ldb, false, c, q.n, &hook));
}

}  // namespace tessera::ops
