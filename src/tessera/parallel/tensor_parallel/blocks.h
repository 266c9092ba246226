// Tensor-parallel attention and MLP blocks, built by slicing the full
// models:: modules (Megatron-LM layout):
//   TensorParallelAttention: heads split across tp — wq, wk, wv
//     column-parallel (rank r computes heads [r·H/tp, (r+1)·H/tp)), wo
//     row-parallel; needs n_heads % tp == 0.
//   TensorParallelMlp: w_gate, w_up column-parallel, w_down row-parallel
//     (d_ff % tp == 0). swiglu when the full Mlp has a w_gate, else gelu.
// Forward has the models:: semantics (rope, 1/√Dh scale, causal flash
// attention via graph::); the input is copied into the tensor-parallel region
// once per block (one all-reduce of its gradient in backward) and the output
// is all-reduced once. With sequence_parallel, x is the rank's sequence shard
// [B, T/tp, d]: it is all-gathered once (backward reduce-scatter) and the
// output is reduce-scattered back to [B, T/tp, d].
// Parameter names match the full modules ("wq.weight", "w_up.bias", ...), each
// holding this rank's slice. Biases of the row-parallel projections have
// partial gradients under sequence parallelism: PartialGradParameters().
// Thread-safety: as graph::Module; the communicator must outlive the block.
#pragma once

#include <memory>
#include <vector>

#include "tessera/comm/api/communicator.h"
#include "tessera/models/ffn.h"
#include "tessera/models/gpt.h"
#include "tessera/models/gpt_config.h"
#include "tessera/parallel/tensor_parallel/layers.h"

namespace tessera::parallel {

class TensorParallelAttention : public graph::Module {
 public:
  // `config` is the one `full` was built from (heads, rope).
  TensorParallelAttention(const models::CausalSelfAttention& full, const models::GptConfig& config,
                          comm::Communicator* tp, bool sequence_parallel = false);
  // [B, T, d] (sequence parallel: [B, T/tp, d]) -> the same shape.
  Tensor Forward(const Tensor& x) const;
  std::vector<Tensor> PartialGradParameters() const { return wo_->PartialGradParameters(); }
  int64_t local_heads() const { return local_heads_; }

 private:
  comm::Communicator* tp_;
  bool sequence_parallel_;
  int64_t local_heads_;
  int64_t head_dim_;
  bool rope_;
  float rope_base_;
  std::unique_ptr<ColumnParallelLinear> wq_, wk_, wv_;
  std::unique_ptr<RowParallelLinear> wo_;
};

class TensorParallelMlp : public graph::Module {
 public:
  TensorParallelMlp(const models::Mlp& full, comm::Communicator* tp, bool sequence_parallel = false);
  // [..., T, d] (sequence parallel: [..., T/tp, d]) -> the same shape.
  Tensor Forward(const Tensor& x) const;
  std::vector<Tensor> PartialGradParameters() const { return w_down_->PartialGradParameters(); }

 private:
  comm::Communicator* tp_;
  bool sequence_parallel_;
  std::unique_ptr<ColumnParallelLinear> w_gate_;  // swiglu only
  std::unique_ptr<ColumnParallelLinear> w_up_;
  std::unique_ptr<RowParallelLinear> w_down_;
};

}  // namespace tessera::parallel
