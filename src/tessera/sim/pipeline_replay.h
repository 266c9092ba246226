// Pipeline replay of priced stages: one training step as a DAG of per-chunk
// forward/backward tasks, gradient reductions and optimizer steps on each
// pipeline rank's streams, list-scheduled (each stream runs its tasks in
// issue order, each when its dependencies are done). The durations come from
// the caller (the planner's pricing, plan::PricePipeline, so `tessera sim
// step` and `tessera plan evaluate` share one cost model, and the twin's
// sim::PredictTrainStep); this file decides only the order, what overlaps
// and, for ranks sharing cores, how fast each runs. Schedules: GPipe, 1F1B (warm-up p-1-s)
// and Megatron's interleaved 1F1B (v chunks per rank, warm-up
// 2(p-1-s) + (v-1)p, micro-batches in groups of p). Point-to-point transfers
// are inside the tasks (Megatron's blocking send/recv), so a chunk's forward
// on stage s+1 waits for the same chunk's forward on stage s. Pure function;
// thread-safe.
#pragma once

#include <vector>

#include "tessera/base/status.h"
#include "tessera/sim/step_replay.h"

namespace tessera::sim {

enum class PipelineSchedule { kGPipe, kOneFOneB, kInterleaved };

// One pipeline rank (all its chunks together), per micro-batch.
struct StageCost {
  double fwd_s = 0;        // forward of one micro-batch over all the rank's chunks (compute + exposed collectives + sends)
  double bwd_s = 0;        // backward likewise (incl. recompute)
  double compute_s = 0;    // of which compute (reporting only)
  double dp_s = 0;         // gradient reduction of the rank's parameters
  bool dp_overlaps_last_backward = false;  // starts with the last micro-batch's backward (else after it)
  double optimizer_s = 0;  // after the reduction and the last backward
};

struct PipelineCost {
  std::vector<StageCost> stages;  // one per pipeline rank
  int micro_batches = 1;
  int vpp = 1;  // chunks per rank (interleaved only)
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  // Ranks sharing a machine's cores (the twin: more ranks than cores): the
  // cores (0 = every rank has its own) and how many ranks run each pipeline
  // rank's tasks at once (its data- and tensor-parallel replicas). Running
  // tasks progress at min(1, cores / (running tasks x ranks_per_stage)).
  double cores = 0;
  int ranks_per_stage = 1;
};

// Fails on an empty pipeline, m < 1, or an interleaved schedule whose m is
// not a multiple of the stages. StepResult: step_time_s, compute_s (busiest
// rank's compute stream incl. exposed collectives), bubble_fraction,
// dp_comm_s (rank 0), trace (one event per task; chunk tasks are "F3.1" =
// micro-batch 3, chunk 1).
StatusOr<StepResult> ReplayPipeline(const PipelineCost& cost);

}  // namespace tessera::sim
