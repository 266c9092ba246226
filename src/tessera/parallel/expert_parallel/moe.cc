#include "tessera/parallel/expert_parallel/moe.h"

#include <cmath>
#include <numeric>
#include <string>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/expert_parallel/exchange.h"
#include "tessera/parallel/tensor_parallel/collectives.h"

namespace tessera::parallel {
namespace {

void LoadInto(graph::Module& dst, const graph::Module& src, const std::string& what) {
  Status st = dst.LoadStateDict(src.StateDict());
  TESSERA_OP_CHECK(st.ok(), "ExpertParallelMoe: {} does not match the config: {}", what, st.ToString());
}

Tensor Ints(const std::vector<int64_t>& v) { return Tensor::FromInts(v, {static_cast<int64_t>(v.size())}); }

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
}

models::MoeOutput ExpertParallelMoe::Forward(const Tensor& x) {
  TESSERA_OP_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == router_->in_features() && x.numel() > 0,
                   "ExpertParallelMoe: x must be a non-empty [..., {}] tensor, got {}", router_->in_features(),
                   x.defined() ? ShapeString(x.shape()) : std::string("undefined"));
  const int64_t d = x.size(-1);
  const int64_t n = x.numel() / d;
  const int k = top_k_;
  const int ranks = GroupSize(ep_);
  const int local = num_local_experts();
  Tensor xf = graph::Reshape(x, {n, d});

  // Routing, exactly as MoeFfn (the same function).
  const models::MoeRoute plan =
      models::RouteTokens(*router_, xf, num_experts_, k, normalize_top_k_, capacity_factor_);
  const Tensor& gates = plan.gates;

  // Send side: kept rows in expert order = grouped by owner rank.
  std::vector<int64_t> send_rows, send_slots, expert_counts(num_experts_), send_per_rank(ranks, 0);
  for (int e = 0; e < num_experts_; ++e) {
    send_rows.insert(send_rows.end(), plan.rows[e].begin(), plan.rows[e].end());
    send_slots.insert(send_slots.end(), plan.slots[e].begin(), plan.slots[e].end());
    expert_counts[e] = static_cast<int64_t>(plan.rows[e].size());
    send_per_rank[e / local] += expert_counts[e];
  }
  // recv_counts[s · local + j]: rows source s sends to local expert j.
  const std::vector<int64_t> recv_counts = ExchangeCounts(expert_counts, ep_);
  std::vector<int64_t> recv_per_rank(ranks, 0);
  for (int s = 0; s < ranks; ++s) {
    for (int j = 0; j < local; ++j) recv_per_rank[s] += recv_counts[s * local + j];
  }
  Tensor send = graph::GatherRows(xf, Ints(send_rows));
  Tensor recv = ExchangeRows(send, send_per_rank, recv_per_rank, ep_);
  const int64_t received = recv.size(0);

  // Local experts: expert j's rows from every source, in source order.
  std::vector<Tensor> outs;
  std::vector<int64_t> order;  // recv position of each row of the concatenated outputs
  order.reserve(static_cast<size_t>(received));
  for (int j = 0; j < local; ++j) {
    std::vector<int64_t> pos;
    int64_t source_start = 0;
    for (int s = 0; s < ranks; ++s) {
      const int64_t* counts = &recv_counts[s * local];
      const int64_t start = source_start + std::accumulate(counts, counts + j, int64_t{0});
      for (int64_t i = 0; i < counts[j]; ++i) pos.push_back(start + i);
      source_start += recv_per_rank[s];
    }
    if (pos.empty()) continue;
    outs.push_back((*experts_)[j].Forward(graph::GatherRows(recv, Ints(pos))));
    order.insert(order.end(), pos.begin(), pos.end());
  }
  Tensor local_out = recv;  // nothing received: the (empty) rows pass through
  if (!outs.empty()) {
    Tensor cat = outs.size() == 1 ? outs[0] : graph::Concat(outs, 0);
    std::vector<int64_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
    local_out = graph::GatherRows(cat, Ints(inverse));
  }

  // Combine: results back to their sources, gated, summed in expert order.
  Tensor back = ExchangeRows(local_out, recv_per_rank, send_per_rank, ep_);
  Tensor gate_rows = graph::GatherRows(graph::Reshape(gates, {n * k, 1}), Ints(send_slots));
  Tensor y = graph::ScatterAddRows(graph::Mul(back, graph::Cast(gate_rows, back.dtype())), Ints(send_rows), n);

  models::RecordRouting(plan, n, k, num_experts_, &last_routing_);
  last_received_rows_ = received;
  return {graph::Reshape(y, x.shape()), plan.aux_loss};
}

}  // namespace tessera::parallel
