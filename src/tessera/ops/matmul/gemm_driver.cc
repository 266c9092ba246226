// Blocked, packed, multi-threaded GEMM driver (see gemm_driver.h).
#include "tessera/ops/matmul/gemm_driver.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>
#include <vector>

#include "tessera/base/check.h"
#include "tessera/ops/matmul/gemm_kernels.h"
#include "tessera/ops/matmul/gemm_pack.h"

namespace tessera::ops::gemm {
namespace {

// A thread's packing buffers: grown on demand, never shrunk, reused by every
// GEMM the thread runs (fresh pages are expensive to touch).
class Buffer {
 public:
  template <typename T>
  T* Get(int64_t count) {
    size_t bytes = static_cast<size_t>(count) * sizeof(T);
    if (bytes > bytes_) {
      bytes_ = std::max(bytes, bytes_ * 2);
      bytes_ = (bytes_ + 63) / 64 * 64;
      data_.reset(static_cast<char*>(std::aligned_alloc(64, bytes_)));
    }
    return reinterpret_cast<T*>(data_.get());
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t bytes_ = 0;
};

struct Workspace {
  Buffer a, b, c;  // c: the C strip when results only go to an epilogue
};
thread_local Workspace t_workspace;

template <typename T>
struct Problem {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha;
  const T* a;
  int64_t lda;
  const T* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
  const RowEpilogue* epilogue;
};

// Row-major A is read in place only while N spans at most this many panels.
constexpr int64_t kDirectAPanels = 8;

// Whether A's micro-panels are read straight from a row-major A (no packing).
// Packing A costs about a cycle per element, repaid over N / nr micro-kernel
// calls; in place costs nothing unless A's rows alias in the L1 cache (row
// pitch a multiple of 4 KiB: all mr rows then compete for the same sets).
template <typename T, typename P>
bool ReadsAInPlace(bool trans_a, int64_t lda, int64_t n, int nr) {
  if (!std::is_same_v<T, P> || trans_a) return false;
  if ((lda * static_cast<int64_t>(sizeof(T))) % 4096 == 0) return false;
  return n <= kDirectAPanels * nr;
}

// Whether full B micro-panels are read straight from a row-major fp32 B.
// Packing B costs about a cycle per element, repaid over M / mr micro-kernel
// calls; the kernel streams B from L2 either way, so in place only loses
// the packed panel's contiguity. (bf16 panels need the pair layout.)
constexpr int64_t kDirectBPanels = 16;
template <typename T, typename P>
bool ReadsBInPlace(bool trans_b, int64_t m, int mr) {
  return std::is_same_v<T, float> && std::is_same_v<P, float> && !trans_b && m <= kDirectBPanels * mr;
}

// C[m0:m1, n0:n1] of the problem, single-threaded. T: input type; P: packed
// type (float, or bf16 for the VDPBF16PS kernels).
template <typename T, typename P>
void GemmBlock(const KernelSet& ks, const Problem<T>& pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  constexpr bool kPairs = std::is_same_v<P, bf16>;
  const int mr = ks.mr, nr = ks.nr;
  const int64_t kc_max = kPairs ? ks.kc_bf16 : ks.kc_f32;
  // M blocks of at most ks.mc rows, balanced (multiples of mr).
  const int64_t m_blocks = (m1 - m0 + ks.mc - 1) / ks.mc;
  const int64_t mc_max = RoundUp((m1 - m0 + m_blocks - 1) / m_blocks, mr), nc_max = ks.nc;
  // Source strides: A as rows x k, B as columns x k.
  const int64_t a_sx = pr.trans_a ? 1 : pr.lda, a_sp = pr.trans_a ? pr.lda : 1;
  const int64_t b_sx = pr.trans_b ? pr.ldb : 1, b_sp = pr.trans_b ? 1 : pr.ldb;
  const bool direct_a = ReadsAInPlace<T, P>(pr.trans_a, pr.lda, n1 - n0, nr);
  const bool direct_b = ReadsBInPlace<T, P>(pr.trans_b, m1 - m0, mr);
  const int64_t kp_max = RoundUp(std::min(kc_max, pr.k), 2);
  Workspace& ws = t_workspace;
  // Epilogue-only output (c == nullptr, one K block): each strip of mr rows
  // is computed into an L1-resident buffer and handed to the epilogue.
  const bool strip_mode = pr.c == nullptr;
  const int64_t strip_ld = RoundUp(std::min(nc_max, n1 - n0), nr);
  float* strip = strip_mode ? ws.c.Get<float>(mr * strip_ld) : nullptr;
  P* b_pack = ws.b.Get<P>(kp_max * RoundUp(direct_b ? nr : std::min(nc_max, n1 - n0), nr));
  P* a_pack = ws.a.Get<P>(kp_max * RoundUp(direct_a ? mr : std::min(mc_max, m1 - m0), mr));

  for (int64_t ic = m0; ic < m1; ic += mc_max) {
    const int64_t mc = std::min(mc_max, m1 - ic);
    // Rows packed: all of them, or (A read in place) only the last partial panel.
    const int64_t packed_from = direct_a ? mc / mr * mr : 0;
    for (int64_t pc = 0; pc < pr.k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, pr.k - pc);
      const int64_t kp = kPairs ? RoundUp(kc, 2) : kc;
      const float beta = pc == 0 ? pr.beta : 1.0f;
      const T* a_src = pr.a + ic * a_sx + pc * a_sp;
      if (packed_from < mc) {
        if constexpr (kPairs) {
          PackPanelsPairs(a_src + packed_from * a_sx, a_sx, a_sp, mc - packed_from, kc, mr, a_pack);
        } else {
          PackPanelsF32(a_src + packed_from * a_sx, a_sx, a_sp, mc - packed_from, kc, mr, a_pack);
        }
      }
      for (int64_t jc = n0; jc < n1; jc += nc_max) {
        const int64_t nc = std::min(nc_max, n1 - jc);
        const T* b_src = pr.b + jc * b_sx + pc * b_sp;
        // Columns packed: all of them, or (B read in place) only the last partial panel.
        const int64_t b_packed_from = direct_b ? nc / nr * nr : 0;
        if (b_packed_from < nc) {
          if constexpr (kPairs) {
            PackPanelsPairs(b_src + b_packed_from * b_sx, b_sx, b_sp, nc - b_packed_from, kc, nr, b_pack);
          } else {
            PackPanelsF32(b_src + b_packed_from * b_sx, b_sx, b_sp, nc - b_packed_from, kc, nr, b_pack);
          }
        }
        // One A micro-panel (L1) against every B micro-panel of the block (L2).
        for (int64_t ir = 0; ir < mc; ir += mr) {
          const int mv = static_cast<int>(std::min<int64_t>(mr, mc - ir));
          float* c_row = strip_mode ? strip : pr.c + (ic + ir) * pr.ldc + jc;
          const int64_t ldc = strip_mode ? strip_ld : pr.ldc;
          const bool in_place = ir < packed_from;
          const P* ap = a_pack + ((ir - packed_from) / mr) * kp * mr;
          for (int64_t jr = 0; jr < nc; jr += nr) {
            const int nv = static_cast<int>(std::min<int64_t>(nr, nc - jr));
            const bool b_in_place = jr < b_packed_from;
            const P* bp = b_in_place ? nullptr : b_pack + ((jr - b_packed_from) / nr) * kp * nr;
            int64_t ldbp = nr;
            if constexpr (std::is_same_v<T, P>) {
              if (b_in_place) {
                bp = b_src + jr;
                ldbp = pr.ldb;
              }
            }
            float* cp = c_row + jr;
            if constexpr (std::is_same_v<T, P>) {
              if (in_place) {
                const T* ar = a_src + ir * a_sx;
                if constexpr (kPairs) {
                  ks.bf16_rows(kc, ar, pr.lda, bp, cp, ldc, mv, nv, pr.alpha, beta);
                } else {
                  ks.f32_rows(kc, ar, pr.lda, bp, ldbp, cp, ldc, mv, nv, pr.alpha, beta);
                }
                continue;
              }
            }
            if constexpr (kPairs) {
              ks.bf16_pairs(kc, ap, 2 * mr, bp, cp, ldc, mv, nv, pr.alpha, beta);
            } else {
              ks.f32_cols(kc, ap, mr, bp, ldbp, cp, ldc, mv, nv, pr.alpha, beta);
            }
          }
          // The strip is final after the last K block: hand it over while it is in L1.
          if (pr.epilogue != nullptr && pc + kc == pr.k) {
            pr.epilogue->fn(pr.epilogue->ctx, c_row, ldc, ic + ir, mv, jc, nc);
          }
        }
      }
    }
  }
}

// Splits [0, total) into `parts` ranges aligned to `align`; returns range i.
std::pair<int64_t, int64_t> Split(int64_t total, int parts, int i, int align) {
  int64_t units = (total + align - 1) / align;
  int64_t per = units / parts, extra = units % parts;
  int64_t begin = (i * per + std::min<int64_t>(i, extra)) * align;
  int64_t end = begin + (per + (i < extra ? 1 : 0)) * align;
  return {std::min(begin, total), std::min(end, total)};
}

// Threads along M x N for `threads` threads: the grid whose slowest thread
// has the least compute plus packing, in rough cycles (32 fp32 multiply-adds
// per cycle, about a cycle per packed element).
template <typename T, typename P>
std::pair<int, int> ChooseGrid(const KernelSet& ks, const Problem<T>& pr, int threads) {
  std::pair<int, int> best{threads, 1};
  double best_cost = 0;
  for (int tm = 1; tm <= threads; ++tm) {
    if (threads % tm != 0) continue;
    int tn = threads / tm;
    int64_t mb = RoundUp((pr.m + tm - 1) / tm, ks.mr), nb = RoundUp((pr.n + tn - 1) / tn, ks.nr);
    double cost = static_cast<double>(mb) * nb * pr.k / 32.0;
    if (!ReadsBInPlace<T, P>(pr.trans_b, mb, ks.mr)) {
      cost += static_cast<double>(nb) * pr.k * ((mb + ks.mc - 1) / ks.mc);  // B, once per M block
    }
    if (!ReadsAInPlace<T, P>(pr.trans_a, pr.lda, nb, ks.nr)) cost += static_cast<double>(mb) * pr.k;
    if (tm == 1 || cost < best_cost) {
      best = {tm, tn};
      best_cost = cost;
    }
  }
  return best;
}

void ScaleC(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + n, 0.0f);
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

template <typename T, typename P>
void RunPath(const KernelSet& ks, const Problem<T>& pr) {
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int64_t macs = pr.m * pr.n * pr.k;
  threads = static_cast<int>(std::min<int64_t>(threads, std::max<int64_t>(1, macs / kMinMacsPerThread)));
  if (threads <= 1) {
    GemmBlock<T, P>(ks, pr, 0, pr.m, 0, pr.n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int team = omp_get_num_threads(), id = omp_get_thread_num();
    auto [tm, tn] = ChooseGrid<T, P>(ks, pr, team);
    auto [m0, m1] = Split(pr.m, tm, id / tn, ks.mr);
    auto [n0, n1] = Split(pr.n, tn, id % tn, ks.nr);
    if (m0 < m1 && n0 < n1) GemmBlock<T, P>(ks, pr, m0, m1, n0, n1);
  }
}

template <typename T>
void Run(const Problem<T>& pr) {
  if (pr.m == 0 || pr.n == 0) return;
  TESSERA_CHECK(pr.c != nullptr || (pr.epilogue != nullptr && pr.beta == 0.0f &&
                                    FitsOneKBlock(pr.k, std::is_same_v<T, bf16>)),
                "gemm: C may only be omitted for an epilogue-only GEMM with beta = 0 and one K block (k={})", pr.k);
  if (pr.k == 0 || pr.alpha == 0.0f) {
    if (pr.c == nullptr) {  // epilogue-only output: hand over zero rows
      std::vector<float> zeros(static_cast<size_t>(pr.n), 0.0f);
      pr.epilogue->fn(pr.epilogue->ctx, zeros.data(), 0, 0, pr.m, 0, pr.n);
      return;
    }
    ScaleC(pr.m, pr.n, pr.beta, pr.c, pr.ldc);
    if (pr.epilogue != nullptr) pr.epilogue->fn(pr.epilogue->ctx, pr.c, pr.ldc, 0, pr.m, 0, pr.n);
    return;
  }
  const KernelSet& ks = ActiveKernelSet();
  if constexpr (std::is_same_v<T, bf16>) {
    if (ks.bf16_rows != nullptr) {
      RunPath<bf16, bf16>(ks, pr);
      return;
    }
  }
  RunPath<T, float>(ks, pr);
}

}  // namespace

bool FitsOneKBlock(int64_t k, bool bf16_inputs) {
  const KernelSet& ks = ActiveKernelSet();
  return k <= (bf16_inputs && ks.bf16_rows != nullptr ? ks.kc_bf16 : ks.kc_f32);
}

void RunF32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const RowEpilogue* epilogue) {
  Run(Problem<float>{trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue});
}

void RunBf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
             const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc, const RowEpilogue* epilogue) {
  Run(Problem<bf16>{trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue});
}

}  // namespace tessera::ops::gemm
