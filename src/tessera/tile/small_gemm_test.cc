// tile::SmallGemmF32 (small_gemm.h), the unpacked GEMM fused kernels run
// on the tile micro-kernel: for every ISA this CPU runs, A read by rows and
// by columns, overwrite and accumulate, sizes that leave partial row tiles
// and every column-panel width — bit for bit against a scalar FMA chain in
// the same order (each C element: the k products fused in order from 0,
// then added to C when accumulating), padding around C untouched.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/hal/cpu_features.h"
#include "tessera/tile/small_gemm.h"

namespace tessera::tile {
namespace {

using SmallFn = void (*)(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                         bool);

template <class Tr, ALayout kA>
void Call(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool acc) {
  SmallGemmF32<Tr, kA>(m, n, k, a, lda, b, ldb, c, ldc, acc);
}

TESSERA_TARGET_AVX512 __attribute__((flatten)) void Avx512Rows(int64_t m, int64_t n, int64_t k, const float* a,
                                                               int64_t lda, const float* b, int64_t ldb, float* c,
                                                               int64_t ldc, bool acc) {
  Call<Avx512, ALayout::kRows>(m, n, k, a, lda, b, ldb, c, ldc, acc);
}
TESSERA_TARGET_AVX512 __attribute__((flatten)) void Avx512Cols(int64_t m, int64_t n, int64_t k, const float* a,
                                                               int64_t lda, const float* b, int64_t ldb, float* c,
                                                               int64_t ldc, bool acc) {
  Call<Avx512, ALayout::kCols>(m, n, k, a, lda, b, ldb, c, ldc, acc);
}
TESSERA_TARGET_AVX2 __attribute__((flatten)) void Avx2Rows(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                                           const float* b, int64_t ldb, float* c, int64_t ldc,
                                                           bool acc) {
  Call<Avx2, ALayout::kRows>(m, n, k, a, lda, b, ldb, c, ldc, acc);
}
TESSERA_TARGET_AVX2 __attribute__((flatten)) void Avx2Cols(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                                           const float* b, int64_t ldb, float* c, int64_t ldc,
                                                           bool acc) {
  Call<Avx2, ALayout::kCols>(m, n, k, a, lda, b, ldb, c, ldc, acc);
}

struct Variant {
  const char* name;
  int lanes;
  bool cols;
  SmallFn fn;
  bool supported;
};

std::vector<Variant> Variants() {
  const hal::CpuFeatures& f = hal::GetCpuFeatures();
  const bool avx512 = f.HasAvx512Core() && f.fma;
  return {{"avx512 rows", 16, false, &Avx512Rows, avx512},
          {"avx512 cols", 16, true, &Avx512Cols, avx512},
          {"avx2 rows", 8, false, &Avx2Rows, f.fma},
          {"avx2 cols", 8, true, &Avx2Cols, f.fma},
          {"portable rows", 4, false, &Call<Portable, ALayout::kRows>, true},
          {"portable cols", 4, true, &Call<Portable, ALayout::kCols>, true}};
}

TEST(SmallGemm, MatchesAnFmaChainBitForBit) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int checked = 0;
  for (const Variant& v : Variants()) {
    if (!v.supported) {
      std::fprintf(stderr, "SKIPPED small GEMM %s: this CPU lacks the ISA\n", v.name);
      continue;
    }
    // n covers 4-, 2- and 1-vector panels and their mixes; m leaves partial
    // row tiles; k = 0 writes zeros (or leaves C when accumulating).
    for (int64_t nvec : {1, 2, 3, 4, 5, 7}) {
      for (int64_t m : {1, 3, 5, 9, 13}) {
        for (int64_t k : {0, 1, 6, 33}) {
          for (bool acc : {false, true}) {
            const int64_t n = nvec * v.lanes, lda = (v.cols ? m : k) + 3, ldb = n + 5, ldc = n + 2;
            const int64_t a_rows = v.cols ? k : m;
            std::vector<float> a(std::max<int64_t>(1, a_rows * lda)), b(std::max<int64_t>(1, k * ldb));
            std::vector<float> c((m + 1) * ldc);
            for (float& x : a) x = u(rng);
            for (float& x : b) x = u(rng);
            for (float& x : c) x = u(rng);
            std::vector<float> want = c;
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                float s = 0.0f;
                for (int64_t p = 0; p < k; ++p)
                  s = std::fma(v.cols ? a[p * lda + i] : a[i * lda + p], b[p * ldb + j], s);
                want[i * ldc + j] = acc ? want[i * ldc + j] + s : s;
              }
            }
            v.fn(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, acc);
            ASSERT_EQ(c, want) << v.name << " m " << m << " n " << n << " k " << k << " acc " << acc;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 2 * 6 * 5 * 4 * 2);  // at least the portable variants
}

}  // namespace
}  // namespace tessera::tile
