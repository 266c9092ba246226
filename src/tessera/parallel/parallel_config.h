// ParallelConfig: how one training job spreads over its ranks — the
// `[parallel]` section of a train config plus the precision and recompute
// choices of `[train]` — and its validation against the model and the
// batch sizes, with errors naming the keys.
// Plain value type.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/base/status.h"
#include "tessera/models/gpt_config.h"
#include "tessera/parallel/mesh.h"

namespace tessera::parallel {

struct ParallelConfig {
  int dp = 1;  // 0: elastic, world_size / (tp · pp) at each (re)start
  int tp = 1;
  int pp = 1;
  int ep = 1;
  int zero = 0;  // ZeRO stage 0–3
  // Gradient compression of the data-parallel reductions (comm/compress):
  // none | bf16 | fp16 | int8 | fp8 | topk:F, with error feedback.
  std::string grad_compression = "none";
  bool sequence_parallel = false;  // with tp > 1
  std::string schedule = "1f1b";   // gpipe | 1f1b | interleaved
  int virtual_stages = 1;          // model chunks per pipeline stage (interleaved)
  std::string recompute = "none";  // none | selective | full
  // Graph mode (train.graph): each segment (embedding, block, head) is
  // captured into a static graph on its first micro-batch, optimized and
  // replayed (graph/compiled_function.h); segments that cannot be captured
  // (MoE routing reads data on the host) stay eager.
  bool graph = false;
  // Graph mode's recompute planner (graph/recompute.h): bytes the backward may
  // keep from the forward per segment and micro-batch before cheap
  // activations are recomputed; 0 recomputes every one that saves memory;
  // -1 (the default) never recomputes (it costs time).
  int64_t graph_recompute_budget = -1;
  // Graph mode's inter-op parallelism (graph/inter_op.h): independent
  // operators of a segment run side by side, one thread each, where the
  // replays measure it faster.
  bool graph_inter_op = true;
  std::string precision = "fp32";   // fp32 | bf16 | fp16 (fp32 master weights)
  bool offload_optimizer = false;   // optimizer state in the host memory tier
  int64_t device_memory_limit = 0;  // bytes; 0 = no limit
  double loss_scale = 65536;        // fp16: initial dynamic loss scale
  int loss_scale_window = 200;      // fp16: good steps before the scale doubles
  // Pipeline (pp · virtual_stages > 1): move layers between stages at run
  // time until the measured stage compute times are within rebalance_spread
  // ((max - min) / max), measured over windows of rebalance_every steps
  // (train/stage_rebalancer.h).
  bool rebalance = true;
  int rebalance_every = 10;
  double rebalance_spread = 0.05;

  MeshShape mesh() const { return {dp, pp, tp, ep}; }
  int world_size() const { return dp * pp * tp; }
  bool is_parallel() const { return world_size() > 1; }
};

// Checks the values and their fit with the model and the batch:
// n_heads % tp, vocab % tp, experts % ep, layers ≥ pp·virtual_stages,
// micro-batches per data-parallel rank (global_batch / (dp · micro_batch))
// a whole number and, for interleaved, a multiple of pp.
Status ValidateParallelConfig(const ParallelConfig& config, const models::GptConfig& model, int64_t global_batch,
                              int64_t micro_batch);

// parallel.dp = 0 means elastic: dp = world_size / (tp · pp), whatever the
// job's size at this (re)start — a job that lost a node continues with fewer
// replicas (the same global batch, through more micro-batches each) and
// grows back. Sets c.dp and validates; a no-op when dp is set.
Status ResolveElasticDp(ParallelConfig& c, const models::GptConfig& m, int64_t global_batch, int64_t micro_batch,
                        int world_size);

}  // namespace tessera::parallel
