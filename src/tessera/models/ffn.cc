#include "tessera/models/ffn.h"

#include <cmath>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"

namespace tessera::models {

Mlp::Mlp(int64_t d_model, int64_t d_ff, ActivationKind activation, bool bias, float init_std, float resid_std,
         DType dtype)
    : activation_(activation) {
  if (activation == ActivationKind::kSwiGlu) {
    w_gate_ = std::make_unique<graph::nn::Linear>(d_model, d_ff, bias, init_std, dtype);
    RegisterModule("w_gate", w_gate_.get());
  }
  w_up_ = std::make_unique<graph::nn::Linear>(d_model, d_ff, bias, init_std, dtype);
  RegisterModule("w_up", w_up_.get());
  w_down_ = std::make_unique<graph::nn::Linear>(d_ff, d_model, bias, resid_std, dtype);
  RegisterModule("w_down", w_down_.get());
}

Tensor Mlp::Forward(const Tensor& x) const {
  Tensor hidden;
  if (activation_ == ActivationKind::kSwiGlu) {
    hidden = graph::SwiGlu(w_gate_->Forward(x), w_up_->Forward(x));
  } else {
    hidden = graph::Gelu(w_up_->Forward(x));
  }
  return w_down_->Forward(hidden);
}

Tensor LoadBalancingLoss(const Tensor& probs, const Tensor& expert_indices, int num_experts) {
  TESSERA_OP_CHECK(probs.dim() == 2 && probs.size(1) == num_experts,
                   "LoadBalancingLoss: probs must be [N, {}], got {}", num_experts, ShapeString(probs.shape()));
  TESSERA_OP_CHECK(expert_indices.dim() == 2 && expert_indices.size(0) == probs.size(0),
                   "LoadBalancingLoss: expert_indices must be [N = {}, k], got {}", probs.size(0),
                   ShapeString(expert_indices.shape()));
  std::vector<int64_t> idx = expert_indices.ToIntVector();
  std::vector<float> fraction(num_experts, 0.0f);
  const float per_assignment = idx.empty() ? 0.0f : 1.0f / static_cast<float>(idx.size());
  for (int64_t e : idx) {
    TESSERA_OP_CHECK(e >= 0 && e < num_experts, "LoadBalancingLoss: expert index {} outside [0, {})", e,
                     num_experts);
    fraction[e] += per_assignment;
  }
  Tensor f = Tensor::FromVector(fraction, {num_experts}, probs.dtype());
  Tensor mean_prob = graph::Mean(probs, {0});
  return graph::Scale(graph::Sum(graph::Mul(mean_prob, f)), static_cast<float>(num_experts));
}

MoeFfn::MoeFfn(const GptConfig& config)
    : num_experts_(config.moe.num_experts),
      top_k_(config.moe.top_k),
      capacity_factor_(config.moe.capacity_factor),
      normalize_top_k_(config.moe.normalize_top_k) {
  const float resid_std = config.init_std / std::sqrt(2.0f * static_cast<float>(config.n_layers));
  router_ = std::make_unique<graph::nn::Linear>(config.d_model, num_experts_, /*bias=*/false, config.init_std,
                                            config.param_dtype);
  RegisterModule("router", router_.get());
  experts_ = std::make_unique<graph::nn::ModuleList<Mlp>>();
  for (int e = 0; e < num_experts_; ++e) {
    experts_->Append(std::make_unique<Mlp>(config.d_model, config.expert_ffn_dim(), config.activation, config.bias,
                                           config.init_std, resid_std, config.param_dtype));
  }
  RegisterModule("experts", experts_.get());
}

int64_t MoeFfn::ParametersPerExpert() const { return (*experts_)[0].NumParameters(); }

MoeRoute RouteTokens(const graph::nn::Linear& router, const Tensor& xf, int num_experts, int top_k,
                     bool normalize_top_k, double capacity_factor) {
  const int64_t n = xf.size(0);
  const int k = top_k;
  MoeRoute route;
  // Routing in fp32 whatever the activation dtype.
  Tensor probs = graph::Softmax(router.Forward(graph::Cast(xf, DType::kF32)), -1);
  graph::TopKOutput top = graph::TopK(probs, k);
  route.gates = normalize_top_k ? graph::Div(top.values, graph::Sum(top.values, {-1}, /*keepdim=*/true))
                                : top.values;
  route.aux_loss = LoadBalancingLoss(probs, top.indices, num_experts);
  route.expert_indices = top.indices.ToIntVector();
  if (capacity_factor > 0.0) {
    route.capacity = static_cast<int64_t>(
        std::ceil(capacity_factor * static_cast<double>(n) * k / static_cast<double>(num_experts)));
  }
  route.rows.resize(num_experts);
  route.slots.resize(num_experts);
  for (int j = 0; j < k; ++j) {
    for (int64_t t = 0; t < n; ++t) {
      const int64_t e = route.expert_indices[t * k + j];
      if (route.capacity >= 0 && static_cast<int64_t>(route.rows[e].size()) >= route.capacity) {
        ++route.dropped;
        continue;
      }
      route.rows[e].push_back(t);
      route.slots[e].push_back(t * k + j);
    }
  }
  return route;
}

void RecordRouting(const MoeRoute& route, int64_t tokens, int top_k, int num_experts, MoeRouting* r) {
  r->tokens = tokens;
  r->top_k = top_k;
  r->num_experts = num_experts;
  r->expert_indices = route.expert_indices;
  r->gates = route.gates.ToFloatVector();
  r->tokens_per_expert.assign(num_experts, 0);
  for (int e = 0; e < num_experts; ++e) r->tokens_per_expert[e] = static_cast<int64_t>(route.rows[e].size());
  r->capacity = route.capacity;
  r->dropped = route.dropped;
  r->aux_loss = route.aux_loss.Item();
}

MoeOutput MoeFfn::Forward(const Tensor& x) {
  const int64_t d = x.size(-1);
  Tensor xf = graph::Reshape(x, {-1, d});
  const int64_t n = xf.size(0);
  const MoeRoute route = RouteTokens(*router_, xf, num_experts_, top_k_, normalize_top_k_, capacity_factor_);

  Tensor gates_flat = graph::Reshape(route.gates, {n * top_k_, 1});
  std::vector<Tensor> outs;
  std::vector<int64_t> all_rows;
  all_rows.reserve(static_cast<size_t>(n) * top_k_);
  for (int e = 0; e < num_experts_; ++e) {
    if (route.rows[e].empty()) continue;
    const auto m = static_cast<int64_t>(route.rows[e].size());
    Tensor xe = graph::GatherRows(xf, Tensor::FromInts(route.rows[e], {m}));
    Tensor he = (*experts_)[e].Forward(xe);
    Tensor ge = graph::Cast(graph::GatherRows(gates_flat, Tensor::FromInts(route.slots[e], {m})), he.dtype());
    outs.push_back(graph::Mul(he, ge));
    all_rows.insert(all_rows.end(), route.rows[e].begin(), route.rows[e].end());
  }
  Tensor y;
  if (outs.empty()) {
    y = Tensor::Zeros({n, d}, x.dtype());
  } else {
    Tensor cat = outs.size() == 1 ? outs[0] : graph::Concat(outs, 0);
    y = graph::ScatterAddRows(cat, Tensor::FromInts(all_rows, {static_cast<int64_t>(all_rows.size())}), n);
  }
  RecordRouting(route, n, top_k_, num_experts_, &last_routing_);
  return {graph::Reshape(y, x.shape()), route.aux_loss};
}

}  // namespace tessera::models
