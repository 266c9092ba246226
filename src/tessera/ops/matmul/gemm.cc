// GemmF32 / GemmBF16F32 entry points: argument checks, the reference triple
// loop (ops::UseReference(), the oracle), and the hand-off to the blocked
// driver (gemm_driver.h) otherwise.
#include "tessera/ops/matmul/gemm.h"

#include <algorithm>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/matmul/gemm_driver.h"
#include "tessera/ops/matmul/gemm_kernels.h"

namespace tessera::ops {
namespace {

void CheckGemmArgs(const char* op, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                   int64_t lda, const void* b, int64_t ldb, const void* c, int64_t ldc) {
  TESSERA_OP_CHECK(m >= 0 && n >= 0 && k >= 0, "{}: negative size m={} n={} k={}", op, m, n, k);
  int64_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  TESSERA_OP_CHECK(lda >= std::max<int64_t>(1, a_cols), "{}: lda={} < {} (A is {} x {}{})", op, lda,
                   std::max<int64_t>(1, a_cols), trans_a ? k : m, a_cols, trans_a ? ", stored transposed" : "");
  TESSERA_OP_CHECK(ldb >= std::max<int64_t>(1, b_cols), "{}: ldb={} < {} (B is {} x {}{})", op, ldb,
                   std::max<int64_t>(1, b_cols), trans_b ? n : k, b_cols, trans_b ? ", stored transposed" : "");
  TESSERA_OP_CHECK(ldc >= std::max<int64_t>(1, n), "{}: ldc={} < n={}", op, ldc, n);
  TESSERA_OP_CHECK((a != nullptr || m * k == 0) && (b != nullptr || k * n == 0) && (c != nullptr || m * n == 0),
                   "{}: null pointer for a non-empty operand (m={} n={} k={})", op, m, n, k);
}

template <typename T>
void ReferenceGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                   int64_t lda, const T* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) {
        float x = static_cast<float>(trans_a ? a[p * lda + i] : a[i * lda + p]);
        float y = static_cast<float>(trans_b ? b[j * ldb + p] : b[p * ldb + j]);
        acc += x * y;
      }
      float& out = c[i * ldc + j];
      out = beta == 0.0f ? alpha * acc : alpha * acc + beta * out;
    }
  }
}

}  // namespace

void GemmF32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  CheckGemmArgs("gemm_f32", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  if (!UseReference()) {
    gemm::RunF32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  ReferenceGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void GemmBF16F32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                 int64_t lda, const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  CheckGemmArgs("gemm_bf16f32", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  if (!UseReference()) {
    gemm::RunBf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  ReferenceGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char* GemmKernelName() { return gemm::ActiveKernelSet().f32_name; }

}  // namespace tessera::ops
