// kAuto's measured algorithm choice (see conv_tune.h).
#include "tessera/ops/conv/conv_tune.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/base/logging.h"
#include "tessera/ops/conv/conv_algos.h"
#include "tessera/tile/autotune.h"

namespace tessera::ops::conv {
namespace {

constexpr double kTuneMinMacs = 1 << 22;
constexpr double kTuneMargin = 0.03;
constexpr int kTuneRepeats = 3;
constexpr const char* kSection = "conv";

int64_t NearestPowerOfTwo(int64_t x) {
  if (x <= 1) return x;
  return int64_t{1} << static_cast<int>(std::lround(std::log2(static_cast<double>(x))));
}

std::optional<Conv2dAlgo> AlgoFromName(const std::string& name) {
  for (Conv2dAlgo a : {Conv2dAlgo::kDirect, Conv2dAlgo::kIm2col, Conv2dAlgo::kGemm1x1, Conv2dAlgo::kDepthwise,
                       Conv2dAlgo::kWinograd2x2, Conv2dAlgo::kWinograd4x4}) {
    if (name == Conv2dAlgoName(a)) return a;
  }
  return std::nullopt;
}

// Scratch operands of g's shape, filled once with small values (the
// kernels' speed does not depend on them; no denormals).
struct Operands {
  std::vector<float> x, w, b, y, gy, gx, gw;
  explicit Operands(const ConvGeom& g)
      : x(g.x_numel()), w(g.w_numel()), b(g.K), y(g.y_numel()), gy(g.y_numel()), gx(g.x_numel()), gw(g.w_numel()) {
    auto fill = [](std::vector<float>& v, float scale) {
      for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(static_cast<int>(i * 7919 % 17) - 8);
    };
    fill(x, 0.125f);
    fill(w, 0.01f);
    fill(b, 0.1f);
    fill(gy, 0.05f);
  }
};

// Seconds of one forward + grad_x + grad_w with `algo`, best of kTuneRepeats
// after a warm-up.
double TimeAlgo(Conv2dAlgo algo, const ConvGeom& g, Operands& o) {
  auto once = [&] {
    RunForward(algo, g, o.x.data(), o.w.data(), o.b.data(), o.y.data());
    RunBackwardX(algo, g, o.gy.data(), o.w.data(), o.gx.data());
    RunBackwardW(algo, g, o.gy.data(), o.x.data(), o.gw.data());
  };
  once();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < kTuneRepeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

nlohmann::json Search(const ConvGeom& g, Conv2dAlgo* winner) {
  Operands o(g);
  const std::vector<Conv2dAlgo> candidates = TuningCandidates(g);
  nlohmann::json ms = nlohmann::json::object();
  Conv2dAlgo best = candidates.front();
  double best_s = std::numeric_limits<double>::infinity(), default_s = 0;
  for (Conv2dAlgo a : candidates) {
    const double s = TimeAlgo(a, g, o);
    ms[Conv2dAlgoName(a)] = s * 1e3;
    if (a == candidates.front()) default_s = s;
    if (s < best_s * (1.0 - kTuneMargin)) {
      best_s = s;
      best = a;
    }
  }
  *winner = best;
  return nlohmann::json{{"algo", Conv2dAlgoName(best)},
                        {"default", Conv2dAlgoName(candidates.front())},
                        {"speedup", default_s / best_s},
                        {"ms", ms}};
}

std::mutex g_mu;
std::set<std::string>& Seen() {  // classes already logged once
  static std::set<std::string>* s = new std::set<std::string>();
  return *s;
}
std::set<std::string>& Retuned() {  // classes retuned under force
  static std::set<std::string>* s = new std::set<std::string>();
  return *s;
}

}  // namespace

std::string ConvShapeKey(const ConvGeom& g, int threads) {
  return fmt::format(
      "{} n{} c{} h{} w{} k{} r{} s{} stride{}x{} pad{}x{} "
      "dil{}x{} groups{} t{}",
      ImageLayoutName(g.layout), NearestPowerOfTwo(g.N), g.C, g.H, g.W, g.K, g.R, g.S, g.sh, g.sw, g.ph, g.pw, g.dh,
      g.dw, g.G, threads);
}

Conv2dAlgo AutoAlgo(const ConvGeom& g) {
  const Conv2dAlgo heuristic = HeuristicAlgo(g);
  const tile::TuneMode mode = tile::CurrentTuneMode();
  if (mode == tile::TuneMode::kOff || g.flops() / 2 < kTuneMinMacs || TuningCandidates(g).size() < 2) {
    return heuristic;
  }
  const std::string key = ConvShapeKey(g, omp_get_max_threads());
  bool first = false, retune = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    first = Seen().insert(key).second;
    retune = mode == tile::TuneMode::kForce && Retuned().insert(key).second;
  }
  if (!retune) {
    if (std::optional<nlohmann::json> e = tile::TuneCache::Get().FindEntry(kSection, key)) {
      std::optional<Conv2dAlgo> a;
      if (e->is_object() && e->contains("algo") && (*e)["algo"].is_string()) {
        a = AlgoFromName((*e)["algo"].get<std::string>());
      }
      if (a && Applies(*a, g)) {
        if (first) TLOG(DEBUG, "conv2d {}: {} (tuned, cached)", key, Conv2dAlgoName(*a));
        return *a;
      }
      TLOG(WARN,
           "autotuner cache {}: conv entry \"{}\" is malformed or names an "
           "algorithm that does not apply; "
           "retuning it",
           tile::TuneCachePath(), key);
    }
  }
  Conv2dAlgo winner = heuristic;
  const nlohmann::json entry = Search(g, &winner);
  tile::TuneCache::Get().PutEntry(kSection, key, entry);
  TLOG(DEBUG, "conv2d {}: {} (tuned now: {})", key, Conv2dAlgoName(winner), entry["ms"].dump());
  return winner;
}

}  // namespace tessera::ops::conv
