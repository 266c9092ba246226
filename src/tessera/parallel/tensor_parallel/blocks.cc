#include "tessera/parallel/tensor_parallel/blocks.h"

#include <cmath>
#include <map>
#include <string>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/parallel/tensor_parallel/collectives.h"

namespace tessera::parallel {
namespace {

// "<name>.weight" (required) and "<name>.bias" (optional) of a state dict.
struct LinearState {
  Tensor weight;
  Tensor bias;
};

LinearState FindLinear(const std::map<std::string, Tensor>& state, const std::string& name, std::string_view block) {
  auto w = state.find(name + ".weight");
  TESSERA_OP_CHECK(w != state.end(), "{}: the full module has no parameter '{}.weight'", block, name);
  auto b = state.find(name + ".bias");
  return {w->second, b == state.end() ? Tensor() : b->second};
}

std::unique_ptr<ColumnParallelLinear> MakeColumn(const std::map<std::string, Tensor>& state, const std::string& name,
                                                 comm::Communicator* tp, std::string_view block) {
  LinearState s = FindLinear(state, name, block);
  return std::make_unique<ColumnParallelLinear>(s.weight, s.bias, tp, /*gather_output=*/false,
                                                /*sequence_parallel=*/false, fmt::format("{}.{}", block, name));
}

std::unique_ptr<RowParallelLinear> MakeRow(const std::map<std::string, Tensor>& state, const std::string& name,
                                           comm::Communicator* tp, bool sequence_parallel, std::string_view block) {
  LinearState s = FindLinear(state, name, block);
  return std::make_unique<RowParallelLinear>(s.weight, s.bias, tp, /*input_is_parallel=*/true, sequence_parallel,
                                             fmt::format("{}.{}", block, name));
}

// The block's input inside the tensor-parallel region: copied (f), or
// all-gathered along the sequence under sequence parallelism.
Tensor EnterRegion(const Tensor& x, comm::Communicator* tp, bool sequence_parallel, std::string_view block) {
  if (!sequence_parallel) return CopyToTensorParallel(x, tp);
  TESSERA_OP_CHECK(x.dim() >= 2, "{}: sequence parallelism needs x [..., T, d], got {}", block,
                   ShapeString(x.shape()));
  return AllGatherSequence(x, x.dim() - 2, tp);
}

}  // namespace

TensorParallelAttention::TensorParallelAttention(const models::CausalSelfAttention& full,
                                                 const models::GptConfig& config, comm::Communicator* tp,
                                                 bool sequence_parallel)
    : tp_(tp),
      sequence_parallel_(sequence_parallel),
      head_dim_(config.head_dim()),
      rope_(config.rope),
      rope_base_(config.rope_base) {
  const int size = GroupSize(tp);
  TESSERA_OP_CHECK(config.n_heads % size == 0, "TensorParallelAttention: n_heads = {} is not divisible by tp = {}",
                   config.n_heads, size);
  local_heads_ = config.n_heads / size;
  const std::map<std::string, Tensor> state = full.StateDict();
  const std::string_view block = "TensorParallelAttention";
  wq_ = MakeColumn(state, "wq", tp, block);
  wk_ = MakeColumn(state, "wk", tp, block);
  wv_ = MakeColumn(state, "wv", tp, block);
  wo_ = MakeRow(state, "wo", tp, sequence_parallel, block);
  TESSERA_OP_CHECK(wq_->in_features() == config.d_model && wq_->out_features() == config.n_heads * head_dim_,
                   "TensorParallelAttention: wq is [{}, {}] but the config needs [{}, {}]", wq_->out_features(),
                   wq_->in_features(), config.n_heads * head_dim_, config.d_model);
  RegisterModule("wq", wq_.get());
  RegisterModule("wk", wk_.get());
  RegisterModule("wv", wv_.get());
  RegisterModule("wo", wo_.get());
}

Tensor TensorParallelAttention::Forward(const Tensor& x) const {
  TESSERA_OP_CHECK(x.defined() && x.dim() == 3, "TensorParallelAttention: x must be [B, T, d], got {}",
                   x.defined() ? ShapeString(x.shape()) : std::string("undefined"));
  Tensor in = EnterRegion(x, tp_, sequence_parallel_, "TensorParallelAttention");
  Tensor o = models::MultiHeadCausalAttention(wq_->ForwardLocal(in), wk_->ForwardLocal(in), wv_->ForwardLocal(in),
                                              local_heads_, head_dim_, rope_, rope_base_);
  return wo_->Forward(o);
}

TensorParallelMlp::TensorParallelMlp(const models::Mlp& full, comm::Communicator* tp, bool sequence_parallel)
    : tp_(tp), sequence_parallel_(sequence_parallel) {
  const std::map<std::string, Tensor> state = full.StateDict();
  const std::string_view block = "TensorParallelMlp";
  if (state.count("w_gate.weight")) {
    w_gate_ = MakeColumn(state, "w_gate", tp, block);
    RegisterModule("w_gate", w_gate_.get());
  }
  w_up_ = MakeColumn(state, "w_up", tp, block);
  RegisterModule("w_up", w_up_.get());
  w_down_ = MakeRow(state, "w_down", tp, sequence_parallel, block);
  RegisterModule("w_down", w_down_.get());
}

Tensor TensorParallelMlp::Forward(const Tensor& x) const {
  Tensor in = EnterRegion(x, tp_, sequence_parallel_, "TensorParallelMlp");
  Tensor hidden = w_gate_ ? graph::SwiGlu(w_gate_->ForwardLocal(in), w_up_->ForwardLocal(in))
                          : graph::Gelu(w_up_->ForwardLocal(in));
  return w_down_->Forward(hidden);
}

}  // namespace tessera::parallel
