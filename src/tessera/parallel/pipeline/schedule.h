// Pipeline-parallel schedules as pure logic: which forward and backward
// passes each pipeline stage runs, in which order, for one training step.
//
//   kGpipe            every forward, then every backward (GPipe): m
//                     micro-batches' activations alive on every stage.
//   k1F1B             PipeDream-flush / Megatron 1F1B: stage s runs
//                     min(p-s-1, m) warm-up forwards, then alternates one
//                     forward and one backward, then drains; at most p
//                     micro-batches in flight on stage 0.
//   kInterleaved1F1B  Megatron's interleaved 1F1B: each stage holds v model
//                     chunks; chunk c on stage s is virtual stage c*p + s, so
//                     activations go round the ring v times. Needs v >= 2 and
//                     m % p == 0. The bubble time shrinks by v.
//
// With forward cost f and backward cost b per chunk (full-stage costs v*f,
// v*b) the makespan is (v*m + p - 1)*(f + b), so the bubble fraction
// (idle / makespan) is (p-1)/(m+p-1) for GPipe and 1F1B and
// (p-1)/(v*m + p-1) for the interleaved schedule (Megatron's bubble-to-work
// ratio (p-1)/m divided by v). SimulatePipeline replays any schedule with
// given costs and checks these figures (and that the schedule cannot
// deadlock: it respects every cross-stage dependency).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::parallel {

enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved1F1B };

// "gpipe", "1f1b", "interleaved" (also "interleaved-1f1b").
StatusOr<PipelineSchedule> ParsePipelineSchedule(std::string_view name);
std::string_view PipelineScheduleName(PipelineSchedule schedule);

struct PipeAction {
  enum class Kind { kForward, kBackward } kind;
  int microbatch;
  int chunk;  // local model chunk, 0..virtual_stages-1
  bool operator==(const PipeAction&) const = default;
};
std::string ToString(const PipeAction& action);  // "F3.1" = forward, micro-batch 3, chunk 1

// Clear InvalidArgument errors for degrees the schedule cannot run: p, m,
// v >= 1; v == 1 for GPipe and 1F1B; v >= 2 and m % p == 0 for interleaved.
Status ValidatePipelineSchedule(PipelineSchedule schedule, int stages, int microbatches, int virtual_stages);

// The actions of every stage (result[s] for stage s), each micro-batch and
// chunk forwarded and backpropagated exactly once per stage. CHECKs
// ValidatePipelineSchedule (validate configs first to get the error as a
// Status).
std::vector<std::vector<PipeAction>> BuildPipelineSchedule(PipelineSchedule schedule, int stages, int microbatches,
                                                           int virtual_stages);

// Virtual stage of local chunk `chunk` on `stage`: chunk * stages + stage.
inline int VirtualStage(int stage, int chunk, int stages) { return chunk * stages + stage; }

// The analytic bubble fraction (see the header comment).
double AnalyticBubbleFraction(PipelineSchedule schedule, int stages, int microbatches, int virtual_stages);

// Largest number of (micro-batch, chunk) forwards not yet backpropagated at
// any point of one stage's actions: the activations it keeps alive.
int MaxInFlight(const std::vector<PipeAction>& actions);

struct PipelineSimulation {
  double makespan = 0;                 // end of the last action
  std::vector<double> busy;            // per stage: sum of its action costs
  double bubble_fraction = 0;          // 1 - sum(busy) / (stages * makespan)
  std::vector<std::vector<double>> start;  // per stage, per action: start time
};

// Replays `schedule` (per stage, as BuildPipelineSchedule returns) with zero
// communication time: each stage runs its actions in order, an action
// starting once the stage is free and its inputs exist (forward of virtual
// stage k after forward k-1 of the same micro-batch; backward of k after
// backward k+1 and after the same stage's forward k). FailedPrecondition if
// the schedule misses or repeats an action or would deadlock.
StatusOr<PipelineSimulation> SimulatePipeline(const std::vector<std::vector<PipeAction>>& schedule,
                                              int microbatches, int virtual_stages, double forward_cost = 1.0,
                                              double backward_cost = 2.0);

}  // namespace tessera::parallel
