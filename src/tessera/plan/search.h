// Strategy search: enumerates parallel plans for a model on `devices` cards
// of a cluster — tp (inside a super-node), pp with virtual stages, dp, ep,
// micro-batch, ZeRO stage, recompute, optimizer offload to the host tier,
// precision and pipeline schedule — prunes those that do not fit in device
// memory (or whose offloaded states do not fit in the host tier), evaluates
// the rest with the time model and keeps the `top` fastest, each with its
// full breakdown. Sequence parallelism, flash attention and overlapped
// gradient reduction are always on (each is a pure gain in the model).
// Deterministic (ties broken by enumeration order). Thread-safe: no state
// outside the call.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/plan/time_model.h"
#include "tessera/sim/cluster_spec.h"

namespace tessera::plan {

struct SearchOptions {
  int64_t devices = 0;       // world size; every plan uses all of them
  int64_t global_batch = 0;  // sequences per step (0: the model's global_batch)
  int64_t seq_len = 0;       // 0: the model's
  int top = 5;
  std::vector<int64_t> micro_batches = {1, 2, 4, 8};
  int max_vpp = 8;
  bool allow_offload = true;
  bool allow_fp8 = true;  // used only where the device has fp8 units
};

struct RankedPlan {
  ParallelPlan plan;
  StepBreakdown result;
};

struct SearchResult {
  std::vector<RankedPlan> top;  // fastest first
  int64_t candidates = 0;       // valid plans enumerated
  int64_t feasible = 0;         // of those, fitting in memory
  double wall_s = 0;            // search time
};

StatusOr<SearchResult> SearchPlans(const ModelSpec& m, const sim::ClusterSpec& c, const SearchOptions& o,
                                   const Efficiency& eff = Efficiency());

}  // namespace tessera::plan
