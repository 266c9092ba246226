// Time model: one training step of a model under a parallel plan on a
// cluster (docs/plan.md derives every term).
//  - compute: every layer is a list of GEMMs (roofline at the device's peak
//    tensor FLOP/s for the plan's precision — attention scores always at
//    the bf16 peak — times an efficiency curve:
//    gemm_max * q(M) q(N) q(K), q(d) = d / (d + gemm_half_dim)) and
//    memory-bound element-wise kernels (bytes / (HBM bandwidth * memory));
//    backward = 2 x forward; recompute adds forward work;
//  - communication: sim's closed-form collective costs on the cluster's
//    topology (tp inside super-nodes when it fits, dp strided by tp, ep
//    contiguous, pp stages dp*tp apart); TP and EP collectives sit on the
//    critical path (Megatron without comm overlap); the dp gradient
//    reduction overlaps the last micro-batch's backward when
//    overlap_grad_reduce, else it is exposed;
//  - pipeline: 1F1B m - 1 slots of the slowest rank + one slot of every
//    rank (fill and drain; (m + p - 1) slots when ranks are equal);
//    interleaved: the fill/drain part divided by v; ZB-H1 bubble
//    (p-1)(t_f + t_b - 2 t_w);
//  - optimizer step: memory-bound Adam over the local shard (host link
//    transfers when offloaded).
// Pure functions of their arguments; thread-safe.
#pragma once

#include <string>

#include "tessera/plan/memory_model.h"
#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/pipeline_replay.h"

namespace tessera::plan {

// Achievable fractions of the device's peaks. Defaults are physical, not
// fitted per workload (docs/plan.md gives the evidence for each).
struct Efficiency {
  double gemm_max = 0.75;
  double gemm_half_dim = 32;      // tile/wave quantization: a 128-wide dimension costs 20 %
  double fp8_gemm_factor = 0.85;  // fp8 GEMMs reach this much of gemm_max (scaling/casting overheads)
  double flash_attention = 0.60;  // FlashAttention-2 forward+backward, fraction of peak
  double memory = 0.80;           // element-wise kernels, fraction of HBM bandwidth
};

struct StepBreakdown {
  // Seconds per step.
  double step_time = 0;
  double compute = 0;       // GEMM + element-wise time on the critical path (incl. recompute)
  double tp_comm = 0;       // exposed tensor-parallel collectives
  double ep_comm = 0;       // exposed expert-parallel all-to-alls
  double pp_comm = 0;       // exposed pipeline sends
  double dp_comm = 0;       // exposed gradient reduction / parameter gathers
  double sync = 0;          // ranks meeting inside micro-batches beyond the transfers (calibrated hosts)
  double bubble = 0;        // pipeline idle time
  double optimizer = 0;     // optimizer step (+ offload transfers)
  // Rates.
  double model_flops = 0;     // per step, without recompute (6N-style + attention)
  double hardware_flops = 0;  // per step, with the recompute FLOPs
  double tflops_per_device = 0;  // hardware FLOP/s per device / 1e12 (Narayanan et al.'s convention)
  double mfu = 0;                // model FLOP/s / peak (the plan's precision)
  double hfu = 0;                // hardware FLOP/s / peak
  double tokens_per_s = 0;
  double bubble_fraction = 0;
  double comm_fraction = 0;   // exposed communication / step time
  MemoryBreakdown memory;
  double memory_capacity = 0;  // usable bytes per device (kUsableMemoryFraction of HBM)
  bool fits = false;
};

// Evaluates `p` (which must pass ValidatePlan and fit in the cluster:
// Devices() <= TotalDevices()); errors say which.
StatusOr<StepBreakdown> EvaluatePlan(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p,
                                     const Efficiency& eff = Efficiency());

// The same plan priced per pipeline rank (the durations EvaluatePlan's closed
// form is built from) for sim::ReplayPipeline, which schedules the tasks
// instead of using the bubble formula; `tessera sim step` runs this. The two
// agree within 1 % on Narayanan et al.'s Table 1 plans (sim_agreement_test).
// Zero-bubble plans are refused.
StatusOr<sim::PipelineCost> PricePipeline(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p,
                                          const Efficiency& eff = Efficiency());

}  // namespace tessera::plan
