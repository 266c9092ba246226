// Gemm() and ChosenConfig(): the configuration a GEMM runs with — the
// cached winner of its shape class, a fresh search when the class is missing
// and the GEMM is large enough to repay one, or the default heuristics — and
// the search itself: coordinate descent from the default over the kernels of
// the default's numerics class, the thread grids, then M and N blocks, each
// candidate timed on the caller's operands (scaled down to at most
// kTuneDim x kTuneDim x kTuneK) into a scratch C, and a winner other than
// the default confirmed against it in interleaved rounds. Every candidate
// computes the same bits, so tuning changes speed only.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <vector>

#include "tessera/base/logging.h"
#include "tessera/tile/autotune.h"
#include "tessera/tile/gemm.h"
#include "tessera/tile/pack.h"

namespace tessera::tile {
namespace {

// GEMMs below this many multiply-adds use the defaults (a search would cost
// more than it saves). The search times the caller's problem cut to at most
// kTuneDim rows and columns and kTuneK of K: big enough that every thread
// still runs several M, N and K blocks (a 256 x 256 cut of a 4096^3 GEMM
// picked tiles 15 % slower on the whole problem), small enough to time in
// milliseconds. A candidate must beat the best so far by kTuneMargin to
// replace it, so timing noise does not move the choice off the default.
constexpr int64_t kTuneMinMacs = int64_t{1} << 24;
constexpr int64_t kTuneDim = 1024;
constexpr int64_t kTuneK = 4096;
constexpr double kTuneMargin = 0.03;
constexpr int kTuneRepeats = 3;
// Rounds of the confirmation (default, winner, default, winner, ...): the
// machine's speed drifts by 10-30 % within minutes, and a default timed in
// a slow moment would otherwise hand its class to whatever came after it
// (a 4x24 AVX2 tile won 4096^3 that way, 13 % slower on the whole problem).
constexpr int kConfirmRounds = 2;

TuneTimerForTesting g_timer_for_testing = nullptr;

GemmType TypeOf(const F32Args&) { return GemmType::kF32; }
GemmType TypeOf(const Bf16Args&) { return GemmType::kBf16F32; }
GemmType TypeOf(const U8S8Args&) { return GemmType::kU8S8S32; }

template <typename TC>
TC* Scratch(int64_t count) {
  thread_local std::vector<TC> scratch;
  if (static_cast<int64_t>(scratch.size()) < count) scratch.resize(static_cast<size_t>(count));
  return scratch.data();
}

// Seconds of the fastest of kTuneRepeats runs (after one warm-up).
template <class Args>
double TimeConfig(const Args& g, const GemmConfig& cfg) {
  if (g_timer_for_testing != nullptr) return g_timer_for_testing(cfg);
  double best = 1e30;
  for (int r = 0; r <= kTuneRepeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    GemmWithConfig(g, cfg);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::min(best, s);
  }
  return best;
}

// The problem the search times: a corner of the caller's operands (at most
// kTuneDim x kTuneDim x kTuneK), beta 0 into scratch.
template <class Args>
Args TuningProblem(const Args& g) {
  Args t = g;
  t.m = std::min(g.m, kTuneDim);
  t.n = std::min(g.n, kTuneDim);
  t.k = std::min(g.k, kTuneK);
  t.beta = 0.0f;
  t.epilogue = nullptr;
  t.ldc = t.n;
  t.c = Scratch<std::remove_cv_t<std::remove_pointer_t<decltype(g.c)>>>(t.m * t.n);
  return t;
}

bool SameConfig(const GemmConfig& a, const GemmConfig& b) {
  return a.kernel == b.kernel && a.mc == b.mc && a.nc == b.nc && a.tm == b.tm && a.tn == b.tn;
}

std::vector<std::pair<int, int>> Grids(int threads) {
  std::vector<std::pair<int, int>> grids;
  for (int tm = 1; tm <= threads; ++tm) {
    if (threads % tm == 0) grids.push_back({tm, threads / tm});
  }
  return grids;
}

template <class Args>
TunedGemm Search(const Args& g, GemmType type, int threads) {
  const Args t = TuningProblem(g);
  const double flops = 2.0 * t.m * t.n * t.k;
  const GemmConfig def = DefaultConfig(type, g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, threads);
  GemmConfig best = def;
  double best_s = TimeConfig(t, best);
  double default_s = best_s;
  auto consider = [&](const GemmConfig& cfg) {
    const double s = TimeConfig(t, cfg);
    TLOG(TRACE, "tune {}x{}x{}: {} {:.1f} GFLOP/s", t.m, t.n, t.k, cfg.ToString(), flops / s * 1e-9);
    if (s < best_s * (1.0 - kTuneMargin)) {
      best_s = s;
      best = cfg;
    }
  };
  for (const KernelInfo* k : SupportedKernels(type)) {  // register tiles
    if (k == best.kernel) continue;
    GemmConfig cfg = best;
    cfg.kernel = k;
    cfg.mc = RoundUp(std::max<int64_t>(k->mr, best.mc), k->mr);
    cfg.nc = RoundUp(std::max<int64_t>(k->nr, best.nc), k->nr);
    consider(cfg);
  }
  for (const auto& [tm, tn] : Grids(threads)) {  // thread grids
    if (tm == best.tm) continue;
    GemmConfig cfg = best;
    cfg.tm = tm;
    cfg.tn = tn;
    consider(cfg);
  }
  const GemmConfig base = best;
  for (int64_t mc : {base.mc / 4, base.mc / 2, base.mc * 2}) {  // M blocks
    GemmConfig cfg = best;
    cfg.mc = RoundUp(std::max<int64_t>(mc, base.kernel->mr), base.kernel->mr);
    if (cfg.mc != best.mc) consider(cfg);
  }
  for (int64_t nc : {base.nc / 4, base.nc / 2, base.nc * 2}) {  // N blocks
    GemmConfig cfg = best;
    cfg.nc = RoundUp(std::max<int64_t>(nc, base.kernel->nr), base.kernel->nr);
    if (cfg.nc != best.nc) consider(cfg);
  }
  if (!SameConfig(best, def)) {  // confirm the winner against the default, interleaved
    double def_s = 1e30, win_s = 1e30;
    for (int r = 0; r < kConfirmRounds; ++r) {
      def_s = std::min(def_s, TimeConfig(t, def));
      win_s = std::min(win_s, TimeConfig(t, best));
    }
    TLOG(TRACE, "tune {}x{}x{}: confirm {} {:.1f} GFLOP/s against the default {:.1f}", t.m, t.n, t.k, best.ToString(),
         flops / win_s * 1e-9, flops / def_s * 1e-9);
    default_s = def_s;
    if (win_s < def_s * (1.0 - kTuneMargin)) {
      best_s = win_s;
    } else {
      best = def;
      best_s = def_s;
    }
  }
  TunedGemm out;
  out.kernel = best.kernel->name;
  out.mc = best.mc;
  out.nc = best.nc;
  out.tm = best.tm;
  out.tn = best.tn;
  out.gflops = flops / best_s * 1e-9;
  out.default_gflops = flops / default_s * 1e-9;
  out.m = t.m;
  out.n = t.n;
  out.k = t.k;
  return out;
}

// A cached entry as a configuration, if it is still valid here.
std::optional<GemmConfig> FromTuned(const TunedGemm& t, GemmType type, int threads) {
  const KernelInfo* k = FindKernel(t.kernel);
  if (k == nullptr) return std::nullopt;
  const std::vector<const KernelInfo*> allowed = SupportedKernels(type);
  if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) return std::nullopt;
  if (t.mc < k->mr || t.mc % k->mr != 0 || t.nc < k->nr || t.nc % k->nr != 0 || t.tm < 1 || t.tn < 1 ||
      t.tm * t.tn != threads) {
    return std::nullopt;
  }
  return GemmConfig{k, t.mc, t.nc, t.tm, t.tn};
}

// Shape classes already chosen (logged once) and already retuned under
// TESSERA_TUNE=force (once per process).
std::mutex g_seen_mu;
std::set<std::string>& Seen() {
  static std::set<std::string>* seen = new std::set<std::string>();
  return *seen;
}
std::set<std::string>& Retuned() {
  static std::set<std::string>* retuned = new std::set<std::string>();
  return *retuned;
}

template <class Args>
GemmConfig Choose(const Args& g) {
  const GemmType type = TypeOf(g);
  const int threads = GemmThreads(g.m, g.n, g.k);
  const GemmConfig def = DefaultConfig(type, g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, threads);
  const TuneMode mode = CurrentTuneMode();
  if (mode == TuneMode::kOff || g.m == 0 || g.n == 0 || g.k == 0) return def;
  const std::string key = GemmShapeKey(type, g.trans_a, g.trans_b, g.m, g.n, g.k, threads);
  const bool large = g.m * g.n * g.k >= kTuneMinMacs;
  bool first = false, retune = false;
  {
    std::lock_guard<std::mutex> lock(g_seen_mu);
    first = Seen().insert(key).second;
    retune = mode == TuneMode::kForce && large && Retuned().insert(key).second;
  }
  if (!retune) {
    if (std::optional<TunedGemm> t = TuneCache::Get().Find(key)) {
      if (std::optional<GemmConfig> cfg = FromTuned(*t, type, threads)) {
        if (first) TLOG(DEBUG, "gemm {}: {} (tuned, cached)", key, cfg->ToString());
        return *cfg;
      }
    }
    if (!large) {
      if (first) TLOG(DEBUG, "gemm {}: {} (default; too small to tune)", key, def.ToString());
      return def;
    }
  }
  const TunedGemm tuned = Search(g, type, threads);
  TuneCache::Get().Put(key, tuned);
  const GemmConfig cfg = *FromTuned(tuned, type, threads);
  TLOG(DEBUG, "gemm {}: {} (tuned now: {:.1f} GFLOP/s, default {:.1f} on {}x{}x{})", key, cfg.ToString(), tuned.gflops,
       tuned.default_gflops, tuned.m, tuned.n, tuned.k);
  return cfg;
}

}  // namespace

void SetTuneTimerForTesting(TuneTimerForTesting timer) { g_timer_for_testing = timer; }

GemmConfig ChosenConfig(const F32Args& args) { return Choose(args); }
GemmConfig ChosenConfig(const Bf16Args& args) { return Choose(args); }
GemmConfig ChosenConfig(const U8S8Args& args) { return Choose(args); }

void Gemm(const F32Args& args) { GemmWithConfig(args, Choose(args)); }
void Gemm(const Bf16Args& args) { GemmWithConfig(args, Choose(args)); }
void Gemm(const U8S8Args& args) { GemmWithConfig(args, Choose(args)); }

}  // namespace tessera::tile
