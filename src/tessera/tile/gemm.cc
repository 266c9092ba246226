// The blocked tile GEMM program (see gemm.h): shared-panel packing, the
// block loops, the per-thread grid, and the default configuration.
// Gemm() / ChosenConfig() — the tuned entry points — are in gemm_tuned.cc.
#include "tessera/tile/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "tessera/base/check.h"
#include "tessera/tile/pack.h"

namespace tessera::tile {
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

// Row-major A is read in place only while N spans at most this many panels;
// full B panels of a row-major fp32 B only while M spans at most this many.
constexpr int64_t kDirectAPanels = 8;
constexpr int64_t kDirectBPanels = 16;

// Whether A's micro-panels are read straight from a row-major A: packing
// costs about a cycle per element, repaid over N / nr kernel calls; in place
// costs nothing unless A's rows alias in L1 (pitch a multiple of 4 KiB).
template <typename TA, typename PA>
bool ReadsAInPlace(const KernelInfo& kernel, bool trans_a, int64_t lda, int64_t n) {
  if (!std::is_same_v<TA, PA> || kernel.rows == nullptr || trans_a) return false;
  if ((lda * static_cast<int64_t>(sizeof(TA))) % 4096 == 0) return false;
  return n <= kDirectAPanels * kernel.nr;
}

// Whether full B micro-panels are read straight from a row-major B (k-groups
// of 1 only: other kernels need the interleaved layout).
template <typename TB, typename PB>
bool ReadsBInPlace(const KernelInfo& kernel, bool trans_b, int64_t m) {
  return std::is_same_v<TB, PB> && kernel.group == 1 && !trans_b && m <= kDirectBPanels * kernel.mr;
}

// Source -> panel conversions, by type pair (pack.h).
void Pack(const float* s, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int, float* out) {
  PackPanelsF32(s, sx, sp, xs, kc, w, out);
}
void Pack(const bf16* s, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int, float* out) {
  PackPanelsF32(s, sx, sp, xs, kc, w, out);
}
void Pack(const bf16* s, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int, bf16* out) {
  PackPanelsPairs(s, sx, sp, xs, kc, w, out);
}
template <typename S, typename P>
void Pack(const S* s, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int g, P* out) {
  PackPanelsGroups(s, sx, sp, xs, kc, w, g, out);
}

template <typename TA, typename TB, typename TC>
struct Problem {
  const GemmArgs<TA, TB, TC>& args;
  const KernelInfo& kernel;
  int64_t mc, nc;
};

// C[m0:m1, n0:n1] single-threaded, A and B packed as PA / PB.
template <typename TA, typename TB, typename TC, typename PA, typename PB>
void GemmBlock(const Problem<TA, TB, TC>& pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const GemmArgs<TA, TB, TC>& g = pr.args;
  const KernelInfo& ks = pr.kernel;
  const int mr = ks.mr, nr = ks.nr, grp = ks.group;
  const int64_t kc_max = ks.kc;
  // M blocks of at most mc rows, balanced (multiples of mr).
  const int64_t m_blocks = (m1 - m0 + pr.mc - 1) / pr.mc;
  const int64_t mc_max = RoundUp((m1 - m0 + m_blocks - 1) / m_blocks, mr), nc_max = pr.nc;
  // Source strides: A as rows x k, B as columns x k.
  const int64_t a_sx = g.trans_a ? 1 : g.lda, a_sp = g.trans_a ? g.lda : 1;
  const int64_t b_sx = g.trans_b ? g.ldb : 1, b_sp = g.trans_b ? 1 : g.ldb;
  const bool direct_a = ReadsAInPlace<TA, PA>(ks, g.trans_a, g.lda, n1 - n0);
  const bool direct_b = ReadsBInPlace<TB, PB>(ks, g.trans_b, m1 - m0);
  const int64_t kp_max = RoundUp(std::min(kc_max, g.k), grp);
  Workspace& ws = t_workspace;
  // Epilogue-only output (c == nullptr, one K block): each strip of mr rows
  // is computed into an L1-resident buffer and handed to the epilogue.
  const bool strip_mode = g.c == nullptr;
  const int64_t strip_ld = RoundUp(std::min(nc_max, n1 - n0), nr);
  TC* strip = strip_mode ? ws.c.Get<TC>(mr * strip_ld) : nullptr;
  PB* b_pack = ws.b.Get<PB>(kp_max * RoundUp(direct_b ? nr : std::min(nc_max, n1 - n0), nr));
  PA* a_pack = ws.a.Get<PA>(kp_max * RoundUp(direct_a ? mr : std::min(mc_max, m1 - m0), mr));

  TileArgs t{};
  t.alpha = g.alpha;
  for (int64_t ic = m0; ic < m1; ic += mc_max) {
    const int64_t mc = std::min(mc_max, m1 - ic);
    // Rows packed: all of them, or (A read in place) only the last partial panel.
    const int64_t packed_from = direct_a ? mc / mr * mr : 0;
    for (int64_t pc = 0; pc < g.k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, g.k - pc);
      const int64_t kp = RoundUp(kc, grp);
      t.kc = kc;
      t.beta = pc == 0 ? g.beta : 1.0f;
      const TA* a_src = g.a + ic * a_sx + pc * a_sp;
      if (packed_from < mc) Pack(a_src + packed_from * a_sx, a_sx, a_sp, mc - packed_from, kc, mr, grp, a_pack);
      for (int64_t jc = n0; jc < n1; jc += nc_max) {
        const int64_t nc = std::min(nc_max, n1 - jc);
        const TB* b_src = g.b + jc * b_sx + pc * b_sp;
        // Columns packed: all of them, or (B read in place) only the last partial panel.
        const int64_t b_packed_from = direct_b ? nc / nr * nr : 0;
        if (b_packed_from < nc) {
          Pack(b_src + b_packed_from * b_sx, b_sx, b_sp, nc - b_packed_from, kc, nr, grp, b_pack);
        }
        // One A micro-panel (L1) against every B micro-panel of the block (L2).
        for (int64_t ir = 0; ir < mc; ir += mr) {
          t.mv = static_cast<int>(std::min<int64_t>(mr, mc - ir));
          TC* c_row = strip_mode ? strip : g.c + (ic + ir) * g.ldc + jc;
          t.ldc = strip_mode ? strip_ld : g.ldc;
          const bool a_in_place = ir < packed_from;
          const TileKernel kernel = a_in_place ? ks.rows : ks.packed;
          t.a = a_in_place ? static_cast<const void*>(a_src + ir * a_sx)
                           : static_cast<const void*>(a_pack + ((ir - packed_from) / mr) * kp * mr);
          t.lda = g.lda;
          for (int64_t jr = 0; jr < nc; jr += nr) {
            t.nv = static_cast<int>(std::min<int64_t>(nr, nc - jr));
            if (jr < b_packed_from) {
              if constexpr (std::is_same_v<TB, PB>) {
                t.b = b_src + jr;
                t.ldb = g.ldb;
              }
            } else {
              t.b = b_pack + ((jr - b_packed_from) / nr) * kp * nr;
              t.ldb = static_cast<int64_t>(grp) * nr;
            }
            t.c = c_row + jr;
            kernel(t);
          }
          // The strip is final after the last K block: hand it over while it is in L1.
          if (g.epilogue != nullptr && pc + kc == g.k) {
            g.epilogue->fn(g.epilogue->ctx, c_row, t.ldc, ic + ir, t.mv, jc, nc);
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

// Threads along M x N: the grid whose slowest thread has the least compute
// plus packing, in rough cycles (32 multiply-adds per cycle, about a cycle
// per packed element; a split along M repacks B, along N repacks A).
std::pair<int, int> DefaultGrid(const KernelInfo& ks, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                int64_t lda_bytes, int64_t mc, int threads, bool same_a, bool same_b) {
  std::pair<int, int> best{threads, 1};
  double best_cost = 0;
  for (int tm = 1; tm <= threads; ++tm) {
    if (threads % tm != 0) continue;
    const int tn = threads / tm;
    const int64_t mb = RoundUp((m + tm - 1) / tm, ks.mr), nb = RoundUp((n + tn - 1) / tn, ks.nr);
    double cost = static_cast<double>(mb) * nb * k / 32.0;
    const bool b_in_place = same_b && ks.group == 1 && !trans_b && mb <= kDirectBPanels * ks.mr;
    if (!b_in_place) cost += static_cast<double>(nb) * k * ((mb + mc - 1) / mc);
    const bool a_in_place = same_a && ks.rows != nullptr && !trans_a && lda_bytes % 4096 != 0 &&
                            nb <= kDirectAPanels * ks.nr;
    if (!a_in_place) cost += static_cast<double>(mb) * k;
    if (tm == 1 || cost < best_cost) {
      best = {tm, tn};
      best_cost = cost;
    }
  }
  return best;
}

template <typename TC>
void ScaleC(int64_t m, int64_t n, float beta, TC* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    TC* row = c + i * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + n, TC{0});
    } else if constexpr (std::is_same_v<TC, float>) {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

template <typename TA, typename TB, typename TC, typename PA, typename PB>
void RunTyped(const GemmArgs<TA, TB, TC>& g, const GemmConfig& cfg) {
  const KernelInfo& ks = *cfg.kernel;
  const int team_max = omp_in_parallel() ? 1 : cfg.tm * cfg.tn;
  if (team_max <= 1) {
    GemmBlock<TA, TB, TC, PA, PB>(Problem<TA, TB, TC>{g, ks, cfg.mc, cfg.nc}, 0, g.m, 0, g.n);
    return;
  }
#pragma omp parallel num_threads(team_max)
  {
    const int team = omp_get_num_threads(), id = omp_get_thread_num();
    std::pair<int, int> grid{cfg.tm, cfg.tn};
    if (team != cfg.tm * cfg.tn) {
      grid = DefaultGrid(ks, g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda * static_cast<int64_t>(sizeof(TA)),
                         cfg.mc, team, std::is_same_v<TA, PA>, std::is_same_v<TB, PB>);
    }
    const auto [m0, m1] = Split(g.m, grid.first, id / grid.second, ks.mr);
    const auto [n0, n1] = Split(g.n, grid.second, id % grid.second, ks.nr);
    if (m0 < m1 && n0 < n1) GemmBlock<TA, TB, TC, PA, PB>(Problem<TA, TB, TC>{g, ks, cfg.mc, cfg.nc}, m0, m1, n0, n1);
  }
}

// Empty or trivial problems: no kernel runs.
template <typename TA, typename TB, typename TC>
bool RunTrivial(const GemmArgs<TA, TB, TC>& g) {
  if (g.m == 0 || g.n == 0) return true;
  if (g.k != 0 && g.alpha != 0.0f) return false;
  if (g.c == nullptr) {  // epilogue-only output: hand over zero rows
    std::vector<TC> zeros(static_cast<size_t>(g.n), TC{0});
    g.epilogue->fn(g.epilogue->ctx, zeros.data(), 0, 0, g.m, 0, g.n);
    return true;
  }
  ScaleC(g.m, g.n, g.beta, g.c, g.ldc);
  if (g.epilogue != nullptr) g.epilogue->fn(g.epilogue->ctx, g.c, g.ldc, 0, g.m, 0, g.n);
  return true;
}

template <typename TA, typename TB, typename TC>
void CheckConfig(const GemmArgs<TA, TB, TC>& g, const GemmConfig& cfg, GemmType type) {
  TESSERA_CHECK(cfg.kernel != nullptr && cfg.kernel->type == type, "tile gemm: config without a {} kernel",
                GemmTypeName(type));
  TESSERA_CHECK(cfg.mc >= cfg.kernel->mr && cfg.mc % cfg.kernel->mr == 0 && cfg.nc >= cfg.kernel->nr &&
                    cfg.nc % cfg.kernel->nr == 0 && cfg.tm >= 1 && cfg.tn >= 1,
                "tile gemm: bad config {}", cfg.ToString());
  TESSERA_CHECK(g.c != nullptr || (g.epilogue != nullptr && g.beta == 0.0f && g.k <= cfg.kernel->kc),
                "tile gemm: C may only be omitted for an epilogue-only GEMM with beta = 0 and one K block (k={})",
                g.k);
}

}  // namespace

std::string GemmConfig::ToString() const {
  return fmt::format("{} mc {} nc {} grid {}x{}", kernel != nullptr ? kernel->name : "(none)", mc, nc, tm, tn);
}

int GemmThreads(int64_t m, int64_t n, int64_t k) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t macs = m * n * k;
  return static_cast<int>(std::min<int64_t>(threads, std::max<int64_t>(1, macs / kMinMacsPerThread)));
}

GemmConfig DefaultConfig(GemmType type, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                         int threads) {
  GemmConfig cfg;
  cfg.kernel = &DefaultKernel(type);
  cfg.mc = cfg.kernel->mc;
  cfg.nc = cfg.kernel->nc;
  const bool same_a = cfg.kernel->rows != nullptr, same_b = cfg.kernel->group == 1 && type == GemmType::kF32;
  const int64_t elem = type == GemmType::kF32 ? 4 : type == GemmType::kBf16F32 ? 2 : 1;
  const auto [tm, tn] = DefaultGrid(*cfg.kernel, trans_a, trans_b, m, n, k, lda * elem, cfg.mc, std::max(1, threads),
                                    same_a, same_b);
  cfg.tm = tm;
  cfg.tn = tn;
  return cfg;
}

bool FitsOneKBlock(GemmType type, int64_t k) { return k <= DefaultKernel(type).kc; }

void GemmWithConfig(const F32Args& g, const GemmConfig& cfg) {
  if (RunTrivial(g)) return;
  CheckConfig(g, cfg, GemmType::kF32);
  RunTyped<float, float, float, float, float>(g, cfg);
}

void GemmWithConfig(const Bf16Args& g, const GemmConfig& cfg) {
  if (RunTrivial(g)) return;
  CheckConfig(g, cfg, GemmType::kBf16F32);
  if (cfg.kernel->pack_a == PackType::kBf16) {
    RunTyped<bf16, bf16, float, bf16, bf16>(g, cfg);
  } else {
    RunTyped<bf16, bf16, float, float, float>(g, cfg);
  }
}

void GemmWithConfig(const U8S8Args& g, const GemmConfig& cfg) {
  if (RunTrivial(g)) return;
  CheckConfig(g, cfg, GemmType::kU8S8S32);
  TESSERA_CHECK(g.alpha == 1.0f && (g.beta == 0.0f || g.beta == 1.0f),
                "tile gemm u8s8s32: alpha must be 1 and beta 0 or 1 (got {}, {})", g.alpha, g.beta);
  if (cfg.kernel->pack_a == PackType::kS16) {
    RunTyped<uint8_t, int8_t, int32_t, int16_t, int16_t>(g, cfg);
  } else {
    RunTyped<uint8_t, int8_t, int32_t, uint8_t, int8_t>(g, cfg);
  }
}

}  // namespace tessera::tile
