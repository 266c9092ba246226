#include "tessera/comm/algo/selector.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>

namespace tessera::comm::algo {

AlgoFn FunctionFor(Algorithm algo, CollectiveKind kind) {
  using K = CollectiveKind;
  switch (algo) {
    case Algorithm::kShmDirect:
      switch (kind) {
        case K::kAllReduce:
        case K::kReduce: return &ShmDirectAllReduce;
        case K::kBroadcast: return &ShmDirectBroadcast;
        case K::kAllGather: return &ShmDirectAllGather;
        case K::kReduceScatter: return &ShmDirectReduceScatter;
        case K::kAllToAll:
        case K::kAllToAllV: return &ShmDirectAllToAll;
        case K::kGather: return &ShmDirectGather;
        case K::kScatter: return &ShmDirectScatter;
        case K::kBarrier: return &ShmDirectBarrier;
        default: return nullptr;
      }
    case Algorithm::kShmTwoPhase:
      return kind == K::kAllReduce || kind == K::kReduce ? &ShmTwoPhaseAllReduce : nullptr;
    case Algorithm::kRing:
      switch (kind) {
        case K::kAllReduce: return &RingAllReduce;
        case K::kAllGather: return &RingAllGather;
        case K::kReduceScatter: return &RingReduceScatter;
        default: return nullptr;
      }
    case Algorithm::kHalvingDoubling: return kind == K::kAllReduce ? &HalvingDoublingAllReduce : nullptr;
    case Algorithm::kBinomialTree:
      switch (kind) {
        case K::kAllReduce: return &TreeAllReduce;
        case K::kReduce: return &TreeReduce;
        case K::kBroadcast: return &TreeBroadcast;
        case K::kBarrier: return &TreeBarrier;
        default: return nullptr;
      }
    case Algorithm::kPairwise:
      switch (kind) {
        case K::kAllToAll:
        case K::kAllToAllV: return &PairwiseAllToAll;
        case K::kGather: return &LinearGather;
        case K::kScatter: return &LinearScatter;
        default: return nullptr;
      }
    case Algorithm::kHierarchical: return nullptr;  // resolved by the communicator (hierarchical.h)
  }
  return nullptr;
}

StatusOr<ForcedAlgos> ParseAlgoSpec(const std::string& spec) {
  ForcedAlgos f;
  if (spec.empty()) return f;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      TESSERA_ASSIGN_OR_RETURN(Algorithm a, ParseAlgorithm(item));
      f.all = a;
      continue;
    }
    const std::string kind_text = item.substr(0, eq);
    bool found = false;
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      const CollectiveKind kind = static_cast<CollectiveKind>(k);
      if (CollectiveName(kind) == kind_text) {
        TESSERA_ASSIGN_OR_RETURN(Algorithm a, ParseAlgorithm(item.substr(eq + 1)));
        f.per_kind[kind] = a;
        found = true;
      }
    }
    if (!found) {
      return InvalidArgument("TESSERA_ALGO: unknown collective '{}' in '{}' (use all_reduce, reduce, broadcast, "
                             "all_gather, reduce_scatter, all_to_all, all_to_allv, gather, scatter, barrier)",
                             kind_text, spec);
    }
  }
  return f;
}

Selector::Selector(ModelInputs inputs, CostConstants constants, ForcedAlgos forced, bool hierarchical)
    : inputs_(inputs), constants_(std::move(constants)), forced_(std::move(forced)), hierarchical_(hierarchical) {}

Choice Selector::Choose(const CollectiveArgs& a) const {
  const bool shm = inputs_.transport == transport::TransportKind::kShm;
  auto usable = [&](Algorithm algo) {
    if (algo == Algorithm::kHierarchical) {
      return hierarchical_ && (a.kind == CollectiveKind::kAllReduce || a.kind == CollectiveKind::kAllGather ||
                               a.kind == CollectiveKind::kReduceScatter);
    }
    if ((algo == Algorithm::kShmDirect || algo == Algorithm::kShmTwoPhase) && !shm) return false;
    return FunctionFor(algo, a.kind) != nullptr;
  };
  std::string note;
  std::optional<Algorithm> forced;
  if (auto it = forced_.per_kind.find(a.kind); it != forced_.per_kind.end()) {
    forced = it->second;
  } else if (forced_.all) {
    forced = forced_.all;
  }
  if (forced) {
    if (usable(*forced)) {
      Choice c{*forced, FunctionFor(*forced, a.kind), "forced by TESSERA_ALGO", 0};
      return c;
    }
    note = fmt::format("TESSERA_ALGO={} cannot run {} here; ", AlgorithmName(*forced), CollectiveName(a.kind));
  }
  if (hierarchical_ && usable(Algorithm::kHierarchical)) {
    return Choice{Algorithm::kHierarchical, nullptr,
                  note + "ranks span several hosts: shm inside each host, tcp between hosts", 0};
  }
  if (a.kind == CollectiveKind::kAllToAllV) {
    // Sizes differ per rank, so the model could disagree across ranks.
    const Algorithm algo = shm ? Algorithm::kShmDirect : Algorithm::kPairwise;
    return Choice{algo, FunctionFor(algo, a.kind),
                  note + (shm ? "shm transport: direct window exchange" : "pairwise exchange over point-to-point"),
                  0};
  }
  Choice best;
  double second = std::numeric_limits<double>::infinity();
  Algorithm second_algo = Algorithm::kShmDirect;
  best.predicted_s = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kNumAlgorithms; ++i) {
    const Algorithm algo = static_cast<Algorithm>(i);
    if (!usable(algo)) continue;
    std::optional<double> t = PredictSeconds(algo, a, inputs_, constants_);
    if (!t) continue;
    if (*t < best.predicted_s) {
      if (best.fn != nullptr) {
        second = best.predicted_s;
        second_algo = best.algo;
      }
      best.algo = algo;
      best.fn = FunctionFor(algo, a.kind);
      best.predicted_s = *t;
    } else if (*t < second) {
      second = *t;
      second_algo = algo;
    }
  }
  if (best.fn == nullptr) {
    // Nothing modelled (cannot happen for valid kinds); fall back to a generic algorithm.
    const Algorithm algo = a.kind == CollectiveKind::kAllGather || a.kind == CollectiveKind::kReduceScatter
                               ? Algorithm::kRing
                           : a.kind == CollectiveKind::kAllToAll || a.kind == CollectiveKind::kGather ||
                                   a.kind == CollectiveKind::kScatter
                               ? Algorithm::kPairwise
                               : Algorithm::kBinomialTree;
    return Choice{algo, FunctionFor(algo, a.kind), note + "no model applies: generic algorithm", 0};
  }
  if (std::isfinite(second)) {
    best.reason = fmt::format("{}cost model: {:.1f} us predicted vs {:.1f} us for {} (next best)", note,
                              best.predicted_s * 1e6, second * 1e6, AlgorithmName(second_algo));
  } else {
    best.reason = fmt::format("{}cost model: {:.1f} us predicted (only candidate)", note, best.predicted_s * 1e6);
  }
  return best;
}

}  // namespace tessera::comm::algo
