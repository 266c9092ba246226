// Memory model: bytes per device for a model under a parallel plan, from
// published formulas (docs/plan.md gives each with its source):
//  - model states (ZeRO paper, mixed-precision Adam, K = 12): bf16 params 2,
//    bf16 grads 2, fp32 master + Adam moments 12 bytes per parameter (or,
//    StateLayout::kFp32Adam, fp32 params 4, grads 4, moments 8);
//    ZeRO-1 shards the 12, ZeRO-2 also the grads, ZeRO-3 also the params,
//    over the data-parallel group (dp for dense weights; the expert-data-
//    parallel group dp*tp/ep for expert weights). fp8 adds a 1-byte weight
//    cast cache. Offload moves the optimizer states to the host tier.
//  - activations (Korthikanti et al. 2022), generalized per tensor kept for
//    backward: 34sbh + 5as²b per layer for GPT; with TP t the norm and
//    dropout tensors stay whole unless sequence parallelism splits them;
//    selective recompute (or flash attention) drops the as² terms; full
//    recompute keeps only each layer's input (plus one layer being
//    recomputed). fp8 stores GEMM inputs in 1 byte.
//  - pipeline: rank i of a 1F1B pipeline holds min(p-i, m) micro-batches;
//    interleaved rank i holds 2(p-i-1) + (vpp-1)p + 1 chunk activations.
//  - workspace: the last stage's logits (bf16 + fp32 softmax) of one
//    micro-batch; ZeRO-3's gathered parameters of two layers.
// Reported for the pipeline rank with the largest total. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/plan/stage_layout.h"

namespace tessera::plan {

// Fraction of device memory the planner lets a plan use: the rest goes to
// the runtime (CUDA/CANN context, communicator buffers) and allocator
// fragmentation (PyTorch's caching allocator typically loses 5-10 %).
inline constexpr double kUsableMemoryFraction = 0.90;

struct MemoryBreakdown {
  double weights = 0;      // parameters (+ fp8 cast cache)
  double gradients = 0;
  double optimizer = 0;    // on the device (0 when offloaded)
  double activations = 0;  // kept for backward, all in-flight micro-batches
  double workspace = 0;    // largest transient buffers
  double host = 0;         // offloaded optimizer states, per device
  int rank = 0;            // pipeline rank this breakdown is for
  double params = 0;       // parameters held by that rank (elements, before ZeRO-3)

  double Total() const { return weights + gradients + optimizer + activations + workspace; }
};

// Parameters one device of pipeline rank `r` holds (elements, before ZeRO-3):
// dense weights split over tp, routed-expert weights over ep.
struct RankParams {
  double dense = 0;
  double expert = 0;
  // Elements whose optimizer states ZeRO shards (dense over dp, experts over edp).
  double Sharded(const ParallelPlan& p) const {
    return dense / p.dp + expert / (static_cast<double>(p.dp) * p.tp / p.ep);
  }
};
RankParams ParamsOnRank(const ModelSpec& m, const ParamCounts& c, const ParallelPlan& p, const RankLayers& r);

// Activation bytes kept for backward by one layer for one micro-batch on one
// device (before pipeline in-flight multiplication).
double LayerActivationBytes(const ModelSpec& m, const ParallelPlan& p, bool moe_layer);

// Micro-batches (in units of one model chunk) pipeline rank `rank` holds at
// its peak.
int64_t InFlightChunks(const ParallelPlan& p, int rank);

// Memory of every pipeline rank (index = pipeline rank).
std::vector<MemoryBreakdown> EstimateMemoryPerRank(const ModelSpec& m, const ParallelPlan& p);
// Memory of the pipeline rank with the largest total.
MemoryBreakdown EstimateMemory(const ModelSpec& m, const ParallelPlan& p);

}  // namespace tessera::plan
