// Router probe: how a config's dropless MoE routing loads its expert-
// parallel ranks, the input the twin needs to predict memory and time of
// expert parallelism (sim/twin.h, TwinModel::expert_load).
//
// ProbeExpertLoad trains the config's first steps (up to `max_steps`) on
// one process — the single-process trainer takes the parallel run's steps
// exactly, so it routes as the parallel run does — and, per layer,
// measures the rows an expert-parallel rank receives over the balanced
// share (tokens · top_k of a rank). The micro-batches that meet in one all-to-all are those the ep
// ranks of one group run at the same time (ParallelTrainer::MicroBatches,
// parallel/mesh.h). Two figures per layer:
//   mean  the busiest rank's share, averaged over the all-to-alls (every
//         rank waits for the busiest: step time);
//   peak  the largest share one rank holds over `window` consecutive
//         micro-batches of a step, over all steps probed (the micro-batches
//         a pipeline stage keeps in flight: peak memory).
// Dense layers and ep = 1 give 1. It measures the workload, not the
// machine: no time or memory is measured.
// ExpertLoadOf is the pure part: from tokens per expert of each
// micro-batch of one step, in the trainer's order.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/train/train_config.h"

namespace tessera::train {

struct ExpertLoad {
  double mean = 1;
  double peak = 1;
};

// counts[k][e]: rows micro-batch k of a step sent to expert e (k over the
// whole step: dp ranks × micro-batches per rank, in the trainer's order).
StatusOr<ExpertLoad> ExpertLoadOf(const std::vector<std::vector<int64_t>>& counts, int dp, int ep, int window);

// Per layer (ExpertLoad{1, 1} for dense layers).
StatusOr<std::vector<ExpertLoad>> ProbeExpertLoad(const TrainConfig& config, int max_steps = 16);

}  // namespace tessera::train
