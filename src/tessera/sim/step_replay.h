// Training-step replay: one step of a (hand-written or planner-made) 3D
// parallel plan on a cluster, as a DAG of compute and communication tasks
// simulated with overlap, with a Chrome trace-event timeline.
//
// Model: a GPT-style transformer (layers, hidden, seq, vocab) split into
// `pp` equal stages of `tp`-way tensor parallelism, replicated `dp` times;
// ranks are ordered tp fastest, then dp, then pp (Megatron). Per stage and
// micro-batch: forward and backward compute (Megatron FLOP counts, 2x for
// backward, roofline with the efficiency curve), the tensor-parallel
// all-reduces of each layer on the stage's stream (2 forward, 2 backward,
// analytic cost over the tp group), activations / gradients sent to the
// neighbour stage (point-to-point) on the stage's send stream. Schedules:
// 1F1B (warm-up pp-1-s forwards, steady one-forward-one-backward, cool-down)
// or GPipe. After its last backward each stage all-reduces its gradients
// over dp (on a separate communication stream) and then runs the optimizer
// (memory-bound, 16 bytes per parameter read and written). DP and TP
// replicas are symmetric, so one pipeline is simulated: the cost is
// independent of dp. Errors in the plan file name file:line and key.
#pragma once

#include <string>
#include <vector>

#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/device_model.h"
#include "tessera/sim/topology.h"

namespace tessera::sim {

struct PlanSpec {
  int layers = 0, hidden = 0, seq = 0, vocab = 0;
  int dp = 1, tp = 1, pp = 1;
  int micro_batch = 1, global_batch = 1;
  bool one_f_one_b = true;  // false: GPipe
  Precision precision = Precision::kBf16;
  EfficiencyCurve efficiency;
  bool custom_efficiency = false;  // the file has [efficiency] (used by the flow replay only)
  // Priced by the planner's cost model only (`tessera sim step` closed form,
  // plan::PricePipeline); the flow replay refuses plans that set them.
  int heads = 0;       // [model] heads; 0: hidden / 128
  int vpp = 1;         // [parallel] vpp > 1: interleaved schedule (schedule = "interleaved")
  std::string recompute = "none";  // none | selective | full
  int zero = 0;
  bool sequence_parallel = false, flash_attention = false, overlap_grad_reduce = false;

  int MicroBatches() const { return global_batch / (dp * micro_batch); }
  int Devices() const { return dp * tp * pp; }
  // Megatron FLOPs of one step without recompute: 72 B s l h^2 (1 + s/6h) + 6 B s h V.
  double StepFlops() const;
  double Parameters() const;  // 12 l h^2 + V h
};

StatusOr<PlanSpec> LoadPlanSpec(const std::string& path);
StatusOr<PlanSpec> ParsePlanSpec(const std::string& toml_text, const std::string& source);

struct TraceEvent {
  std::string name;
  int stage = 0;
  int stream = 0;  // 0 compute, 1 pipeline sends, 2 data-parallel communication
  double start_s = 0, end_s = 0;
};

struct StepResult {
  double step_time_s = 0;
  double compute_s = 0;      // busiest stage's compute (incl. tp comm)
  double bubble_fraction = 0;  // idle share of the busiest compute stream until the pipeline flush
  double dp_comm_s = 0;      // one stage's gradient all-reduce
  double tp_comm_s = 0;      // one stage's tensor-parallel communication per step
  double mfu = 0;            // model FLOPs / (devices x peak x step time)
  int64_t flows = 0, events = 0;  // flow replay: engine flows + tasks, events
  int64_t simulated_ranks = 0;    // flow replay: ranks whose pipeline (compute, tp, sends) was simulated
  std::vector<TraceEvent> trace;  // flow replay: the pipeline of tp rank 0, dp replica 0
};

// Fails when the plan does not fit the cluster (devices, tp across super-nodes, divisibility).
StatusOr<StepResult> ReplayStep(const ClusterSpec& cluster, const PlanSpec& plan);
// The same step with every rank's communication as flows on the flow engine
// over the cluster's topology (all dp x tp x pp ranks, no symmetry assumed)
// and compute as timed tasks; see step_replay_flows.cc for the granularity.
StatusOr<StepResult> ReplayStepFlows(const ClusterSpec& cluster, const PlanSpec& plan,
                                     Routing routing = Routing::kAdaptive);
// The flow replay reduced by symmetry (docs/sim.md, "Simulator scale"): the
// pipelines of `replicas` data-parallel replicas (whole super-nodes per
// stage) stand for all of them; every rank's gradient all-reduce is simulated,
// with each ring's steps merged into one flow per ring edge. full = true is
// ReplayStepFlows above (every rank, every collective step).
struct FlowReplayOptions {
  Routing routing = Routing::kAdaptive;
  bool full = false;
  int replicas = 0;  // 0: one super-node's worth (its dp replicas) per stage; rounded up to whole super-nodes
};
StatusOr<StepResult> ReplayStepFlows(const ClusterSpec& cluster, const PlanSpec& plan, const FlowReplayOptions& options);
// Chrome trace-event JSON (open in Perfetto or chrome://tracing); see chrome_trace.h.
std::string ChromeTraceJson(const StepResult& result);

// Shared by both replays.
namespace step_detail {
enum Stream { kCompute = 0, kSendNext = 1, kDataParallel = 2, kSendPrev = 3, kStreams = 4 };
struct StageWork {
  int layers = 0;             // per stage
  double fwd_s = 0, bwd_s = 0;  // one micro-batch's compute per tp rank (roofline), LM head on the last stage
  double act_bytes = 0;       // b s h bf16: a tp all-reduce and a stage-to-stage message
  double params = 0;          // parameters of the stage (all its tp ranks)
  double grad_bytes = 0;      // bf16 gradients per tp rank
  double optimizer_s = 0;     // 16 bytes per parameter read and written through HBM
  int dp_local = 1;           // dp replicas per super-node
};
Status CheckPlanFits(const ClusterSpec& c, const PlanSpec& p);
StageWork Stage(const ClusterSpec& c, const PlanSpec& p, int stage);
// Compute order of a stage: (micro-batch, is forward), 1F1B or GPipe.
std::vector<std::pair<int, bool>> ComputeOrder(const PlanSpec& p, int stage);
}  // namespace step_detail

}  // namespace tessera::sim
