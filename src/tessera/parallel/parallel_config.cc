#include "tessera/parallel/parallel_config.h"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/parallel/grad_compression_policy.h"

namespace tessera::parallel {

Status ValidateParallelConfig(const ParallelConfig& c, const models::GptConfig& m, int64_t global_batch,
                              int64_t micro_batch) {
  if (c.dp == 0) {
    // Elastic: the job's world size sets dp (ResolveElasticDp); check the
    // rest with the smallest dp the mesh allows.
    ParallelConfig probe = c;
    probe.dp = std::max(1, c.ep);
    return ValidateParallelConfig(probe, m, global_batch, micro_batch);
  }
  TESSERA_RETURN_IF_ERROR(ValidateMeshShape(c.mesh(), c.world_size()));
  if (c.zero < 0 || c.zero > 3) return InvalidArgument("parallel.zero = {} must be 0, 1, 2 or 3", c.zero);
  if (c.zero == 3 && c.pp > 1) {
    return InvalidArgument(
        "parallel.zero = 3 needs parallel.pp = 1 (as in DeepSpeed: parameters gathered per layer do not mix with "
        "pipeline stages holding their layers; use ZeRO-1/2 with pipelines)");
  }
  {
    auto policy = ParseGradCompressionPolicy(c.grad_compression);
    if (!policy.ok()) return InvalidArgument("parallel.grad_compression: {}", policy.status().message());
    if (policy->any_enabled() && c.precision == "fp16") {
      return InvalidArgument(
          "parallel.grad_compression = '{}' does not work with train.precision = 'fp16': dynamic loss scaling finds "
          "overflows through inf/NaN in the reduced gradients, which blockwise quantization and the error-feedback "
          "residuals do not carry; use bf16 or fp32 compute",
          c.grad_compression);
    }
  }
  if (c.schedule != "gpipe" && c.schedule != "1f1b" && c.schedule != "interleaved") {
    return InvalidArgument("parallel.schedule = '{}' must be 'gpipe', '1f1b' or 'interleaved'", c.schedule);
  }
  if (c.virtual_stages < 1) return InvalidArgument("parallel.virtual_stages = {} must be >= 1", c.virtual_stages);
  if (c.schedule == "interleaved" && c.virtual_stages < 2) {
    return InvalidArgument(
        "parallel.schedule = 'interleaved' needs parallel.virtual_stages >= 2 (got {}; use '1f1b' "
        "for one chunk per stage)",
        c.virtual_stages);
  }
  if (c.virtual_stages > 1 && c.schedule != "interleaved") {
    return InvalidArgument("parallel.virtual_stages = {} needs parallel.schedule = 'interleaved' (got '{}')",
                           c.virtual_stages, c.schedule);
  }
  if (c.recompute != "none" && c.recompute != "selective" && c.recompute != "full") {
    return InvalidArgument("train.recompute = '{}' must be 'none', 'selective' or 'full'", c.recompute);
  }
  if (c.graph && c.recompute != "none") {
    return InvalidArgument(
        "train.graph = true with train.recompute = '{}': graph mode keeps only the activations "
        "its backward reads; set train.recompute = 'none'",
        c.recompute);
  }
  if (c.graph_recompute_budget < -1) {
    return InvalidArgument("train.graph_recompute_budget = {} must be -1 (off), 0 (all cheap activations) or a byte "
                           "count",
                           c.graph_recompute_budget);
  }
  if (c.graph && m.dropout > 0) {
    return InvalidArgument(
        "train.graph = true needs model.dropout = 0 (got {}): dropout masks are seeded per step, "
        "and a captured graph would replay the first step's mask",
        m.dropout);
  }
  if (c.precision != "fp32" && c.precision != "bf16" && c.precision != "fp16") {
    return InvalidArgument("train.precision = '{}' must be 'fp32', 'bf16' or 'fp16'", c.precision);
  }
  if (c.sequence_parallel && c.tp == 1) {
    return InvalidArgument(
        "parallel.sequence_parallel needs parallel.tp > 1 (it shards the tensor-parallel "
        "group's norm and dropout regions)");
  }
  if (c.sequence_parallel && m.seq_len % c.tp != 0) {
    return InvalidArgument("parallel.sequence_parallel: model.seq_len = {} must be divisible by parallel.tp = {}",
                           m.seq_len, c.tp);
  }
  if (m.n_heads % c.tp != 0) {
    return InvalidArgument(
        "parallel.tp = {} must divide model.n_heads = {} (attention heads are split across the "
        "tensor-parallel ranks)",
        c.tp, m.n_heads);
  }
  if (m.vocab_size % c.tp != 0) {
    return InvalidArgument("parallel.tp = {} must divide model.vocab_size = {} (vocab-parallel embedding)", c.tp,
                           m.vocab_size);
  }
  if (m.ffn_dim() % c.tp != 0) {
    return InvalidArgument("parallel.tp = {} must divide the MLP hidden size {} (model.d_ff)", c.tp, m.ffn_dim());
  }
  if (m.moe.num_experts > 0 && m.moe.num_experts % c.ep != 0) {
    return InvalidArgument("parallel.ep = {} must divide model.moe.num_experts = {}", c.ep, m.moe.num_experts);
  }
  if (m.moe.num_experts == 0 && c.ep > 1) {
    return InvalidArgument("parallel.ep = {} needs an MoE model (model.moe.num_experts > 0)", c.ep);
  }
  const int chunks = c.pp * c.virtual_stages;
  if (m.n_layers < chunks) {
    return InvalidArgument("model.n_layers = {} is fewer than parallel.pp x parallel.virtual_stages = {} model chunks",
                           m.n_layers, chunks);
  }
  if (global_batch % (c.dp * micro_batch) != 0) {
    return InvalidArgument(
        "train.global_batch = {} must be a multiple of parallel.dp x train.micro_batch = {} x {} (each data-parallel "
        "rank runs whole micro-batches)",
        global_batch, c.dp, micro_batch);
  }
  const int64_t micro_batches = global_batch / (c.dp * micro_batch);
  if (c.schedule == "interleaved" && c.pp > 1 && micro_batches % c.pp != 0) {
    return InvalidArgument(
        "the interleaved schedule needs the micro-batches per data-parallel rank ({} = train.global_batch / (dp x "
        "micro_batch)) to be a multiple of parallel.pp = {}",
        micro_batches, c.pp);
  }
  if (c.device_memory_limit < 0) {
    return InvalidArgument("train.device_memory_limit = {} must be >= 0 (0 = no limit)", c.device_memory_limit);
  }
  if (!(c.loss_scale > 0) || c.loss_scale_window < 1) {
    return InvalidArgument("train.loss_scale must be > 0 and train.loss_scale_window >= 1 (got {}, {})", c.loss_scale,
                           c.loss_scale_window);
  }
  if (c.rebalance_every < 1 || !(c.rebalance_spread > 0 && c.rebalance_spread < 1)) {
    return InvalidArgument("parallel.rebalance_every = {} must be >= 1 and parallel.rebalance_spread = {} in (0, 1)",
                           c.rebalance_every, c.rebalance_spread);
  }
  return Status::Ok();
}

Status ResolveElasticDp(ParallelConfig& c, const models::GptConfig& m, int64_t global_batch, int64_t micro_batch,
                        int world_size) {
  if (c.dp != 0) return Status::Ok();
  const int per_replica = c.tp * c.pp;
  if (world_size < per_replica || world_size % per_replica != 0) {
    return InvalidArgument(
        "parallel.dp = 0 (elastic): the job's {} ranks are not a multiple of parallel.tp x "
        "parallel.pp = {}",
        world_size, per_replica);
  }
  c.dp = world_size / per_replica;
  Status st = ValidateParallelConfig(c, m, global_batch, micro_batch);
  if (!st.ok())
    return st.WithContext(fmt::format("parallel.dp = 0 (elastic) became {} for {} ranks", c.dp, world_size));
  return st;
}

}  // namespace tessera::parallel
