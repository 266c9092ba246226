// Picks the algorithm for each call: the forced one when TESSERA_ALGO (or
// CommOptions::algo) names one that can run the collective here, else the
// cheapest by the cost model (cost_model.h), with a reason string for
// TESSERA_DEBUG=INFO logs and `tessera topo`. Deterministic: every rank
// holds the same inputs and constants, so all pick the same algorithm.
//   Spec: "ring" (every collective it can run) or per collective,
//   "all_reduce=ring,all_to_all=pairwise,broadcast=binomial_tree".
// Immutable after construction; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "tessera/base/status.h"
#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/cost_model.h"

namespace tessera::comm::algo {

using AlgoFn = Status (*)(const CollectiveArgs&, AlgoEnv&);

// The entry point of `algo` for `kind`, or nullptr.
AlgoFn FunctionFor(Algorithm algo, CollectiveKind kind);

struct Choice {
  Algorithm algo = Algorithm::kShmDirect;
  AlgoFn fn = nullptr;
  std::string reason;
  double predicted_s = 0;
};

// Parses a TESSERA_ALGO spec: "" (none), "ring", "all_reduce=ring,...".
struct ForcedAlgos {
  std::optional<Algorithm> all;
  std::map<CollectiveKind, Algorithm> per_kind;
};
StatusOr<ForcedAlgos> ParseAlgoSpec(const std::string& spec);

class Selector {
 public:
  Selector(ModelInputs inputs, CostConstants constants, ForcedAlgos forced, bool hierarchical);
  // For collectives (not send/recv).
  Choice Choose(const CollectiveArgs& a) const;
  const CostConstants& constants() const { return constants_; }
  const ModelInputs& inputs() const { return inputs_; }

 private:
  ModelInputs inputs_;
  CostConstants constants_;
  ForcedAlgos forced_;
  bool hierarchical_;
};

}  // namespace tessera::comm::algo
