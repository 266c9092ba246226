// Small fp32 GEMMs inside fused kernels (flash attention's score and value
// products): C[m][n] (+)= sum_p A(i, p) B[p][j] on the tile micro-kernel
// (microkernel.h, F32Fma over the ISA traits Tr), with nothing packed —
// A is read in place by rows, A(i, p) = a[i*lda + p] (ALayout::kRows), or
// by columns, A(i, p) = a[p*lda + i] (ALayout::kCols); B is row-major with
// row pitch ldb. n must be a multiple of Tr::kLanes (the caller pads).
// Register tiles: 4, 2 or 1 vectors of columns with the most rows the
// register file holds (SmallGemmRows), one row at a time for the last rows.
// accumulate: C += A B (the sum over p is formed first, then added); else
// C = A B. One thread. Header-only: call it from code compiled for Tr's ISA
// (a function or translation unit with that target), where it inlines.
#pragma once

#include <cstdint>

#include "tessera/tile/microkernel.h"
#include "tessera/tile/mma.h"

namespace tessera::tile {

// Rows of a register tile of nv vectors: accumulators rows*nv, plus nv B
// vectors and one broadcast, within the register file.
template <class Tr>
constexpr int SmallGemmRows(int nv) {
  if constexpr (Tr::kRegisters >= 32) {
    return nv >= 4 ? 4 : 8;
  } else {
    return nv >= 4 ? 2 : nv == 2 ? 4 : 6;
  }
}

template <class Tr, ALayout kA, int NV>
TESSERA_INLINE void SmallGemmPanel(int64_t m, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                                   float* c, int64_t ldc, bool accumulate) {
  constexpr int R = SmallGemmRows<Tr>(NV);
  constexpr int NR = NV * Tr::kLanes;
  const int64_t row_step = kA == ALayout::kRows ? lda : 1;
  TileArgs t{k, a, lda, b, ldb, c, ldc, R, NR, 1.0f, accumulate ? 1.0f : 0.0f};
  int64_t i = 0;
  for (; i + R <= m; i += R) {
    t.a = a + i * row_step;
    t.c = c + i * ldc;
    GemmTile<F32Fma<Tr>, R, NR, kA>(t);
  }
  t.mv = 1;
  for (; i < m; ++i) {
    t.a = a + i * row_step;
    t.c = c + i * ldc;
    GemmTile<F32Fma<Tr>, 1, NR, kA>(t);
  }
}

template <class Tr, ALayout kA>
TESSERA_INLINE void SmallGemmF32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                                 int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  static_assert(kA != ALayout::kPacked, "SmallGemmF32 reads A in place");
  constexpr int64_t L = Tr::kLanes;
  int64_t j = 0;
  for (; j + 4 * L <= n; j += 4 * L) SmallGemmPanel<Tr, kA, 4>(m, k, a, lda, b + j, ldb, c + j, ldc, accumulate);
  if (n - j >= 2 * L) {
    SmallGemmPanel<Tr, kA, 2>(m, k, a, lda, b + j, ldb, c + j, ldc, accumulate);
    j += 2 * L;
  }
  if (n - j >= L) SmallGemmPanel<Tr, kA, 1>(m, k, a, lda, b + j, ldb, c + j, ldc, accumulate);
}

}  // namespace tessera::tile
