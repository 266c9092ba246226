// The tile GEMM micro-kernel, written once over an MMA op (mma.h) and a
// register tile MR x NR, and instantiated per ISA (kernels_*.cc):
//   fragment  MR x NR/lanes accumulators, kept in registers for the whole
//             reduction
//   loop      over k-groups: NR/lanes vector loads of the B panel, one
//             broadcast of A per row, MR * NR/lanes MMAs
//   epilogue  C = alpha * acc + beta * C (fp32; beta == 0 never reads C) or
//             C = acc (+ C when beta != 0) for int32, on the mv x nv valid
//             corner (masked columns, rows >= mv computed but not stored)
// Operands (TileArgs; element types are the op's PA / PB / Out):
//   B   a panel of ceil(kc/G) groups, group q at b + q*ldb, NR columns of
//       G consecutive k each (zero-padded): Bp[q*ldb + G*j + s] = B(Gq+s, j);
//       ldb = G*NR packed, B's row pitch when a fp32 B is read in place
//   A   ALayout::kRows: A(i, p) = a[i*lda + p] (row-major A read in
//       place; a partial last group is read without overrunning the row);
//       ALayout::kCols (G == 1): A(i, p) = a[p*lda + i] (a transposed A
//       read in place); ALayout::kPacked: A(i, Gq + s) = a[q*G*MR + G*i + s]
//       (zero-padded)
// The contract of every instantiated kernel: a pure function of its
// arguments, safe from any thread.
#pragma once

#include <cstdint>

#include "tessera/tile/mma.h"
#include "tessera/tile/vec.h"

namespace tessera::tile {

enum class ALayout { kPacked, kRows, kCols };

struct TileArgs {
  int64_t kc;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  int mv, nv;
  float alpha, beta;
};

using TileKernel = void (*)(const TileArgs&);

// Stores the valid corner of a fp32 fragment.
template <class Tr, int MR, int NV>
TESSERA_INLINE void StoreFragment(typename Tr::VF (&acc)[MR][NV], float* c, int64_t ldc, int mv, int nv, float alpha,
                                  float beta) {
  constexpr int L = Tr::kLanes;
  const typename Tr::VF va = Tr::Set1(alpha), vb = Tr::Set1(beta);
  if (mv == MR && nv == NV * L) {
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc;
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        typename Tr::VF r = Tr::Mul(acc[i][v], va);
        if (beta != 0.0f) r = Tr::Fma(vb, Tr::LoadF(ci + v * L), r);
        Tr::StoreF(ci + v * L, r);
      }
    }
    return;
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i >= mv) break;
    float* ci = c + i * ldc;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const int n = nv - v * L;
      if (n <= 0) break;
      typename Tr::VF r = Tr::Mul(acc[i][v], va);
      if (beta != 0.0f) r = Tr::Fma(vb, Tr::LoadFN(ci + v * L, n), r);
      Tr::StoreFN(ci + v * L, r, n);
    }
  }
}

// Stores the valid corner of an int32 fragment (beta != 0: accumulate).
template <class Tr, int MR, int NV>
TESSERA_INLINE void StoreFragment(typename Tr::VI (&acc)[MR][NV], int32_t* c, int64_t ldc, int mv, int nv, float,
                                  float beta) {
  constexpr int L = Tr::kLanes;
  const bool add = beta != 0.0f;
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i >= mv) break;
    int32_t* ci = c + i * ldc;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const int n = nv - v * L;
      if (n <= 0) break;
      typename Tr::VI r = acc[i][v];
      if (n >= L) {
        if (add) r = Tr::AddI(r, Tr::LoadI(ci + v * L));
        Tr::StoreI(ci + v * L, r);
      } else {
        if (add) r = Tr::AddI(r, Tr::LoadIN(ci + v * L, n));
        Tr::StoreIN(ci + v * L, r, n);
      }
    }
  }
}

// Starts loading the C tile (first and last line of each row) so it
// arrives while the reduction runs; C often lives in L3 or memory.
template <class Tr, int MR, int NR, typename Out>
TESSERA_INLINE void PrefetchC(const Out* c, int64_t ldc) {
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    Tr::Prefetch(c + i * ldc);
    Tr::Prefetch(c + i * ldc + NR - 1);
  }
}

template <class Op, int MR, int NR, ALayout kA>
TESSERA_INLINE void GemmTile(const TileArgs& t) {
  using Tr = typename Op::Traits;
  using PA = typename Op::PA;
  using PB = typename Op::PB;
  using Out = typename Op::Out;
  constexpr int L = Tr::kLanes;
  constexpr int NV = NR / L;
  constexpr int G = Op::kGroup;
  static_assert(NR % L == 0, "NR must be a multiple of the vector lanes");
  static_assert(MR * NV + NV + 1 <= Tr::kRegisters, "the fragment does not fit the register file");

  Out* c = static_cast<Out*>(t.c);
  PrefetchC<Tr, MR, NR>(c, t.ldc);
  typename Op::Acc acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = Op::Zero();
  }
  const PA* a = static_cast<const PA*>(t.a);
  const PB* b = static_cast<const PB*>(t.b);
  // Rows are reached from a base every 3 rows ({0,1,2} * step is an
  // addressing mode), so no row needs a register of its own.
  static_assert(kA != ALayout::kCols || G == 1, "a transposed A is read in place only one k at a time");
  constexpr bool kRowsA = kA == ALayout::kRows;
  const int64_t row_step = kRowsA ? t.lda : kA == ALayout::kCols ? 1 : G;
  const int64_t group_step = kRowsA ? G : kA == ALayout::kCols ? t.lda : static_cast<int64_t>(G) * MR;
  const int64_t groups = kA != ALayout::kPacked ? t.kc / G : (t.kc + G - 1) / G;
  constexpr int kBases = (MR + 2) / 3;
  const PA* base[kBases];
#pragma GCC unroll 16
  for (int j = 0; j < kBases; ++j) base[j] = a + 3 * j * row_step;
#pragma GCC unroll 4
  for (int64_t q = 0; q < groups; ++q) {
    typename Op::BV bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = Op::LoadB(b + v * L * G);
    b += t.ldb;
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const typename Op::AV ai = Op::BroadcastA(base[i / 3] + (i % 3) * row_step);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = Op::Mma(acc[i][v], ai, bv[v]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < kBases; ++j) base[j] += group_step;
  }
  if constexpr (kRowsA && G > 1) {
    const int rest = static_cast<int>(t.kc % G);
    if (rest != 0) {  // a partial last group (B's panel is zero-padded there)
      typename Op::BV bv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) bv[v] = Op::LoadB(b + v * L * G);
#pragma GCC unroll 32
      for (int i = 0; i < MR; ++i) {
        const typename Op::AV ai = Op::BroadcastAPartial(base[i / 3] + (i % 3) * row_step, rest);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[i][v] = Op::Mma(acc[i][v], ai, bv[v]);
      }
    }
  }
  StoreFragment<Tr, MR, NV>(acc, c, t.ldc, t.mv, t.nv, t.alpha, t.beta);
}

}  // namespace tessera::tile
