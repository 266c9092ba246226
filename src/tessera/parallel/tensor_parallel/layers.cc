// ColumnParallelLinear and RowParallelLinear (the vocabulary-parallel layers
// are in vocab_parallel.cc).
#include "tessera/parallel/tensor_parallel/layers.h"

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/tensor_parallel/collectives.h"

namespace tessera::parallel {
namespace {

// Block `rank` of `size` of `full` along `axis`, checked divisible
// (`what` names the layer and the dimension in the error).
Tensor ShardParameter(const Tensor& full, int axis, comm::Communicator* tp, std::string_view layer,
                      std::string_view what) {
  const int size = GroupSize(tp);
  TESSERA_OP_CHECK(full.size(axis) % size == 0, "{}: {} = {} is not divisible by tp = {} (weight {})", layer, what,
                   full.size(axis), size, ShapeString(full.shape()));
  graph::NoGradGuard no_grad;
  return TensorShard(full, axis, GroupRank(tp), size);
}

void CheckWeight(const Tensor& weight, const Tensor& bias, std::string_view layer) {
  TESSERA_OP_CHECK(weight.defined() && weight.dim() == 2 && IsFloating(weight.dtype()),
                   "{}: the full weight must be a floating [out, in] tensor, got {}", layer,
                   weight.defined() ? ShapeString(weight.shape()) : std::string("undefined"));
  TESSERA_OP_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)),
                   "{}: the full bias must be [{}], got {}", layer, weight.size(0),
                   bias.defined() ? ShapeString(bias.shape()) : std::string());
}

void CheckInput(const Tensor& x, int64_t features, std::string_view layer) {
  TESSERA_OP_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == features,
                   "{}: input shape {} does not end in {}", layer,
                   x.defined() ? ShapeString(x.shape()) : std::string("undefined"), features);
}

// Sequence axis of an activation [..., T, features].
int SequenceAxis(const Tensor& x, std::string_view layer) {
  TESSERA_OP_CHECK(x.dim() >= 2, "{}: sequence parallelism needs an input [..., T, features], got {}", layer,
                   ShapeString(x.shape()));
  return x.dim() - 2;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(const graph::nn::Linear& full, comm::Communicator* tp, bool gather_output,
                                           bool sequence_parallel)
    : ColumnParallelLinear(full.weight(), full.bias(), tp, gather_output, sequence_parallel) {}

ColumnParallelLinear::ColumnParallelLinear(const Tensor& full_weight, const Tensor& full_bias, comm::Communicator* tp,
                                           bool gather_output, bool sequence_parallel, std::string_view layer)
    : tp_(tp), gather_output_(gather_output), sequence_parallel_(sequence_parallel) {
  CheckWeight(full_weight, full_bias, layer);
  out_features_ = full_weight.size(0);
  in_features_ = full_weight.size(1);
  weight_ = RegisterParameter("weight", ShardParameter(full_weight, 0, tp, layer, "out_features"));
  if (full_bias.defined()) bias_ = RegisterParameter("bias", ShardParameter(full_bias, 0, tp, layer, "out_features"));
}

Tensor ColumnParallelLinear::ForwardLocal(const Tensor& x) const {
  CheckInput(x, in_features_, "ColumnParallelLinear");
  return graph::Linear(x, graph::Cast(weight_, x.dtype()),
                       bias_.defined() ? graph::Cast(bias_, x.dtype()) : Tensor());
}

Tensor ColumnParallelLinear::Forward(const Tensor& x) const {
  CheckInput(x, in_features_, "ColumnParallelLinear");
  Tensor in = sequence_parallel_ ? AllGatherSequence(x, SequenceAxis(x, "ColumnParallelLinear"), tp_)
                                 : CopyToTensorParallel(x, tp_);
  Tensor y = ForwardLocal(in);
  return gather_output_ ? GatherFromTensorParallel(y, -1, tp_) : y;
}

RowParallelLinear::RowParallelLinear(const graph::nn::Linear& full, comm::Communicator* tp, bool input_is_parallel,
                                     bool sequence_parallel)
    : RowParallelLinear(full.weight(), full.bias(), tp, input_is_parallel, sequence_parallel) {}

RowParallelLinear::RowParallelLinear(const Tensor& full_weight, const Tensor& full_bias, comm::Communicator* tp,
                                     bool input_is_parallel, bool sequence_parallel, std::string_view layer)
    : tp_(tp), input_is_parallel_(input_is_parallel), sequence_parallel_(sequence_parallel) {
  CheckWeight(full_weight, full_bias, layer);
  out_features_ = full_weight.size(0);
  in_features_ = full_weight.size(1);
  weight_ = RegisterParameter("weight", ShardParameter(full_weight, 1, tp, layer, "in_features"));
  if (full_bias.defined()) {
    graph::NoGradGuard no_grad;
    bias_ = RegisterParameter("bias", full_bias.Clone());
  }
}

Tensor RowParallelLinear::Forward(const Tensor& x) const {
  Tensor in = x;
  if (!input_is_parallel_) {
    CheckInput(x, in_features_, "RowParallelLinear");
    in = ScatterToTensorParallel(x, -1, tp_);
  }
  CheckInput(in, weight_.size(1), "RowParallelLinear");
  Tensor partial = graph::MatMul(in, graph::Cast(weight_, in.dtype()), false, true);
  Tensor y = sequence_parallel_ ? ReduceScatterSequence(partial, SequenceAxis(partial, "RowParallelLinear"), tp_)
                                : ReduceFromTensorParallel(partial, tp_);
  if (bias_.defined()) y = graph::Add(y, graph::Cast(bias_, y.dtype()));
  return y;
}

std::vector<Tensor> RowParallelLinear::PartialGradParameters() const {
  if (sequence_parallel_ && bias_.defined() && !IsTrivialGroup(tp_)) return {bias_};
  return {};
}

}  // namespace tessera::parallel
