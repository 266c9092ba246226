// TrainStep: the forward and backward passes of one optimizer step on this
// rank — every micro-batch through this rank's GptStage — with the
// gradient reduction of the ZeroOptimizer started as soon as a bucket's
// gradients are final, so it overlaps the rest of the backward pass.
//
// One pipeline stage (pp = 1): each segment (embedding, block, head) runs
// on its own tape, so the backward pass goes segment by segment; after the
// last micro-batch's backward of a segment its buckets start reducing while
// the earlier segments are still differentiated (DDP-style overlap). ZeRO-3
// gathers a segment's parameters just before its forward and its backward
// and releases them right after.
// Several stages (pp > 1): the pipeline executor runs the configured
// schedule (gpipe, 1f1b, interleaved) over the pp group, each chunk's
// segments on the executor's per-(micro-batch, chunk) tape; a chunk's
// buckets start reducing after its last micro-batch's backward, while the
// pipeline drains; after the flush the tied embedding's gradient is summed
// between the first and last stage and its buckets follow (ZeRO-3 needs
// pp = 1).
// Recompute happens inside the segments (graph::Checkpoint).
// Every phase is recorded as a timeline event (Chrome trace categories
// "compute", "comm").
// Thread-safety: one thread drives a TrainStep.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/parallel/gpt_stage.h"
#include "tessera/parallel/mesh.h"
#include "tessera/parallel/zero.h"

namespace tessera::parallel {

class PipelineExecutor;

struct TimelineEvent {
  std::string name;      // "F blocks.2 mb 3", "reduce blocks.2"
  std::string category;  // "compute" | "comm"
  double start_s = 0;    // since the step began
  double duration_s = 0;
};

struct StepResult {
  MicroBatchStats stats;
  double step_s = 0;      // forward + backward + reduction wall time
  double compute_s = 0;   // time inside segment forwards and backwards
  std::vector<double> chunk_compute_s;  // pipeline: compute_s per local chunk
  double comm_wait_s = 0; // time blocked on communication (reductions, pipeline transfers)
  double p2p_wait_s = 0;  // of which pipeline transfers
  double bubble_fraction = 0;  // pipeline: 1 - busy / step of the executor
  std::vector<TimelineEvent> timeline;
};

class TrainStep {
 public:
  TrainStep(GptStage& stage, ZeroOptimizer& zero, const DeviceMesh& mesh, const ParallelConfig& config);
  ~TrainStep();

  // Runs the micro-batches (their loss_scale set by the caller) and leaves
  // the reduced gradients in the optimizer.
  Status Run(const std::vector<MicroBatchInput>& micro_batches, StepResult* result);

 private:
  Status RunSingleStage(const std::vector<MicroBatchInput>& micro_batches, StepResult* result);
  Status RunPipeline(const std::vector<MicroBatchInput>& micro_batches, StepResult* result);

  std::unique_ptr<PipelineExecutor> executor_;  // pp > 1
  GptStage& stage_;
  ZeroOptimizer& zero_;
  const DeviceMesh& mesh_;
  ParallelConfig config_;
};

}  // namespace tessera::parallel
