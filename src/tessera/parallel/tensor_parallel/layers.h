// Tensor-parallel layers (Megatron-LM), each built by SLICING an existing
// full layer, so a parallel model starts bitwise equal to the single-process
// one. Parameter names inside a layer stay "weight" / "bias".
//
//   ColumnParallelLinear  rank r keeps weight rows (output features)
//                         [r·out/tp, (r+1)·out/tp) and those bias entries;
//                         y_r = f(x) · W_rᵀ + b_r, optionally all-gathered.
//   RowParallelLinear     rank r keeps weight columns (input features)
//                         [r·in/tp, (r+1)·in/tp); y = g(x_r · W_rᵀ) + b, the
//                         full bias added once after the reduction.
//   VocabParallelEmbedding rank r keeps vocabulary rows [r·V/tp, (r+1)·V/tp);
//                         ids outside the shard give 0, then all-reduce.
//   VocabParallelCrossEntropy / VocabParallelLmHead: the loss and the tied
//                         LM head over vocabulary-sharded logits.
// f = CopyToTensorParallel, g = ReduceFromTensorParallel (collectives.h).
// Sequence parallelism (Korthikanti et al.): the sequence axis is the
// second-to-last axis ([B, T, d] -> T). ColumnParallelLinear then takes the
// rank's sequence shard and all-gathers it (backward: reduce-scatter);
// RowParallelLinear and VocabParallelEmbedding reduce-scatter their output
// along the sequence instead of all-reducing. Under sequence parallelism a
// replicated parameter applied to the sequence shard (RowParallelLinear's
// bias) gets only this shard's gradient: PartialGradParameters() lists them,
// and AllReduceGradients (collectives.h) over tp completes them.
// A size not divisible by tp throws OpError naming the layer and the sizes.
// Thread-safety: as graph::Module; the communicator must outlive the layer.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tessera/comm/api/communicator.h"
#include "tessera/graph/layers.h"
#include "tessera/graph/module.h"

namespace tessera::parallel {

class ColumnParallelLinear : public graph::Module {
 public:
  ColumnParallelLinear(const graph::nn::Linear& full, comm::Communicator* tp, bool gather_output = false,
                       bool sequence_parallel = false);
  // From the full weight [out, in] and bias [out] (undefined: none); `layer`
  // names the layer in errors.
  ColumnParallelLinear(const Tensor& full_weight, const Tensor& full_bias, comm::Communicator* tp,
                       bool gather_output = false, bool sequence_parallel = false,
                       std::string_view layer = "ColumnParallelLinear");

  // x [..., in] (sequence parallel: [..., T/tp, in]) -> [..., out/tp]
  // (gather_output: [..., out]).
  Tensor Forward(const Tensor& x) const;
  // The local product only: x must already be the full input inside the
  // tensor-parallel region (the caller applied CopyToTensorParallel or
  // AllGatherSequence once for several layers that share the input).
  Tensor ForwardLocal(const Tensor& x) const;

  const Tensor& weight() const { return weight_; }  // [out/tp, in]
  const Tensor& bias() const { return bias_; }      // [out/tp] or undefined
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }  // full
  int64_t local_out_features() const { return weight_.size(0); }

 private:
  comm::Communicator* tp_;
  bool gather_output_;
  bool sequence_parallel_;
  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

class RowParallelLinear : public graph::Module {
 public:
  RowParallelLinear(const graph::nn::Linear& full, comm::Communicator* tp, bool input_is_parallel = true,
                    bool sequence_parallel = false);
  RowParallelLinear(const Tensor& full_weight, const Tensor& full_bias, comm::Communicator* tp,
                    bool input_is_parallel = true, bool sequence_parallel = false,
                    std::string_view layer = "RowParallelLinear");

  // x [..., in/tp] (input_is_parallel) or [..., in] -> [..., out]
  // (sequence parallel: [..., T/tp, out]).
  Tensor Forward(const Tensor& x) const;

  const Tensor& weight() const { return weight_; }  // [out, in/tp]
  const Tensor& bias() const { return bias_; }      // [out] (full) or undefined
  int64_t in_features() const { return in_features_; }  // full
  int64_t out_features() const { return out_features_; }
  // Parameters whose gradient is partial over tp (the bias under sequence parallelism).
  std::vector<Tensor> PartialGradParameters() const;

 private:
  comm::Communicator* tp_;
  bool input_is_parallel_;
  bool sequence_parallel_;
  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

class VocabParallelEmbedding : public graph::Module {
 public:
  VocabParallelEmbedding(const graph::nn::Embedding& full, comm::Communicator* tp, bool sequence_parallel = false);

  // ids int64/int32 [...] in [0, V) -> [..., dim] in the weight's dtype
  // (sequence parallel: reduce-scattered along the second-to-last output axis).
  Tensor Forward(const Tensor& ids) const;
  // The tied LM head on this shard: VocabParallelLmHead(x, weight(), tp).
  Tensor LmHead(const Tensor& x) const;

  const Tensor& weight() const { return weight_; }  // [V/tp, dim]
  int64_t vocab_size() const { return vocab_size_; }  // full
  int64_t vocab_start() const { return vocab_start_; }
  int64_t vocab_end() const { return vocab_start_ + weight_.size(0); }

 private:
  comm::Communicator* tp_;
  bool sequence_parallel_;
  int64_t vocab_size_;
  int64_t vocab_start_;
  Tensor weight_;
};

// Mean cross-entropy over the targets that are not -100, from this rank's
// vocabulary shard of the logits [..., V/tp] (vocabulary entries
// [vocab_start, vocab_start + V/tp)) and the full int64 targets [...]
// (identical on every rank). Equals graph::CrossEntropy on the full logits;
// a scalar fp32, differentiable w.r.t. logits_shard. Two small all-reduces
// per call (row max; row sum-exp with the target logit), none in backward.
Tensor VocabParallelCrossEntropy(const Tensor& logits_shard, const Tensor& targets, int64_t vocab_start,
                                 comm::Communicator* tp);

// Column-parallel LM head for tied embeddings: logits_shard = f(x) · E_shardᵀ
// with E_shard the rank's [V/tp, d] embedding rows, cast to x's dtype.
// sequence_parallel: x is the rank's sequence shard, all-gathered first.
Tensor VocabParallelLmHead(const Tensor& x, const Tensor& embedding_shard, comm::Communicator* tp,
                           bool sequence_parallel = false);

}  // namespace tessera::parallel
