// The worked example of docs/kernels.md ("Writing a kernel on the tile
// layer"), compiled and checked here so the document cannot drift from the
// API: a linear layer y = x @ w^T + bias written as one tile GEMM whose
// epilogue adds the bias to each finished block while it is in cache.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/tile/gemm.h"

namespace tessera::tile {
namespace {

// ---- the example, as the document shows it ----
struct BiasEpilogue {
  const float* bias;  // [N]
  float* y;           // [M, N], row pitch ldy
  int64_t ldy;
};

// Called once per finished block of C: rows [row, row + rows), columns
// [col, col + cols), values at block[r * ld + c]. The block is either an
// L1 strip (C omitted) or y itself (then this adds in place).
void AddBias(void* ctx, const void* block, int64_t ld, int64_t row, int64_t rows, int64_t col, int64_t cols) {
  const auto* e = static_cast<const BiasEpilogue*>(ctx);
  const auto* src = static_cast<const float*>(block);
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = e->y + (row + r) * e->ldy + col;
    for (int64_t j = 0; j < cols; ++j) dst[j] = src[r * ld + j] + e->bias[col + j];
  }
}

// y[M, N] = x[M, K] @ w[N, K]^T + bias[N] (fp32, row-major).
void LinearF32(const float* x, const float* w, const float* bias, float* y, int64_t m, int64_t n, int64_t k) {
  BiasEpilogue ctx{bias, y, n};
  const Epilogue epilogue{&AddBias, &ctx};
  F32Args g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = x;
  g.lda = k;
  g.b = w;  // stored [N, K]: op(B) = w^T, packed into nr-wide panels by 8x8 transposes
  g.ldb = k;
  g.trans_b = true;
  // With K in one block C can be omitted: each mr x nc strip is computed
  // into an L1 buffer and handed to the epilogue, which writes y.
  g.c = FitsOneKBlock(GemmType::kF32, k) ? nullptr : y;
  g.ldc = n;
  g.epilogue = &epilogue;
  Gemm(g);  // tuned (or default) kernel, blocks and thread grid
}
// ---- end of the example ----

TEST(TileExample, LinearWithBiasEpilogueMatchesALoop) {
  for (const int64_t k : {int64_t{1}, int64_t{37}, int64_t{1000}}) {  // one K block, and several
    const int64_t m = 131, n = 67;
    std::vector<float> x(m * k), w(n * k), bias(n), y(m * n, NAN);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * static_cast<float>(i));
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i) - 30.0f;
    LinearF32(x.data(), w.data(), bias.data(), y.data(), m, n, k);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = bias[j], scale = std::abs(bias[j]);
        for (int64_t p = 0; p < k; ++p) {
          want += static_cast<double>(x[i * k + p]) * w[j * k + p];
          scale += std::abs(static_cast<double>(x[i * k + p]) * w[j * k + p]);
        }
        ASSERT_NEAR(y[i * n + j], want, 2e-6 * scale + 1e-6) << "k " << k << " at " << i << ", " << j;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::tile
