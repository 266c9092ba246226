#include "tessera/parallel/expert_parallel/moe.h"

#include <cmath>
#include <string>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/expert_parallel/token_dispatch.h"
#include "tessera/parallel/tensor_parallel/collectives.h"

namespace tessera::parallel {
namespace {

void LoadInto(graph::Module& dst, const graph::Module& src, const std::string& what) {
  Status st = dst.LoadStateDict(src.StateDict());
  TESSERA_OP_CHECK(st.ok(), "ExpertParallelMoe: {} does not match the config: {}", what, st.ToString());
}

}  // namespace

models::Mlp& ExpertShard::Add(int expert, std::unique_ptr<models::Mlp> mlp) {
  models::Mlp& ref = *mlp;
  RegisterModule(std::to_string(expert), &ref);
  experts_.push_back(std::move(mlp));
  return ref;
}

ExpertParallelMoe::ExpertParallelMoe(const models::MoeFfn& full, const models::GptConfig& config,
                                     comm::Communicator* ep)
    : ep_(ep),
      num_experts_(config.moe.num_experts),
      top_k_(config.moe.top_k),
      capacity_factor_(config.moe.capacity_factor),
      normalize_top_k_(config.moe.normalize_top_k) {
  const int size = GroupSize(ep);
  TESSERA_OP_CHECK(num_experts_ > 0 && static_cast<size_t>(num_experts_) == full.experts().size() &&
                       full.router().out_features() == num_experts_,
                   "ExpertParallelMoe: config.moe.num_experts = {} but the MoE layer has {} experts (router {})",
                   num_experts_, full.experts().size(), full.router().out_features());
  TESSERA_OP_CHECK(num_experts_ % size == 0, "ExpertParallelMoe: num_experts = {} is not divisible by ep = {}",
                   num_experts_, size);
  const int local = num_experts_ / size;
  first_expert_ = GroupRank(ep) * local;
  router_ = std::make_unique<graph::nn::Linear>(config.d_model, num_experts_, /*bias=*/false, config.init_std,
                                                config.param_dtype);
  LoadInto(*router_, full.router(), "the router");
  RegisterModule("router", router_.get());
  experts_ = std::make_unique<ExpertShard>();
  const float resid_std = config.init_std / std::sqrt(2.0f * static_cast<float>(config.n_layers));
  for (int e = first_expert_; e < first_expert_ + local; ++e) {
    models::Mlp& mlp = experts_->Add(e, std::make_unique<models::Mlp>(config.d_model, config.expert_ffn_dim(),
                                                                     config.activation, config.bias, config.init_std,
                                                                     resid_std, config.param_dtype));
    LoadInto(mlp, full.experts()[e], "expert " + std::to_string(e));
  }
  RegisterModule("experts", experts_.get());
  auto buffer = comm::moe::MoeBuffer::Create(ep, num_experts_, config.d_model);
  TESSERA_OP_CHECK(buffer.ok(), "ExpertParallelMoe: {}", buffer.status().ToString());
  buffer_ = std::move(*buffer);
}

models::MoeOutput ExpertParallelMoe::Forward(const Tensor& x) {
  TESSERA_OP_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == router_->in_features() && x.numel() > 0,
                   "ExpertParallelMoe: x must be a non-empty [..., {}] tensor, got {}", router_->in_features(),
                   x.defined() ? ShapeString(x.shape()) : std::string("undefined"));
  const int64_t d = x.size(-1);
  const int64_t n = x.numel() / d;
  const int k = top_k_;
  const int local = num_local_experts();
  Tensor xf = graph::Reshape(x, {n, d});

  // Routing, exactly as MoeFfn (the same function).
  const models::MoeRoute plan =
      models::RouteTokens(*router_, xf, num_experts_, k, normalize_top_k_, capacity_factor_);
  // The kept choices; dropped ones (capacity) are -1.
  std::vector<int64_t> topk_idx(static_cast<size_t>(n) * k, -1);
  for (int e = 0; e < num_experts_; ++e) {
    for (int64_t slot : plan.slots[e]) topk_idx[slot] = e;
  }

  // Dispatch: each token once per rank, rows grouped by local expert.
  DispatchedTokens sent = DispatchTokens(*buffer_, xf, topk_idx, plan.gates,
                                      payload_ == comm::moe::Payload::kFloat32 ? ExactPayload(xf.dtype()) : payload_);
  const comm::moe::DispatchHandle& h = *sent.handle;
  const int64_t received = h.num_recv_rows();

  // Local experts on their contiguous blocks; the outputs, concatenated,
  // are already in the dispatch layout.
  std::vector<Tensor> outs;
  for (int j = 0; j < local; ++j) {
    if (h.rows_of_expert(j) == 0) continue;
    outs.push_back((*experts_)[j].Forward(graph::Slice(sent.rows, 0, h.expert_offsets[j], h.expert_offsets[j + 1])));
  }
  Tensor y_rows = outs.empty() ? sent.rows : outs.size() == 1 ? outs[0] : graph::Concat(outs, 0);

  // Combine: gated sums back at the tokens' ranks.
  Tensor y = CombineTokens(*buffer_, sent, y_rows, sent.weights);

  models::RecordRouting(plan, n, k, num_experts_, &last_routing_);
  last_received_rows_ = received;
  return {graph::Reshape(y, x.shape()), plan.aux_loss};
}

}  // namespace tessera::parallel
