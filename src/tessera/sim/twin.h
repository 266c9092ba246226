// The twin's step-time and memory predictor for `tessera train` runs on
// this machine (docs/twin.md): counts the real work of one optimizer step of
// Tessera's GPT (models/gpt.h, parallel/gpt_stage.cc) per rank and prices it
// with the calibrated costs (calibrate.h).
//
//  - Every autograd op of one micro-batch on each pipeline stage
//    (twin_ops.h) priced with the calibration's shape-aware fits: linear
//    layers, fused causal attention, norms, rope, copies, activations,
//    cross-entropy, router softmax, row gathers; MoE routing with balanced
//    experts; sequence parallelism shards the norm/residual regions;
//    selective / full recompute re-run the attention part / the block in
//    the backward. Op costs are scaled by the calibrated context factor
//    (generic probe models' ops inside training steps vs isolated).
//  - Communication on the calibrated cluster spec (collective_cost.h): tp
//    all-reduces (2 forward, 2 backward per layer), ep all-to-alls, pp
//    sends and the calibrated cost of each meeting of ranks inside a
//    micro-batch, on the micro-batch's critical path; the dp gradient
//    reduction as the ZeRO stage does it (all-reduce or reduce-scatter, then
//    the parameter all-gathers of ZeRO-1/2; ZeRO-3 gathers the parameters
//    around every micro-batch's forward and backward), overlapping the last
//    micro-batch's backward.
//  - Optimizer: gradient-norm clipping + AdamW over the rank's parameters
//    (shard under ZeRO >= 1) at the measured per-tensor and per-parameter
//    costs, after the gradients are copied into the flat ZeRO buckets.
//  - The step: sim::ReplayPipeline (1F1B) over the stages' per-micro-batch
//    costs — the schedule model `tessera sim step` and the planner use —
//    with processor sharing when the ranks outnumber the cores.
//  - Memory per rank: ZeroOptimizer's flat buffers (parameters, gradients,
//    AdamW moments by ZeRO stage), the parameters' gradient tensors during
//    accumulation, ZeRO-3's gathered block, and every op output of a
//    micro-batch kept on the tape times the micro-batches in flight on the
//    stage (1F1B: pp - stage); the single-process trainer keeps fp32
//    parameters, gradients and moments and one micro-batch's activations.
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/sim/calibrate.h"
#include "tessera/sim/cluster_spec.h"

namespace tessera::sim {

struct TwinModel {
  int64_t vocab = 0;
  int64_t seq = 0;
  int layers = 0;
  int64_t d_model = 0;
  int heads = 1;
  int64_t d_ff = 0;
  bool gated_ffn = true;  // SwiGLU (3 matrices) vs GELU (2)
  bool tied_embeddings = true;
  bool rope = true;
  int experts = 0;  // 0 = dense
  int top_k = 1;
  int64_t d_ff_expert = 0;
  std::vector<bool> moe;  // per layer: MoE feed-forward (empty = dense model)
  // Per layer, under expert parallelism: the rows a rank's experts receive
  // over the balanced share (tokens · top_k), >= 1. Routing is data
  // dependent (dropless); a router probe measures it (train/router_probe.h).
  // expert_load: the busiest rank's, averaged over the all-to-alls (every
  // rank waits for it: time); expert_peak_load: the most one rank holds over
  // the micro-batches in flight (memory). Empty or missing layers: balanced.
  std::vector<double> expert_load;
  std::vector<double> expert_peak_load;
};

enum class Recompute { kNone, kSelective, kFull };

struct TwinRun {
  int64_t global_batch = 1;
  int64_t micro_batch = 1;  // sequences per micro-batch per data-parallel rank
  int dp = 1, tp = 1, pp = 1, ep = 1;
  int zero = 0;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
};

struct TwinPrediction {
  int ranks = 1;
  int threads_per_rank = 1;
  int64_t micro_batches = 1;  // per rank per step
  double step_s = 0;
  double gemm_s = 0;          // per step on the critical rank
  double elementwise_s = 0;   // every op other than linear layers and attention
  double overhead_s = 0;      // the fixed per-op part of all ops (included in the two above)
  double optimizer_s = 0;
  double dp_comm_s = 0;
  double tp_comm_s = 0;
  double ep_comm_s = 0;
  double pp_comm_s = 0;
  double sync_s = 0;          // meetings of ranks inside micro-batches (tp, ep, pp) beyond transfers
  double bubble_s = 0;        // pipeline idle time of the schedule itself
  double sharing_s = 0;       // what ranks outnumbering the cores add (waiting for a core)
  double ops_per_micro_batch = 0;  // autograd ops on the critical stage
  // Memory of the rank with the highest peak (bytes): saved activations
  // (every op output of a micro-batch until its backward, fp32, times the
  // micro-batches in flight), ZeroOptimizer's flat buffers, the gradient
  // tensors accumulated over micro-batches and gathered ZeRO-3 blocks.
  double activation_bytes = 0;
  double parameter_bytes = 0;
  double gradient_bytes = 0;
  double optimizer_state_bytes = 0;
  double buffer_bytes = 0;  // gradient tensors, gathered ZeRO-3 parameters, recompute transients
  double peak_memory_bytes = 0;
  int activation_stage = 0;  // pipeline stage of that rank
  double expert_load = 1;       // the largest TwinModel::expert_load used (expert parallelism only)
  double expert_peak_load = 1;  // the largest expert_peak_load used
  double model_flops = 0;     // per step, whole model: 6 N_active tokens + attention
  double parameters = 0;
};

StatusOr<TwinPrediction> PredictTrainStep(const MachineCalibration& calibration, const ClusterSpec& spec,
                                          const TwinModel& model, const TwinRun& run);
// Forward + backward seconds of one micro-batch of `micro_batch` sequences
// through the whole model on one rank (no parallelism): the sum of the op
// costs in `h` without its context_factor. `tessera sim calibrate` divides
// a probe model's measured time by this to get the context factor.
double OpSumSecondsPerMicroBatch(const HostCalibration& h, const TwinModel& model, int64_t micro_batch);

std::string TwinPredictionJson(const TwinPrediction& p);
std::string DescribeTwinPrediction(const TwinPrediction& p);

}  // namespace tessera::sim
