// GemmF32 / GemmBF16F32 / GemmU8S8S32 entry points: argument checks, the
// reference loops (ops::UseReference(), the oracle), and the hand-off to the
// tile layer's GEMM otherwise, with the fused epilogue when one is given.
#include "tessera/ops/matmul/gemm.h"

#include <algorithm>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/matmul/gemm_internal.h"
#include "tessera/tile/gemm.h"

namespace tessera::ops {
namespace {

template <typename T>
float AsFloat(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return static_cast<float>(v);
  }
}

template <typename T>
void ReferenceGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                   int64_t lda, const T* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) {
        float x = AsFloat(trans_a ? a[p * lda + i] : a[i * lda + p]);
        float y = AsFloat(trans_b ? b[j * ldb + p] : b[p * ldb + j]);
        acc += x * y;
      }
      float& out = c[i * ldc + j];
      out = beta == 0.0f ? alpha * acc : alpha * acc + beta * out;
    }
  }
}

template <typename T>
tile::GemmArgs<T, T, float> Args(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                                 int64_t lda, const T* b, int64_t ldb, float beta, float* c, int64_t ldc,
                                 const tile::Epilogue* epilogue) {
  tile::GemmArgs<T, T, float> g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.beta = beta;
  g.c = c;
  g.ldc = ldc;
  g.epilogue = epilogue;
  return g;
}

template <typename T>
void RunFloat(const char* op, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
              int64_t lda, const T* b, int64_t ldb, float beta, float* c, int64_t ldc, const GemmEpilogue* epi) {
  CheckGemmArgs(op, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  if (epi != nullptr) CheckEpilogue(op, *epi, m, n, c, ldc);
  if (UseReference()) {
    ReferenceGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (epi != nullptr) ApplyEpilogueReference(*epi, m, n, c, ldc);
    return;
  }
  EpilogueContext ctx{epi, c, ldc};
  const tile::Epilogue hook{&ApplyEpilogueBlock, &ctx};
  tile::Gemm(Args(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epi != nullptr ? &hook : nullptr));
}

}  // namespace

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

void GemmF32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  RunFloat("gemm_f32", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr);
}

void GemmBF16F32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                 int64_t lda, const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  RunFloat("gemm_bf16f32", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr);
}

void GemmF32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const GemmEpilogue& epilogue) {
  RunFloat("gemm_f32", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &epilogue);
}

void GemmBF16F32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                 int64_t lda, const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc,
                 const GemmEpilogue& epilogue) {
  RunFloat("gemm_bf16f32", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &epilogue);
}

const char* GemmKernelName() { return tile::DefaultKernel(tile::GemmType::kF32).name; }
const char* GemmBf16KernelName() { return tile::DefaultKernel(tile::GemmType::kBf16F32).name; }
const char* GemmInt8KernelName() { return tile::DefaultKernel(tile::GemmType::kU8S8S32).name; }

}  // namespace tessera::ops
