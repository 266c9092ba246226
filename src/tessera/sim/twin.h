// The twin's step-time predictor for `tessera train` runs on this machine
// (docs/twin.md): counts the real work of one optimizer step of Tessera's
// GPT (models/gpt.h) per rank and prices it with the calibrated constants.
//
//  - Every autograd op of one micro-batch is listed with its size, and
//    priced forward + backward with the calibrated op lines
//    (calibrate.h): Linear layers on the fitted linear EfficiencyCurve
//    (6 m n k FLOPs against the rank's peak), fused causal attention,
//    norms, rope, copies, activations, cross-entropy, router softmax and
//    row gathers (fixed cost + cost per element).
//    All op costs of a micro-batch are scaled by the calibrated
//    context_factor (a probe model's ops inside training steps vs isolated).
//  - MoE: router, softmax, top-k, load-balancing loss, and per local expert
//    gathers, a SwiGLU MLP over M k / E tokens, gate multiply, concat and
//    scatter-add.
//  - Optimizer: gradient-norm clipping + AdamW over the rank's parameters
//    (shard under ZeRO >= 1) at the measured per-tensor and per-parameter
//    costs (without them: 28 bytes per parameter at triad bandwidth plus 4
//    kernels per tensor).
//  - Communication on the calibrated cluster spec (collective_cost.h):
//    the dp gradient reduction as the ZeRO stage does it (all-reduce or
//    reduce-scatter, plus the parameter all-gathers of ZeRO-1/2/3; exposed),
//    tp all-reduces (2 forward, 2 backward per layer), ep all-to-alls
//    (dispatch + combine, forward and backward) and pp activation sends;
//    multi-rank runs also copy the gradients into flat buckets.
//  - Each meeting of ranks inside a micro-batch (tp all-reduce, ep
//    exchange, pp hand-off) costs the calibrated meeting time on top.
//  - Pipeline: 1F1B over pp stages: (m + pp - 1) slots of the slowest stage.
//  - Activation memory: every op output of a micro-batch (the tape keeps
//    them until backward), times the micro-batches in flight per stage.
// Ranks share the cores: each rank gets MachineCalibration::PerRank(world).
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
};

struct TwinRun {
  int64_t global_batch = 1;
  int64_t micro_batch = 1;  // sequences per micro-batch per data-parallel rank
  int dp = 1, tp = 1, pp = 1, ep = 1;
  int zero = 0;
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
  double bubble_s = 0;
  double ops_per_micro_batch = 0;  // autograd ops on the critical stage
  // Peak bytes of saved activations per rank: every op output of a
  // micro-batch stays on the tape until its backward (fp32), times the
  // micro-batches in flight on the stage (1F1B: pp - stage); the stage
  // with the most.
  double activation_bytes = 0;
  int activation_stage = 0;
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
